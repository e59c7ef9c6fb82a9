// Command chi rate-limits a go-chi/chi router three ways: a site-wide
// per-IP limit with r.Use, a per-key limit on an API group with r.Group,
// and a strict limit on one route with r.With.
//
//	go -C examples run ./chi
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	// Each limiter names its policy: a request can pass through two, and
	// the name in the RateLimit headers tells the client whose quota they
	// describe.
	site, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer site.Close()
	// KeyByHeader does not check keys: in production, put the limiter
	// behind the middleware that authenticates them.
	api, err := ratelimit.New(100, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer api.Close()
	login, err := ratelimit.New(5, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer login.Close()

	if err := serve.Run(*addr, newRouter(site, api, login)); err != nil {
		log.Fatal(err)
	}
}

// newRouter wires the limiters in. A request through two limiters counts
// in both, and its response shows the headers of the inner one.
//
// Do not put chi's middleware.RealIP in front of KeyByIP: it trusts
// X-Forwarded-For from anyone, so every client could pick its own key.
func newRouter(site, api, login *ratelimit.Limiter) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(site.Handler) // every route, per client IP

	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	r.With(login.Handler).Post("/login", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "welcome")
	})
	r.Group(func(r chi.Router) {
		r.Use(api.Handler) // the API routes, per API key
		r.Get("/api/hello", func(w http.ResponseWriter, r *http.Request) {
			res, _ := ratelimit.FromContext(r.Context())
			fmt.Fprintf(w, "remaining %d of %d\n", res.Remaining, res.Limit)
		})
	})
	return r
}
