package redisstore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// Store is a ratelimit.Store kept in Redis: the state of every policy of
// every client, shared by every server that uses the same Redis, with a
// local cache of refusals in front (see WithRefusalCache). It implements
// every algorithm, and the optional abilities ratelimit.Peeker, Resetter
// and Refunder. Make one with New; pass it to ratelimit.New with
// ratelimit.WithStore.
//
// A Store is safe for simultaneous use by multiple goroutines.
type Store struct {
	client   redis.UniversalClient
	prefix   string
	timeout  time.Duration
	policy   FailurePolicy
	fallback ratelimit.Store
	owned    io.Closer // the fallback New made, closed by Close
	hook     func(error)
	bounded  bool      // the client itself gives up at a context's deadline
	refusals *refusals // nil when the cache is off

	clock func() time.Time // test hook: the scripts' time; nil for TIME
	local func() time.Time // the refusal cache's clock
	base  time.Time        // a reading of local, the origin of mono

	noRO     atomic.Bool // the server has no EVALSHA_RO (Redis before 7.0)
	failures atomic.Uint64
}

var (
	_ ratelimit.Store    = (*Store)(nil)
	_ ratelimit.Peeker   = (*Store)(nil)
	_ ratelimit.Resetter = (*Store)(nil)
	_ ratelimit.Refunder = (*Store)(nil)
)

// New returns a Store that keeps its counts in the Redis that client
// talks to: a single server, a Sentinel-managed one or a Cluster. The
// caller owns client; Close does not close it.
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
// New reports every invalid option at once, joined with errors.Join.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	c := defaultConfig()
	if client == nil {
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
		hook:     c.onFailure,
		bounded:  honoursDeadlines(client),
		clock:    c.clock,
		local:    c.local,
	}
	if s.local == nil {
		s.local = time.Now
	}
	s.base = s.local()
	if c.refusals > 0 {
		s.refusals = newRefusals(c.refusals)
	}
	if s.policy == FailLocal && s.fallback == nil {
		ms, err := ratelimit.NewMemoryStore()
		if err != nil {
			return nil, err
		}
		s.fallback, s.owned = ms, ms
	}
	return s, nil
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
// stretch a remembered refusal.
func (s *Store) mono() int64 { return int64(s.local().Sub(s.base)) }

// Take implements ratelimit.Store with one script run in Redis: see the
// package documentation. A refusal it remembers is answered without
// Redis. When Redis fails it counts the failure and acts as the store's
// FailurePolicy says. If ctx ends first, Take returns ctx's error, which
// is not counted as a failure of Redis.
func (s *Store) Take(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (ratelimit.Result, error) {
	if err := set.CheckCost(cost); err != nil {
		return ratelimit.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	var sent int64
	var epoch uint64
	if s.refusals != nil {
		res, ok, e := s.refusals.get(key, set, cost, s.mono)
		if ok {
			return res, nil
		}
		epoch, sent = e, s.mono()
	}
	reply, err := s.run(ctx, takeScript, false, keys(s.prefix, key, set), s.args(set, cost, 0))
	if err == nil {
		var buf [4]ratelimit.Result
		if res, r1, ok := decode(set, reply, 3, buf[:0]); ok {
			if s.refusals != nil {
				s.remember(key, set, cost, res, r1, sent, epoch)
			}
			return res, nil
		}
		err = fmt.Errorf("ratelimit: redisstore: unexpected script reply %v", reply)
	}
	if ctx.Err() != nil {
		return ratelimit.Result{}, ctx.Err()
	}
	s.fail(err)
	switch s.policy {
	case FailOpen:
		return openResult(set, cost, s.local()), nil
	case FailLocal:
		return s.fallback.Take(ctx, key, set, cost)
	}
	return ratelimit.Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// remember updates the refusal cache with the decision res of a request
// sent at sent: a refusal is remembered only when the set refuses a
// request of cost 1 too (r1 > 0), since then no request of any cost can
// be counted anywhere until r1 has passed, and for no longer than the
// reported policy's Reset, after which its Remaining changes; an
// admission forgets whatever the cache held for the key and set, which
// it proves stale.
func (s *Store) remember(key string, set ratelimit.PolicySet, cost int, res ratelimit.Result, r1 time.Duration, sent int64, epoch uint64) {
	if res.Allowed {
		s.refusals.forget(key, set)
		return
	}
	if r1 > 0 {
		s.refusals.put(key, set, cost, res, sent, s.mono(), min(r1, res.Reset), epoch)
	}
}

// fail counts a failure of Redis and reports it to the hook.
func (s *Store) fail(err error) {
	s.failures.Add(1)
	if s.hook != nil {
		s.hook(err)
	}
}

// args returns a script's ARGV for set: the header (the clock, the expiry
// slack, cost and the instant at, in µs), then each policy's algorithm,
// limit and window in µs.
func (s *Store) args(set ratelimit.PolicySet, cost int, at int64) []any {
	a := make([]any, 4, 4+3*set.Len())
	a[0], a[1], a[2], a[3] = "", "0", cost, at
	if s.clock != nil {
		// The injected clock does not move with Redis's: keep keys an
		// hour longer than they matter, so that none expires while a
		// test's time stands still.
		a[0], a[1] = strconv.FormatInt(s.clock().UnixMicro(), 10), "3600000"
	}
	for i := range set.Len() {
		p := set.At(i)
		a = append(a, algoCode(p.Algorithm), p.Limit, micros(p.Window))
	}
	return a
}

// decode turns a script's reply into the Result ratelimit.Tightest picks
// from one per policy, each four numbers (ok, remaining, retry, reset)
// from index first of reply on, reply[0] being the decision's instant and,
// for a Take, reply[2] the set's wait for a request of cost 1. It appends
// the policies' results to buf.
func decode(set ratelimit.PolicySet, reply []int64, first int, buf []ratelimit.Result) (res ratelimit.Result, r1 time.Duration, ok bool) {
	if len(reply) != first+4*set.Len() {
		return ratelimit.Result{}, 0, false
	}
	at := time.UnixMicro(reply[0])
	for i := range set.Len() {
		p, v := set.At(i), reply[first+4*i:]
		buf = append(buf, ratelimit.Result{
			Allowed:    v[0] == 1,
			Limit:      p.Limit,
			Remaining:  int(v[1]),
			RetryAfter: time.Duration(v[2]) * time.Microsecond,
			Reset:      time.Duration(v[3]) * time.Microsecond,
			Policy:     p.Name,
			At:         at,
		})
	}
	if first == 3 {
		r1 = time.Duration(reply[2]) * time.Microsecond
	}
	return ratelimit.Tightest(buf), r1, true
}

// run runs script (read-only with EVALSHA_RO when ro is set) within the
// store's timeout.
func (s *Store) run(ctx context.Context, script *redis.Script, ro bool, keys []string, args []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.bounded {
		return s.call(ctx, script, ro, keys, args)
	}
	type reply struct {
		v   []int64
		err error
	}
	// Buffered so that a call answered after the deadline does not block
	// its goroutine forever.
	done := make(chan reply, 1)
	go func() {
		v, err := s.call(ctx, script, ro, keys, args)
		done <- reply{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// call runs script once. A read-only call goes by EVALSHA_RO, so that the
// server itself refuses any write; a server without it (before Redis 7.0)
// gets EVALSHA, which runs the same script, from then on.
func (s *Store) call(ctx context.Context, script *redis.Script, ro bool, keys []string, args []any) ([]int64, error) {
	if ro && !s.noRO.Load() {
		v, err := script.RunRO(ctx, s.client, keys, args...).Int64Slice()
		if err == nil || !unknownCommand(err) {
			return v, err
		}
		s.noRO.Store(true)
	}
	return script.Run(ctx, s.client, keys, args...).Int64Slice()
}

// unknownCommand reports whether err is the server's answer to a command
// it does not have.
func unknownCommand(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command")
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

// Close stops the background work of the fallback store New made for
// FailLocal, if any. It does not close the Redis client. Close is safe to
// call more than once.
func (s *Store) Close() error {
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}
