package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// apiKeyRequest returns a request carrying apiKey in X-API-Key.
func apiKeyRequest(apiKey string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	r.Header.Set("X-API-Key", apiKey)
	return r
}

// mwTier returns ctx carrying tier, as mwWithTier puts it there.
func mwTier(ctx context.Context, tier string) context.Context {
	return context.WithValue(ctx, mwTierKey{}, tier)
}

// mwKey returns keyer's key for r.
func mwKey(t *testing.T, keyer ratelimit.Keyer, r *http.Request) string {
	t.Helper()
	key, err := keyer.Key(r)
	require.NoError(t, err)
	return key
}

// mwContracts is a WithLimits lookup over a table that a test changes as
// it runs, standing in for a database of contracts: a key it does not
// hold gets the default policies. It counts its calls.
type mwContracts struct {
	mu    sync.Mutex
	m     map[string][]ratelimit.Policy
	calls atomic.Int64
}

// set makes ps key's policies; none, the default ones.
func (c *mwContracts) set(key string, ps ...ratelimit.Policy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]ratelimit.Policy{}
	}
	c.m[key] = ps
}

func (c *mwContracts) lookup(_ context.Context, key string) ([]ratelimit.Policy, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

// Peek and Reset name the client by its key, under the policies the
// lookup gives it; Reset forgets those and the default ones.
func TestPeekAndResetByKey(t *testing.T) {
	clk := fakeclock.New()
	keyer := ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key"))
	var contracts mwContracts
	l := newLimiter(t, 3, time.Minute, keyer, ratelimit.WithClock(clk.Now), ratelimit.WithLimits(contracts.lookup, time.Second))
	h := l.Handler(okHandler)
	serve := func(n int) {
		for i := range n {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, apiKeyRequest("acme"))
			require.Equal(t, http.StatusOK, w.Code, "request %d", i)
		}
	}
	key := mwKey(t, keyer, apiKeyRequest("acme"))
	peek := func(remaining, limit int) {
		t.Helper()
		for i := range 3 { // peeks count nothing
			res, err := l.Peek(context.Background(), key)
			require.NoError(t, err)
			assert.True(t, res.Allowed, "peek %d: Allowed", i)
			assert.Equal(t, remaining, res.Remaining, "peek %d: Remaining", i)
			assert.Equal(t, limit, res.Limit, "peek %d: Limit", i)
		}
	}
	serve(2)
	peek(1, 3)
	contracts.set(key, ratelimit.Policy{Name: "pro", Limit: 10, Window: time.Minute})
	clk.Advance(time.Second) // the cached answer expires
	serve(4)
	peek(6, 10)
	for _, other := range []string{mwKey(t, keyer, apiKeyRequest("someone else")), "acme", "apikey:acme"} {
		res, err := l.Peek(context.Background(), other)
		require.NoError(t, err)
		assert.Equal(t, 3, res.Remaining, "key %q, not the Keyer's key for acme: a client never seen", other)
	}
	require.NoError(t, l.Reset(context.Background(), key))
	peek(10, 10)
	contracts.set(key)
	clk.Advance(time.Second)
	peek(3, 3)
}

// Allow, Peek and Reset take the key the Keyer makes of a client's
// requests, kind prefix included, and so reach the count the middleware
// keeps for that client: one quota, whichever way in.
func TestAllowPeekResetShareTheHandlersCount(t *testing.T) {
	keyer := ratelimit.KeyByHeader("X-API-Key")
	l := newLimiter(t, 3, time.Minute, keyer, ratelimit.WithClock(fakeclock.New().Now))
	h := l.Handler(okHandler)
	ctx := context.Background()
	serve := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, apiKeyRequest("acme"))
		return w
	}
	key := mwKey(t, keyer, apiKeyRequest("acme"))
	require.Equal(t, "apikey:acme", key)

	require.Equal(t, http.StatusOK, serve().Code, "the first request")
	d := l.Allow(ctx, key, 1)
	assert.Equal(t, ratelimit.Serve, d.Outcome, "Allow after one request")
	assert.Equal(t, 1, d.Result.Remaining, "Allow after one request: Remaining")
	res, err := l.Peek(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Remaining, "Peek after a request and an Allow")
	w := serve()
	assert.Equal(t, http.StatusOK, w.Code, "the third request")
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"), "the third request: X-RateLimit-Remaining")
	assert.Equal(t, ratelimit.Refuse, l.Allow(ctx, key, 1).Outcome, "Allow once the handler used the quota")
	res, err = l.Peek(ctx, key)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "Peek when full: Allowed")
	assert.Equal(t, time.Minute, res.RetryAfter, "Peek when full: RetryAfter, the clock standing still")

	for _, other := range []string{"acme", "apikey:acme ", "APIKEY:acme", "ip:192.0.2.1"} {
		assert.Equal(t, ratelimit.Serve, l.Allow(ctx, other, 1).Outcome, "key %q is another client", other)
	}

	require.NoError(t, l.Reset(ctx, key))
	w = serve()
	assert.Equal(t, http.StatusOK, w.Code, "a request after Reset")
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Remaining"), "a request after Reset: a full quota")
	res, err = l.Peek(ctx, "acme")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Remaining, "Reset of acme's key leaves the client named \"acme\" alone")
}

// Reset forgets the client's counts under its own policies and the
// default ones, and no other client's.
func TestResetForgetsOwnAndDefaultPolicies(t *testing.T) {
	clk := fakeclock.New()
	var contracts mwContracts
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithClock(clk.Now),
		ratelimit.WithLimits(contracts.lookup, time.Second))
	ctx := context.Background()
	fill := func(key string) {
		for d := l.Allow(ctx, key, 1); d.Outcome == ratelimit.Serve; {
			d = l.Allow(ctx, key, 1)
		}
	}
	peek := func(key string) ratelimit.Result {
		res, err := l.Peek(ctx, key)
		require.NoError(t, err)
		return res
	}
	gold := ratelimit.Policy{Name: "gold", Limit: 3, Window: time.Hour, Algorithm: ratelimit.GCRA}
	for _, key := range []string{"apikey:a", "apikey:b"} {
		fill(key) // on the default policies
		contracts.set(key, gold)
	}
	clk.Advance(time.Second)
	for _, key := range []string{"apikey:a", "apikey:b"} {
		fill(key) // on gold
	}
	require.NoError(t, l.Reset(ctx, "apikey:a"))
	assert.Equal(t, 3, peek("apikey:a").Remaining, "the reset client on gold: remaining, want all")
	assert.Zero(t, peek("apikey:b").Remaining, "another client on gold: remaining, untouched")
	contracts.set("apikey:a")
	contracts.set("apikey:b")
	clk.Advance(time.Second)
	assert.Equal(t, 2, peek("apikey:a").Remaining, "the reset client on the default policies: remaining, want all")
	assert.Zero(t, peek("apikey:b").Remaining, "another client on the default policies: remaining, untouched")
}

// mwHookCall is one call of a hook.
type mwHookCall struct {
	hook       string // "allow", "limit" or "error"
	nilRequest bool
	res        ratelimit.Result
	err        error
}

// mwRecordHooks returns hooks that append their calls to calls.
func mwRecordHooks(calls *[]mwHookCall) ratelimit.Hooks {
	return ratelimit.Hooks{
		OnAllow: func(r *http.Request, res ratelimit.Result) {
			*calls = append(*calls, mwHookCall{"allow", r == nil, res, nil})
		},
		OnLimit: func(r *http.Request, res ratelimit.Result) {
			*calls = append(*calls, mwHookCall{"limit", r == nil, res, nil})
		},
		OnError: func(r *http.Request, err error) {
			*calls = append(*calls, mwHookCall{"error", r == nil, ratelimit.Result{}, err})
		},
	}
}

// Allow is Decide without a request: for the same client, the same
// options and the same history, it chooses the same plan, checks the cost
// the same way, applies dry run and the failure mode alike, and calls the
// same hooks, with a nil request.
func TestAllowIsDecideWithoutARequest(t *testing.T) {
	boom := errors.New("redis: connection refused")
	const (
		S = ratelimit.Serve
		R = ratelimit.Refuse
		J = ratelimit.Reject
		F = ratelimit.Fail
	)
	// The default plan is 2 a minute, gold 4; the key "apikey:vip" is on
	// gold whatever its context says.
	choose := func(ctx context.Context, key string) string {
		if key == "apikey:vip" {
			return "gold"
		}
		return mwChooseTier(ctx, key)
	}
	plans := map[string][]ratelimit.Policy{"gold": {{Name: "gold", Limit: 4, Window: time.Minute}}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		opts    []ratelimit.Option
		store   bool // a failing store instead of a memory store
		ctx     context.Context
		apiKey  string
		tier    string
		cost    int
		want    []ratelimit.Outcome
		allowed []bool   // Result.Allowed of each decision
		err     error    // that every decision's Err matches, if any
		status  int      // the KeyError status of a Reject
		hooks   []string // the hooks called, in order
	}{
		{name: "default plan", apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{S, S, R}, allowed: []bool{true, true, false}, hooks: []string{"allow", "allow", "limit"}},
		{name: "plan from the context", apiKey: "acme", tier: "gold", cost: 1,
			want: []ratelimit.Outcome{S, S, S, S, R}, allowed: []bool{true, true, true, true, false}},
		{name: "plan from the key", apiKey: "vip", cost: 1,
			want: []ratelimit.Outcome{S, S, S, S, R}, allowed: []bool{true, true, true, true, false}},
		{name: "unknown plan", apiKey: "acme", tier: "platinum", cost: 1,
			want: []ratelimit.Outcome{S, S, R}, allowed: []bool{true, true, false}},
		{name: "dry run", opts: []ratelimit.Option{ratelimit.WithDryRun()}, apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{S, S, S}, allowed: []bool{true, true, false}, hooks: []string{"allow", "allow", "limit"}},
		{name: "cost", apiKey: "acme", tier: "gold", cost: 3,
			want: []ratelimit.Outcome{S, R}, allowed: []bool{true, false}},
		{name: "cost 0", apiKey: "acme", cost: 0,
			want: []ratelimit.Outcome{J}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 400, hooks: []string{"error"}},
		{name: "negative cost", apiKey: "acme", cost: -1,
			want: []ratelimit.Outcome{J}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 400},
		{name: "cost above the limit", apiKey: "acme", cost: 3,
			want: []ratelimit.Outcome{J, J}, allowed: []bool{false, false}, err: ratelimit.ErrInvalidCost, status: 413, hooks: []string{"error", "error"}},
		{name: "cost above the plan's limit", apiKey: "vip", cost: 5,
			want: []ratelimit.Outcome{J}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 413},
		{name: "cost above the limit, dry run", opts: []ratelimit.Option{ratelimit.WithDryRun()}, apiKey: "acme", cost: 3,
			want: []ratelimit.Outcome{S}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 413, hooks: []string{"error"}},
		{name: "cost 0, dry run", opts: []ratelimit.Option{ratelimit.WithDryRun()}, apiKey: "acme", cost: 0,
			want: []ratelimit.Outcome{J}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 400, hooks: []string{"error"}},
		{name: "cost above the limit, fail open", opts: []ratelimit.Option{ratelimit.WithFailOpen()}, store: true, apiKey: "acme", cost: 3,
			want: []ratelimit.Outcome{J}, allowed: []bool{false}, err: ratelimit.ErrInvalidCost, status: 413, hooks: []string{"error"}},
		{name: "store fails", store: true, apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{F, F}, allowed: []bool{false, false}, err: boom, hooks: []string{"error", "error"}},
		{name: "store fails, fail open", opts: []ratelimit.Option{ratelimit.WithFailOpen()}, store: true, apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{S, S}, allowed: []bool{false, false}, err: boom, hooks: []string{"error", "error"}},
		{name: "context cancelled", ctx: cancelled, apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{F}, allowed: []bool{false}, err: context.Canceled, hooks: []string{"error"}},
		{name: "context cancelled, fail open", opts: []ratelimit.Option{ratelimit.WithFailOpen()}, ctx: cancelled, apiKey: "acme", cost: 1,
			want: []ratelimit.Outcome{S}, allowed: []bool{false}, err: context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			var allowCalls, decideCalls []mwHookCall
			newFor := func(calls *[]mwHookCall) *ratelimit.Limiter {
				opts := append([]ratelimit.Option{
					ratelimit.WithLimits(mwPlans(choose, plans), time.Minute),
					ratelimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("X-Cost")); return n }),
					ratelimit.WithHooks(mwRecordHooks(calls)),
				}, c.opts...)
				if c.store {
					opts = append(opts, ratelimit.WithStore(stubStore{err: boom}))
				} else {
					opts = append(opts, ratelimit.WithClock(fakeclock.New().Now))
				}
				return newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), opts...)
			}
			byAllow, byDecide := newFor(&allowCalls), newFor(&decideCalls)
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			ctx = mwTier(ctx, c.tier)
			for i, want := range c.want {
				r := apiKeyRequest(c.apiKey).WithContext(ctx)
				r.Header.Set("X-Cost", strconv.Itoa(c.cost))
				dd := byDecide.Decide(r)
				da := byAllow.Allow(ctx, "apikey:"+c.apiKey, c.cost)

				assert.Equal(t, want, da.Outcome, "decision %d: Allow's Outcome", i)
				assert.Equal(t, want, dd.Outcome, "decision %d: Decide's Outcome", i)
				assert.Equal(t, c.allowed[i], da.Result.Allowed, "decision %d: Allow's Result.Allowed", i)
				assert.Equal(t, dd.Result, da.Result, "decision %d: Allow's Result, want Decide's", i)
				if c.err == nil {
					assert.NoError(t, da.Err, "decision %d: Allow's Err", i)
				} else {
					assert.ErrorIs(t, da.Err, c.err, "decision %d: Allow's Err", i)
				}
				assert.Equal(t, dd.Err, da.Err, "decision %d: Allow's Err, want Decide's", i)
				if c.status != 0 {
					var ke *ratelimit.KeyError
					if assert.ErrorAs(t, da.Err, &ke, "decision %d: Allow's Err", i) {
						assert.Equal(t, c.status, ke.Status, "decision %d: Allow's KeyError.Status", i)
					}
				}
			}
			if c.hooks != nil {
				var got []string
				for _, call := range allowCalls {
					got = append(got, call.hook)
				}
				assert.Equal(t, c.hooks, got, "the hooks Allow called")
			}
			require.Len(t, allowCalls, len(decideCalls), "hook calls: Allow's, want as many as Decide's")
			for i := range allowCalls {
				a, d := allowCalls[i], decideCalls[i]
				assert.True(t, a.nilRequest, "hook call %d (%s) from Allow: nil request", i, a.hook)
				assert.False(t, d.nilRequest, "hook call %d (%s) from Decide: nil request", i, d.hook)
				a.nilRequest, d.nilRequest = false, false
				assert.Equal(t, d, a, "hook call %d: Allow's, want Decide's", i)
			}
		})
	}
}

// Peek and Reset pass the store's errors on; Allow answers them with the
// failure mode.
func TestPeekAndResetReportStoreErrors(t *testing.T) {
	boom := errors.New("redis: connection refused")
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(stubStore{err: boom}),
		ratelimit.WithLimits(mwPlans(mwChooseTier, map[string][]ratelimit.Policy{"gold": {{Name: "gold", Limit: 4, Window: time.Minute}}}), time.Minute))
	_, err := l.Peek(context.Background(), "ip:192.0.2.1")
	assert.ErrorIs(t, err, boom, "Peek")
	assert.ErrorIs(t, l.Reset(context.Background(), "ip:192.0.2.1"), boom, "Reset")
}

// Limiters on one store share counts when configured alike: with the same
// default policies, in whatever order WithPolicies gives them, since a
// set's order means nothing; and not when a limit differs.
func TestLimitersConfiguredAlikeShareCounts(t *testing.T) {
	st, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	hourly := ratelimit.Policy{Name: "hourly", Limit: 100, Window: time.Hour}
	daily := ratelimit.Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour}
	limiter := func(limit int, ps ...ratelimit.Policy) *ratelimit.Limiter {
		return newLimiter(t, limit, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st), ratelimit.WithPolicies(ps...))
	}
	a := limiter(10, hourly, daily)
	d := a.Allow(context.Background(), "ip:192.0.2.1", 1)
	require.Equal(t, ratelimit.Serve, d.Outcome, "a's first request")
	for name, l := range map[string]*ratelimit.Limiter{
		"reordered WithPolicies": limiter(10, daily, hourly),
		"same order":             limiter(10, hourly, daily),
	} {
		p, err := l.Peek(context.Background(), "ip:192.0.2.1")
		require.NoError(t, err, name)
		assert.Equal(t, 9, p.Remaining, "%s: remaining after a's request", name)
	}
	p, err := limiter(11, hourly, daily).Peek(context.Background(), "ip:192.0.2.1")
	require.NoError(t, err)
	assert.Equal(t, 11, p.Remaining, "another default limit: remaining")
}
