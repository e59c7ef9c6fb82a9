package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
)

func TestMetricsCountDecisionsByPolicy(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	l, err := ratelimit.New(3, time.Hour, ratelimit.KeyByIP(), ratelimit.WithName("api"),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 2, Window: time.Hour}),
		ratelimit.WithHooks(m.hooks()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m.trackKeys(reg, "api", l)
	srv := httptest.NewServer(newMux(l, reg))
	defer srv.Close()

	var codes []int
	for range 4 {
		resp, err := http.Get(srv.URL + "/api/hello")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if want := []int{200, 200, 429, 429}; !equal(codes, want) {
		t.Fatalf("statuses %v, want %v", codes, want)
	}
	for _, c := range []struct {
		outcome, policy string
		want            float64
	}{
		{"allowed", "burst", 2}, // 1 then 0 left of 2: tighter than 2 then 1 of 3
		{"allowed", "api", 0},
		{"limited", "burst", 2},
	} {
		if got := testutil.ToFloat64(m.decisions.WithLabelValues(c.outcome, c.policy)); got != c.want {
			t.Errorf("ratelimit_requests_total{outcome=%q,policy=%q} = %v, want %v", c.outcome, c.policy, got, c.want)
		}
	}

	// The scrape shows the tracked key; the metrics route is not limited.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// One client under two policies: two states. The memory store
	// answers every refusal itself: none from a cache.
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(`
# HELP ratelimit_tracked_keys States the limiter's memory store tracks now: one per key and policy.
# TYPE ratelimit_tracked_keys gauge
ratelimit_tracked_keys{limiter="api"} 2
# HELP ratelimit_cached_refusals_total Refusals redisstore answered from its cache, without a round trip to Redis.
# TYPE ratelimit_cached_refusals_total counter
ratelimit_cached_refusals_total{limiter="api"} 0
`), "ratelimit_tracked_keys", "ratelimit_cached_refusals_total"); err != nil {
		t.Error(err)
	}
}

func TestErrorsAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	l, err := ratelimit.New(3, time.Hour, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithHooks(m.hooks()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := l.Handler(http.NotFoundHandler())
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // no key
	if got := testutil.ToFloat64(m.errors); got != 1 {
		t.Errorf("ratelimit_errors_total = %v, want 1", got)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
