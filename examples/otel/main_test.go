package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
)

// newStore returns a memory store that the test closes.
func newStore(t *testing.T, c ratelimit.MemoryConfig) ratelimit.Store {
	t.Helper()
	st, err := ratelimit.NewMemoryStore(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newLimiter returns a limiter per API key counted by m as name, that
// the test closes, with its store observed.
func newLimiter(t *testing.T, m *metrics, name string, limit int, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limit, time.Hour, ratelimit.KeyByHeader("X-API-Key"), append(opts, ratelimit.WithHooks(m.hooks(name)))...)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := m.observeStore(name, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Unregister()
		l.Close()
	})
	return l
}

// TestMetricsCountDecisionsByPolicy sends allowed, limited and failed
// requests through two limiters and reads the exact counts back from the
// SDK's reader: decisions by limiter, outcome and policy or failure, and
// each store's counters.
func TestMetricsCountDecisionsByPolicy(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := newMetrics(provider.Meter(meterName))
	if err != nil {
		t.Fatal(err)
	}

	// api: 3 an hour and a burst of 2, in a store with room for one
	// client's two states and no eviction, so a second client fails.
	api := newLimiter(t, m, "api", 3, ratelimit.WithName("api"),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 2, Window: time.Hour}),
		ratelimit.WithStore(newStore(t, ratelimit.MemoryConfig{MaxKeys: 2})))
	// login: 5 an hour, in a store with room for two clients, evicting.
	login := newLimiter(t, m, "login", 5, ratelimit.WithName("login"),
		ratelimit.WithStore(newStore(t, ratelimit.MemoryConfig{MaxKeys: 2, EvictLeastRecent: true})))
	srv := httptest.NewServer(newMux(api, reader))
	defer srv.Close()

	for i, c := range []struct {
		key    string
		status int
	}{
		{"alice", 200}, {"alice", 200}, // allowed; burst has the fewest left
		{"alice", 429}, {"alice", 429}, // limited by burst
		{"", 400},    // no key: failed, the key's fault
		{"bob", 503}, // the store is full: failed, the store's fault
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/hello", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.key != "" {
			req.Header.Set("X-API-Key", c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("request %d (key %q): status %d, want %d", i+1, c.key, resp.StatusCode, c.status)
		}
	}
	// Allow, without a request: three clients, the third evicting the
	// first; then a cost no wait could fit.
	for i, c := range []struct {
		key     string
		cost    int
		outcome ratelimit.Outcome
	}{
		{"apikey:a", 1, ratelimit.Serve}, {"apikey:b", 1, ratelimit.Serve}, {"apikey:c", 1, ratelimit.Serve},
		{"apikey:a", 6, ratelimit.Reject},
	} {
		if d := login.Allow(context.Background(), c.key, c.cost); d.Outcome != c.outcome {
			t.Errorf("Allow %d (%s, cost %d): outcome %d, want %d (err %v)", i+1, c.key, c.cost, d.Outcome, c.outcome, d.Err)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Name != meterName {
		t.Fatalf("scopes %+v, want one, %s", rm.ScopeMetrics, meterName)
	}
	got := map[string]metricdata.Metrics{}
	for _, mt := range rm.ScopeMetrics[0].Metrics {
		got[mt.Name] = mt
	}
	requests := func(limiter, outcome string, attr attribute.KeyValue, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(limiterKey.String(limiter), outcomeKey.String(outcome), attr),
			Value:      n,
		}
	}
	perLimiter := func(api, login int64) []metricdata.DataPoint[int64] {
		return []metricdata.DataPoint[int64]{
			{Attributes: attribute.NewSet(limiterKey.String("api")), Value: api},
			{Attributes: attribute.NewSet(limiterKey.String("login")), Value: login},
		}
	}
	counter := func(points []metricdata.DataPoint[int64]) metricdata.Sum[int64] {
		return metricdata.Sum[int64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
	}
	for _, want := range []metricdata.Metrics{
		{
			Name:        "ratelimit.requests",
			Description: "Requests decided by the rate limiter, by outcome, and by the policy reported or what failed.",
			Unit:        "{request}",
			Data: counter([]metricdata.DataPoint[int64]{
				requests("api", "allowed", policyKey.String("burst"), 2),
				requests("api", "limited", policyKey.String("burst"), 2),
				requests("api", "failed", errorKey.String("key"), 1),
				requests("api", "failed", errorKey.String("store"), 1),
				requests("login", "allowed", policyKey.String("login"), 3),
				requests("login", "failed", errorKey.String("key"), 1),
			}),
		},
		{
			Name:        "ratelimit.store.states",
			Description: "States the limiter's memory store tracks now: one per key and policy.",
			Unit:        "{state}",
			// api: alice under two policies; login: b and c.
			Data: metricdata.Gauge[int64]{DataPoints: perLimiter(2, 2)},
		},
		{
			Name:        "ratelimit.store.evictions",
			Description: "Live states evicted to make room (MemoryConfig.MaxKeys, EvictLeastRecent).",
			Unit:        "{state}",
			Data:        counter(perLimiter(0, 1)),
		},
		{
			Name:        "ratelimit.store.rejected_keys",
			Description: "New keys refused because the store was full (MemoryConfig.MaxKeys).",
			Unit:        "{key}",
			Data:        counter(perLimiter(1, 0)),
		},
		{
			Name:        "ratelimit.store.cached_refusals",
			Description: "Refusals redisstore answered from its cache, without a round trip to Redis.",
			Unit:        "{request}",
			Data:        counter(perLimiter(0, 0)),
		},
	} {
		metricdatatest.AssertEqual(t, want, got[want.Name], metricdatatest.IgnoreTimestamp())
		delete(got, want.Name)
	}
	for name := range got {
		t.Errorf("unexpected metric %s", name)
	}

	// /metrics shows the same points; the endpoint is not limited.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"ratelimit.requests{ratelimit.limiter=api,ratelimit.outcome=allowed,ratelimit.policy=burst} 2",
		"ratelimit.requests{error.type=store,ratelimit.limiter=api,ratelimit.outcome=failed} 1",
		"ratelimit.store.evictions{ratelimit.limiter=login} 1",
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("GET /metrics: no line %q in\n%s", line, body)
		}
	}
}

// TestFailure: failure tells a request's own faults from the store's.
func TestFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no key", &ratelimit.KeyError{Status: 400, Message: "no key"}, "key"},
		{"no key, wrapped", errWrap{ratelimit.ErrNoKey}, "key"},
		{"invalid cost", errWrap{ratelimit.ErrInvalidCost}, "key"},
		{"store", context.DeadlineExceeded, "store"},
	} {
		if got := failure(c.err); got != c.want {
			t.Errorf("failure(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

// TestMainFailsOnTakenPort runs the example as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
