package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slidelog/ratelimit"
)

func newLimiter(t *testing.T, limit int, window time.Duration, key ratelimit.KeyFunc, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limit, window, key, opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
})

func get(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerSequenceAndHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, 3, time.Minute, ratelimit.KeyByIP())
		h := l.Handler(okHandler)
		type want struct {
			status                      int
			limit, remaining, reset     string
			rateLimit, retryAfter, body string
		}
		steps := []struct {
			wait time.Duration
			want want
		}{
			{0, want{200, "3", "2", "60", `"default";r=2;t=60`, "", ""}},
			{20 * time.Second, want{200, "3", "1", "40", `"default";r=1;t=40`, "", ""}},
			{20*time.Second + 500*time.Millisecond, want{200, "3", "0", "20", `"default";r=0;t=20`, "", ""}},
			// 19.5s until the first request leaves: advertised as 20, rounded up.
			{0, want{429, "3", "0", "20", `"default";r=0;t=20`, "20", "Too Many Requests"}},
			// 1ms before it leaves: 1, never 0.
			{19*time.Second + 499*time.Millisecond, want{429, "3", "0", "1", `"default";r=0;t=1`, "1", "Too Many Requests"}},
			{time.Millisecond, want{200, "3", "0", "20", `"default";r=0;t=20`, "", ""}},
		}
		for i, st := range steps {
			time.Sleep(st.wait)
			w := get(h, "192.0.2.1:1234")
			got := want{
				status:     w.Code,
				limit:      w.Header().Get("X-RateLimit-Limit"),
				remaining:  w.Header().Get("X-RateLimit-Remaining"),
				reset:      w.Header().Get("X-RateLimit-Reset"),
				rateLimit:  w.Header().Get("RateLimit"),
				retryAfter: w.Header().Get("Retry-After"),
			}
			if strings.Contains(w.Body.String(), "Too Many Requests") {
				got.body = "Too Many Requests"
			}
			if got != st.want {
				t.Errorf("request %d: got %+v, want %+v", i, got, st.want)
			}
			if p := w.Header().Get("RateLimit-Policy"); p != `"default";q=3;w=60` {
				t.Errorf("request %d: RateLimit-Policy %q, want %q", i, p, `"default";q=3;w=60`)
			}
		}
	})
}

func TestHandlerExactUnderConcurrency(t *testing.T) {
	const limit, goroutines, each = 100, 64, 10
	l := newLimiter(t, limit, time.Hour, ratelimit.KeyByHeader("X-API-Key"))
	var served atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	var ok, tooMany atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				switch code := get(h, "192.0.2.1:1", "X-API-Key", "shared").Code; code {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					tooMany.Add(1)
				default:
					t.Errorf("status %d", code)
				}
			}
		})
	}
	wg.Wait()
	if got, want := ok.Load(), int64(limit); got != want {
		t.Errorf("200s: got %v, want %v", got, want)
	}
	if got, want := served.Load(), int64(limit); got != want {
		t.Errorf("requests reaching the handler: got %v, want %v", got, want)
	}
	if got, want := tooMany.Load(), int64(goroutines*each-limit); got != want {
		t.Errorf("429s: got %v, want %v", got, want)
	}
}

func TestAllowExactUnderConcurrency(t *testing.T) {
	const limit, goroutines, each = 300, 128, 10
	l := newLimiter(t, limit, time.Minute, ratelimit.KeyByIP())
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				res, err := l.Allow(context.Background(), "user-1")
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed.Add(1)
				}
				if res.Remaining < 0 || res.Remaining > limit {
					t.Errorf("Remaining %d outside [0, %d]", res.Remaining, limit)
				}
			}
		})
	}
	wg.Wait()
	if got, want := allowed.Load(), int64(limit); got != want {
		t.Errorf("allowed.Load(): got %v, want %v", got, want)
	}
}

func TestMissingKeyNeverReachesTheHandler(t *testing.T) {
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	var reached bool
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	for _, hdr := range [][]string{nil, {"X-API-Key", ""}} {
		w := get(h, "192.0.2.1:1", hdr...)
		if got, want := w.Code, http.StatusBadRequest; got != want {
			t.Errorf("status %v, want %v", got, want)
		}
		if reached {
			t.Errorf("the wrapped handler ran without a key: want false")
		}
		if got := w.Header().Get("X-RateLimit-Remaining"); got != "" {
			t.Errorf("no decision, no rate-limit headers: got %q, want empty", got)
		}
	}
	w := get(h, "192.0.2.1:1", "X-API-Key", strings.Repeat("k", ratelimit.MaxKeyLen+1))
	if got, want := w.Code, http.StatusRequestHeaderFieldsTooLarge; got != want {
		t.Errorf("status %v, want %v", got, want)
	}
	if got := w.Body.String(); strings.Contains(got, "kkkk") {
		t.Errorf("the body must not echo the client's key: %q contains %q", got, "kkkk")
	}
}

func TestForwardingHeadersIgnoredByDefault(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP())
	h := l.Handler(okHandler)
	if got, want := get(h, "198.51.100.7:5000").Code, 200; got != want {
		t.Errorf("first request: status %v, want %v", got, want)
	}
	// The same peer pretending to be others is still the same peer.
	for _, hdr := range [][]string{
		{"X-Forwarded-For", "203.0.113.1"},
		{"X-Real-IP", "203.0.113.2"},
		{"Forwarded", "for=203.0.113.3"},
	} {
		if got, want := get(h, "198.51.100.7:5001", hdr...).Code, 429; got != want {
			t.Errorf("spoofed %s: got %v, want %v", hdr[0], got, want)
		}
	}
	// And nobody can drain a victim's quota by naming the victim.
	if got, want := get(h, "203.0.113.1:80").Code, 200; got != want {
		t.Errorf("victim locked out by a spoofed header: got %v, want %v", got, want)
	}
}

func TestIPv6GroupedBySlash64(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP())
	h := l.Handler(okHandler)
	for i, step := range []struct {
		remote string
		want   int
	}{
		{"[2001:db8:1:2::1]:443", 200},
		{"[2001:db8:1:2:ffff::9]:443", 200},
		{"[2001:db8:1:2:abcd::5%eth0]:443", 429}, // the same /64, with a zone
		{"[2001:db8:1:3::1]:443", 200},           // another /64
		// IPv4-mapped IPv6 is the IPv4 address.
		{"192.0.2.9:1", 200},
		{"[::ffff:192.0.2.9]:1", 200},
		{"192.0.2.9:2", 429},
	} {
		if got := get(h, step.remote).Code; got != step.want {
			t.Errorf("request %d from %s: status %d, want %d", i, step.remote, got, step.want)
		}
	}
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	key := ratelimit.KeyByIP()
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		key    ratelimit.KeyFunc
		opts   []ratelimit.Option
		want   []string
	}{
		{"zero limit", 0, time.Minute, key, nil, []string{"limit 0"}},
		{"negative window", 1, -time.Second, key, nil, []string{"window -1s"}},
		{"nil key", 1, time.Minute, nil, nil, []string{"nil KeyFunc"}},
		{"all at once", 0, 0, nil, nil, []string{"limit 0", "window 0s", "nil KeyFunc"}},
		{"zero option", 1, time.Minute, key, []ratelimit.Option{{}}, []string{"zero Option"}},
		{"bad max keys", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithMaxKeys(0, ratelimit.RejectNewKeys)}, []string{"WithMaxKeys"}},
		{"unknown algorithm", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithAlgorithm(99)}, []string{"unknown algorithm"}},
		{"store and memory options", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithStore(stubStore{}), ratelimit.WithMaxKeys(10, ratelimit.RejectNewKeys),
		}, []string{"cannot be combined with WithStore"}},
		{"duplicate policy name", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithPolicies(ratelimit.Policy{Name: "default", Limit: 5, Window: time.Hour}),
		}, []string{"used twice"}},
		{"bad policy name", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithPolicies(ratelimit.Policy{Name: `a"b`, Limit: 5, Window: time.Hour}),
		}, []string{"policy name"}},
		{"nil handlers", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithDeniedHandler(nil), ratelimit.WithErrorHandler(nil), ratelimit.WithKeyErrorHandler(nil),
		}, []string{"WithDeniedHandler", "WithErrorHandler", "WithKeyErrorHandler"}},
		{"bad header set", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithHeaders(7)}, []string{"WithHeaders"}},
		{"limit beyond int32", 1 << 40, time.Minute, key, nil, []string{"want 1 to 2147483647"}},
		{"window beyond MaxWindow", 1, ratelimit.MaxWindow + 1, key, nil, []string{"at most two years"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(tt.limit, tt.window, tt.key, tt.opts...)
			if err == nil {
				t.Fatalf("want an error")
			}
			if l != nil {
				t.Errorf("l: %v, want nil", l)
			}
			for _, w := range tt.want {
				if got := err.Error(); !strings.Contains(got, w) {
					t.Errorf("err.Error(): %q does not contain %q", got, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !(strings.HasPrefix(line, "ratelimit: ")) {
					t.Errorf("error line %q lacks the package prefix: want true", line)
				}
			}
		})
	}
}

type stubStore struct {
	res ratelimit.Result
	err error
}

func (s stubStore) Take(context.Context, string, ratelimit.PolicySet, int) (ratelimit.Result, error) {
	return s.res, s.err
}

func TestStoreErrors(t *testing.T) {
	boom := errors.New("dial tcp 10.0.0.1:6379: secret internals")
	t.Run("default answers 503 without the error text", func(t *testing.T) {
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}))
		var reached bool
		w := get(l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })), "192.0.2.1:1")
		if got, want := w.Code, http.StatusServiceUnavailable; got != want {
			t.Errorf("status %v, want %v", got, want)
		}
		if got, want := w.Header().Get("Retry-After"), "1"; got != want {
			t.Errorf("w.Header().Get(\"Retry-After\"): got %v, want %v", got, want)
		}
		if got := w.Body.String(); strings.Contains(got, "secret") {
			t.Errorf("w.Body.String(): %q contains %q", got, "secret")
		}
		if reached {
			t.Errorf("reached: want false")
		}
	})
	t.Run("fail open lets the request through and reports it", func(t *testing.T) {
		var seen error
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}),
			ratelimit.WithFailOpen(), ratelimit.WithHooks(ratelimit.Hooks{OnError: func(r *http.Request, err error) { seen = err }}))
		if got, want := get(l.Handler(okHandler), "192.0.2.1:1").Code, http.StatusOK; got != want {
			t.Errorf("get(l.Handler(okHandler), \"192.0.2.1:1\").Code: got %v, want %v", got, want)
		}
		if got, want := seen, boom; got != want {
			t.Errorf("seen: got %v, want %v", got, want)
		}
	})
	t.Run("custom handler", func(t *testing.T) {
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}),
			ratelimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(599) }))
		if got, want := get(l.Handler(okHandler), "192.0.2.1:1").Code, 599; got != want {
			t.Errorf("get(l.Handler(okHandler), \"192.0.2.1:1\").Code: got %v, want %v", got, want)
		}
	})
}

func TestHeaderSets(t *testing.T) {
	legacy := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	ietf := []string{"RateLimit", "RateLimit-Policy"}
	tests := []struct {
		set       ratelimit.HeaderSet
		has, lack []string
	}{
		{ratelimit.HeadersBoth, append(legacy, ietf...), nil},
		{ratelimit.HeadersLegacy, legacy, ietf},
		{ratelimit.HeadersIETF, ietf, legacy},
		{ratelimit.HeadersNone, nil, append(legacy, ietf...)},
	}
	for _, tt := range tests {
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithHeaders(tt.set))
		h := l.Handler(okHandler)
		get(h, "192.0.2.1:1")
		w := get(h, "192.0.2.1:1")
		for _, name := range tt.has {
			if w.Header().Get(name) == "" {
				t.Errorf("set %d: %s missing: empty", tt.set, name)
			}
		}
		for _, name := range tt.lack {
			if got := w.Header().Get(name); got != "" {
				t.Errorf("set %d: %s present: got %q, want empty", tt.set, name, got)
			}
		}
		if got, want := w.Header().Get("Retry-After"), "60"; got != want {
			t.Errorf("set %d: Retry-After goes on every 429: got %v, want %v", tt.set, got, want)
		}
	}
}

func TestResetUnix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithResetFormat(ratelimit.ResetUnix))
		h := l.Handler(okHandler)
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		w := get(h, "192.0.2.1:1")
		// The quota grows at start+60s; in epoch seconds rounded up.
		want := start.Add(time.Minute + time.Second - 1).Unix()
		if got, want := mustAtoi(t, w.Header().Get("X-RateLimit-Reset")), want; got != want {
			t.Errorf("mustAtoi(t, w.Header().Get(\"X-RateLimit-Reset\")): got %v, want %v", got, want)
		}
		if got, want := w.Header().Get("RateLimit"), `"default";r=1;t=60`; got != want {
			t.Errorf("RateLimit's t stays delta seconds: got %v, want %v", got, want)
		}
	})
}

func TestFromContextDryRunAndHooks(t *testing.T) {
	var allowed, limited atomic.Int64
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithDryRun(), ratelimit.WithResultInContext(), ratelimit.WithHooks(ratelimit.Hooks{
		OnAllow: func(*http.Request, ratelimit.Result) { allowed.Add(1) },
		OnLimit: func(*http.Request, ratelimit.Result) { limited.Add(1) },
	}))
	var got []ratelimit.Result
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok := ratelimit.FromContext(r.Context())
		if !ok {
			t.Fatalf("ok: want true")
		}
		got = append(got, res)
	}))
	for range 3 {
		w := get(h, "192.0.2.1:1")
		if got, want := w.Code, http.StatusOK; got != want {
			t.Errorf("dry run never rejects: got %v, want %v", got, want)
		}
	}
	if len(got) != 3 {
		t.Fatalf("len(got) = %d, want 3", len(got))
	}
	if !got[0].Allowed {
		t.Errorf("got[0].Allowed: want true")
	}
	if got[1].Allowed {
		t.Errorf("the handler sees what would have been limited: want false")
	}
	if got, want := allowed.Load(), int64(1); got != want {
		t.Errorf("allowed.Load(): got %v, want %v", got, want)
	}
	if got, want := limited.Load(), int64(2); got != want {
		t.Errorf("limited.Load(): got %v, want %v", got, want)
	}
	_, ok := ratelimit.FromContext(context.Background())
	if ok {
		t.Errorf("ok: want false")
	}
}

func TestSkip(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	h := l.Handler(okHandler)
	for range 3 {
		r := httptest.NewRequest("GET", "/healthz", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got, want := w.Code, 200; got != want {
			t.Errorf("health checks are exempt, keyless or not: got %v, want %v", got, want)
		}
		if got := w.Header().Get("RateLimit"); got != "" {
			t.Errorf("w.Header().Get(\"RateLimit\"): got %q, want empty", got)
		}
	}
}

func TestDeniedHandler(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithDeniedHandler(
		func(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"slow down"}`))
		}))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	if got, want := w.Code, 429; got != want {
		t.Errorf("status %v, want %v", got, want)
	}
	if got, want := w.Body.String(), `{"error":"slow down"}`; got != want {
		t.Errorf("w.Body.String(): got %v, want %v", got, want)
	}
	if got, want := w.Header().Get("Retry-After"), "60"; got != want {
		t.Errorf("set before the denied handler runs: got %v, want %v", got, want)
	}
}

func TestPlansAndPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type tierKey struct{}
		plans := map[string][]ratelimit.Policy{
			"pro": {{Name: "pro", Limit: 5, Window: time.Minute}},
		}
		l := newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
			ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 1, Window: time.Second}),
			ratelimit.WithPlans(func(r *http.Request, key string) string {
				return r.Header.Get("X-Tier") // stands in for a tier the auth middleware verified
			}, plans))
		h := l.Handler(okHandler)
		_ = tierKey{}

		// Default plan: 2/min and 1/s together.
		w := get(h, "192.0.2.1:1", "X-API-Key", "a")
		if got, want := w.Code, 200; got != want {
			t.Errorf("status %v, want %v", got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"default";q=2;w=60, "burst";q=1;w=1`; got != want {
			t.Errorf("w.Header().Get(\"RateLimit-Policy\"): got %v, want %v", got, want)
		}
		if got, want := w.Header().Get("RateLimit"), `"burst";r=0;t=1`; got != want {
			t.Errorf("the tighter policy is reported: got %v, want %v", got, want)
		}
		w = get(h, "192.0.2.1:1", "X-API-Key", "a")
		if got, want := w.Code, 429; got != want {
			t.Errorf("status %v, want %v", got, want)
		}
		if got, want := w.Header().Get("RateLimit"), `"burst";r=0;t=1`; got != want {
			t.Errorf("w.Header().Get(\"RateLimit\"): got %v, want %v", got, want)
		}
		time.Sleep(time.Second)
		if got, want := get(h, "192.0.2.1:1", "X-API-Key", "a").Code, 200; got != want {
			t.Errorf("get(h, \"192.0.2.1:1\", \"X-API-Key\", \"a\").Code: got %v, want %v", got, want)
		}
		time.Sleep(time.Second)
		w = get(h, "192.0.2.1:1", "X-API-Key", "a")
		if got, want := w.Code, 429; got != want {
			t.Errorf("default policy exhausted: got %v, want %v", got, want)
		}
		if got, want := w.Header().Get("Retry-After"), "58"; got != want {
			t.Errorf("the longest wait among violated policies: got %v, want %v", got, want)
		}

		// Pro plan: its own policies and its own count; unknown plans get the default.
		for i := range 5 {
			if got, want := get(h, "192.0.2.1:1", "X-API-Key", "a", "X-Tier", "pro").Code, 200; got != want {
				t.Errorf("pro request %d: got %v, want %v", i, got, want)
			}
		}
		w = get(h, "192.0.2.1:1", "X-API-Key", "a", "X-Tier", "pro")
		if got, want := w.Code, 429; got != want {
			t.Errorf("status %v, want %v", got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"pro";q=5;w=60`; got != want {
			t.Errorf("w.Header().Get(\"RateLimit-Policy\"): got %v, want %v", got, want)
		}
		if got, want := get(h, "192.0.2.1:1", "X-API-Key", "a", "X-Tier", "platinum").Code, 429; got != want {
			t.Errorf("unknown plan counts as default: got %v, want %v", got, want)
		}
	})
}

func TestCost(t *testing.T) {
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyByIP(), ratelimit.WithCost(func(r *http.Request) int {
		if r.URL.Path == "/bulk" {
			return 4
		}
		return 1
	}))
	h := l.Handler(okHandler)
	bulk := func() int {
		r := httptest.NewRequest("POST", "/bulk", nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if got, want := bulk(), 200; got != want {
		t.Errorf("bulk request: status %v, want %v", got, want)
	}
	if got, want := bulk(), 200; got != want {
		t.Errorf("bulk request: status %v, want %v", got, want)
	}
	if got, want := bulk(), 429; got != want {
		t.Errorf("8 used of 10: a cost of 4 does not fit: got %v, want %v", got, want)
	}
	w := get(h, "192.0.2.1:1")
	if got, want := w.Code, 200; got != want {
		t.Errorf("a cost of 1 still does: got %v, want %v", got, want)
	}
	if got, want := w.Header().Get("X-RateLimit-Remaining"), "1"; got != want {
		t.Errorf("w.Header().Get(\"X-RateLimit-Remaining\"): got %v, want %v", got, want)
	}

	res, err := l.AllowN(context.Background(), "k", 11)
	if !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("error %v, want ratelimit.ErrCostExceedsLimit", err)
	}
	if res.Allowed {
		t.Errorf("res.Allowed: want false")
	}
}

func TestLimiterCloseStopsBackgroundWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByIP())
		if err != nil {
			t.Fatalf("%v", err)
		}
		l.Allow(context.Background(), "k")
		if err := l.Close(); err != nil {
			t.Fatalf("%v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func TestPartitionKey(t *testing.T) {
	l := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithPartitionKey())
	h := l.Handler(okHandler)
	pk := func(key string) string {
		v := get(h, "192.0.2.1:1", "X-API-Key", key).Header().Get("RateLimit")
		_, after, ok := strings.Cut(v, ";pk=")
		if !ok {
			t.Fatalf("RateLimit %q has no pk: want true", v)
		}
		return after
	}
	a1, a2, b := pk("secret-alice"), pk("secret-alice"), pk("secret-bob")
	if got := a1; !regexp.MustCompile(`^:[A-Za-z0-9+/]{12}:$`).MatchString(got) {
		t.Errorf("pk is a structured-field byte sequence: %q does not match %s", got, `^:[A-Za-z0-9+/]{12}:$`)
	}
	if got, want := a2, a1; got != want {
		t.Errorf("stable for one key: got %v, want %v", got, want)
	}
	if got, want := b, a1; got == want {
		t.Errorf("distinct keys, distinct pks: got %v, want something else", got)
	}

	plain := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	v := get(plain.Handler(okHandler), "192.0.2.1:1", "X-API-Key", "k").Header().Get("RateLimit")
	if got := v; strings.Contains(got, "pk=") {
		t.Errorf("no pk unless asked for: %q contains %q", got, "pk=")
	}
}

func TestResultInContextIsOptIn(t *testing.T) {
	for _, tt := range []struct {
		opts []ratelimit.Option
		want bool
	}{{nil, false}, {[]ratelimit.Option{ratelimit.WithResultInContext()}, true}} {
		l := newLimiter(t, 5, time.Minute, ratelimit.KeyByIP(), tt.opts...)
		var got ratelimit.Result
		var ok bool
		get(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok = ratelimit.FromContext(r.Context())
		})), "192.0.2.1:1")
		if got, want := ok, tt.want; got != want {
			t.Errorf("options %d: got %v, want %v", len(tt.opts), got, want)
		}
		if tt.want {
			if got, want := got.Remaining, 4; got != want {
				t.Errorf("got.Remaining: got %v, want %v", got, want)
			}
		}
	}
}

// headerWriter is a ResponseWriter that allocates nothing once its header
// map has room, so that allocation counts are the middleware's own.
type headerWriter struct {
	h      http.Header
	status int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(status int)      { w.status = status }

func TestHandlerAllocations(t *testing.T) {
	// The allowed path makes the key and one block for all header values;
	// a rejection adds the 429's Content-Type and nosniff values. A second
	// passes per request, so the log holds 60 instants and stops growing.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := time.Second
	l := newLimiter(t, 100, time.Minute, ratelimit.KeyByHeader("X-Api-Key"),
		ratelimit.WithClock(func() time.Time { return now }))
	h := l.Handler(okHandler)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", "client-1")
	w := &headerWriter{h: make(http.Header)}
	serve := func() {
		now = now.Add(step)
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	for range 100 {
		serve()
	}
	if got := testing.AllocsPerRun(100, serve); got > 2 {
		t.Errorf("allowed: %.0f allocations per request, want at most 2", got)
	}
	// Bytes matter as much as counts: they set how often the collector
	// runs. The key takes 16 bytes and the header values 128. The
	// counter is the whole process's, so the least of three rounds is
	// taken, each long enough that a stray allocation elsewhere cannot
	// tip it.
	const n = 2000
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			serve()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.TotalAlloc-before.TotalAlloc)/n)
	}
	if least > 144 {
		t.Errorf("allowed: %d bytes allocated per request, want at most 144", least)
	}
	if got, want := w.status, http.StatusOK; got != want {
		t.Fatalf("w.status: got %v, want %v", got, want)
	}
	if got, want := w.h.Get("RateLimit"), `"default";r=40;t=1`; got != want {
		t.Errorf("w.h.Get(\"RateLimit\"): got %v, want %v", got, want)
	}

	step = 0
	for w.status != http.StatusTooManyRequests {
		serve()
	}
	if got := testing.AllocsPerRun(100, serve); got > 3 {
		t.Errorf("rejected: %.0f allocations per request, want at most 3", got)
	}
	if got, want := w.h.Get("Retry-After"), "1"; got != want {
		t.Errorf("w.h.Get(\"Retry-After\"): got %v, want %v", got, want)
	}
	if got, want := w.h.Get("RateLimit"), `"default";r=0;t=1`; got != want {
		t.Errorf("w.h.Get(\"RateLimit\"): got %v, want %v", got, want)
	}
}

// A cost the store cannot count is the request's fault, not the store's:
// it is answered 400 or 413 and never served uncounted, even under
// WithFailOpen, and leaves the client's count untouched.
func TestInvalidCostIsRefusedWhateverTheFailureMode(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		var cost atomic.Int64
		opts := []ratelimit.Option{ratelimit.WithCost(func(*http.Request) int { return int(cost.Load()) })}
		if failOpen {
			opts = append(opts, ratelimit.WithFailOpen())
		}
		l := newLimiter(t, 3, time.Minute, ratelimit.KeyByIP(), opts...)
		var served atomic.Int64
		h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
		for _, tc := range []struct {
			cost   int64
			status int
			is     error
		}{
			{0, http.StatusBadRequest, ratelimit.ErrInvalidCost},
			{-5, http.StatusBadRequest, ratelimit.ErrInvalidCost},
			{4, http.StatusRequestEntityTooLarge, ratelimit.ErrCostExceedsLimit},
		} {
			cost.Store(tc.cost)
			w := get(h, "192.0.2.1:1")
			if w.Code != tc.status {
				t.Errorf("fail open %v, cost %d: status %d, want %d", failOpen, tc.cost, w.Code, tc.status)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			if d := l.Decide(r); d.Outcome != ratelimit.Reject || !errors.Is(d.Err, tc.is) {
				t.Errorf("fail open %v, cost %d: Decide gives %v, %v; want Reject, %v", failOpen, tc.cost, d.Outcome, d.Err, tc.is)
			}
		}
		if n := served.Load(); n != 0 {
			t.Errorf("fail open %v: %d requests with invalid costs reached the handler, want 0", failOpen, n)
		}
		cost.Store(3)
		if w := get(h, "192.0.2.1:1"); w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("fail open %v: a valid cost of 3 after the invalid ones: status %d, remaining %q; want 200, 0 (nothing counted before)",
				failOpen, w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	}
}

// Handler(nil) panics where it is wrapped, before any request is counted.
func TestHandlerNilPanicsAtWrapTime(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP())
	defer func() {
		if recover() == nil {
			t.Error("Handler(nil) did not panic")
		}
		if res, _ := l.Allow(context.Background(), "ip:192.0.2.1"); !res.Allowed {
			t.Error("Handler(nil) counted a request")
		}
	}()
	l.Handler(nil)
}

// Dry run reports a would-be refusal in the rate-limit headers, but a 200
// carries no Retry-After: the request was not refused.
func TestDryRunSendsNoRetryAfter(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithDryRun())
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	if w.Code != http.StatusOK || w.Header().Get("Retry-After") != "" || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("dry run over the limit: status %d, Retry-After %q, remaining %q; want 200, none, 0",
			w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Remaining"))
	}
}

// Decide and SetHeaders give a server of another protocol what Handler
// sends.
func TestDecideAndSetHeadersMatchHandler(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP())
	h := l.Handler(okHandler)
	for i, want := range []ratelimit.Outcome{ratelimit.Serve, ratelimit.Refuse} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		d := l.Decide(r)
		if d.Outcome != want || !d.Decided() {
			t.Fatalf("decision %d: %v, decided %v; want %v, decided", i, d.Outcome, d.Decided(), want)
		}
		if s := d.PolicySet(); s.Len() != 1 || s.At(0).Limit != 1 {
			t.Errorf("decision %d: PolicySet %q, want the default policy", i, s.ID())
		}
		got := http.Header{}
		l.SetHeaders(got, d)
		w := get(h, "192.0.2.2:1") // another client in the same standing
		for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "Ratelimit", "Ratelimit-Policy", "Retry-After"} {
			if g, h := got.Get(name), w.Header().Get(name); g != h {
				t.Errorf("decision %d: SetHeaders %s %q, Handler %q", i, name, g, h)
			}
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "garbage"
	if d := l.Decide(r); d.Outcome != ratelimit.Reject || d.Decided() || d.PolicySet().Len() != 0 {
		t.Errorf("no key: %v, decided %v, %d policies; want Reject, undecided, none", d.Outcome, d.Decided(), d.PolicySet().Len())
	}
}

// countFailures keeps a request counted only if it failed to log in.
func countFailures(_ *http.Request, status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// loginHandler answers 200 when X-Password is "right", else 401.
var loginHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Password") != "right" {
		http.Error(w, "wrong password", http.StatusUnauthorized)
		return
	}
	w.Write([]byte("welcome"))
})

// With WithCountIf counting failures only, a user who types the right
// password is never locked out, and a guesser is after the limit.
func TestCountIfFailedLogins(t *testing.T) {
	l := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithCountIf(countFailures))
	h := l.Handler(loginHandler)
	login := func(user, password string) int {
		return get(h, "192.0.2.1:1", "X-User", user, "X-Password", password).Code
	}
	for i := range 4 {
		if code := login("alice", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("alice's wrong attempt %d: %d, want 401", i, code)
		}
	}
	for i := range 20 {
		if code := login("alice", "right"); code != http.StatusOK {
			t.Fatalf("alice's right attempt %d after 4 wrong ones: %d, want 200 (successes do not count)", i, code)
		}
	}
	var codes []int
	for range 8 {
		codes = append(codes, login("mallory", "guess"))
	}
	want := []int{401, 401, 401, 401, 401, 429, 429, 429}
	if !slices.Equal(codes, want) {
		t.Errorf("the guesser's attempts: %v, want %v", codes, want)
	}
	if code := login("alice", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("alice's fifth wrong attempt: %d, want 401 (one left)", code)
	}
	if code := login("alice", "right"); code != http.StatusTooManyRequests {
		t.Errorf("alice after 5 wrong attempts: %d, want 429", code)
	}
}

// A store that cannot take requests back cannot count by outcome: New
// says so instead of ignoring the option.
func TestCountIfNeedsARefunder(t *testing.T) {
	_, err := ratelimit.New(5, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{}), ratelimit.WithCountIf(countFailures))
	if !errors.Is(err, ratelimit.ErrUnsupported) || !strings.Contains(err.Error(), "Refunder") {
		t.Errorf("New with WithCountIf and a store without Refund: %v, want ErrUnsupported naming Refunder", err)
	}
}

// Counting by outcome stays exact under many goroutines: the requests kept
// counted never exceed the limit, and reach it.
func TestCountIfExactUnderConcurrency(t *testing.T) {
	const limit, goroutines, each = 50, 32, 20
	l := newLimiter(t, limit, time.Hour, ratelimit.KeyByHeader("X-User"), ratelimit.WithCountIf(countFailures))
	var kept atomic.Int64
	var n atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			kept.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				get(h, "192.0.2.1:1", "X-User", "shared")
			}
		})
	}
	wg.Wait()
	// The last request allowed may have been taken back: fill up.
	for i := 0; get(h, "192.0.2.1:1", "X-User", "shared").Code != http.StatusTooManyRequests; i++ {
		if i > 2*limit {
			t.Fatal("never refused")
		}
	}
	if got := kept.Load(); got != limit {
		t.Errorf("%d requests kept counted when the limit refused the next, want exactly %d", got, limit)
	}
}

// The writer WithCountIf wraps keeps Flush, Hijack and ResponseController
// working, and sees the status they send.
func TestCountIfWriterKeepsItsAbilities(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool { return status != http.StatusOK }))
	var hijacked bool
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			w.(http.Flusher).Flush() // a 200: not counted
		case "/controller":
			if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
				t.Errorf("SetWriteDeadline through the wrapper: %v", err)
			}
			w.WriteHeader(http.StatusAccepted) // counted
		case "/hijack":
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("Hijack through the wrapper: %v", err)
				return
			}
			hijacked = true
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close() // counted: the handler owned the connection
		}
	})))
	defer srv.Close()
	status := func(path string) int {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		// The body ends once the handler has returned, and with it the
		// middleware's refund: the headers come sooner, from Flush.
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for i := range 5 {
		if code := status("/flush"); code != http.StatusOK {
			t.Fatalf("flush %d: %d, want 200 (flushed 200s are not counted)", i, code)
		}
	}
	if code := status("/controller"); code != http.StatusAccepted {
		t.Fatalf("controller: %d, want 202", code)
	}
	if code := status("/hijack"); code != http.StatusOK || !hijacked {
		t.Fatalf("hijack: %d, hijacked %v; want 200 from the handler", code, hijacked)
	}
	if code := status("/flush"); code != http.StatusTooManyRequests {
		t.Errorf("after a counted 202 and a hijack under a limit of 2: %d, want 429", code)
	}
}
