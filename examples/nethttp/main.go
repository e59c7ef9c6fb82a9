// Command nethttp rate-limits routes of a plain http.ServeMux, each with
// its own limiter: anonymous pages by client IP, the API by API key.
//
//	go -C examples run ./nethttp
package main

import (
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

	// Each limiter names its policy, so that the RateLimit headers tell
	// the client whose quota they describe.
	perIP, err := ratelimit.New(5, 10*time.Second, ratelimit.KeyByIP(), ratelimit.WithName("site"), ratelimit.WithResultInContext())
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

	if err := serve.Run(*addr, newMux(perIP, perKey)); err != nil {
		log.Fatal(err)
	}
}

// newMux wraps each route in the limiter that suits it. l.Handler is a
// func(http.Handler) http.Handler, so it wraps any handler.
func newMux(perIP, perKey *ratelimit.Limiter) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", perIP.Handler(http.HandlerFunc(home)))
	mux.Handle("GET /api/", perKey.Handler(http.HandlerFunc(api)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {}) // not limited
	return mux
}

func home(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintln(w, "hello")
}

// api shows the caller its standing, as the limiter left it in the
// request's context.
func api(w http.ResponseWriter, r *http.Request) {
	res, _ := ratelimit.FromContext(r.Context())
	fmt.Fprintf(w, "remaining %d of %d\n", res.Remaining, res.Limit)
}
