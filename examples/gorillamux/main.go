// Command gorillamux rate-limits a gorilla/mux router: a per-IP limit on
// the router with r.Use, and a per-key limit on the API subrouter.
//
//	go -C examples run ./gorillamux
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	// Each limiter names its policy: a request can pass through two, and
	// the name in the RateLimit headers tells the client whose quota they
	// describe.
	perIP, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer perIP.Close()
	// KeyByHeader does not check keys: in production, put the limiter
	// behind the middleware that authenticates them.
	perKey, err := ratelimit.New(100, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer perKey.Close()

	if err := serve.Run(*addr, newRouter(perIP, perKey)); err != nil {
		log.Fatal(err)
	}
}

// newRouter wires the limiters in. gorilla/mux runs middleware only for
// requests that match a route, and a router's middleware also runs for its
// subrouters' routes: an API request counts in both limiters, and its
// response shows the inner one's headers.
func newRouter(perIP, perKey *ratelimit.Limiter) http.Handler {
	r := mux.NewRouter()
	r.Use(perIP.Handler)
	r.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}).Methods(http.MethodGet)

	api := r.PathPrefix("/api").Subrouter()
	api.Use(perKey.Handler)
	api.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		res, _ := ratelimit.FromContext(r.Context())
		fmt.Fprintf(w, "remaining %d of %d\n", res.Remaining, res.Limit)
	}).Methods(http.MethodGet)
	return r
}
