package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// newLimiter returns a Limiter of New's arguments, closed when the test
// ends.
func newLimiter(t *testing.T, limit int, window time.Duration, key ratelimit.Keyer, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	// WithLimits' lookups answer at once here, unless a test says
	// otherwise: a minute's deadline keeps a busy machine from failing them.
	opts = append([]ratelimit.Option{ratelimit.WithLookupTimeout(time.Minute)}, opts...)
	l, err := ratelimit.New(limit, window, key, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
})

// get serves h a GET from remote carrying the headers hdr, as name, value
// pairs.
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

// mwMaxKeyLen is the longest API key KeyByHeader keeps (maxKeyLen).
const mwMaxKeyLen = 256

// mwMaxWindow is the longest window of a policy (maxWindow).
const mwMaxWindow = 2 * 365 * 24 * time.Hour

func TestHandlerSequenceAndHeaders(t *testing.T) {
	clk := fakeclock.New()
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(clk.Now))
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
		clk.Advance(st.wait)
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
		assert.Equal(t, st.want, got, "request %d", i)
		assert.Equal(t, `"default";q=3;w=60`, w.Header().Get("RateLimit-Policy"), "request %d: RateLimit-Policy", i)
	}
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
					t.Errorf("status %d, want 200 or 429", code)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), ok.Load(), "200s")
	assert.Equal(t, int64(limit), served.Load(), "requests reaching the handler")
	assert.Equal(t, int64(goroutines*each-limit), tooMany.Load(), "429s")
}

func TestAllowExactUnderConcurrency(t *testing.T) {
	const limit, goroutines, each = 300, 128, 10
	l := newLimiter(t, limit, time.Minute, ratelimit.KeyByIP())
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				d := l.Allow(context.Background(), "user-1", 1)
				switch d.Outcome {
				case ratelimit.Serve:
					allowed.Add(1)
					assert.True(t, d.Result.Allowed, "a Serve without dry run was allowed")
				case ratelimit.Refuse:
					refused.Add(1)
				default:
					t.Errorf("Outcome %v (%v), want Serve or Refuse", d.Outcome, d.Err)
				}
				if d.Result.Remaining < 0 || d.Result.Remaining > limit {
					t.Errorf("Remaining %d outside [0, %d]", d.Result.Remaining, limit)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), allowed.Load(), "allowed")
	assert.Equal(t, int64(goroutines*each-limit), refused.Load(), "refused")
}

func TestMissingKeyNeverReachesTheHandler(t *testing.T) {
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	var reached bool
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	for _, hdr := range [][]string{nil, {"X-API-Key", ""}, {"X-API-Key", " \t "}} {
		w := get(h, "192.0.2.1:1", hdr...)
		assert.Equal(t, http.StatusBadRequest, w.Code, "headers %q: status", hdr)
		assert.False(t, reached, "headers %q: the wrapped handler ran without a key", hdr)
		assert.Empty(t, w.Header().Get("X-RateLimit-Remaining"), "headers %q: no decision, no rate-limit headers", hdr)
	}
	w := get(h, "192.0.2.1:1", "X-API-Key", strings.Repeat("k", mwMaxKeyLen+1))
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, w.Code, "an oversized key: status")
	assert.NotContains(t, w.Body.String(), "kkkk", "the body must not echo the client's key")
	assert.False(t, reached, "the wrapped handler ran with an oversized key")
}

func TestForwardingHeadersIgnoredByDefault(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP())
	h := l.Handler(okHandler)
	require.Equal(t, 200, get(h, "198.51.100.7:5000").Code, "first request")
	// The same peer pretending to be others is still the same peer.
	for _, hdr := range [][]string{
		{"X-Forwarded-For", "203.0.113.1"},
		{"X-Real-IP", "203.0.113.2"},
		{"Forwarded", "for=203.0.113.3"},
	} {
		assert.Equal(t, 429, get(h, "198.51.100.7:5001", hdr...).Code, "spoofed %s", hdr[0])
	}
	// And nobody can drain a victim's quota by naming the victim.
	assert.Equal(t, 200, get(h, "203.0.113.1:80").Code, "victim locked out by a spoofed header")
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
		assert.Equal(t, step.want, get(h, step.remote).Code, "request %d from %s", i, step.remote)
	}
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	key := ratelimit.KeyByIP()
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		key    ratelimit.Keyer
		opts   []ratelimit.Option
		want   []string
	}{
		{"zero limit", 0, time.Minute, key, nil, []string{"limit 0"}},
		{"negative window", 1, -time.Second, key, nil, []string{"window -1s"}},
		{"nil key", 1, time.Minute, nil, nil, []string{"nil Keyer"}},
		{"nil KeyFunc", 1, time.Minute, ratelimit.KeyFunc(nil), nil, []string{"nil Keyer"}},
		{"typed nil Keyer", 1, time.Minute, (*fieldKeyer)(nil), nil, []string{"nil Keyer"}},
		{"misconfigured extractor", 1, time.Minute, ratelimit.KeyByHeader(""), nil, []string{"KeyByHeader"}},
		{"all at once", 0, 0, nil, nil, []string{"limit 0", "window 0s", "nil Keyer"}},
		{"nil option", 1, time.Minute, key, []ratelimit.Option{nil}, []string{"nil Option"}},
		{"unknown algorithm", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithAlgorithm(99)}, []string{"unknown algorithm"}},
		{"nil store", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithStore(nil)}, []string{"WithStore: nil store"}},
		// A nil *T in a Store is not == nil, and its first call panics.
		{"typed nil store", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithStore((*stubStore)(nil))}, []string{"WithStore: nil store"}},
		{"duplicate policy name", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithPolicies(ratelimit.Policy{Name: "default", Limit: 5, Window: time.Hour}),
		}, []string{"used twice"}},
		{"bad policy name", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithPolicies(ratelimit.Policy{Name: `a"b`, Limit: 5, Window: time.Hour}),
		}, []string{"policy name"}},
		{"bad name", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithName("a b")}, []string{"policy name"}},
		{"nil handlers", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithDeniedHandler(nil), ratelimit.WithErrorHandler(nil),
		}, []string{"WithDeniedHandler", "WithErrorHandler"}},
		{"nil functions", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithClock(nil), ratelimit.WithCost(nil), ratelimit.WithSkip(nil), ratelimit.WithCountIf(nil),
		}, []string{"WithClock", "WithCost", "WithSkip", "WithCountIf"}},
		{"unknown header set", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithHeaders(8)}, []string{"WithHeaders"}},
		{"unix reset alone", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithHeaders(ratelimit.HeadersUnixReset)}, []string{"HeadersUnixReset without HeadersLegacy"}},
		{"nil limits", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithLimits(nil, time.Minute)}, []string{"WithLimits: nil function"}},
		{"limits without a ttl", 1, time.Minute, key, []ratelimit.Option{
			ratelimit.WithLimits(func(context.Context, string) ([]ratelimit.Policy, error) { return nil, nil }, 0),
		}, []string{"WithLimits: ttl 0s"}},
		{"limit beyond int32", 1 << 40, time.Minute, key, nil, []string{"want 1 to 2147483647"}},
		{"window beyond two years", 1, mwMaxWindow + 1, key, nil, []string{"at most two years"}},
		{"zones without a name", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithPolicies(
			ratelimit.Policy{Name: "east", Limit: 5, Algorithm: ratelimit.Monthly, Location: time.FixedZone("", 12*3600)},
			ratelimit.Policy{Name: "west", Limit: 5, Algorithm: ratelimit.Monthly, Location: time.FixedZone("", -12*3600)},
		)}, []string{`policy "east": Location "" is not the zone`, `policy "west": Location "" is not the zone`}},
		{"a zone under another's name", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithPolicies(
			ratelimit.Policy{Name: "daily", Limit: 5, Algorithm: ratelimit.Daily, Location: time.FixedZone("UTC", 3600)},
		)}, []string{`Location "UTC" is not the zone`}},
		{"the host's zone", 1, time.Minute, key, []ratelimit.Option{ratelimit.WithPolicies(
			ratelimit.Policy{Name: "daily", Limit: 5, Algorithm: ratelimit.Daily, Location: time.Local},
		)}, []string{`Location "Local" is not the zone`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(tt.limit, tt.window, tt.key, tt.opts...)
			require.Error(t, err)
			assert.Nil(t, l)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				assert.True(t, strings.HasPrefix(line, "ratelimit: "), "error line %q lacks the package prefix", line)
			}
		})
	}
}

// A Keyer of the application's own whose *KeyError carries no status an
// answer can have (0, or a 2xx) is misconfigured: 500, never a panic in
// the error handler, which would otherwise be given status 0. So is one of
// 429, which would be a 429 without the Retry-After every 429 carries:
// only the limiter's refusal says when to come back.
func TestKeyErrorWithoutAStatus(t *testing.T) {
	for _, status := range []int{0, 200, http.StatusTooManyRequests, 600} {
		keyer := ratelimit.KeyFunc(func(*http.Request) (string, error) {
			return "", &ratelimit.KeyError{Status: status, Message: "no key"}
		})
		l := newLimiter(t, 1, time.Minute, keyer)
		var w *httptest.ResponseRecorder
		require.NotPanics(t, func() { w = get(l.Handler(okHandler), "192.0.2.1:1") }, "status %d", status)
		assert.Equal(t, http.StatusInternalServerError, w.Code, "a KeyError of status %d", status)
		d := l.Decide(httptest.NewRequest("GET", "/", nil))
		var ke *ratelimit.KeyError
		if assert.ErrorAs(t, d.Err, &ke) {
			assert.Equal(t, http.StatusInternalServerError, ke.Status, "Decide's error for a KeyError of status %d", status)
		}
	}
}

// A Keyer of the application's own that returns a nil *KeyError as its
// error (the typed nil of a "var ke *KeyError; return k, ke") has no
// status either: 500, never a panic.
func TestKeyErrorNilPointer(t *testing.T) {
	keyer := ratelimit.KeyFunc(func(*http.Request) (string, error) {
		var ke *ratelimit.KeyError
		return "", ke
	})
	var logged []string
	l := newLimiter(t, 1, time.Minute, keyer, ratelimit.WithHooks(ratelimit.Hooks{
		OnError: func(_ *http.Request, err error) { logged = append(logged, err.Error()) },
	}))
	var w *httptest.ResponseRecorder
	require.NotPanics(t, func() { w = get(l.Handler(okHandler), "192.0.2.1:1") })
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, []string{"ratelimit: 500 Internal Server Error: rate-limit key misconfigured"}, logged, "OnError")
}

// stubStore answers every call with res and err.
type stubStore struct {
	res ratelimit.Result
	err error
}

var _ ratelimit.Store = stubStore{}

func (s stubStore) Take(context.Context, string, ratelimit.PolicySet, int) (ratelimit.Result, error) {
	return s.res, s.err
}

func (s stubStore) Peek(context.Context, string, ratelimit.PolicySet) (ratelimit.Result, error) {
	return s.res, s.err
}

func (s stubStore) Reset(context.Context, string, ratelimit.PolicySet) error { return s.err }

func (s stubStore) Refund(context.Context, string, ratelimit.PolicySet, int, time.Time) error {
	return s.err
}

func (stubStore) Close() error { return nil }

func TestStoreErrors(t *testing.T) {
	boom := errors.New("dial tcp 10.0.0.1:6379: secret internals")
	request := func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		return r
	}
	t.Run("default answers 503 without the error text", func(t *testing.T) {
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}))
		var reached bool
		w := get(l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })), "192.0.2.1:1")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code, "status")
		assert.Equal(t, "1", w.Header().Get("Retry-After"), "Retry-After")
		assert.NotContains(t, w.Body.String(), "secret", "body")
		assert.Empty(t, w.Header().Get("RateLimit"), "no decision, no rate-limit headers")
		assert.False(t, reached, "the wrapped handler ran")
		d := l.Decide(request())
		assert.Equal(t, ratelimit.Fail, d.Outcome, "Decide: Outcome")
		assert.ErrorIs(t, d.Err, boom, "Decide: Err")
	})
	t.Run("fail open lets the request through and reports it", func(t *testing.T) {
		var seen error
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}),
			ratelimit.WithFailOpen(), ratelimit.WithHooks(ratelimit.Hooks{OnError: func(r *http.Request, err error) { seen = err }}))
		w := get(l.Handler(okHandler), "192.0.2.1:1")
		assert.Equal(t, http.StatusOK, w.Code, "status")
		assert.Empty(t, w.Header().Get("RateLimit"), "served without rate-limit headers")
		assert.ErrorIs(t, seen, boom, "OnError")
		d := l.Decide(request())
		assert.Equal(t, ratelimit.Serve, d.Outcome, "Decide: Outcome")
		assert.ErrorIs(t, d.Err, boom, "Decide: Err")
		assert.Zero(t, d.Result, "Decide: the store did not decide")
	})
	t.Run("custom handler", func(t *testing.T) {
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}),
			ratelimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(599) }))
		assert.Equal(t, 599, get(l.Handler(okHandler), "192.0.2.1:1").Code, "status")
	})
	t.Run("one handler for rejections and failures", func(t *testing.T) {
		// A request at fault comes with a *KeyError, a Keyer's own error
		// wrapped in one; a failure without.
		forged := errors.New("forged credential")
		keyer := ratelimit.KeyFunc(func(r *http.Request) (string, error) {
			switch r.Header.Get("X-Case") {
			case "forged":
				return "", forged
			case "none":
				return "", &ratelimit.KeyError{Status: 401, Message: "401 Unauthorized"}
			}
			return "k", nil
		})
		var got []error
		l := newLimiter(t, 1, time.Minute, keyer, ratelimit.WithStore(stubStore{err: boom}),
			ratelimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { got = append(got, err) }))
		h := l.Handler(okHandler)
		for _, c := range []string{"forged", "none", "ok"} {
			get(h, "192.0.2.1:1", "X-Case", c)
		}
		require.Len(t, got, 3, "the handler's calls")
		var ke *ratelimit.KeyError
		if assert.ErrorAs(t, got[0], &ke, "a Keyer's own error") {
			assert.Equal(t, 400, ke.Status, "its status")
		}
		assert.ErrorIs(t, got[0], forged, "a Keyer's own error, still matched")
		if assert.ErrorAs(t, got[1], &ke, "a Keyer's KeyError") {
			assert.Equal(t, 401, ke.Status, "its status")
		}
		assert.False(t, errors.As(got[2], &ke), "the store's failure: no KeyError")
		assert.ErrorIs(t, got[2], boom, "the store's failure")
	})
}

// A failure whose error wraps a *KeyError, a lookup's or a store's, is
// still a failure: 503 with Retry-After: 1, or served under WithFailOpen,
// and its error no *KeyError to errors.As, since the request is not at
// fault; a KeyError's status, even one no response can have, never
// answers it.
func TestFailureWrappingAKeyErrorIsAFailure(t *testing.T) {
	for _, ke := range []*ratelimit.KeyError{
		{Status: http.StatusUnauthorized, Message: "401 Unauthorized: unknown API key"},
		{Status: http.StatusOK, Message: "200 OK"},
		{}, // no status at all
	} {
		lookup := func(context.Context, string) ([]ratelimit.Policy, error) { return nil, ke }
		store := stubStore{err: fmt.Errorf("store: %w", ke)}
		for _, c := range []struct {
			name string
			opt  ratelimit.Option
		}{
			{"lookup", ratelimit.WithLimits(lookup, time.Minute)},
			{"store", ratelimit.WithStore(store)},
		} {
			for _, failOpen := range []bool{false, true} {
				var reported []error
				opts := []ratelimit.Option{c.opt, ratelimit.WithHooks(ratelimit.Hooks{OnError: func(_ *http.Request, err error) { reported = append(reported, err) }})}
				want, wantOutcome := http.StatusServiceUnavailable, ratelimit.Fail
				if failOpen {
					opts = append(opts, ratelimit.WithFailOpen())
					want, wantOutcome = http.StatusOK, ratelimit.Serve
				}
				l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), opts...)
				w := get(l.Handler(okHandler), "192.0.2.1:1")
				assert.Equal(t, want, w.Code, "%s failing with KeyError %d, fail open %v: status", c.name, ke.Status, failOpen)
				if !failOpen {
					assert.Equal(t, "1", w.Header().Get("Retry-After"), "%s failing with KeyError %d: Retry-After", c.name, ke.Status)
				}
				d := l.Allow(context.Background(), "ip:192.0.2.1", 1)
				assert.Equal(t, wantOutcome, d.Outcome, "%s failing with KeyError %d, fail open %v: Outcome", c.name, ke.Status, failOpen)
				for i, err := range append(reported, d.Err) {
					var got *ratelimit.KeyError
					assert.False(t, errors.As(err, &got), "%s failing with KeyError %d, fail open %v: error %d matches a *KeyError", c.name, ke.Status, failOpen, i)
					assert.ErrorIs(t, err, ke, "%s failing with KeyError %d, fail open %v: error %d, still the failure", c.name, ke.Status, failOpen, i)
				}
			}
		}
	}
}

func TestHeaderSets(t *testing.T) {
	legacy := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	ietf := []string{"RateLimit", "RateLimit-Policy"}
	tests := []struct {
		name      string
		set       ratelimit.HeaderSet
		has, lack []string
	}{
		{"both", ratelimit.HeadersLegacy | ratelimit.HeadersIETF, append(legacy, ietf...), nil},
		{"legacy", ratelimit.HeadersLegacy, legacy, ietf},
		{"legacy unix", ratelimit.HeadersLegacy | ratelimit.HeadersUnixReset, legacy, ietf},
		{"ietf", ratelimit.HeadersIETF, ietf, legacy},
		{"none", 0, nil, append(legacy, ietf...)},
	}
	for _, tt := range tests {
		clk := fakeclock.New()
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithHeaders(tt.set), ratelimit.WithClock(clk.Now))
		h := l.Handler(okHandler)
		get(h, "192.0.2.1:1")
		w := get(h, "192.0.2.1:1")
		require.Equal(t, http.StatusTooManyRequests, w.Code, "set %s: the second request", tt.name)
		for _, name := range tt.has {
			assert.NotEmpty(t, w.Header().Get(name), "set %s: %s missing", tt.name, name)
		}
		for _, name := range tt.lack {
			assert.Empty(t, w.Header().Get(name), "set %s: %s present", tt.name, name)
		}
		assert.Equal(t, "60", w.Header().Get("Retry-After"), "set %s: Retry-After goes on every 429", tt.name)
	}
}

// X-RateLimit-Reset in Unix time is the store's instant of the decision
// plus the reset, rounded up: the injected clock's, not the wall clock's.
func TestHeadersUnixReset(t *testing.T) {
	clk := fakeclock.New()
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(),
		ratelimit.WithHeaders(ratelimit.HeadersLegacy|ratelimit.HeadersIETF|ratelimit.HeadersUnixReset), ratelimit.WithClock(clk.Now))
	h := l.Handler(okHandler)
	clk.Advance(500 * time.Millisecond)
	w := get(h, "192.0.2.1:1")
	// The quota grows at Start+60.5s: in epoch seconds rounded up.
	want := fakeclock.Start.Add(61 * time.Second).Unix()
	got, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
	require.NoError(t, err, "X-RateLimit-Reset")
	assert.Equal(t, want, got, "X-RateLimit-Reset")
	assert.Equal(t, `"default";r=1;t=60`, w.Header().Get("RateLimit"), "RateLimit's t stays delta seconds")

	seconds := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(clk.Now)).Handler(okHandler)
	assert.Equal(t, "60", get(seconds, "192.0.2.1:1").Header().Get("X-RateLimit-Reset"), "without HeadersUnixReset, the reset is in seconds")
}

// A wait however long, up to the longest a Duration holds, as a Store of
// one's own may report, is rounded up in every header, never wrapped
// round to a wait of 1 s or less.
func TestHugeWaitsRoundedUp(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	seconds := int64(huge/time.Second) + 1 // 9223372036.854775807 s, rounded up
	res := ratelimit.Result{Limit: 1, RetryAfter: huge, Reset: huge, Policy: "default", Window: time.Minute, At: fakeclock.Start}
	for _, unix := range []bool{false, true} {
		set := ratelimit.HeadersLegacy | ratelimit.HeadersIETF
		wantReset := seconds
		if unix {
			set |= ratelimit.HeadersUnixReset
			wantReset += fakeclock.Start.Unix()
		}
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{res: res}), ratelimit.WithHeaders(set))
		w := get(l.Handler(okHandler), "192.0.2.1:1", "Accept", "application/problem+json")
		require.Equal(t, http.StatusTooManyRequests, w.Code, "unix %v: status", unix)
		s := strconv.FormatInt(seconds, 10)
		assert.Equal(t, s, w.Header().Get("Retry-After"), "unix %v: Retry-After", unix)
		assert.Equal(t, `"default";r=0;t=`+s, w.Header().Get("RateLimit"), "unix %v: RateLimit", unix)
		assert.Equal(t, strconv.FormatInt(wantReset, 10), w.Header().Get("X-RateLimit-Reset"), "unix %v: X-RateLimit-Reset", unix)
		assert.Contains(t, w.Body.String(), "retry after "+s+" s.", "unix %v: problem details", unix)
	}
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
		require.True(t, ok, "FromContext in the handler")
		got = append(got, res)
	}))
	for i := range 3 {
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1").Code, "request %d: dry run never refuses", i)
	}
	require.Len(t, got, 3)
	assert.True(t, got[0].Allowed, "the first request is allowed")
	assert.False(t, got[1].Allowed, "the handler sees what would have been limited")
	assert.Equal(t, int64(1), allowed.Load(), "OnAllow calls")
	assert.Equal(t, int64(2), limited.Load(), "OnLimit calls")
	_, ok := ratelimit.FromContext(context.Background())
	assert.False(t, ok, "FromContext of another context")
}

func TestSkip(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	h := l.Handler(okHandler)
	for i := range 3 {
		r := httptest.NewRequest("GET", "/healthz", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, 200, w.Code, "request %d: health checks are exempt, keyless or not", i)
		assert.Empty(t, w.Header().Get("RateLimit"), "request %d: RateLimit", i)
	}
}

// A request WithSkip exempts meets no other option: no decision in its
// context (WithResultInContext), no hook, no keep (WithCountIf), and
// nothing counted against its client, whom a key would name.
func TestSkipBesideOtherOptions(t *testing.T) {
	var calls []mwHookCall
	asked := 0
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		ratelimit.WithResultInContext(), ratelimit.WithHooks(mwRecordHooks(&calls)),
		ratelimit.WithCountIf(func(*http.Request, int) bool { asked++; return true }))
	var inContext []bool
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := ratelimit.FromContext(r.Context())
		inContext = append(inContext, ok)
	}))
	for i := range 2 {
		r := httptest.NewRequest("GET", "/healthz", nil)
		r.Header.Set("X-API-Key", "acme")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code, "exempt request %d", i)
	}
	assert.Equal(t, []bool{false, false}, inContext, "FromContext ok in the exempt requests' handler")
	assert.Empty(t, calls, "hook calls for exempt requests")
	assert.Zero(t, asked, "calls of keep for exempt requests")
	w := get(h, "192.0.2.1:1", "X-API-Key", "acme")
	assert.Equal(t, http.StatusOK, w.Code, "the client's first counted request")
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"), "the client's first counted request: X-RateLimit-Remaining")
	assert.Equal(t, []bool{false, false, true}, inContext, "FromContext ok in the handler, the counted request's last")
}

func TestDeniedHandler(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now), ratelimit.WithDeniedHandler(
		func(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"slow down"}`))
		}))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	assert.Equal(t, 429, w.Code, "status")
	assert.Equal(t, `{"error":"slow down"}`, w.Body.String(), "body")
	assert.Equal(t, "60", w.Header().Get("Retry-After"), "set before the denied handler runs")
}

// mwTierKey is the context key of the tier mwWithTier puts there.
type mwTierKey struct{}

// mwChooseTier chooses the plan named by the tier in ctx.
func mwChooseTier(ctx context.Context, _ string) string {
	tier, _ := ctx.Value(mwTierKey{}).(string)
	return tier
}

// mwPlans returns a WithLimits lookup that gives a client the policies of
// the plan choose names for it (none, so the default ones, for a name not
// in plans).
func mwPlans(choose func(ctx context.Context, key string) string, plans map[string][]ratelimit.Policy) func(context.Context, string) ([]ratelimit.Policy, error) {
	return func(ctx context.Context, key string) ([]ratelimit.Policy, error) { return plans[choose(ctx, key)], nil }
}

// mwWithTier stands in for authentication middleware: it puts the tier a
// request's X-Tier names in its context.
func mwWithTier(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mwTierKey{}, r.Header.Get("X-Tier"))))
	})
}

func TestLimitsAndPolicies(t *testing.T) {
	clk := fakeclock.New()
	plans := map[string][]ratelimit.Policy{
		"pro": {{Name: "pro", Limit: 5, Window: time.Minute}},
	}
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithClock(clk.Now),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 1, Window: time.Second}),
		ratelimit.WithLimits(mwPlans(mwChooseTier, plans), time.Hour))
	h := mwWithTier(l.Handler(okHandler))

	// The default policies: 2/min and 1/s together.
	w := get(h, "192.0.2.1:1", "X-API-Key", "a")
	assert.Equal(t, 200, w.Code, "status")
	assert.Equal(t, `"default";q=2;w=60, "burst";q=1;w=1`, w.Header().Get("RateLimit-Policy"), "RateLimit-Policy")
	assert.Equal(t, `"burst";r=0;t=1`, w.Header().Get("RateLimit"), "the tighter policy is reported")
	assert.Equal(t, "1", w.Header().Get("X-RateLimit-Limit"), "X-RateLimit-Limit: the reported policy's limit")
	w = get(h, "192.0.2.1:1", "X-API-Key", "a")
	assert.Equal(t, 429, w.Code, "status")
	assert.Equal(t, `"burst";r=0;t=1`, w.Header().Get("RateLimit"), "RateLimit")
	clk.Advance(time.Second)
	assert.Equal(t, 200, get(h, "192.0.2.1:1", "X-API-Key", "a").Code, "a second later")
	clk.Advance(time.Second)
	w = get(h, "192.0.2.1:1", "X-API-Key", "a")
	assert.Equal(t, 429, w.Code, "default policy exhausted")
	assert.Equal(t, "58", w.Header().Get("Retry-After"), "the longest wait among violated policies")
	assert.Equal(t, `"default";r=0;t=58`, w.Header().Get("RateLimit"), "RateLimit")
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"), "X-RateLimit-Limit: the reported policy's limit")

	// A pro client: its own policies and its own count; a plan the lookup
	// does not know gets the default policies.
	for i := range 5 {
		assert.Equal(t, 200, get(h, "192.0.2.1:1", "X-API-Key", "p", "X-Tier", "pro").Code, "pro request %d", i)
	}
	w = get(h, "192.0.2.1:1", "X-API-Key", "p", "X-Tier", "pro")
	assert.Equal(t, 429, w.Code, "status")
	assert.Equal(t, `"pro";q=5;w=60`, w.Header().Get("RateLimit-Policy"), "RateLimit-Policy")
	w = get(h, "192.0.2.1:1", "X-API-Key", "x", "X-Tier", "platinum")
	assert.Equal(t, `"default";q=2;w=60, "burst";q=1;w=1`, w.Header().Get("RateLimit-Policy"), "an unknown plan: the default policies")
}

// Clients are told apart by their keys alone, whatever policies the
// lookup gives them: a client that chooses its own key (whatever a header
// says) cannot name its way into another client's count, not with a
// store key's layout ("<policy>:<key>") nor any other.
func TestLimitsKeysCannotCollide(t *testing.T) {
	// The Keyer takes the client's word, so that keys are whatever an
	// attacker makes them.
	keyer := ratelimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil })
	gold := []ratelimit.Policy{{Name: "api", Limit: 2, Window: time.Minute}}
	choose := func(ctx context.Context, key string) string {
		if key == "victim" {
			return "gold"
		}
		return ""
	}
	newHandler := func(t *testing.T) http.Handler {
		l := newLimiter(t, 2, time.Minute, keyer, ratelimit.WithName("api"), ratelimit.WithClock(fakeclock.New().Now),
			ratelimit.WithLimits(mwPlans(choose, map[string][]ratelimit.Policy{"gold": gold}), time.Hour))
		return l.Handler(okHandler)
	}
	codes := func(h http.Handler, n int, hdr ...string) []int {
		var c []int
		for range n {
			c = append(c, get(h, "192.0.2.1:1", hdr...).Code)
		}
		return c
	}
	full := []int{200, 200, 429}
	for _, attacker := range []string{"plan:gold|victim", "plan:gold|", `"gold"|victim`, "gold|victim", "gold:victim", "0:victim", "1:victim", "api:victim"} {
		t.Run(attacker, func(t *testing.T) {
			h := newHandler(t)
			assert.Equal(t, full, codes(h, 3, "X-Client", "victim"), "the victim on gold")
			assert.Equal(t, full, codes(h, 3, "X-Client", attacker), "the attacker on the default policies, after the victim")

			h = newHandler(t)
			assert.Equal(t, full, codes(h, 3, "X-Client", attacker), "the attacker on the default policies")
			assert.Equal(t, full, codes(h, 3, "X-Client", "victim"), "the victim on gold, after the attacker")
		})
	}
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
	assert.Equal(t, 200, bulk(), "bulk request 1")
	assert.Equal(t, 200, bulk(), "bulk request 2")
	assert.Equal(t, 429, bulk(), "8 used of 10: a cost of 4 does not fit")
	w := get(h, "192.0.2.1:1")
	assert.Equal(t, 200, w.Code, "a cost of 1 still does")
	assert.Equal(t, "1", w.Header().Get("X-RateLimit-Remaining"), "X-RateLimit-Remaining")

	d := l.Allow(context.Background(), "k", 11)
	assert.Equal(t, ratelimit.Reject, d.Outcome, "Allow of a cost above the limit")
	assert.ErrorIs(t, d.Err, ratelimit.ErrInvalidCost)
	var ke *ratelimit.KeyError
	if assert.ErrorAs(t, d.Err, &ke) {
		assert.Equal(t, http.StatusRequestEntityTooLarge, ke.Status, "KeyError.Status")
	}
	assert.False(t, d.Result.Allowed, "Result.Allowed")
}

func TestLimiterCloseStopsBackgroundWork(t *testing.T) {
	// synctest.Test fails if the store's sweep outlives Close.
	synctest.Test(t, func(t *testing.T) {
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByIP())
		require.NoError(t, err)
		l.Allow(context.Background(), "k", 1)
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "second Close")
	})
}

func TestPartitionKey(t *testing.T) {
	l := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithPartitionKey())
	h := l.Handler(okHandler)
	pk := func(key string) string {
		v := get(h, "192.0.2.1:1", "X-API-Key", key).Header().Get("RateLimit")
		_, after, ok := strings.Cut(v, ";pk=")
		require.True(t, ok, "RateLimit %q has no pk", v)
		return after
	}
	a1, a2, b := pk("secret-alice"), pk("secret-alice"), pk("secret-bob")
	assert.Regexp(t, regexp.MustCompile(`^:[A-Za-z0-9+/]{12}:$`), a1, "pk is a structured-field byte sequence")
	assert.Equal(t, a1, a2, "stable for one key")
	assert.NotEqual(t, a1, b, "distinct keys, distinct pks")

	other := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithPartitionKey())
	v := get(other.Handler(okHandler), "192.0.2.1:1", "X-API-Key", "secret-alice").Header().Get("RateLimit")
	assert.NotContains(t, v, ";pk="+a1, "another limiter, with its own secret, gives the key another pk")

	plain := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	v = get(plain.Handler(okHandler), "192.0.2.1:1", "X-API-Key", "k").Header().Get("RateLimit")
	assert.NotContains(t, v, "pk=", "no pk unless asked for")
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
		assert.Equal(t, tt.want, ok, "options %d: FromContext", len(tt.opts))
		if tt.want {
			assert.Equal(t, 4, got.Remaining, "Remaining")
		}
	}
}

// TestResultInContextUploadTempFilesRemoved: the server removes the
// temporary files of a multipart form the handler parsed, as it does
// without the limiter, though the handler was given a copy of the
// request, carrying the Result: the server removes those of the request
// it gave, to which the form must come back.
func TestResultInContextUploadTempFilesRemoved(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"result in context", []ratelimit.Option{ratelimit.WithResultInContext()}},
		{"and count if", []ratelimit.Option{ratelimit.WithResultInContext(), ratelimit.WithCountIf(func(*http.Request, int) bool { return true })}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // where multipart keeps what it cannot in memory
			l := newLimiter(t, 5, time.Minute, ratelimit.KeyByIP(), tt.opts...)
			var during int
			srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := r.ParseMultipartForm(1); err != nil { // every file to disk
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				entries, _ := os.ReadDir(tmp)
				during = len(entries)
			})))
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, err := mw.CreateFormFile("f", "f.bin")
			require.NoError(t, err)
			fw.Write(bytes.Repeat([]byte("x"), 64<<10))
			require.NoError(t, mw.Close())
			resp, err := http.Post(srv.URL, mw.FormDataContentType(), &body)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "status")
			srv.Close() // waits for the server to finish the request

			require.Equal(t, 1, during, "temporary files while the handler ran")
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, entries, "temporary files left once the request is done")
		})
	}
}

// headerWriter is a ResponseWriter that allocates nothing once its header
// map has room, so that allocation counts are the middleware's own. It
// writes strings as they are, as net/http's own ResponseWriter does.
type headerWriter struct {
	h      http.Header
	status int
}

func (w *headerWriter) Header() http.Header               { return w.h }
func (w *headerWriter) Write(b []byte) (int, error)       { return len(b), nil }
func (w *headerWriter) WriteString(s string) (int, error) { return len(s), nil }
func (w *headerWriter) WriteHeader(status int)            { w.status = status }

// mwBytesPerRun returns the bytes f allocates per run, the least of three
// rounds of n runs: the counter is the whole process's, so a stray
// allocation elsewhere can only add to a round, and rounds long enough
// make it negligible. It counts bytes, not time.
func mwBytesPerRun(n int, f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.TotalAlloc-before.TotalAlloc)/uint64(n))
	}
	return least
}

func TestHandlerAllocations(t *testing.T) {
	// The allowed path makes the key and, for all the headers, one string
	// of their numbers and one array of their values; the store makes
	// nothing. A refusal adds one array for the 429's Content-Type and
	// Vary values. A second passes per request, so the log holds 60
	// instants and stops growing.
	clk := fakeclock.New()
	l := newLimiter(t, 100, time.Minute, ratelimit.KeyByHeader("X-Api-Key"), ratelimit.WithClock(clk.Now))
	h := l.Handler(okHandler)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", "client-1")
	w := &headerWriter{h: make(http.Header)}
	step := time.Second
	serve := func() {
		clk.Advance(step)
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	for range 100 {
		serve()
	}
	assert.LessOrEqual(t, testing.AllocsPerRun(100, serve), 3.0, "allowed: allocations per request")
	// Bytes matter as much as counts: they set how often the collector
	// runs. The key takes 16 bytes, the numbers 24 and the values 96; the
	// log, which drops its oldest instant from the front of its slice as
	// it appends one, is copied into a new one every 40 requests (800
	// bytes, some 20 a request).
	assert.LessOrEqual(t, mwBytesPerRun(2000, serve), uint64(16+24+96+32), "allowed: bytes allocated per request")
	require.Equal(t, http.StatusOK, w.status, "status")
	assert.Equal(t, `"default";r=40;t=1`, w.h.Get("RateLimit"), "RateLimit")

	step = 0
	for w.status != http.StatusTooManyRequests {
		serve()
	}
	assert.LessOrEqual(t, testing.AllocsPerRun(100, serve), 4.0, "refused: allocations per request")
	// The key, the numbers and the values as above, and 48 bytes for the
	// 429's three values.
	assert.LessOrEqual(t, mwBytesPerRun(2000, serve), uint64(16+24+96+48), "refused: bytes allocated per request")
	assert.Equal(t, "1", w.h.Get("Retry-After"), "Retry-After")
	assert.Equal(t, `"default";r=0;t=1`, w.h.Get("RateLimit"), "RateLimit")
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
		}{
			{0, http.StatusBadRequest},
			{-5, http.StatusBadRequest},
			{4, http.StatusRequestEntityTooLarge},
		} {
			cost.Store(tc.cost)
			assert.Equal(t, tc.status, get(h, "192.0.2.1:1").Code, "fail open %v, cost %d: status", failOpen, tc.cost)
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			d := l.Decide(r)
			assert.Equal(t, ratelimit.Reject, d.Outcome, "fail open %v, cost %d: Decide", failOpen, tc.cost)
			assert.ErrorIs(t, d.Err, ratelimit.ErrInvalidCost, "fail open %v, cost %d: Decide", failOpen, tc.cost)
			var ke *ratelimit.KeyError
			if assert.ErrorAs(t, d.Err, &ke, "fail open %v, cost %d: Decide", failOpen, tc.cost) {
				assert.Equal(t, tc.status, ke.Status, "fail open %v, cost %d: KeyError.Status", failOpen, tc.cost)
			}
		}
		assert.Zero(t, served.Load(), "fail open %v: requests with invalid costs reaching the handler", failOpen)
		cost.Store(3)
		w := get(h, "192.0.2.1:1")
		assert.Equal(t, http.StatusOK, w.Code, "fail open %v: a valid cost of 3 after the invalid ones", failOpen)
		assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"), "fail open %v: nothing counted before", failOpen)
	}
}

// Handler(nil) panics where it is wrapped, before any request is counted.
func TestHandlerNilPanicsAtWrapTime(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP())
	assert.Panics(t, func() { l.Handler(nil) }, "Handler(nil)")
	d := l.Allow(context.Background(), "ip:192.0.2.1", 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "Handler(nil) counted a request")
	assert.True(t, d.Result.Allowed, "Handler(nil) counted a request")
}

// Dry run reports a would-be refusal in the rate-limit headers, but a 200
// carries no Retry-After: the request was not refused.
func TestDryRunSendsNoRetryAfter(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithDryRun())
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	assert.Equal(t, http.StatusOK, w.Code, "dry run over the limit: status")
	assert.Empty(t, w.Header().Get("Retry-After"), "dry run over the limit: Retry-After")
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"), "dry run over the limit: X-RateLimit-Remaining")
}

// Decide and SetHeaders give a server of another protocol what Handler
// sends.
func TestDecideAndSetHeadersMatchHandler(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now))
	h := l.Handler(okHandler)
	for i, want := range []ratelimit.Outcome{ratelimit.Serve, ratelimit.Refuse} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		d := l.Decide(r)
		require.Equal(t, want, d.Outcome, "decision %d", i)
		assert.Equal(t, "default", d.Result.Policy, "decision %d: the store decided under the default policy", i)
		assert.Equal(t, 1, d.Result.Limit, "decision %d: Result.Limit", i)
		assert.Equal(t, time.Minute, d.Result.Window, "decision %d: Result.Window", i)
		got := http.Header{}
		l.SetHeaders(got, d)
		w := get(h, "192.0.2.2:1") // another client in the same standing
		for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy", "Retry-After"} {
			assert.Equal(t, w.Header().Get(name), got.Get(name), "decision %d: SetHeaders %s, want Handler's", i, name)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "garbage"
	d := l.Decide(r)
	assert.Equal(t, ratelimit.Reject, d.Outcome, "no key")
	assert.Zero(t, d.Result, "no key: the store did not decide")
	got := http.Header{}
	l.SetHeaders(got, d)
	assert.Empty(t, got, "no key: SetHeaders")
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
		require.Equal(t, http.StatusUnauthorized, login("alice", "wrong"), "alice's wrong attempt %d", i)
	}
	for i := range 20 {
		require.Equal(t, http.StatusOK, login("alice", "right"), "alice's right attempt %d after 4 wrong ones (successes do not count)", i)
	}
	var codes []int
	for range 8 {
		codes = append(codes, login("mallory", "guess"))
	}
	assert.Equal(t, []int{401, 401, 401, 401, 401, 429, 429, 429}, codes, "the guesser's attempts")
	assert.Equal(t, http.StatusUnauthorized, login("alice", "wrong"), "alice's fifth wrong attempt (one left)")
	assert.Equal(t, http.StatusTooManyRequests, login("alice", "right"), "alice after 5 wrong attempts")
}

// A handler under WithCountIf that panics has its request counted, keep
// unasked, whatever it wrote first: the panic goes on (net/http recovers
// it and drops the connection), and keep would see a status the client
// never got.
func TestCountIfPanicStaysCounted(t *testing.T) {
	asked := 0
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithCountIf(func(*http.Request, int) bool {
		asked++
		return false
	}))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		panic(http.ErrAbortHandler)
	}))
	for i := range 3 {
		assert.PanicsWithValue(t, http.ErrAbortHandler, func() { get(h, "192.0.2.1:1", "X-User", "alice") }, "request %d", i)
	}
	assert.Zero(t, asked, "calls of keep")
	assert.Equal(t, http.StatusTooManyRequests, get(h, "192.0.2.1:1", "X-User", "alice").Code, "after 3 requests whose handler panicked")
}

// keep sees the status a handler sent: 101 Switching Protocols is a final
// status, as net/http sends it, though no hijack follows; the other 1xx
// are not, and the status after them is the one seen. The first final
// status is the one sent, as net/http ignores a later WriteHeader: a body
// written or a flush done first sends a 200.
func TestCountIfSeesTheFinalStatus(t *testing.T) {
	status := func(code int) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) { w.WriteHeader(code) }
	}
	body := func(w http.ResponseWriter) { io.WriteString(w, "body") }
	flush := func(w http.ResponseWriter) { w.(http.Flusher).Flush() }
	for _, tt := range []struct {
		name  string
		steps []func(http.ResponseWriter)
		want  int
	}{
		{"101 alone", []func(http.ResponseWriter){status(http.StatusSwitchingProtocols)}, http.StatusSwitchingProtocols},
		{"103 then 204", []func(http.ResponseWriter){status(http.StatusEarlyHints), status(http.StatusNoContent)}, http.StatusNoContent},
		{"103 alone", []func(http.ResponseWriter){status(http.StatusEarlyHints)}, http.StatusOK},
		{"401 then 200", []func(http.ResponseWriter){status(http.StatusUnauthorized), status(http.StatusOK)}, http.StatusUnauthorized},
		{"body then 500", []func(http.ResponseWriter){body, status(http.StatusInternalServerError)}, http.StatusOK},
		{"flush then 401", []func(http.ResponseWriter){flush, status(http.StatusUnauthorized)}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen []int
			l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
				seen = append(seen, status)
				return true
			}))
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, step := range tt.steps {
					step(w)
				}
			}))
			get(h, "192.0.2.1:1", "X-User", "alice")
			assert.Equal(t, []int{tt.want}, seen, "statuses keep saw")
		})
	}
}

// A handler under WithCountIf that resets its client and answers 200, as
// the login example does on a successful login, has its own request taken
// back after the Reset. The refund must not reach what the Reset made
// new: the client then has exactly the full quota, whatever it had before,
// and a request counted after the Reset stays counted. The clock stands
// still, so that the refunded request, the Reset and the requests after it
// share one instant.
func TestCountIfRefundAfterReset(t *testing.T) {
	fixed := fakeclock.Start
	keyer := ratelimit.KeyByHeader("X-User")
	for _, algo := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA} {
		for _, sc := range []struct {
			name   string
			before int  // failed attempts before the successful one
			inside bool // after its Reset, the handler serves a failed attempt of the same client
			want   []int
		}{
			{"fresh client", 0, false, []int{401, 401, 429}},
			{"after a failure", 1, false, []int{401, 401, 429}},
			{"a failure counted after the reset", 1, true, []int{401, 429}},
		} {
			t.Run(algo.String()+"/"+sc.name, func(t *testing.T) {
				l := newLimiter(t, 2, time.Minute, keyer, ratelimit.WithAlgorithm(algo),
					ratelimit.WithClock(func() time.Time { return fixed }), ratelimit.WithCountIf(countFailures))
				var h http.Handler
				h = l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("X-Password") != "right" {
						w.WriteHeader(http.StatusUnauthorized)
						return
					}
					key, err := keyer.Key(r)
					require.NoError(t, err)
					require.NoError(t, l.Reset(r.Context(), key))
					if sc.inside {
						inner := get(h, "192.0.2.1:1", "X-User", "alice", "X-Password", "wrong")
						require.Equal(t, http.StatusUnauthorized, inner.Code, "the failed attempt after the Reset")
					}
					w.WriteHeader(http.StatusOK)
				}))
				login := func(password string) int {
					return get(h, "192.0.2.1:1", "X-User", "alice", "X-Password", password).Code
				}
				for i := range sc.before {
					require.Equal(t, http.StatusUnauthorized, login("wrong"), "failed attempt %d", i)
				}
				require.Equal(t, http.StatusOK, login("right"), "the successful attempt")
				var got []int
				for range len(sc.want) {
					got = append(got, login("wrong"))
				}
				assert.Equal(t, sc.want, got, "attempts after the successful one")
			})
		}
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
		require.LessOrEqual(t, i, 2*limit, "never refused")
	}
	assert.Equal(t, int64(limit), kept.Load(), "requests kept counted when the limit refused the next")
}

// The writer WithCountIf wraps keeps Flush, Hijack and ResponseController
// working, and sees the status they send.
func TestCountIfWriterKeepsItsAbilities(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool { return status != http.StatusOK }))
	var hijacked atomic.Bool
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			w.(http.Flusher).Flush() // a 200: not counted
		case "/controller":
			assert.NoError(t, http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)), "SetWriteDeadline through the wrapper")
			w.WriteHeader(http.StatusAccepted) // counted
		case "/hijack":
			c, _, err := w.(http.Hijacker).Hijack()
			if !assert.NoError(t, err, "Hijack through the wrapper") {
				return
			}
			hijacked.Store(true)
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close() // counted: the handler owned the connection
		}
	})))
	defer srv.Close()
	status := func(path string) int {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		// The body ends once the handler has returned, and with it the
		// middleware's refund: the headers come sooner, from Flush.
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for i := range 5 {
		require.Equal(t, http.StatusOK, status("/flush"), "flush %d (flushed 200s are not counted)", i)
	}
	require.Equal(t, http.StatusAccepted, status("/controller"), "controller")
	require.Equal(t, http.StatusOK, status("/hijack"), "hijack: the handler's answer")
	require.True(t, hijacked.Load(), "hijacked")
	assert.Equal(t, http.StatusTooManyRequests, status("/flush"), "after a counted 202 and a hijack under a limit of 2")
}

// Under WithDryRun a cost above the limit is served, uncounted, and goes
// to OnError, however far above the limit it is: a cost above the largest
// limit a policy may have (math.MaxInt32) too.
func TestDryRunServesEveryCostAboveTheLimit(t *testing.T) {
	var errs []error
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByIP(), ratelimit.WithDryRun(), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("X-Cost")); return n }),
		ratelimit.WithHooks(ratelimit.Hooks{OnError: func(_ *http.Request, err error) { errs = append(errs, err) }}))
	served := 0
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	ctx := context.Background()
	costs := []int{4, math.MaxInt32, math.MaxInt} // math.MaxInt is above math.MaxInt32 where int has 64 bits
	for _, cost := range costs {
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1", "X-Cost", strconv.Itoa(cost)).Code, "cost %d in dry run: status", cost)
		d := l.Allow(ctx, "ip:192.0.2.1", cost)
		assert.Equal(t, ratelimit.Serve, d.Outcome, "cost %d in dry run: Allow's Outcome", cost)
		assert.ErrorIs(t, d.Err, ratelimit.ErrInvalidCost, "cost %d in dry run: Allow's Err", cost)
	}
	assert.Equal(t, len(costs), served, "requests served")
	assert.Len(t, errs, 2*len(costs), "errors reported to OnError")
	res, err := l.Peek(ctx, "ip:192.0.2.1")
	require.NoError(t, err)
	assert.Equal(t, 3, res.Remaining, "nothing counted")
}

// noFlushWriter is a ResponseWriter that cannot flush, as one a
// middleware in front of the limiter may wrap the server's in.
type noFlushWriter struct{ http.ResponseWriter }

// Under WithCountIf, a Flush the ResponseWriter cannot do sends nothing:
// keep sees the status the handler then sends, and the handler sees that
// the flush failed, as it would without the limiter.
func TestCountIfFlushThatCannotFlush(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithCountIf(countFailures))
	var flushErrs []error
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flushErrs = append(flushErrs, http.NewResponseController(w).Flush())
		w.WriteHeader(http.StatusUnauthorized)
	}))
	var codes []int
	for range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-User", "mallory")
		h.ServeHTTP(noFlushWriter{w}, r)
		codes = append(codes, w.Code)
	}
	assert.Equal(t, []int{401, 401, 429, 429}, codes, "failed logins after a flush that sent nothing")
	for i, err := range flushErrs {
		assert.ErrorIs(t, err, http.ErrNotSupported, "request %d: the handler's Flush", i)
	}
}

// A Hijack that fails hijacks nothing: the request is answered as any
// other, and keep decides whether it stays counted.
func TestCountIfFailedHijackIsNoHijack(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithCountIf(countFailures))
	var hijackErrs []error
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := http.NewResponseController(w).Hijack() // a ResponseRecorder cannot
		hijackErrs = append(hijackErrs, err)
		w.WriteHeader(http.StatusOK)
	}))
	for i := range 3 {
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1", "X-User", "alice").Code, "request %d (a 200 is taken back)", i)
	}
	for i, err := range hijackErrs {
		assert.ErrorIs(t, err, http.ErrNotSupported, "request %d: the handler's Hijack", i)
	}
}

// ctxStore is a memory store whose Refund, as a networked store's would,
// fails once its context is done.
type ctxStore struct{ ratelimit.Store }

func (s ctxStore) Refund(ctx context.Context, key string, set ratelimit.PolicySet, cost int, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Refund(ctx, key, set, cost, at)
}

// The refund WithCountIf makes is the server's: a client gone once the
// handler has returned, its request's context cancelled, still has the
// request taken back.
func TestCountIfRefundOutlivesTheClient(t *testing.T) {
	mem, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: fakeclock.New().Now})
	require.NoError(t, err)
	defer mem.Close()
	var errs []error
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-User"), ratelimit.WithStore(ctxStore{mem}),
		ratelimit.WithCountIf(countFailures), ratelimit.WithHooks(ratelimit.Hooks{OnError: func(_ *http.Request, err error) { errs = append(errs, err) }}))
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			cancel() // the client hangs up
		}))
		r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code, "request %d (each 200 is taken back)", i)
	}
	assert.Empty(t, errs, "errors reported to OnError")
}

// A refusal's body is the limiter's: a Content-Length that a handler in
// front of the limiter set for its own answer does not go out with it.
func TestRefusalDropsAContentLengthSetBefore(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now))
	inner := l.Handler(okHandler)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1234")
		inner.ServeHTTP(w, r)
	})
	get(h, "192.0.2.1:1")
	for _, accept := range []string{"text/plain", "application/problem+json"} {
		w := get(h, "192.0.2.1:1", "Accept", accept)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "Accept %s: status", accept)
		assert.Empty(t, w.Header().Values("Content-Length"), "Accept %s: Content-Length", accept)
	}
}

// A store of one's own may refuse with no wait, or report a reset
// already past: a refusal still says to come back in a second at the
// earliest, and no figure goes below now.
func TestZeroAndPastFiguresOfAStore(t *testing.T) {
	res := ratelimit.Result{Limit: 1, RetryAfter: 0, Reset: -time.Minute, Policy: "default", Window: time.Minute, At: fakeclock.Start.Add(500 * time.Millisecond)}
	for _, unix := range []bool{false, true} {
		set := ratelimit.HeadersLegacy | ratelimit.HeadersIETF
		wantReset := "0"
		if unix {
			set |= ratelimit.HeadersUnixReset
			wantReset = strconv.FormatInt(fakeclock.Start.Unix()+1, 10) // At, rounded up
		}
		l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{res: res}), ratelimit.WithHeaders(set))
		w := get(l.Handler(okHandler), "192.0.2.1:1", "Accept", "application/problem+json")
		require.Equal(t, http.StatusTooManyRequests, w.Code, "unix %v: status", unix)
		assert.Equal(t, "1", w.Header().Get("Retry-After"), "unix %v: Retry-After", unix)
		assert.Equal(t, `"default";r=0;t=0`, w.Header().Get("RateLimit"), "unix %v: RateLimit", unix)
		assert.Equal(t, wantReset, w.Header().Get("X-RateLimit-Reset"), "unix %v: X-RateLimit-Reset", unix)
		assert.Contains(t, w.Body.String(), "retry after 1 s.", "unix %v: problem details", unix)
	}
}

// WithPolicies given twice adds both lists, unlike other options, and
// RateLimit-Policy states a window that is not whole seconds rounded up.
func TestPoliciesAddUpAndTheirWindowsRoundUp(t *testing.T) {
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 3, Window: 1500 * time.Millisecond}),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "hour", Limit: 100, Window: time.Hour}))
	w := get(l.Handler(okHandler), "192.0.2.1:1")
	assert.Equal(t, `"default";q=10;w=60, "burst";q=3;w=2, "hour";q=100;w=3600`, w.Header().Get("RateLimit-Policy"), "RateLimit-Policy")
}
