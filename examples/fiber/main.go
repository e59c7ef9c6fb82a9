// Command fiber rate-limits a gofiber/fiber (v3) app through fiber's
// adaptor, which runs l.Handler, a net/http middleware, on each request:
// per IP for every route, per API key on the /api group.
//
//	go -C examples run ./fiber
//
// # The decision in a fiber handler
//
// Under WithResultInContext, l.Handler puts its decision in the context
// of the net/http request it passes on, which the adaptor makes for
// l.Handler alone: FromContext(c.Context()) finds nothing there, since
// c.Context() is fiber's own context for the request. So limit, the
// example's middleware, wraps l.Handler in a net/http handler of its own
// that copies the decision into c.Locals, where resultOf reads it:
//
//	app.Use(limit(l))
//	app.Get("/", func(c fiber.Ctx) error {
//		res, _ := resultOf(c)
//		...
//	})
//
// (The adaptor also copies the net/http context's values into the fasthttp
// request's user values, where ratelimit.FromContext(c) and
// ratelimit.FromContext(c.RequestCtx()) find them too, but it does so by
// walking the standard library's context structs with reflection, which
// fiber deprecates; the example passes the decision explicitly instead.)
//
// # WithCountIf
//
// The adaptor calls the fiber handlers after l.Handler has returned, so
// WithCountIf would see a 200 for every request: keep it for net/http and
// gin (package ginlimit) servers.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/adaptor"

	"github.com/slidelog/ratelimit"
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

	if err := run(*addr, newApp(perIP, perKey)); err != nil {
		log.Fatal(err)
	}
}

// run serves app on addr until an interrupt, then shuts it down
// gracefully, as the other examples' servers do. It binds addr before it
// says it is listening.
func run(addr string, app *fiber.App) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("listening on http://%s (Ctrl-C to stop)", ln.Addr())
	return app.Listener(ln, fiber.ListenConfig{
		DisableStartupMessage: true,
		GracefulContext:       ctx,
		ShutdownTimeout:       5 * time.Second,
	})
}

// newApp wires the limiters in: per IP for every route with app.Use, per
// API key on the /api group. An API request counts in both, and its
// response shows the inner limiter's headers.
//
// KeyByIP reads the TCP peer, which the adaptor gives the net/http request
// as its RemoteAddr, not fiber's c.IP(), nor X-Forwarded-For.
func newApp(perIP, perKey *ratelimit.Limiter) *fiber.App {
	app := fiber.New()
	app.Use(limit(perIP))
	app.Get("/", func(c fiber.Ctx) error {
		return c.SendString("hello\n")
	})

	api := app.Group("/api", limit(perKey))
	api.Get("/hello", func(c fiber.Ctx) error {
		res, _ := resultOf(c)
		return c.JSON(fiber.Map{"remaining": res.Remaining, "limit": res.Limit})
	})
	return app
}

// resultKey is the c.Locals key of the limiter's decision.
type resultKey struct{}

// limit is l as fiber middleware: adaptor.HTTPMiddleware(l.Handler), with
// two additions of the example's own, in net/http handlers around and
// inside l.Handler:
//
//   - the decision is copied from the net/http request's context into
//     c.Locals, for resultOf;
//   - the headers l.Handler writes replace those the fiber response
//     already has, where the adaptor would add to them: under two
//     limiters a response shows the inner one's, as under net/http,
//     rather than both limiters' values in one header.
//
// A request l.Handler answers itself (429, 4xx, 503) never reaches the
// fiber handlers: the adaptor calls c.Next only when l.Handler called its
// next handler.
func limit(l *ratelimit.Limiter) fiber.Handler {
	return func(c fiber.Ctx) error {
		// The adaptor builds its net/http handler for each request anyway;
		// this one closes over c. It runs on a goroutine of the adaptor's
		// while this one waits for it, so c is never used by two at once.
		return adaptor.HTTPMiddleware(func(next http.Handler) http.Handler {
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if res, ok := ratelimit.FromContext(r.Context()); ok {
					c.Locals(resultKey{}, res)
				}
				next.ServeHTTP(w, r)
			}))
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				for name := range w.Header() {
					c.Response().Header.Del(name)
				}
			})
		})(c)
	}
}

// resultOf returns the decision limit made for c's request; ok is false
// when no limiter with WithResultInContext decided it. Under two limiters
// it is the inner one's.
func resultOf(c fiber.Ctx) (res ratelimit.Result, ok bool) {
	res, ok = c.Locals(resultKey{}).(ratelimit.Result)
	return res, ok
}
