package demoapp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	base time.Time
	off  atomic.Int64
}

func (c *fakeClock) now() time.Time          { return c.base.Add(time.Duration(c.off.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func newApp(t *testing.T) (*App, *fakeClock) {
	t.Helper()
	clk := &fakeClock{base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	app, err := New(ratelimit.WithClock(clk.now))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := app.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return app, clk
}

func do(app *App, path, key, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if remote != "" {
		r.RemoteAddr = remote
	}
	if key != "" {
		r.Header.Set(KeyHeader, key)
	}
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	return w
}

func TestAnonymousRoutesShareOneQuotaPerIP(t *testing.T) {
	app, clk := newApp(t)
	paths := []string{"/", "/api/hello", "/", "/api/hello", "/api/hello", "/api/hello", "/"}
	want := []int{200, 200, 200, 200, 200, 429, 429}
	for i, p := range paths {
		w := do(app, p, "", "192.0.2.1:1000")
		if w.Code != want[i] {
			t.Fatalf("request %d (%s): status %d, want %d", i+1, p, w.Code, want[i])
		}
	}
	// Another IP has its own quota.
	if w := do(app, "/api/hello", "", "192.0.2.2:1000"); w.Code != 200 {
		t.Errorf("other IP: status %d, want 200", w.Code)
	}

	w := do(app, "/api/hello", "", "192.0.2.1:2000")
	for name, want := range map[string]string{
		"X-Ratelimit-Limit":     "5",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "10",
		"Ratelimit-Policy":      `"site";q=5;w=10`,
		"Ratelimit":             `"site";r=0;t=10`,
		"Retry-After":           "10",
	} {
		if got := w.Header().Get(name); got != want {
			t.Errorf("429 header %s = %q, want %q", name, got, want)
		}
	}

	// The first five were all logged at the same instant: 1 ns short of
	// a window they still count, at a full window they are gone.
	clk.advance(AnonWindow - 1)
	if w := do(app, "/api/hello", "", "192.0.2.1:1000"); w.Code != 429 {
		t.Errorf("1ns before the window ends: status %d, want 429", w.Code)
	}
	clk.advance(1)
	w = do(app, "/api/hello", "", "192.0.2.1:1000")
	if w.Code != 200 {
		t.Fatalf("after the window: status %d, want 200", w.Code)
	}
	if got, want := w.Body.String(), `{"message":"hello","policy":"site","limit":5,"remaining":4}`+"\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

func TestAPIKeyRoutes(t *testing.T) {
	app, clk := newApp(t)

	for _, tc := range []struct{ name, key string }{{"missing", ""}, {"wrong prefix", "alice"}, {"bare prefix", KeyPrefix}} {
		w := do(app, "/api/v1/hello", tc.key, "")
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s key: status %d, want 401", tc.name, w.Code)
		}
		if w.Header().Get("Ratelimit") != "" {
			t.Errorf("%s key: 401 carries rate-limit headers; want none (rejected before the limiter)", tc.name)
		}
	}

	// The burst policy binds first: 10 in one instant, then 429 for 1 s.
	for i := 1; i <= BurstLimit+1; i++ {
		w := do(app, "/api/v1/hello", "demo-a", "")
		want := 200
		if i > BurstLimit {
			want = 429
		}
		if w.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, want)
		}
		if i == BurstLimit+1 {
			if got, want := w.Header().Get("Ratelimit"), `"burst";r=0;t=1`; got != want {
				t.Errorf("429 Ratelimit = %q, want %q", got, want)
			}
			if got, want := w.Header().Get("Ratelimit-Policy"), `"api";q=50;w=10, "burst";q=10;w=1`; got != want {
				t.Errorf("Ratelimit-Policy = %q, want %q", got, want)
			}
			if got := w.Header().Get("Retry-After"); got != "1" {
				t.Errorf("429 Retry-After = %q, want 1", got)
			}
		}
	}
	// Another key is unaffected.
	if w := do(app, "/api/v1/other", "demo-b", ""); w.Code != 200 {
		t.Errorf("key demo-b: status %d, want 200", w.Code)
	}

	// Ten a second for five seconds fills the 50-per-10s policy; the next
	// second's first request is refused by it, for the 5 s until the
	// first second's requests leave.
	allowed := BurstLimit
	for s := 1; s < KeyLimit/BurstLimit; s++ {
		clk.advance(BurstWindow)
		for range BurstLimit {
			if w := do(app, "/api/v1/hello", "demo-a", ""); w.Code == 200 {
				allowed++
			}
		}
	}
	if allowed != KeyLimit {
		t.Fatalf("allowed %d in 5 s, want %d", allowed, KeyLimit)
	}
	clk.advance(BurstWindow)
	w := do(app, "/api/v1/hello", "demo-a", "")
	if w.Code != 429 {
		t.Fatalf("51st request in 10 s: status %d, want 429", w.Code)
	}
	if got, want := w.Header().Get("Ratelimit"), `"api";r=0;t=5`; got != want {
		t.Errorf("Ratelimit = %q, want %q", got, want)
	}
	if got := w.Header().Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After = %q, want 5", got)
	}
}

func TestHealthzIsNotLimited(t *testing.T) {
	app, _ := newApp(t)
	for i := range 3 * AnonLimit {
		w := do(app, "/healthz", "", "")
		if w.Code != 200 || strings.TrimSpace(w.Body.String()) != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i+1, w.Code, w.Body.String())
		}
		if w.Header().Get("Ratelimit") != "" {
			t.Fatalf("request %d: rate-limit headers on /healthz", i+1)
		}
	}
}
