package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// limitsCase is a limiter whose lookup a test scripts, and what it saw.
type limitsCase struct {
	clk     *fakeclock.Clock
	l       *ratelimit.Limiter
	lookups atomic.Int64
	errs    []error // OnError's, in order
	mu      sync.Mutex
}

// newLimitsCase makes a limiter of 2 a minute whose lookup is lookup,
// cached for ttl, with opts.
func newLimitsCase(t *testing.T, ttl time.Duration, lookup func(ctx context.Context, key string) ([]ratelimit.Policy, error), opts ...ratelimit.Option) *limitsCase {
	c := &limitsCase{clk: fakeclock.New()}
	counted := func(ctx context.Context, key string) ([]ratelimit.Policy, error) {
		c.lookups.Add(1)
		return lookup(ctx, key)
	}
	opts = append([]ratelimit.Option{
		ratelimit.WithClock(c.clk.Now), ratelimit.WithLimits(counted, ttl),
		ratelimit.WithHooks(ratelimit.Hooks{OnError: func(_ *http.Request, err error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.errs = append(c.errs, err)
		}}),
	}, opts...)
	c.l = newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), opts...)
	return c
}

func (c *limitsCase) errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// A ttl of "for ever" caches the answer for ever: the expiry does not
// wrap round to the past, which would look the client up on every request.
func TestLimitsForEver(t *testing.T) {
	c := newLimitsCase(t, math.MaxInt64, func(context.Context, string) ([]ratelimit.Policy, error) {
		return []ratelimit.Policy{{Name: "gold", Limit: 100, Window: time.Minute}}, nil
	})
	for i := range 5 {
		d := c.l.Allow(context.Background(), "apikey:a", 1)
		require.True(t, d.Result.Allowed, "decision %d", i)
		assert.Equal(t, 100, d.Result.Limit, "decision %d: the client's own limit", i)
		c.clk.Advance(24 * time.Hour)
	}
	assert.Equal(t, int64(1), c.lookups.Load(), "lookups")
}

// A lookup's error goes to OnError once even when the request that asked
// for it stopped waiting first: the first request to see the answer
// reports it.
func TestLimitsLookupErrorIsReportedWhenItsCallerGaveUp(t *testing.T) {
	boom := errors.New("contracts database: connection refused")
	started, release := make(chan struct{}), make(chan struct{})
	c := newLimitsCase(t, time.Hour, func(context.Context, string) ([]ratelimit.Policy, error) {
		close(started)
		<-release
		return nil, boom
	})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan ratelimit.Decision)
	go func() { first <- c.l.Allow(ctx, "apikey:a", 1) }()
	<-started
	cancel()
	require.ErrorIs(t, (<-first).Err, context.Canceled)
	close(release)

	// boom, or the lookup's timeout if this machine took longer to get
	// here: either way, the answer cached.
	var answer error
	for i := range 3 {
		d := c.l.Allow(context.Background(), "apikey:a", 1)
		require.Error(t, d.Err, "decision %d", i)
		answer = d.Err
	}
	errs := c.errors()
	require.Len(t, errs, 2, "OnError calls: the first request's cancellation, then the lookup's error")
	assert.ErrorIs(t, errs[0], context.Canceled)
	assert.Equal(t, answer, errs[1])
	assert.Equal(t, int64(1), c.lookups.Load())
}

// A cost no plan can count is rejected even when the lookup fails and the
// limiter fails open: the lookup's failure is no reason to serve a
// request that no plan would have counted.
func TestLimitsLookupFailsOpenRejectsAnInvalidCost(t *testing.T) {
	boom := errors.New("contracts database down")
	cost := 0
	c := newLimitsCase(t, time.Hour, func(context.Context, string) ([]ratelimit.Policy, error) { return nil, boom },
		ratelimit.WithFailOpen(), ratelimit.WithCost(func(*http.Request) int { return cost }))
	served := false
	h := c.l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
	w := get(h, "192.0.2.1:1", "X-API-Key", "a")
	assert.False(t, served, "a request of cost 0 reached the handler")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	for _, cost := range []int{-1, 0} {
		d := c.l.Allow(context.Background(), "apikey:a", cost)
		assert.Equal(t, ratelimit.Reject, d.Outcome, "Allow of cost %d under a failing lookup: %v", cost, d.Err)
		assert.ErrorIs(t, d.Err, ratelimit.ErrInvalidCost, "cost %d", cost)
	}
	d := c.l.Allow(context.Background(), "apikey:a", 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "cost 1: fails open")
	assert.ErrorIs(t, d.Err, boom)
}

// A lookup that fails is answered as a store failure, by the failure
// mode, and reported once while its error is cached (at most a second,
// however long the ttl); then it is called again.
func TestLimitsLookupFails(t *testing.T) {
	boom := errors.New("contracts database: connection refused")
	for _, failOpen := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail closed", true: "fail open"}[failOpen], func(t *testing.T) {
			var opts []ratelimit.Option
			want := ratelimit.Fail
			if failOpen {
				opts, want = []ratelimit.Option{ratelimit.WithFailOpen()}, ratelimit.Serve
			}
			c := newLimitsCase(t, time.Hour, func(context.Context, string) ([]ratelimit.Policy, error) { return nil, boom }, opts...)
			for i := range 10 {
				d := c.l.Allow(context.Background(), "apikey:a", 1)
				assert.Equal(t, want, d.Outcome, "decision %d", i)
				assert.ErrorIs(t, d.Err, boom, "decision %d: Err", i)
				assert.False(t, d.Result.Allowed, "decision %d: nothing counted", i)
			}
			assert.Equal(t, int64(1), c.lookups.Load(), "lookups while the error is cached")
			require.Len(t, c.errors(), 1, "OnError calls")
			assert.ErrorIs(t, c.errors()[0], boom)
			c.clk.Advance(time.Second)
			c.l.Allow(context.Background(), "apikey:a", 1)
			assert.Equal(t, int64(2), c.lookups.Load(), "lookups a second later")
			assert.Len(t, c.errors(), 2, "OnError calls a second later")
		})
	}
	t.Run("handler answers 503", func(t *testing.T) {
		c := newLimitsCase(t, time.Hour, func(context.Context, string) ([]ratelimit.Policy, error) { return nil, boom })
		w := get(c.l.Handler(okHandler), "192.0.2.1:1", "X-API-Key", "a")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.NotContains(t, w.Body.String(), "contracts database", "the error's text stays out of the body")
	})
}

// A lookup that returns invalid policies is answered as a failure, with
// an error naming what is wrong, reported once and cached for the ttl.
func TestLimitsLookupReturnsInvalidPolicies(t *testing.T) {
	c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) {
		return []ratelimit.Policy{{Name: "pro", Limit: 0, Window: time.Minute}, {Name: "pro", Limit: 5, Window: time.Hour}}, nil
	})
	for range 5 {
		d := c.l.Allow(context.Background(), "apikey:a", 1)
		assert.Equal(t, ratelimit.Fail, d.Outcome)
		require.Error(t, d.Err)
		assert.Contains(t, d.Err.Error(), "invalid policies")
		assert.Contains(t, d.Err.Error(), "limit 0")
		assert.Contains(t, d.Err.Error(), `"pro" used twice`)
	}
	c.clk.Advance(59 * time.Second)
	c.l.Allow(context.Background(), "apikey:a", 1)
	assert.Equal(t, int64(1), c.lookups.Load(), "lookups within the ttl")
	assert.Len(t, c.errors(), 1, "OnError calls within the ttl")
	c.clk.Advance(time.Second)
	c.l.Allow(context.Background(), "apikey:a", 1)
	assert.Equal(t, int64(2), c.lookups.Load(), "lookups once the ttl has passed")
}

// A lookup that does not answer within 100 ms, or panics, is a failure;
// every request waiting for it gets the failure, none an admission.
func TestLimitsLookupSlowOrPanics(t *testing.T) {
	t.Run("slow", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c := newLimitsCase(t, time.Minute, func(ctx context.Context, _ string) ([]ratelimit.Policy, error) {
			select {
			case <-release:
			case <-ctx.Done(): // the lookup's own deadline
			}
			return []ratelimit.Policy{{Name: "pro", Limit: 1000, Window: time.Minute}}, nil
		}, ratelimit.WithLookupTimeout(100*time.Millisecond)) // the library's
		var wg sync.WaitGroup
		var fails atomic.Int64
		for range 32 {
			wg.Go(func() {
				if d := c.l.Allow(context.Background(), "apikey:a", 1); d.Outcome == ratelimit.Fail && errors.Is(d.Err, context.DeadlineExceeded) {
					fails.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(32), fails.Load(), "requests failed for the lookup's deadline")
		assert.Equal(t, int64(1), c.lookups.Load(), "one lookup for 32 waiting requests")
		assert.Len(t, c.errors(), 1, "OnError calls")
		// The failure is cached for a second at most, however long the ttl.
		c.clk.Advance(time.Second)
		c.l.Allow(context.Background(), "apikey:a", 1)
		assert.Equal(t, int64(2), c.lookups.Load(), "lookups a second later")
	})
	t.Run("panics", func(t *testing.T) {
		c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) { panic("nil map") })
		d := c.l.Allow(context.Background(), "apikey:a", 1)
		assert.Equal(t, ratelimit.Fail, d.Outcome)
		require.Error(t, d.Err)
		assert.Contains(t, d.Err.Error(), "panic: nil map")
	})
	t.Run("the request's context ends first", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) {
			<-release
			return nil, nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d := c.l.Allow(ctx, "apikey:a", 1)
		assert.Equal(t, ratelimit.Fail, d.Outcome)
		assert.ErrorIs(t, d.Err, context.Canceled)
	})
}

// A client whose answer is cached costs no lookup, and the lookup is
// given the request's context, values included.
func TestLimitsCachedCostsNoLookup(t *testing.T) {
	type tierKey struct{}
	c := newLimitsCase(t, time.Minute, func(ctx context.Context, _ string) ([]ratelimit.Policy, error) {
		if ctx.Value(tierKey{}) == "pro" {
			return []ratelimit.Policy{{Name: "pro", Limit: 500, Window: time.Minute}}, nil
		}
		return nil, nil
	})
	ctx := context.WithValue(context.Background(), tierKey{}, "pro")
	allowed := 0
	for range 1000 {
		if c.l.Allow(ctx, "apikey:a", 1).Outcome == ratelimit.Serve {
			allowed++
		}
	}
	assert.Equal(t, 500, allowed, "the pro limit, from the context's tier")
	assert.Equal(t, int64(1), c.lookups.Load(), "lookups for 1,000 requests of one client")
	for range 10 {
		c.l.Allow(context.Background(), "apikey:b", 1)
	}
	assert.Equal(t, int64(2), c.lookups.Load(), "one more for another client")
	// The default policies, a nil answer, are cached for the ttl too.
	c.clk.Advance(59 * time.Second)
	c.l.Allow(context.Background(), "apikey:b", 1)
	assert.Equal(t, int64(2), c.lookups.Load(), "lookups within the ttl of a nil answer")
	c.clk.Advance(time.Second)
	c.l.Allow(context.Background(), "apikey:b", 1)
	assert.Equal(t, int64(3), c.lookups.Load(), "lookups once the ttl of a nil answer has passed")
}

// A request that stops waiting for its client's lookup (its client went
// away) does not end the lookup: the requests of the client that wait for
// it, or come after, get its answer.
func TestLimitsLookupOutlivesTheRequestThatAsked(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) {
		started <- struct{}{}
		<-release
		return []ratelimit.Policy{{Name: "pro", Limit: 1000, Window: time.Minute}}, nil
	}, ratelimit.WithLookupTimeout(time.Hour)) // not the 100 ms a loaded machine may take here
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan ratelimit.Decision)
	go func() { first <- c.l.Allow(ctx, "apikey:a", 1) }()
	<-started
	cancel()
	d := <-first
	assert.Equal(t, ratelimit.Fail, d.Outcome, "the request that gave up")
	assert.ErrorIs(t, d.Err, context.Canceled, "the request that gave up")
	close(release)
	d = c.l.Allow(context.Background(), "apikey:a", 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "the next request: %v", d.Err)
	assert.Equal(t, 1000, d.Result.Limit, "the next request's limit")
	assert.Equal(t, int64(1), c.lookups.Load(), "lookups")
}

// A flood of keys the cache does not hold calls the lookup at most
// MaxLookups at a time, however many requests wait for one and however
// long the lookups ignore their context: the requests beyond the cap get
// no turn within the lookup's timeout and are answered as a failed
// lookup, and a turn comes back only when its lookup returns.
func TestLimitsLookupsInFlightAreCapped(t *testing.T) {
	require.Equal(t, 16, ratelimit.MaxLookups, "the cap WithLimits documents")
	const n = 4 * ratelimit.MaxLookups
	started, returned, release := make(chan struct{}, n+4), make(chan struct{}, n+4), make(chan struct{})
	var inFlight, peak atomic.Int64
	c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) {
		peakAt(&peak, inFlight.Add(1))
		defer func() { inFlight.Add(-1); returned <- struct{}{} }()
		started <- struct{}{}
		<-release // a database that hangs, and a lookup that ignores ctx
		return nil, nil
	}, ratelimit.WithLookupTimeout(100*time.Millisecond)) // the library's
	decisions := make([]ratelimit.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { decisions[i] = c.l.Allow(context.Background(), "apikey:flood-"+strconv.Itoa(i), 1) })
	}
	for range ratelimit.MaxLookups {
		<-started
	}
	wg.Wait()
	busy := 0
	for i, d := range decisions {
		require.Equal(t, ratelimit.Fail, d.Outcome, "request %d: %v", i, d.Err)
		require.ErrorIs(t, d.Err, context.DeadlineExceeded, "request %d", i)
		if strings.Contains(d.Err.Error(), "lookups under way") {
			busy++
		}
	}
	assert.Equal(t, int64(ratelimit.MaxLookups), c.lookups.Load(), "lookups called for %d new keys", n)
	assert.Equal(t, int64(ratelimit.MaxLookups), peak.Load(), "most lookups in flight at once")
	assert.Equal(t, n-ratelimit.MaxLookups, busy, "requests answered that no lookup could start")
	assert.Len(t, c.errors(), n, "OnError calls: one per key")

	// The lookups past their deadline still hold their turns: one more
	// key gets none, and calls nothing.
	d := c.l.Allow(context.Background(), "apikey:one-more", 1)
	assert.Equal(t, ratelimit.Fail, d.Outcome, "a new key while every turn is held")
	assert.Equal(t, int64(ratelimit.MaxLookups), c.lookups.Load(), "lookups called while every turn is held")

	// Once the lookups return, a new key is looked up and served, and a
	// refused one is looked up again once its error has expired.
	close(release)
	for range ratelimit.MaxLookups {
		<-returned
	}
	d = c.l.Allow(context.Background(), "apikey:after", 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "a new key once the lookups returned: %v", d.Err)
	c.clk.Advance(time.Second)
	d = c.l.Allow(context.Background(), "apikey:one-more", 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "a refused key a second later: %v", d.Err)
	assert.Equal(t, int64(ratelimit.MaxLookups+2), c.lookups.Load(), "lookups")
}

// A burst of new customers whose lookups answer at once is served whole:
// the cap on lookups in flight makes the burst take turns, not fail.
func TestLimitsBurstOfNewCustomersIsServed(t *testing.T) {
	const n = 300
	var inFlight, peak atomic.Int64
	c := newLimitsCase(t, time.Minute, func(context.Context, string) ([]ratelimit.Policy, error) {
		peakAt(&peak, inFlight.Add(1))
		defer inFlight.Add(-1)
		return []ratelimit.Policy{{Name: "pro", Limit: 1000, Window: time.Minute}}, nil
	}, ratelimit.WithLookupTimeout(time.Minute)) // no deadline a busy machine reaches
	var wg sync.WaitGroup
	var served atomic.Int64
	for i := range n {
		wg.Go(func() {
			if d := c.l.Allow(context.Background(), "apikey:new-"+strconv.Itoa(i), 1); d.Outcome == ratelimit.Serve && d.Result.Limit == 1000 {
				served.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(n), served.Load(), "new customers served under their own limit")
	assert.Equal(t, int64(n), c.lookups.Load(), "lookups")
	assert.LessOrEqual(t, peak.Load(), int64(ratelimit.MaxLookups), "most lookups in flight at once")
	assert.Empty(t, c.errors(), "OnError calls")
}

// peakAt raises peak to v if v is higher.
func peakAt(peak *atomic.Int64, v int64) {
	for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
	}
}

// Clients whose policies differ in their algorithm alone are counted each
// by its own: GCRA lets a client of 5 a minute back in 12 s after a burst
// of 5, a sliding log only once the minute has passed.
func TestLimitsPoliciesDifferingInAlgorithmAlone(t *testing.T) {
	algos := map[string]ratelimit.Algorithm{"apikey:log": ratelimit.SlidingLog, "apikey:gcra": ratelimit.GCRA}
	c := newLimitsCase(t, time.Hour, func(_ context.Context, key string) ([]ratelimit.Policy, error) {
		return []ratelimit.Policy{{Name: "pro", Limit: 5, Window: time.Minute, Algorithm: algos[key]}}, nil
	})
	ctx := context.Background()
	for _, key := range []string{"apikey:log", "apikey:gcra"} {
		for i := range 5 {
			require.Equal(t, ratelimit.Serve, c.l.Allow(ctx, key, 1).Outcome, "%s: request %d", key, i)
		}
	}
	c.clk.Advance(12 * time.Second)
	assert.Equal(t, ratelimit.Refuse, c.l.Allow(ctx, "apikey:log", 1).Outcome, "sliding log, 12 s after a burst of 5")
	assert.Equal(t, ratelimit.Serve, c.l.Allow(ctx, "apikey:gcra", 1).Outcome, "GCRA, 12 s after a burst of 5")
}
