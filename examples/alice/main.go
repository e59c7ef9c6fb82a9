// Command alice rate-limits with justinas/alice chains: l.Handler is an
// alice.Constructor as it stands, so a limiter is one more link.
//
//	go -C examples run ./alice
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/justinas/alice"

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

	if err := serve.Run(*addr, newHandler(perIP, perKey)); err != nil {
		log.Fatal(err)
	}
}

// newHandler builds one base chain and extends it with a different
// limiter per route.
func newHandler(perIP, perKey *ratelimit.Limiter) http.Handler {
	base := alice.New(noStore)
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", base.Append(perIP.Handler).ThenFunc(home))
	mux.Handle("GET /api/", base.Append(perKey.Handler).ThenFunc(api))
	return mux
}

// noStore stands for any other middleware in the chain.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func home(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintln(w, "hello")
}

func api(w http.ResponseWriter, r *http.Request) {
	res, _ := ratelimit.FromContext(r.Context())
	fmt.Fprintf(w, "remaining %d of %d\n", res.Remaining, res.Limit)
}
