// Command echo rate-limits a labstack/echo (v4) server: l.Handler is a
// func(http.Handler) http.Handler, which echo.WrapMiddleware adapts.
//
//	go -C examples run ./echo
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

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

	if err := serve.Run(*addr, newEcho(perIP, perKey)); err != nil {
		log.Fatal(err)
	}
}

// newEcho wires the limiters in: per IP for every route with e.Use, per
// API key on the /api group. An API request counts in both, and its
// response shows the inner limiter's headers.
//
// KeyByIP reads the TCP peer, not echo's c.RealIP(), which trusts
// X-Forwarded-For unless e.IPExtractor says otherwise.
func newEcho(perIP, perKey *ratelimit.Limiter) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.Use(echo.WrapMiddleware(perIP.Handler))
	e.GET("/", func(c echo.Context) error {
		return c.String(http.StatusOK, "hello\n")
	})

	api := e.Group("/api", echo.WrapMiddleware(perKey.Handler))
	api.GET("/hello", func(c echo.Context) error {
		res, _ := ratelimit.FromContext(c.Request().Context())
		return c.JSON(http.StatusOK, map[string]int{"remaining": res.Remaining, "limit": res.Limit})
	})
	return e
}
