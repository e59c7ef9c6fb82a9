package main

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

// start serves app on a port of the loopback interface until the test
// ends, and returns its base URL.
func start(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	t.Cleanup(func() {
		if err := app.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func TestFiberMiddleware(t *testing.T) {
	perIP := routetest.NewLimiter(t, 6, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	perKey := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	base := start(t, newApp(perIP, perKey))

	alice := map[string]string{"X-API-Key": "alice"}
	routetest.Run(t, base, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 6, 5), Body: "hello"},
		// The handler reads the inner limiter's decision from c.Locals.
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 2, 1), Body: `{"limit":2,"remaining":1}`},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 2, 0), Body: `{"limit":2,"remaining":0}`},
		{Path: "/api/hello", Header: alice, Status: 429, Want: routetest.Limited("api", 2), Body: "429 Too Many Requests"},
		{Path: "/api/hello", Status: 400, Want: map[string]string{"Ratelimit": `"site";r=1;t=60`}},
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 6, 0)},
		{Path: "/", Status: 429, Want: routetest.Limited("site", 6)},
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "bob"}, Status: 429, Want: routetest.Limited("site", 6)},
		{Path: "/", Header: map[string]string{"Accept": "application/problem+json"}, Status: 429,
			Want: map[string]string{"Content-Type": "application/problem+json", "Retry-After": "60"}, Body: `"violated-policies":["site"]`},
	})
}

// TestRefusedRequestRunsNoHandler counts a handler's calls: it runs for
// the allowed requests only, and nothing of it is added to a refusal.
func TestRefusedRequestRunsNoHandler(t *testing.T) {
	perIP := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	perKey := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	app := newApp(perIP, perKey)
	var calls atomic.Int64
	app.Get("/counted", func(c fiber.Ctx) error {
		calls.Add(1)
		res, ok := resultOf(c)
		if !ok {
			return c.SendString("no decision\n")
		}
		return c.SendString("counted, " + res.Policy + "\n")
	})
	base := start(t, app)

	routetest.Run(t, base, []routetest.Step{
		{Path: "/counted", Status: 200, Want: routetest.Allowed("site", 2, 1), Body: "counted, site"},
		{Path: "/counted", Status: 200, Want: routetest.Allowed("site", 2, 0), Body: "counted, site"},
		{Path: "/counted", Status: 429, Want: routetest.Limited("site", 2), Body: "429 Too Many Requests: rate limit exceeded, see Retry-After\n"},
		{Path: "/counted", Status: 429, Want: routetest.Limited("site", 2)},
	})
	if got := calls.Load(); got != 2 {
		t.Errorf("handler ran %d times for 2 allowed and 2 refused requests, want 2", got)
	}
}

// TestFromContext pins down which of fiber's contexts carry the decision,
// as the package comment and the README say: c and c.RequestCtx(), which
// read the fasthttp request's user values the adaptor copied it into, but
// not c.Context().
func TestFromContext(t *testing.T) {
	l := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	app := fiber.New()
	app.Use(limit(l))
	app.Get("/", func(c fiber.Ctx) error {
		_, fromCtx := ratelimit.FromContext(c)
		_, fromRequestCtx := ratelimit.FromContext(c.RequestCtx())
		_, fromContext := ratelimit.FromContext(c.Context())
		return c.SendString(fmt.Sprintf("c %v, c.RequestCtx() %v, c.Context() %v", fromCtx, fromRequestCtx, fromContext))
	})
	base := start(t, app)

	routetest.Run(t, base, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 2, 1), Body: "c true, c.RequestCtx() true, c.Context() false"},
	})
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
