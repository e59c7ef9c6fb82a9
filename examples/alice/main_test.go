package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

func TestChains(t *testing.T) {
	perIP := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	perKey := routetest.NewLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	srv := httptest.NewServer(newHandler(perIP, perKey))
	defer srv.Close()

	// with adds the base chain's header to the expected ones: the 429
	// went through it too.
	with := func(h map[string]string) map[string]string {
		h["Cache-Control"] = "no-store"
		return h
	}
	alice := map[string]string{"X-API-Key": "alice"}
	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: with(routetest.Allowed("site", 2, 1)), Body: "hello"},
		{Path: "/", Status: 200, Want: with(routetest.Allowed("site", 2, 0))},
		{Path: "/", Status: 429, Want: with(routetest.Limited("site", 2))},
		{Path: "/api/hello", Header: alice, Status: 200, Want: with(routetest.Allowed("api", 3, 2)), Body: "remaining 2 of 3"},
		{Path: "/api/hello", Header: alice, Status: 200, Want: with(routetest.Allowed("api", 3, 1))},
		{Path: "/api/hello", Header: alice, Status: 200, Want: with(routetest.Allowed("api", 3, 0))},
		{Path: "/api/hello", Header: alice, Status: 429, Want: with(routetest.Limited("api", 3))},
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "bob"}, Status: 200, Want: with(routetest.Allowed("api", 3, 2))},
	})
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
