package benchmarks

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	sethlimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/slidelog/ratelimit"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// A peer is one limiter under test, configured for limit requests per
// window per key: sliding windows and fixed windows as limit per window,
// token buckets as a burst of limit refilled at limit per window.
type peer struct {
	name string
	// middleware returns the peer's net/http middleware keyed by
	// keyHeader, and a function that releases it.
	middleware func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func())
	// store returns the peer's decision for one key without HTTP, and a
	// release function; nil if the peer has no such call.
	store func(tb testing.TB, limit int, window time.Duration) (take, func())
	// hotLimit and hotWindow, if set, replace the hot-key quota for a
	// peer that would refuse requests under it.
	hotLimit  int
	hotWindow time.Duration
}

// take decides one request for key: allowed, or refused, or an error.
type take func(ctx context.Context, key string) (bool, error)

func nop() {}

// peers lists the limiters compared; ratelimit first.
var peers = []peer{
	{
		name: "ratelimit",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			l := newRatelimit(tb, limit, window)
			return l.Handler, func() { l.Close() }
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			l := newRatelimit(tb, limit, window)
			return func(ctx context.Context, key string) (bool, error) {
				d := l.Allow(ctx, key, 1)
				return d.Result.Allowed, d.Err
			}, func() { l.Close() }
		},
	},
	{
		// ratelimit with each client's policies looked up (WithLimits),
		// as a SaaS keeps them: the lookup answers every client with the
		// same quota as the default, another quota in name only, and the
		// cache answers all but each key's first request.
		name: "ratelimit+limits",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			l := newRatelimit(tb, limit, window, withLookup(limit, window))
			return l.Handler, func() { l.Close() }
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			l := newRatelimit(tb, limit, window, withLookup(limit, window))
			return func(ctx context.Context, key string) (bool, error) {
				d := l.Allow(ctx, key, 1)
				return d.Result.Allowed, d.Err
			}, func() { l.Close() }
		},
	},
	{
		// httprate: a sliding-window counter over two fixed windows. It
		// has no decision call apart from the one that writes headers, so
		// it takes part in the middleware workloads only.
		name: "httprate",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			return httprate.LimitBy(limit, window, func(r *http.Request) (string, error) {
				return headerKey(r), nil
			}), nop
		},
		// httprate keeps an xxh3 hash of each key, not the key.
	},
	{
		// ulule/limiter: a fixed window per key in a sync.Map.
		name: "ulule",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			l := newUlule(limit, window)
			return stdlib.NewMiddleware(l, stdlib.WithKeyGetter(headerKey)).Handler, nop
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			l := newUlule(limit, window)
			return func(ctx context.Context, key string) (bool, error) {
				c, err := l.Get(ctx, key)
				return !c.Reached, err
			}, nop
		},
	},
	{
		// sethvargo/go-limiter: a token bucket per key, memorystore.
		name: "sethvargo",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			s := newSethvargo(tb, limit, window)
			m, err := httplimit.NewMiddleware(s, func(r *http.Request) (string, error) { return headerKey(r), nil })
			if err != nil {
				tb.Fatal(err)
			}
			return m.Handle, func() { s.Close(context.Background()) }
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			s := newSethvargo(tb, limit, window)
			return func(ctx context.Context, key string) (bool, error) {
				_, _, _, ok, err := s.Take(ctx, key)
				return ok, err
			}, func() { s.Close(context.Background()) }
		},
		// memorystore refills interval/tokens tokens per elapsed interval
		// (its fillRate is nanoseconds per token, used as tokens per
		// tick), so with 100,000 per millisecond it refills 10 a tick and
		// refuses most hot-key requests. A bucket of 10^9 per hour is
		// never emptied within a run, and its take does the same work.
		hotLimit:  1_000_000_000,
		hotWindow: time.Hour,
	},
	{
		// throttled: GCRA (a token bucket) over memstore, a map behind one
		// RWMutex.
		name: "throttled",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			h := &throttled.HTTPRateLimiterCtx{
				RateLimiter: newThrottled(tb, limit, window),
				VaryBy:      &throttled.VaryBy{Custom: headerKey},
			}
			return h.RateLimit, nop
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			rl := newThrottled(tb, limit, window)
			return func(ctx context.Context, key string) (bool, error) {
				limited, _, err := rl.RateLimitCtx(ctx, key, 1)
				return !limited, err
			}, nop
		},
		// GCRA refuses a request whose clock reading is older than the
		// bucket's depth (here a millisecond) behind another's, and a
		// goroutine descheduled between reading the clock and its
		// compare-and-swap on a busy machine is that late: a depth of
		// 100 ms at the same rate of 10^8 a second keeps it out of it.
		hotLimit:  10_000_000,
		hotWindow: 100 * time.Millisecond,
	},
	{
		// The classic hand-rolled pattern: a map of x/time/rate token
		// buckets behind one sync.Mutex held for the lookup only. Its
		// middleware sends no rate-limit headers, as the pattern does.
		name: "xrate-map",
		middleware: func(tb testing.TB, limit int, window time.Duration) (func(http.Handler) http.Handler, func()) {
			m := newRateMap(limit, window)
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !m.allow(headerKey(r)) {
						http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
						return
					}
					next.ServeHTTP(w, r)
				})
			}, nop
		},
		store: func(tb testing.TB, limit int, window time.Duration) (take, func()) {
			m := newRateMap(limit, window)
			return func(_ context.Context, key string) (bool, error) { return m.allow(key), nil }, nop
		},
	},
	{
		// The floor: no limiter at all.
		name: "baseline",
		middleware: func(testing.TB, int, time.Duration) (func(http.Handler) http.Handler, func()) {
			return func(next http.Handler) http.Handler { return next }, nop
		},
	},
}

func newRatelimit(tb testing.TB, limit int, window time.Duration, opts ...ratelimit.Option) *ratelimit.Limiter {
	l, err := ratelimit.New(limit, window, ratelimit.KeyByHeader(keyHeader), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// withLookup looks every client's policies up as limit per window,
// cached for a minute.
func withLookup(limit int, window time.Duration) ratelimit.Option {
	ps := []ratelimit.Policy{{Name: "contract", Limit: limit, Window: window}}
	return ratelimit.WithLimits(func(context.Context, string) ([]ratelimit.Policy, error) { return ps, nil }, time.Minute)
}

func newUlule(limit int, window time.Duration) *ulule.Limiter {
	return ulule.New(ululemem.NewStore(), ulule.Rate{Period: window, Limit: int64(limit)})
}

func newSethvargo(tb testing.TB, limit int, window time.Duration) sethlimiter.Store {
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(limit), Interval: window})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func newThrottled(tb testing.TB, limit int, window time.Duration) *throttled.GCRARateLimiterCtx {
	st, err := memstore.NewCtx(0)
	if err != nil {
		tb.Fatal(err)
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(limit, window),
		MaxBurst: limit - 1, // GCRA admits MaxBurst+1 at once
	})
	if err != nil {
		tb.Fatal(err)
	}
	return rl
}

// rateMap is the hand-rolled per-key x/time/rate limiter.
type rateMap struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	r     rate.Limit
	burst int
}

func newRateMap(limit int, window time.Duration) *rateMap {
	return &rateMap{
		m:     make(map[string]*rate.Limiter),
		r:     rate.Limit(float64(limit) / window.Seconds()),
		burst: limit,
	}
}

func (m *rateMap) allow(key string) bool {
	m.mu.Lock()
	l := m.m[key]
	if l == nil {
		l = rate.NewLimiter(m.r, m.burst)
		m.m[key] = l
	}
	m.mu.Unlock()
	return l.Allow()
}
