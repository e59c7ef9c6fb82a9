package ratelimit_test

import (
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
