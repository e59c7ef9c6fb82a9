package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
	"github.com/slidelog/ratelimit/examples/internal/routetest"
)

func init() { gin.SetMode(gin.TestMode) }

func TestGroupAndRouteLimits(t *testing.T) {
	site := routetest.NewLimiter(t, 20, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	api := routetest.NewLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	login := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"))
	srv := httptest.NewServer(newRouter(site, api, login))
	defer srv.Close()

	alice := map[string]string{"X-API-Key": "alice"}
	routetest.Run(t, srv.URL, []routetest.Step{
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 20, 19), Body: "hello"},
		// A route's own limiter is the inner one, so its headers show.
		{Method: "POST", Path: "/login", Status: 401, Want: routetest.Allowed("login", 2, 1), Body: "wrong password"},
		{Method: "POST", Path: "/login", Status: 401, Want: routetest.Allowed("login", 2, 0)},
		{Method: "POST", Path: "/login", Status: 429, Want: routetest.Limited("login", 2), Body: "429 Too Many Requests"},
		// The group's limiter, per key; the handler reads its standing.
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 2), Body: `{"limit":3,"remaining":2}`},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 1), Body: `"remaining":1`},
		{Path: "/api/hello", Header: alice, Status: 200, Want: routetest.Allowed("api", 3, 0), Body: `"remaining":0`},
		{Path: "/api/hello", Header: alice, Status: 429, Want: routetest.Limited("api", 3)},
		// No key: the API limiter answers 400; the headers are the site
		// limiter's, which ran first and allowed it.
		{Path: "/api/hello", Status: 400, Want: map[string]string{"Ratelimit": `"site";r=11;t=60`}},
		// r.Use: the site limiter counted every request from this IP, the
		// inner limiters' 429s and 400 included.
		{Path: "/", Status: 200, Want: routetest.Allowed("site", 20, 10)},
	})
}

// TestLoginCountsFailuresOnly: successful logins never use up the quota
// (WithCountIf sees the status the gin handler wrote), failed ones do.
func TestLoginCountsFailuresOnly(t *testing.T) {
	site := routetest.NewLimiter(t, 100, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"))
	api := routetest.NewLimiter(t, 100, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"))
	login := routetest.NewLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"), ratelimit.WithCountIf(failedLogin))
	srv := httptest.NewServer(newRouter(site, api, login))
	defer srv.Close()

	for i, c := range []struct {
		password string
		status   int
	}{
		{"open sesame", 200}, {"guess", 401}, {"open sesame", 200}, {"open sesame", 200},
		{"guess", 401}, {"open sesame", 429},
	} {
		resp, err := http.PostForm(srv.URL+"/login", url.Values{"password": {c.password}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("login %d (%q): status %d, want %d", i+1, c.password, resp.StatusCode, c.status)
		}
	}
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
		// The site limiter refuses before the inner limiters run, and
		// nothing of the handlers is appended to its answer.
		{Path: "/api/hello", Header: map[string]string{"X-API-Key": "alice"}, Status: 429, Want: routetest.Limited("site", 2)},
		{Method: "POST", Path: "/login", Status: 429, Want: routetest.Limited("site", 2)},
	})
	// The refusal's body is the limiter's alone.
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "429 Too Many Requests: rate limit exceeded, see Retry-After\n"; resp.StatusCode != 429 || string(body) != want {
		t.Errorf("GET /: %d %q, want 429 %q", resp.StatusCode, body, want)
	}
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
