package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

func TestPerRouteLimiters(t *testing.T) {
	perIP := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	perKey := routetest.NewLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	srv := httptest.NewServer(newMux(perIP, perKey))
	defer srv.Close()

	alice := map[string]string{"X-API-Key": "alice"}
	bob := map[string]string{"X-API-Key": "bob"}
	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 2, 1), Body: "hello"},
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 2, 0)},
		{Path: "/", Status: 429, Want: routetest.Limited("site", 2)},
		// The API has its own limiter, keyed by API key, untouched by
		// the IP's exhausted quota.
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 2), Body: "remaining 2 of 3"},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 1)},
		{Path: "/api/other", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 0)},
		{Path: "/api/hello", Header: alice, Status: 429, Want: routetest.Limited("api", 3)},
		{Path: "/api/hello", Header: bob, Status: 200, Want: routetest.Allowed("api", 3, 2)},
		{Path: "/api/hello", Status: 400, Want: map[string]string{"Ratelimit": ""}},
		{Path: "/healthz", Status: 200, Want: map[string]string{"Ratelimit": ""}},
	})
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
