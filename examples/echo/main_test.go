package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

func TestEchoMiddleware(t *testing.T) {
	perIP := routetest.NewLimiter(t, 6, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	perKey := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	srv := httptest.NewServer(newEcho(perIP, perKey))
	defer srv.Close()

	alice := map[string]string{"X-API-Key": "alice"}
	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 6, 5), Body: "hello"},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 2, 1), Body: `{"limit":2,"remaining":1}`},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 2, 0), Body: `"remaining":0`},
		{Path: "/api/hello", Header: alice, Status: 429, Want: routetest.Limited("api", 2), Body: "429 Too Many Requests"},
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 6, 1)},
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 6, 0)},
		{Path: "/", Status: 429, Want: routetest.Limited("site", 6)},
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "bob"}, Status: 429, Want: routetest.Limited("site", 6)},
	})
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
