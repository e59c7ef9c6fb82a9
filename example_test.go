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

// The limiter's Handler is an alice.Constructor, a
// func(http.Handler) http.Handler, as it stands.
func Example_alice() {
	// A clock that stands still, so that the output does not depend on
	// how fast this machine runs.
	start := time.Now()
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(func() time.Time { return start }))
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
		fmt.Printf("%d %s Retry-After=%q Cache-Control=%s\n", resp.StatusCode, resp.Header.Get("RateLimit"),
			resp.Header.Get("Retry-After"), resp.Header.Get("Cache-Control"))
	}
	// Output:
	// 200 "default";r=1;t=60 Retry-After="" Cache-Control=no-store
	// 200 "default";r=0;t=60 Retry-After="" Cache-Control=no-store
	// 429 "default";r=0;t=60 Retry-After="60" Cache-Control=no-store
}

// The same decision without HTTP: for a queue consumer, a job or a
// login form. The key is what the limiter's Keyer makes of the client's
// requests, so that both ways count against one quota.
func ExampleLimiter_Allow() {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByIP())
	if err != nil {
		panic(err)
	}
	defer l.Close()

	for range 3 {
		d := l.Allow(context.Background(), "ip:192.0.2.1", 1)
		switch d.Outcome {
		case ratelimit.Serve:
			fmt.Println("serve, remaining", d.Result.Remaining)
		case ratelimit.Refuse:
			fmt.Println("refuse, retry in", d.Result.RetryAfter.Round(time.Minute))
		default:
			fmt.Println("cannot decide:", d.Err)
		}
	}
	// Output:
	// serve, remaining 1
	// serve, remaining 0
	// refuse, retry in 1m0s
}

// A burst limit and an hourly limit at once: a request counts against both
// or neither, and the headers report the tighter one.
func ExampleWithPolicies() {
	start := time.Now() // a clock that stands still: three requests in one second
	l, err := ratelimit.New(100, time.Hour, ratelimit.KeyByIP(), ratelimit.WithClock(func() time.Time { return start }),
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

// Limits per customer live where the application keeps them, here a
// table standing in for a database, and are cached for a minute per
// customer, so that a customer who upgrades has the new limit within a
// minute and a busy one costs no lookup per request. A customer the table
// does not hold gets the default policies.
func ExampleWithLimits() {
	contracts := map[string]string{"apikey:k-pro": "1000/min"}
	lookup := func(ctx context.Context, key string) ([]ratelimit.Policy, error) {
		text, ok := contracts[key]
		if !ok {
			return nil, nil // the default policies
		}
		return ratelimit.ParsePolicies(text)
	}
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithLimits(lookup, time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for _, apiKey := range []string{"k-free", "k-free", "k-pro", "k-pro"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", apiKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d %s\n", apiKey, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// k-free: 200 "default";q=1;w=60
	// k-free: 429 "default";q=1;w=60
	// k-pro: 200 "per-min";q=1000;w=60
	// k-pro: 200 "per-min";q=1000;w=60
}

// An admin endpoint shows a customer's standing and resets it, naming the
// customer by their API key: it asks the limiter's Keyer for the key of a
// request carrying it, as the customer's own requests do, so that the
// store's key (here a digest) is spelled the same way.
func ExampleLimiter_Peek() {
	keyer := ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key"))
	l, err := ratelimit.New(300, time.Minute, keyer)
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

	key, err := keyer.Key(customer("key-of-acme"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, err := l.Peek(ctx, key)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d left\n", res.Remaining, res.Limit)

	if err := l.Reset(ctx, key); err != nil {
		panic(err)
	}
	res, _ = l.Peek(ctx, key)
	fmt.Printf("after Reset: %d of %d left\n", res.Remaining, res.Limit)
	// Output:
	// 263 of 300 left
	// after Reset: 300 of 300 left
}

// On a login endpoint, only failed attempts count: a user who logs in is
// never locked out, and a password guesser is refused after five tries a
// minute.
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
