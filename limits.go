package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WithLimits makes each client's policies those limits returns for it, in
// place of the default ones (New's and WithPolicies'), so that limits live
// where the application keeps them: a database, a configuration service,
// a claim of a token the authentication middleware verified (in ctx).
// limits is called with the client's key and its request's context; a nil
// or empty result means the default policies.
//
// It is called on the request path, so the limiter caches what it returns,
// per key, for ttl: a client's new limits apply within ttl of the change,
// and a busy client costs no call. Concurrent requests of a client whose
// limits are not cached wait for one call. A call that fails, panics,
// takes more than 100 ms, or returns invalid policies is answered as a
// failure of the store (WithFailOpen serves it, else the error handler
// answers 503), never by letting the request through uncounted otherwise;
// its error goes to the OnError hook once, not once per request, and is
// cached too (invalid policies for ttl, other errors for at most a
// second).
//
// At most 16 calls are under way at once, however many clients need one,
// so that a flood of keys the cache does not hold (random API keys, say)
// costs the database no more than 16 queries at a time: a client that
// needs a call while 16 are under way waits up to 100 ms for one of them
// to return, and if none does it is answered as a failed call (its error
// wraps context.DeadlineExceeded, as a slow call's does), cached and
// reported the same way. A call keeps its turn until it returns, past its
// 100 ms if it ignores ctx. Calls of a millisecond or two serve a burst
// of a few hundred new clients in turn, well within the wait.
//
// Every way into the limiter (Handler, Decide, Allow, Peek, Reset) looks
// a client up the same way, with the context it is given: a limits that
// reads a claim from ctx must find the client's there when an operator's
// tool calls Peek or Reset, or it answers for that ctx, and the answer is
// cached for the client as any other.
//
// A client whose limit changes keeps its counts: raised from 100 to 1,000
// a minute, it has 900 more in the current window, not 1,000; lowered, it
// is refused until its window holds fewer than the new limit (GCRA keeps
// the share of its bucket in use instead: see GCRA). A changed window,
// algorithm or name is another quota, which starts afresh; so is a policy
// added or taken away, and with it every count of the client, since a
// count belongs to a set of policies (see PolicySet.ID). The cache holds
// at most 262,144 keys, about 200 bytes each: more clients than that
// active within ttl are looked up again as the cache makes room.
func WithLimits(limits func(ctx context.Context, key string) ([]Policy, error), ttl time.Duration) Option {
	return func(c *config) {
		need(c, "WithLimits", "function", &c.limits, limits)
		if ttl <= 0 {
			c.errs = append(c.errs, errorf("WithLimits: ttl %v, want > 0", ttl))
		}
		c.ttl = ttl
	}
}

const (
	// lookupTimeout bounds a call of WithLimits' function.
	lookupTimeout = 100 * time.Millisecond
	// maxErrorTTL bounds how long a failed call is cached.
	maxErrorTTL = time.Second
	// maxCachedKeys bounds the keys WithLimits' cache holds; maxPlans the
	// distinct sets of policies it keeps one plan for.
	maxCachedKeys = 1 << 18
	maxPlans      = 1 << 12
	// maxLookups bounds the calls of WithLimits' function under way at
	// once: a flood of unknown keys must not become a flood of queries.
	maxLookups = 16
)

// limitsCache caches WithLimits' answers per key.
type limitsCache struct {
	lookup   func(ctx context.Context, key string) ([]Policy, error)
	ttl      time.Duration
	timeout  time.Duration // lookupTimeout, but in tests
	now      func() int64  // ns: the monotonic clock, or WithClock's
	scope    string
	maxKeys  int      // maxCachedKeys, but in tests
	keys     sync.Map // key -> *cached
	size     atomic.Int64
	plans    sync.Map // the policies' full text -> *plan, so that sets are shared
	nplans   atomic.Int64
	mu       sync.Mutex
	inflight map[string]*flight // lookups under way, by key
	turns    chan struct{}      // a token per call under way; maxLookups long
}

// cached is one key's answer, until expires.
type cached struct {
	plan     *plan // nil for the default policies
	err      error
	expires  int64
	reported atomic.Bool // err went to a call's report
}

// flight is a lookup under way: answer is set, and done closed, once it
// is known. The cache keeps the answer alone, not the channel.
type flight struct {
	done   chan struct{}
	answer *cached
}

// result returns e's answer, and reports its error if no call has: the
// first call to see the answer does, which is the one that asked for it
// unless that one stopped waiting.
func (e *cached) result(report func(error)) (*plan, error) {
	if e.err != nil && e.reported.CompareAndSwap(false, true) {
		report(e.err)
	}
	return e.plan, e.err
}

// planOf returns the plan of the client key: looked up (and cached), or
// the default one (nil). report is called with the lookup's error, once
// (see cached.result), and with ctx's while this call waits for it.
func (c *limitsCache) planOf(ctx context.Context, key string, report func(error)) (*plan, error) {
	now := c.now()
	if v, ok := c.keys.Load(key); ok {
		if e := v.(*cached); now < e.expires {
			return e.result(report)
		}
	}
	c.mu.Lock()
	if v, ok := c.keys.Load(key); ok {
		// Filled while this call waited for the lock.
		if e := v.(*cached); now < e.expires {
			c.mu.Unlock()
			return e.result(report)
		}
	}
	f, ok := c.inflight[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		c.inflight[key] = f
		go c.fill(context.WithoutCancel(ctx), key, f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		report(ctx.Err())
		return nil, ctx.Err()
	}
	return f.answer.result(report)
}

// fill calls the lookup for key, once it has a turn, and gives f its
// answer, within c.timeout of the call: an answer that comes later is
// dropped. The lookup runs on fill's own goroutine, as soon as it runs,
// so that the time counts the lookup and not the scheduling of another
// goroutine. The turn goes back when the lookup returns, not at its
// deadline, so that lookups that ignore their context stay within the cap.
func (c *limitsCache) fill(ctx context.Context, key string, f *flight) {
	if !c.takeTurn() {
		err := fmt.Errorf("ratelimit: WithLimits: %d lookups under way, none ended within %v: %w", maxLookups, c.timeout, context.DeadlineExceeded)
		c.answer(key, f, nil, err, min(c.ttl, maxErrorTTL))
		return
	}
	defer func() { <-c.turns }()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var once sync.Once
	late := func() {
		err := fmt.Errorf("ratelimit: WithLimits: no answer within %v: %w", c.timeout, context.DeadlineExceeded)
		c.answer(key, f, nil, err, min(c.ttl, maxErrorTTL))
	}
	context.AfterFunc(ctx, func() { once.Do(late) })
	ps, err := c.call(ctx, key)
	once.Do(func() {
		switch {
		case ctx.Err() != nil: // past the deadline, whatever the answer
			late()
		case err != nil:
			c.answer(key, f, nil, notAtFault(fmt.Errorf("ratelimit: WithLimits: %w", err)), min(c.ttl, maxErrorTTL))
		case len(ps) > 0:
			p, err := c.planFor(ps)
			c.answer(key, f, p, err, c.ttl)
		default:
			c.answer(key, f, nil, nil, c.ttl)
		}
	})
}

// takeTurn waits up to c.timeout for a turn to call the lookup, and
// reports whether it got one.
func (c *limitsCache) takeTurn() bool {
	select {
	case c.turns <- struct{}{}:
		return true
	default: // no timer unless there is a wait
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case c.turns <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// call calls the lookup, making a panic of it an error: a panic on this
// goroutine would end the process, which no server recovers.
func (c *limitsCache) call(ctx context.Context, key string) (ps []Policy, err error) {
	defer func() {
		if v := recover(); v != nil {
			ps, err = nil, fmt.Errorf("panic: %v", v)
		}
	}()
	return c.lookup(ctx, key)
}

// answer makes p and err f's answer, cached for ttl, and lets those who
// wait for it go on.
func (c *limitsCache) answer(key string, f *flight, p *plan, err error, ttl time.Duration) {
	now := c.now()
	e := &cached{plan: p, err: err, expires: now + int64(ttl)}
	if e.expires < now { // a ttl of "for ever" wrapped
		e.expires = math.MaxInt64
	}
	c.store(key, e)
	f.answer = e
	c.mu.Lock()
	delete(c.inflight, key)
	c.mu.Unlock()
	close(f.done)
}

// store caches e for key, making room when the cache is full: expired
// answers go first, then any, down to three quarters of the bound, so
// that making room is rare.
func (c *limitsCache) store(key string, e *cached) {
	if _, loaded := c.keys.Swap(key, e); loaded || c.size.Add(1) <= int64(c.maxKeys) {
		return
	}
	now := c.now()
	for _, expiredOnly := range []bool{true, false} {
		c.keys.Range(func(k, v any) bool {
			if c.size.Load() <= int64(c.maxKeys)*3/4 {
				return false
			}
			if k != key && (!expiredOnly || v.(*cached).expires <= now) {
				if _, ok := c.keys.LoadAndDelete(k); ok {
					c.size.Add(-1)
				}
			}
			return true
		})
	}
}

// planFor returns the plan of policies, shared by every client with the
// same ones, or why they are invalid.
func (c *limitsCache) planFor(ps []Policy) (*plan, error) {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%q %d %d %d %s,", p.Name, p.Limit, p.Window, p.Algorithm, locationName(p.Location))
	}
	text := b.String()
	if v, ok := c.plans.Load(text); ok {
		return v.(*plan), nil
	}
	p, err := newPlan(c.scope, ps)
	if err != nil {
		return nil, errors.Join(errors.New("ratelimit: WithLimits: invalid policies"), err)
	}
	if c.nplans.Add(1) > maxPlans {
		c.plans.Clear() // plans are shared to save memory, not for correctness
		c.nplans.Store(1)
	}
	c.plans.Store(text, p)
	return p, nil
}
