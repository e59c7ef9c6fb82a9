package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// apiKeyRequest returns a request carrying apiKey in X-API-Key and plan in
// X-Plan.
func apiKeyRequest(apiKey, plan string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	r.Header.Set("X-API-Key", apiKey)
	r.Header.Set("X-Plan", plan)
	return r
}

// Peek and Reset name the client as its requests do, under the plan the
// limiter chooses for them; Reset forgets every plan.
func TestPeekAndResetByRequest(t *testing.T) {
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key")),
		ratelimit.WithPlans(func(r *http.Request, _ string) string { return r.Header.Get("X-Plan") },
			map[string][]ratelimit.Policy{"pro": {{Name: "pro", Limit: 10, Window: time.Minute}}}))
	h := l.Handler(okHandler)
	serve := func(plan string, n int) {
		for range n {
			h.ServeHTTP(httptest.NewRecorder(), apiKeyRequest("acme", plan))
		}
	}
	serve("", 2)
	serve("pro", 4)
	for _, c := range []struct {
		plan      string
		remaining int
		limit     int
	}{{"", 1, 3}, {"pro", 6, 10}} {
		for range 3 { // peeks count nothing
			res, err := l.Peek(apiKeyRequest("acme", c.plan))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Allowed || res.Remaining != c.remaining || res.Limit != c.limit {
				t.Fatalf("plan %q: Peek %+v, want allowed with %d of %d left", c.plan, res, c.remaining, c.limit)
			}
		}
	}
	if res, _ := l.Peek(apiKeyRequest("someone else", "")); res.Remaining != 3 {
		t.Errorf("a client never seen: %d left, want the full 3", res.Remaining)
	}
	if err := l.Reset(apiKeyRequest("acme", "")); err != nil {
		t.Fatal(err)
	}
	for _, plan := range []string{"", "pro"} {
		if res, _ := l.Peek(apiKeyRequest("acme", plan)); res.Remaining != res.Limit {
			t.Errorf("plan %q after Reset: %d of %d left, want all", plan, res.Remaining, res.Limit)
		}
	}
	if _, err := l.Peek(httptest.NewRequest("GET", "/", nil)); err == nil {
		t.Error("Peek of a request without a key: no error")
	}
}

// A store without the optional abilities is reported, not ignored.
func TestPeekAndResetNeedTheirInterfaces(t *testing.T) {
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{}))
	if _, err := l.Peek(apiKeyRequest("a", "")); !errors.Is(err, ratelimit.ErrUnsupported) {
		t.Errorf("Peek on a store without Peek: %v, want ErrUnsupported", err)
	}
	if err := l.Reset(apiKeyRequest("a", "")); !errors.Is(err, ratelimit.ErrUnsupported) {
		t.Errorf("Reset on a store without Reset: %v, want ErrUnsupported", err)
	}
}
