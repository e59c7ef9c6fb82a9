package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/client"
)

// A server grants 2 requests an hour. The client sends 3, each allowed 5
// seconds: the third would have to wait an hour, so it returns at once
// with the deadline's error, and never costs the server a 429.
func Example() {
	l, err := ratelimit.New(2, time.Hour, ratelimit.KeyByHeader("X-API-Key"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var served atomic.Int32
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
	})))
	defer srv.Close()

	tr := &client.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("X-API-Key", "k")
		resp, err := c.Do(req)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Printf("request %d: would wait past its deadline\n", i)
		case err != nil:
			log.Fatal(err)
		default:
			resp.Body.Close()
			fmt.Printf("request %d: %s, %s\n", i, resp.Status, resp.Header.Get("RateLimit"))
		}
	}
	fmt.Println("the server saw", served.Load(), "requests")
	// Output:
	// request 0: 200 OK, "default";r=1;t=3600
	// request 1: 200 OK, "default";r=0;t=3600
	// request 2: would wait past its deadline
	// the server saw 2 requests
}
