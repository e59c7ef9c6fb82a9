package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

func TestGroupAndRouteLimits(t *testing.T) {
	site := routetest.NewLimiter(t, 20, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	api := routetest.NewLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	login := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"))
	srv := httptest.NewServer(newRouter(site, api, login))
	defer srv.Close()

	alice := map[string]string{"X-API-Key": "alice"}
	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 20, 19), Body: "hello"},
		// r.With: the login limiter is the inner one, so its headers show.
		{Method: "POST", Path: "/login", Status: 200, Want: routetest.Allowed("login", 2, 1), Body: "welcome"},
		{Method: "POST", Path: "/login", Status: 200, Want: routetest.Allowed("login", 2, 0)},
		{Method: "POST", Path: "/login", Status: 429, Want: routetest.Limited("login", 2)},
		// r.Group: the API limiter, per key.
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 2), Body: "remaining 2 of 3"},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 1)},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 0)},
		{Path: "/api/hello", Header: alice, Status: 429, Want: routetest.Limited("api", 3)},
		// No key: the API limiter answers 400; the headers are the site
		// limiter's, which ran first and allowed it.
		{Path: "/api/hello", Status: 400, Want: map[string]string{"Ratelimit": `"site";r=11;t=60`}},
		// r.Use: the site limiter counted every request from this IP, the
		// inner limiters' 429s and 400 included.
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 20, 10)},
	})
}

func TestSiteLimitCoversEveryRoute(t *testing.T) {
	site := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	api := routetest.NewLimiter(t, 10, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	login := routetest.NewLimiter(t, 10, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"))
	srv := httptest.NewServer(newRouter(site, api, login))
	defer srv.Close()

	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 2, 1)},
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "alice"}, Status: 200, Want: routetest.Allowed("api", 10, 9)},
		// The site limiter refuses before the inner limiters run.
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "alice"}, Status: 429, Want: routetest.Limited("site", 2)},
		{Method: "POST", Path: "/login", Status: 429, Want: routetest.Limited("site", 2)},
	})
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
