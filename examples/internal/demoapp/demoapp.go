// Package demoapp is the demo server's handler: a few routes behind
// limiters of different keys and policies. The demo command serves it, and
// the load generator starts it in-process with -self.
package demoapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slidelog/ratelimit"
)

// The demo's quotas. Anonymous callers get a small one so that a person
// with curl sees a 429 on the sixth try; API-key callers get two policies
// at once, a sustained rate and a short burst cap. Each policy has a name,
// so that the RateLimit headers tell the client which quota they describe.
const (
	AnonName   = "site"
	AnonLimit  = 5
	AnonWindow = 10 * time.Second

	KeyName     = "api"
	KeyLimit    = 50
	KeyWindow   = 10 * time.Second
	BurstName   = "burst"
	BurstLimit  = 10
	BurstWindow = time.Second

	// KeyHeader carries the API key; KeyPrefix is what the demo's stand-in
	// authentication accepts.
	KeyHeader = "X-API-Key"
	KeyPrefix = "demo-"
)

// App is the demo's handler and the limiters it owns.
type App struct {
	mux      *http.ServeMux
	limiters []*ratelimit.Limiter
}

// New builds the demo. Options are passed to every limiter after the
// demo's own; tests pass ratelimit.WithClock to drive time.
func New(opts ...ratelimit.Option) (*App, error) {
	// The handlers show callers their standing through FromContext.
	opts = append([]ratelimit.Option{ratelimit.WithResultInContext()}, opts...)
	// Anonymous routes share one quota per client IP. KeyByIP trusts only
	// the TCP peer: behind a proxy, configure its trusted prefixes.
	anonOpts := append([]ratelimit.Option{ratelimit.WithName(AnonName)}, opts...)
	anon, err := ratelimit.New(AnonLimit, AnonWindow, ratelimit.KeyByIP(), anonOpts...)
	if err != nil {
		return nil, err
	}
	keyOpts := append([]ratelimit.Option{
		ratelimit.WithName(KeyName),
		ratelimit.WithPolicies(ratelimit.Policy{Name: BurstName, Limit: BurstLimit, Window: BurstWindow}),
	}, opts...)
	keyed, err := ratelimit.New(KeyLimit, KeyWindow, ratelimit.KeyByHeader(KeyHeader), keyOpts...)
	if err != nil {
		return nil, errors.Join(err, anon.Close())
	}

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", anon.Handler(http.HandlerFunc(home)))
	mux.Handle("GET /api/hello", anon.Handler(http.HandlerFunc(hello)))
	// Authenticate first, then limit: a limiter keyed by an unchecked
	// header lets anyone mint fresh keys and dodge it.
	mux.Handle("GET /api/v1/", authenticate(keyed.Handler(http.HandlerFunc(hello))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	return &App{mux: mux, limiters: []*ratelimit.Limiter{anon, keyed}}, nil
}

// ServeHTTP serves the demo's routes.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Close stops the limiters' background work.
func (a *App) Close() error {
	var errs []error
	for _, l := range a.limiters {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// authenticate is a stand-in for real API-key authentication: it accepts
// any key that starts with KeyPrefix and answers 401 otherwise.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get(KeyHeader)
		if !strings.HasPrefix(k, KeyPrefix) || len(k) == len(KeyPrefix) {
			w.Header().Set("WWW-Authenticate", `ApiKey header="`+KeyHeader+`"`)
			http.Error(w, "401 Unauthorized: send "+KeyHeader+": "+KeyPrefix+"<anything>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func home(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "ratelimit demo\n\n"+
		"GET /             this page, %d per %v per client IP\n"+
		"GET /api/hello    %d per %v per client IP (shared with /)\n"+
		"GET /api/v1/...   %s: %s<anything>; %d per %v and %d per %v per key\n"+
		"GET /healthz      not limited\n",
		AnonLimit, AnonWindow, AnonLimit, AnonWindow,
		KeyHeader, KeyPrefix, KeyLimit, KeyWindow, BurstLimit, BurstWindow)
}

// hello shows the caller its standing, as the middleware left it in the
// request's context.
func hello(w http.ResponseWriter, r *http.Request) {
	res, _ := ratelimit.FromContext(r.Context())
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Message   string `json:"message"`
		Policy    string `json:"policy"`
		Limit     int    `json:"limit"`
		Remaining int    `json:"remaining"`
	}{"hello", res.Policy, res.Limit, res.Remaining})
}
