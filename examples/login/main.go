// Command login protects a login form against password guessing: only
// failed attempts count, per user and per client IP, so that a user's
// own successful logins never lock them out, and a guesser is locked out
// after five failures; a successful login clears the user's failures.
// The lock is the account's, not the guesser's: five failures lock the
// user out too, right password or not (the limiter answers before the
// password is checked), until the window passes or an admin resets them.
// An admin endpoint shows and resets a user's standing.
//
//	go -C examples run ./login
//	curl -i -d user=alice -d password=wrong http://127.0.0.1:8080/login
//	curl -s http://127.0.0.1:8080/admin/failures?user=alice
//	curl -s -X POST http://127.0.0.1:8080/admin/failures/reset?user=alice
package main

import (
	"crypto/subtle"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	l, err := newLimiters()
	if err != nil {
		log.Fatal(err)
	}
	defer l.close()
	log.Printf("users: alice/wonderland, bob/builder; 5 failures per user and 20 per IP in 15 minutes")
	if err := serve.Run(*addr, newMux(l, demoUsers)); err != nil {
		log.Fatal(err)
	}
}

// limiters count failed logins: per user, so that a guesser cannot try
// many passwords for one account, and per client IP, so that one client
// cannot try one password on many accounts.
type limiters struct {
	perUser, perIP *ratelimit.Limiter
}

// onlyFailures keeps a login counted only if it failed.
func onlyFailures(_ *http.Request, status int) bool { return status == http.StatusUnauthorized }

func newLimiters() (*limiters, error) {
	perUser, err := ratelimit.New(5, 15*time.Minute, ratelimit.KeyFunc(keyByUser), ratelimit.WithName("user"), ratelimit.WithCountIf(onlyFailures))
	if err != nil {
		return nil, err
	}
	perIP, err := ratelimit.New(20, 15*time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("ip"), ratelimit.WithCountIf(onlyFailures))
	if err != nil {
		perUser.Close()
		return nil, err
	}
	return &limiters{perUser: perUser, perIP: perIP}, nil
}

func (l *limiters) close() {
	l.perUser.Close()
	l.perIP.Close()
}

// keyByUser keys a login by the user it names in its form. A request that
// names none gets 400.
func keyByUser(r *http.Request) (string, error) { return userKey(r.FormValue("user")) }

// userKey returns the limiter's key for user, as keyByUser does for a login
// of theirs, so that an admin reaches the same count.
func userKey(user string) (string, error) {
	if user == "" || len(user) > 64 {
		return "", &ratelimit.KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: give a user of 1 to 64 bytes"}
	}
	return "user:" + user, nil
}

// demoUsers are the accounts of the demo. A real server checks a password
// hash (bcrypt, argon2id), not a clear password.
var demoUsers = map[string]string{"alice": "wonderland", "bob": "builder"}

func newMux(l *limiters, users map[string]string) *http.ServeMux {
	mux := http.NewServeMux()
	// The IP's limiter outside the user's: a login refused per user is a
	// 429, not a failure, so the IP's limiter takes it back too.
	mux.Handle("POST /login", l.perIP.Handler(l.perUser.Handler(login(l, users))))
	mux.HandleFunc("GET /admin/failures", l.standing)
	mux.HandleFunc("POST /admin/failures/reset", l.reset)
	return mux
}

func login(l *limiters, users map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, ok := users[r.FormValue("user")]
		if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(r.FormValue("password"))) != 1 {
			http.Error(w, "wrong user or password", http.StatusUnauthorized)
			return
		}
		// A successful login clears the user's failures. Its own request,
		// counted before the Reset and taken back after it (a 200 does not
		// count), changes nothing the Reset made new.
		key, _ := keyByUser(r) // the limiter checked it
		if err := l.perUser.Reset(r.Context(), key); err != nil {
			log.Printf("login: reset: %v", err)
		}
		fmt.Fprintf(w, "welcome, %s\n", r.FormValue("user"))
	})
}

// standing answers an admin's question: how many failures does the user
// have left? A real server authenticates its admins first.
func (l *limiters) standing(w http.ResponseWriter, r *http.Request) {
	key, err := userKey(r.URL.Query().Get("user"))
	if err != nil {
		http.Error(w, "400 Bad Request: give a user", http.StatusBadRequest)
		return
	}
	res, err := l.perUser.Peek(r.Context(), key)
	if err != nil {
		http.Error(w, "503 Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"failures_left": res.Remaining,
		"limit":         res.Limit,
		"locked":        !res.Allowed,
		"retry_after_s": int64((res.RetryAfter + time.Second - 1) / time.Second),
	})
}

// reset clears a user's failures, after a support ticket, say.
func (l *limiters) reset(w http.ResponseWriter, r *http.Request) {
	key, err := userKey(r.URL.Query().Get("user"))
	if err != nil {
		http.Error(w, "400 Bad Request: give a user", http.StatusBadRequest)
		return
	}
	if err := l.perUser.Reset(r.Context(), key); err != nil {
		http.Error(w, "503 Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
