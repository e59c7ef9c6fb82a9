package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// Store is a ratelimit.Store kept in Redis: an exact sliding-window log
// per client and policy, shared by every server that uses the same Redis.
// Make one with New; pass it to ratelimit.New with ratelimit.WithStore.
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
	bounded  bool // the client itself gives up at a context's deadline

	failures atomic.Uint64
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store that keeps its logs in the Redis that client talks
// to: a single server, a Sentinel-managed one or a Cluster. The caller
// owns client; Close does not close it.
//
// Give the client ContextTimeoutEnabled: true. The store then bounds each
// call by passing a context with its timeout, and the client abandons a
// call that outlives it. Without it, go-redis waits for a slow server up to
// its own ReadTimeout (seconds), so the store has to wait for each call on
// a separate goroutine and stop waiting at its deadline: requests are still
// answered in time, at the cost of a goroutine a call and of calls that
// linger in the background.
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

// Take implements ratelimit.Store with one script run in Redis: see the
// package documentation. When Redis fails it counts the failure and acts
// as the store's FailurePolicy says. If ctx ends first, Take returns ctx's
// error, which is not counted as a failure of Redis.
func (s *Store) Take(ctx context.Context, key string, policies []ratelimit.Policy, cost int) (ratelimit.Result, error) {
	if err := checkTake(policies, cost); err != nil {
		return ratelimit.Result{}, err
	}
	reply, err := s.run(ctx, keys(s.prefix, key, policies), args(policies, cost))
	if err == nil {
		if res, ok := result(policies, reply); ok {
			return res, nil
		}
		err = fmt.Errorf("ratelimit: redisstore: unexpected script reply %v", reply)
	}
	if ctx.Err() != nil {
		return ratelimit.Result{}, ctx.Err()
	}
	s.failures.Add(1)
	if s.hook != nil {
		s.hook(err)
	}
	switch s.policy {
	case FailOpen:
		return openResult(policies, cost), nil
	case FailLocal:
		return s.fallback.Take(ctx, key, policies, cost)
	}
	return ratelimit.Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// run runs the script within the store's timeout.
func (s *Store) run(ctx context.Context, keys []string, args []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.bounded {
		return take.Run(ctx, s.client, keys, args...).Int64Slice()
	}
	type reply struct {
		v   []int64
		err error
	}
	// Buffered so that a call answered after the deadline does not block
	// its goroutine forever.
	done := make(chan reply, 1)
	go func() {
		v, err := take.Run(ctx, s.client, keys, args...).Int64Slice()
		done <- reply{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// checkTake validates a Take's arguments as the memory store does.
func checkTake(policies []ratelimit.Policy, cost int) error {
	if len(policies) == 0 {
		return errors.New("ratelimit: redisstore: Take: no policies")
	}
	if cost < 1 {
		return errors.New("ratelimit: redisstore: Take: cost must be at least 1")
	}
	for i, p := range policies {
		if p.Window < time.Microsecond || p.Limit < 1 {
			return fmt.Errorf("ratelimit: redisstore: Take: policy %q: want a limit >= 1 and a window >= 1µs", p.Name)
		}
		for _, q := range policies[:i] {
			// They would share a log and count each request twice.
			if q.Name == p.Name {
				return fmt.Errorf("ratelimit: redisstore: Take: policy name %q used twice", p.Name)
			}
		}
		if cost > p.Limit {
			return ratelimit.ErrCostExceedsLimit
		}
	}
	return nil
}

// Failures reports how many calls to Redis have failed or timed out since
// the store was made.
func (s *Store) Failures() uint64 { return s.failures.Load() }

// Close stops the background work of the fallback store New made for
// FailLocal, if any. It does not close the Redis client. Close is safe to
// call more than once.
func (s *Store) Close() error {
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}
