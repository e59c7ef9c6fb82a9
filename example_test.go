package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/justinas/alice"

	"github.com/slidelog/ratelimit"
)

// Three requests a minute per API key: the fourth and fifth are refused
// until the first leaves the window.
func Example() {
	l, err := ratelimit.New(3, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(l.Handler(hello))
	defer srv.Close()

	for range 5 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-API-Key", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ")
	}
	fmt.Println()
	// Output: 200 200 200 429 429
}

// The limiter's Handler is an alice.Constructor as it stands.
func Example_alice() {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByIP())
	if err != nil {
		panic(err)
	}
	defer l.Close()

	noCache := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			next.ServeHTTP(w, r)
		})
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(alice.New(noCache, l.Handler).Then(ok))
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d %s Retry-After=%q\n", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 "default";r=1;t=60 Retry-After=""
	// 200 "default";r=0;t=60 Retry-After=""
	// 429 "default";r=0;t=60 Retry-After="60"
}

// The same decision without HTTP: for a gRPC interceptor, a queue consumer
// or a login form.
func ExampleLimiter_Allow() {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByIP())
	if err != nil {
		panic(err)
	}
	defer l.Close()

	for range 3 {
		res, err := l.Allow(context.Background(), "user:42")
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry in %v\n", res.Allowed, res.Remaining, res.RetryAfter.Round(time.Minute))
	}
	// Output:
	// allowed=true remaining=1 retry in 0s
	// allowed=true remaining=0 retry in 0s
	// allowed=false remaining=0 retry in 1m0s
}

// A burst limit and an hourly limit at once: a request counts against both
// or neither, and the headers report the tighter one.
func ExampleWithPolicies() {
	l, err := ratelimit.New(100, time.Hour, ratelimit.KeyByIP(),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 2, Window: time.Second}))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	var w *httptest.ResponseRecorder
	for range 3 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	// Output:
	// 200 "burst";r=1;t=1
	// 200 "burst";r=0;t=1
	// 429 "burst";r=0;t=1
	// "default";q=100;w=3600, "burst";q=2;w=1
}

// Plans give tiers their own quotas; here the tier comes from a header for
// brevity, in production from what the authentication middleware verified.
func ExampleWithPlans() {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithPlans(func(r *http.Request, key string) string { return r.Header.Get("X-Plan") },
			map[string][]ratelimit.Policy{"pro": {{Name: "pro", Limit: 1000, Window: time.Minute}}}))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for _, plan := range []string{"", "", "pro", "gold"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "k1")
		r.Header.Set("X-Plan", plan)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("plan %q: %d %s\n", plan, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// plan "": 200 "default";q=1;w=60
	// plan "": 429 "default";q=1;w=60
	// plan "pro": 200 "pro";q=1000;w=60
	// plan "gold": 429 "default";q=1;w=60
}

// An admin endpoint shows a customer's standing and resets it, naming the
// customer by their API key: the request it builds carries the key as the
// customer's own requests do, so the limiter's KeyFunc spells the store's
// key (here a digest) the same way.
func ExampleLimiter_Peek() {
	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key")))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	customer := func(apiKey string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", apiKey)
		return r
	}
	api := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 37 {
		api.ServeHTTP(httptest.NewRecorder(), customer("key-of-acme"))
	}

	res, err := l.Peek(customer("key-of-acme"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d left\n", res.Remaining, res.Limit)

	if err := l.Reset(customer("key-of-acme")); err != nil {
		panic(err)
	}
	res, _ = l.Peek(customer("key-of-acme"))
	fmt.Printf("after Reset: %d of %d left\n", res.Remaining, res.Limit)
	// Output:
	// 263 of 300 left
	// after Reset: 300 of 300 left
}

// On a login endpoint, only failed attempts count: a user who logs in is
// never locked out, and a password guesser is after five tries a minute.
func ExampleWithCountIf() {
	l, err := ratelimit.New(5, time.Minute, ratelimit.KeyByHeader("X-User"),
		ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
			return status == http.StatusUnauthorized
		}))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	login := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	try := func(user, password string) int {
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-User", user)
		r.Header.Set("X-Password", password)
		w := httptest.NewRecorder()
		login.ServeHTTP(w, r)
		return w.Code
	}
	var alice, mallory []int
	for _, password := range []string{"1234", "letmein", "qwerty", "hunter2", "s3cret", "s3cret"} {
		alice = append(alice, try("alice", password))
	}
	for range 7 {
		mallory = append(mallory, try("mallory", "guess"))
	}
	fmt.Println("alice:  ", alice)
	fmt.Println("mallory:", mallory)
	// Output:
	// alice:   [401 401 401 401 200 200]
	// mallory: [401 401 401 401 401 429 429]
}
