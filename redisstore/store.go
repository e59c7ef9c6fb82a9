package redisstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// Store is a ratelimit.Store kept in Redis: the state of every policy of
// every client, shared by every server that uses the same Redis, with a
// local cache of refusals (see WithRefusalCache) and leases for busy keys
// (see WithLeases) in front. It implements every algorithm. Make one with
// New; pass it to ratelimit.New with ratelimit.WithStore.
//
// A Store is safe for simultaneous use by multiple goroutines.
type Store struct {
	client   redis.UniversalClient
	prefix   string
	timeout  time.Duration
	policy   FailurePolicy
	fallback ratelimit.Store
	fleet    int      // servers sharing the limit under FailLocal
	shares   sync.Map // set ID -> *fleetShare
	owned    bool     // the fallback is New's, closed by Close
	hook     func(error)
	bounded  bool      // the client itself gives up at a context's deadline
	refusals *refusals // nil when the cache is off
	leases   *leases   // nil when leases are off
	locals   *locals   // the admissions Redis did not count (FailOpen, FailLocal)
	loads    loader    // of the library, when a server lacks it

	clock func() time.Time // test hook: the functions' time; nil for TIME
	local func() time.Time // the local clock of the refusal cache and leases
	base  time.Time        // a reading of local, the origin of mono

	stop      chan struct{} // stops the janitor
	closed    atomic.Bool   // Close was called: no lease outlives it
	done      chan struct{}
	closeOnce sync.Once
	failures  atomic.Uint64
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store that keeps its counts in the Redis that client
// talks to: a single server, a Sentinel-managed one or a Cluster, of Redis
// 7.0 or later. The caller owns client; Close does not close it.
//
// Give the client ContextTimeoutEnabled: true, and the dial and retry
// settings the package documentation lists, so that a call that fails
// fails within the store's timeout. The store bounds each call by passing
// a context with its timeout, and such a client abandons a call that
// outlives it. Without ContextTimeoutEnabled, go-redis waits for a slow
// server up to its own ReadTimeout (seconds), so the store has to wait
// for each call on a separate goroutine and stop waiting at its deadline:
// requests are still answered in time, at the cost of a goroutine a call
// and of calls that linger in the background.
//
// New reports every invalid option at once, joined with errors.Join, and
// a nil client (or one holding a nil pointer) with them; it never panics.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	c := defaultConfig()
	if isNil(client) {
		c.fail("New: nil client")
	}
	for _, o := range opts {
		if o == nil {
			c.fail("nil option")
			continue
		}
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		client:   client,
		prefix:   c.prefix,
		timeout:  c.timeout,
		policy:   c.policy,
		fallback: c.fallback,
		fleet:    c.fleet,
		hook:     c.onFailure,
		bounded:  honoursDeadlines(client),
		clock:    c.clock,
		local:    c.local,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if s.local == nil {
		s.local = time.Now
	}
	s.base = s.local()
	if c.refusals > 0 {
		s.refusals = newRefusals(c.refusals)
	}
	if err := s.start(c.leases); err != nil {
		return nil, err
	}
	return s, nil
}

// start makes what New's store owns: the fallback of FailLocal when none
// was given, and the janitor of leases when they are on.
func (s *Store) start(leases bool) error {
	if s.policy == FailLocal && s.fallback == nil {
		ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{})
		if err != nil {
			return err
		}
		s.fallback, s.owned = ms, true
	}
	if s.policy != FailClosed {
		s.locals = &locals{seed: maphash.MakeSeed()}
	}
	if leases {
		s.leases = newLeases()
		go s.janitor(s.stop, s.done)
	} else {
		close(s.done)
	}
	return nil
}

// honoursDeadlines reports whether client gives up a call at its context's
// deadline, as go-redis does only with ContextTimeoutEnabled.
func honoursDeadlines(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// mono reads the local clock in nanoseconds since the store was made: the
// monotonic clock in production, so that a step of the wall clock cannot
// stretch a remembered refusal or a lease.
func (s *Store) mono() int64 { return int64(s.local().Sub(s.base)) }

// Take implements ratelimit.Store with one function call in Redis: see
// the package documentation. A remembered refusal, and a request a lease
// has room for, are answered without Redis. When Redis fails it counts
// the failure and acts as the store's FailurePolicy says. If ctx ends
// first, Take returns ctx's error, which is not counted as a failure of
// Redis.
func (s *Store) Take(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (ratelimit.Result, error) {
	if err := set.CheckCost(cost); err != nil {
		return ratelimit.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	var epoch uint64
	if s.refusals != nil {
		res, ok, e := s.refusals.get(key, set, cost, s.mono)
		if ok {
			return res, nil
		}
		epoch = e
	}
	want, ask := 0, chan struct{}(nil)
	caller := ctx
	if s.leases != nil {
		// The timeout is counted from here: it bounds the wait for
		// another request's ask of a lease, and the return of the
		// leases this request ends, too (see release).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
		res, ok, w, a, err := s.leased(ctx, key, set, cost)
		if err != nil {
			return s.takeFailed(caller, key, set, cost, err)
		}
		if ok {
			return res, nil
		}
		want, ask = w, a
	}
	sent := s.mono()
	var t taken
	var err error
	if ask != nil {
		t, err = s.ask(ctx, key, set, cost, want, ask, sent)
	} else {
		t, err = s.call(ctx, key, set, cost, want)
	}
	if err != nil {
		return s.takeFailed(caller, key, set, cost, err)
	}
	if s.refusals != nil {
		s.remember(key, set, cost, t.res, t.r1, sent, epoch)
	}
	return t.res, nil
}

// call calls the take function for key under set, asking for want more
// slots for a lease, and decodes its reply.
func (s *Store) call(ctx context.Context, key string, set ratelimit.PolicySet, cost, want int) (taken, error) {
	reply, err := s.fcall(ctx, fnTake, false, keys(s.prefix, key, set, false), s.args(set, cost, int64(want)))
	if err != nil {
		return taken{}, err
	}
	t, ok := decodeTake(set, reply)
	if !ok {
		return taken{}, fmt.Errorf("ratelimit: redisstore: unexpected reply %v", reply)
	}
	return t, nil
}

// takeFailed answers a Take whose call to Redis failed with err: ctx's
// error if ctx ended, which is no failure of Redis; otherwise it counts
// the failure and acts as the store's FailurePolicy says.
func (s *Store) takeFailed(ctx context.Context, key string, set ratelimit.PolicySet, cost int, err error) (ratelimit.Result, error) {
	if ctx.Err() != nil {
		return ratelimit.Result{}, ctx.Err()
	}
	s.fail(err)
	switch s.policy {
	case FailOpen:
		res := openResult(set, cost, s.local())
		s.locals.add(key, set, res.At)
		return res, nil
	case FailLocal:
		if lkey, share := s.localKey(key, set); share.CheckCost(cost) == nil {
			res, err := s.fallback.Take(ctx, lkey, share, cost)
			if err == nil && res.Allowed {
				s.locals.add(key, set, res.At)
			}
			return res, err
		}
		// A cost above this process's share of a limit, which no local
		// decision can admit: unavailable, as under FailClosed.
	}
	return ratelimit.Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// leased admits a request of cost for key under set from the key's lease
// if it has room, waiting for a grant another request is out asking for;
// otherwise it says what to ask Redis for: want slots beyond the request,
// ask to end with asked, if any.
func (s *Store) leased(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (res ratelimit.Result, ok bool, want int, ask chan struct{}, err error) {
	for {
		now := s.mono()
		l, stale := s.leases.of(key, set, now)
		if l == nil {
			return res, false, 0, nil, nil // another key's lease holds the slot
		}
		res, ok, wait, want, ask, give := l.admit(cost, now)
		l.mu.Unlock()
		s.release(ctx, stale, give)
		if wait == nil {
			return res, ok, want, ask, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return res, false, 0, nil, ctx.Err()
		}
	}
}

// ask calls the take function for a request that asks for want slots
// for a lease, unless ctx has ended, and ends the ask (see asked). Once
// sent, the call outlives the end of ctx's caller, within ctx's deadline:
// the lease Redis grants and counts is the store's, not the request's,
// and only its reply says which slots to give back.
func (s *Store) ask(ctx context.Context, key string, set ratelimit.PolicySet, cost, want int, ask chan struct{}, sent int64) (taken, error) {
	t, err := taken{}, ctx.Err()
	if err == nil {
		cctx, cancel := detached(ctx)
		t, err = s.call(cctx, key, set, cost, want)
		cancel()
	}
	s.asked(ctx, key, set, ask, &t, err == nil, sent)
	return t, err
}

// asked ends the ask of a lease for key under set: t is the reply to the
// request sent at sent when ok.
func (s *Store) asked(ctx context.Context, key string, set ratelimit.PolicySet, ask chan struct{}, t *taken, ok bool, sent int64) {
	if !ok {
		t = nil
	}
	// The slot is this key's: no other key takes a slot with an ask out.
	now := s.mono()
	l, stale := s.leases.of(key, set, now)
	give := l.done(ask, t, sent, now)
	var late *grant
	if s.closed.Load() {
		// Close has given back every lease already: give back this
		// one's slots now, since no janitor will.
		late = l.expire()
	}
	l.mu.Unlock()
	s.release(ctx, stale, give, late)
}

// remember updates the refusal cache with the decision res of a request
// sent at sent: a refusal is remembered only when the set refuses a
// request of cost 1 too (r1 > 0), since then no request of any cost can
// be counted anywhere until r1 has passed, and for no longer than the
// reported policy's Reset, after which its Remaining changes, nor than
// maxRemembered, so that a Reset or Refund elsewhere is seen within it;
// an admission forgets whatever the cache held for the key and set,
// which it proves stale.
func (s *Store) remember(key string, set ratelimit.PolicySet, cost int, res ratelimit.Result, r1 time.Duration, sent int64, epoch uint64) {
	if res.Allowed {
		s.refusals.forget(key, set)
		return
	}
	if r1 > 0 {
		s.refusals.put(key, set, cost, res, sent, s.mono(), min(r1, res.Reset, maxRemembered), epoch)
	}
}

// maxRemembered is the longest a refusal is remembered: a Reset or Refund
// in another process is seen here at most that long after it, and a
// client flooding one key costs this process a round trip per that long.
const maxRemembered = time.Second

// fail counts a failure of Redis and reports it to the hook.
func (s *Store) fail(err error) {
	s.failures.Add(1)
	if s.hook != nil {
		s.hook(err)
	}
}

// share returns set with each limit divided among the fleet, for the
// fallback of FailLocal, so that the fleet admits no more than the limit
// while Redis is down.
func (s *Store) share(set ratelimit.PolicySet) ratelimit.PolicySet {
	if s.fleet <= 1 {
		return set
	}
	if v, ok := s.shares.Load(set.ID()); ok {
		if sh := v.(*fleetShare); sameLimits(sh.of, set) {
			return sh.share
		}
	}
	ps := make([]ratelimit.Policy, set.Len())
	for i := range ps {
		ps[i] = set.At(i)
		ps[i].Limit = max(1, ps[i].Limit/s.fleet)
	}
	shared, err := ratelimit.NewPolicySet(ps...)
	if err != nil {
		return set // cannot happen: the policies were valid, and are still
	}
	s.shares.Store(set.ID(), &fleetShare{of: set, share: shared})
	return shared
}

// localKey returns the key and the set the fallback decides key under set
// with: set's share of the fleet, and a key that keeps the counts of sets
// of other IDs apart, since a share's ID lacks its set's scope (a
// Limiter's).
func (s *Store) localKey(key string, set ratelimit.PolicySet) (string, ratelimit.PolicySet) {
	share := s.share(set)
	if share != set {
		key = set.ID() + "\x00" + key
	}
	return key, share
}

// fleetShare is a set's share, kept under the set's ID.
type fleetShare struct{ of, share ratelimit.PolicySet }

// sameLimits reports whether sets of one ID have the same limits. A set's
// ID names its quotas, not their limits, so that a client whose limit
// changed keeps its counts in Redis; what this process keeps of a set
// (leases, refusals, shares) holds for its limits only.
func sameLimits(a, b ratelimit.PolicySet) bool {
	if a == b {
		return true
	}
	for i := range a.Len() {
		if a.At(i).Limit != b.At(i).Limit {
			return false
		}
	}
	return true
}

// args returns a function's ARGV for set (see library.lua): cost and x,
// then each policy's algorithm, limit and window in µs. It leaves room
// for release's tail and a test's clock (see fcall).
func (s *Store) args(set ratelimit.PolicySet, cost int, x int64) []any {
	a := make([]any, 2, 2+4*set.Len()+3)
	a[0], a[1] = cost, x
	var now time.Time // for calendar periods, read once
	for i := range set.Len() {
		p := set.At(i)
		var window any = micros(p.Window)
		if p.Window == 0 { // a calendar period
			if now.IsZero() {
				now = time.Now()
				if s.clock != nil {
					now = s.clock()
				}
			}
			window = periodBounds(p, now)
		}
		a = append(a, algoCode(p.Algorithm), p.Limit, window)
	}
	return a
}

// periodBounds returns the bounds of p's calendar period as the functions
// take them (see library.lua): "prev,start,end,next" in µs, the period
// around now after the previous one's start and before the next one's
// end, so that the server's clock may pick the period it is in, though
// this process's clock is in the one before or after.
func periodBounds(p ratelimit.Policy, now time.Time) string {
	start, end := p.Period(now)
	prev, _ := p.Period(start.Add(-1))
	_, next := p.Period(end)
	return fmt.Sprintf("%d,%d,%d,%d", prev.UnixMicro(), start.UnixMicro(), end.UnixMicro(), next.UnixMicro())
}

// algoCode names an algorithm in the functions' ARGV.
func algoCode(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.SlidingWindowCounter:
		return "c"
	case ratelimit.GCRA:
		return "g"
	case ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly:
		return "p"
	}
	return "l"
}

// micros is w in whole microseconds, rounded up so that a window never
// shrinks: Redis's TIME has microsecond resolution.
func micros(w time.Duration) int64 {
	return int64((w + time.Microsecond - 1) / time.Microsecond)
}

// taken is a Take's reply: the Result, r1 for the refusal cache, and the
// lease granted with it, if any.
type taken struct {
	res   ratelimit.Result
	r1    time.Duration
	slots int // of the lease
	// lease is the time from the grant to the lease's end; without a
	// lease, 0 or the time until a window's end that was too near to
	// lease up to, before which no lease is to be asked for.
	lease time.Duration
	marks []int64
}

// decodeTake turns the take function's reply into a taken: {now, allowed,
// r1, policy, remaining, retry, reset, lease slots, lease end (or, without
// a lease, 0 or when to ask again), then the marks when there is a lease},
// or, for an admission under a set of one policy with none of the rest,
// {now, remaining, reset}.
func decodeTake(set ratelimit.PolicySet, reply []int64) (taken, bool) {
	n := set.Len()
	if len(reply) == 3 { // {now, remaining, reset}: see takeAll in library.lua
		return taken{res: result(set.At(0), reply[0], true, reply[1], 0, reply[2])}, n == 1
	}
	if len(reply) < 9 || reply[3] < 1 || reply[3] > int64(n) || reply[7] > 0 && len(reply) != 9+n {
		return taken{}, false
	}
	t := taken{
		res:   result(set.At(int(reply[3])-1), reply[0], reply[1] == 1, reply[4], reply[5], reply[6]),
		r1:    time.Duration(reply[2]) * time.Microsecond,
		slots: int(reply[7]),
	}
	if t.slots > 0 || reply[8] > reply[0] {
		t.lease = time.Duration(reply[8]-reply[0]) * time.Microsecond
	}
	if t.slots > 0 {
		t.marks = reply[9:]
	}
	return t, true
}

// result is the Result of policy p decided at now (µs) with the figures of
// a function's reply.
func result(p ratelimit.Policy, now int64, ok bool, remaining, retry, reset int64) ratelimit.Result {
	window := p.Window
	if window == 0 { // a calendar period: the length of the one at now
		start, end := p.Period(time.UnixMicro(now))
		window = end.Sub(start)
	}
	return ratelimit.Result{
		Allowed:    ok,
		Limit:      p.Limit,
		Remaining:  int(remaining),
		RetryAfter: time.Duration(retry) * time.Microsecond,
		Reset:      time.Duration(reset) * time.Microsecond,
		Policy:     p.Name,
		Window:     window,
		At:         time.UnixMicro(now),
	}
}

// Failures reports how many calls to Redis have failed or timed out since
// the store was made.
func (s *Store) Failures() uint64 { return s.failures.Load() }

// Stats reports the store's counters: CachedRefusals, the refusals
// answered from the refusal cache without a round trip to Redis. The
// other fields are the memory store's and stay 0: Redis counts its own
// keys (INFO keyspace).
func (s *Store) Stats() ratelimit.Stats {
	var st ratelimit.Stats
	if s.refusals != nil {
		st.CachedRefusals = s.refusals.hits.Load()
	}
	return st
}

// Close stops the store's background work: the janitor that gives back
// what leases did not use, and the fallback store New made for FailLocal,
// if any. It does not close the Redis client. Close is safe to call more
// than once.
//
// With leases on, Close first gives back the unused slots of every lease,
// a few calls at a time. While Redis hangs it returns within about two
// timeouts (WithTimeout), however many leases the store holds: one for a
// sweep of the janitor in progress, one for its own, which sends no more
// once a call has waited out the timeout. The slots not given back stay
// counted in Redis until they leave their windows (a calendar quota's
// until its period ends), as after any return that failed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
	})
	<-s.done
	if s.owned {
		return s.fallback.Close()
	}
	return nil
}
