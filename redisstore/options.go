package redisstore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/slidelog/ratelimit"
)

// An Option configures a Store in New. Options write into a private
// configuration: defaults are laid first, options applied in order, and the
// result validated once, so a bad option is an error from New.
type Option func(*config)

type config struct {
	prefix    string
	timeout   time.Duration
	policy    FailurePolicy
	fallback  ratelimit.Store
	onFailure func(err error)
	refusals  int  // entries of the refusal cache; 0 turns it off
	leases    bool // lease busy keys
	fleet     int  // servers that share a limit under FailLocal
	errs      []error

	// Test hooks, set only by the package's tests (export_test.go).
	clock func() time.Time // the scripts' time instead of the server's TIME
	local func() time.Time // the refusal cache's clock instead of time.Now
}

// DefaultTimeout bounds each call to Redis unless WithTimeout says
// otherwise.
const DefaultTimeout = 50 * time.Millisecond

// DefaultRefusalCache is how many refusals a Store remembers unless
// WithRefusalCache says otherwise.
const DefaultRefusalCache = 4096

func defaultConfig() config {
	return config{prefix: DefaultPrefix, timeout: DefaultTimeout, policy: FailClosed, refusals: DefaultRefusalCache, fleet: 1}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("ratelimit: redisstore: "+format, args...))
}

// isNil reports whether v is nil: a nil interface, or one holding a nil
// pointer, map, slice, channel or function, which is not == nil but
// would panic at its first call (a fallback's, in an outage).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func (c *config) validate() error {
	errs := c.errs
	if c.fallback != nil && c.policy != FailLocal {
		errs = append(errs, errors.New("ratelimit: redisstore: WithFallback needs WithFailurePolicy(FailLocal)"))
	}
	if c.fleet > 1 && c.policy != FailLocal {
		errs = append(errs, errors.New("ratelimit: redisstore: WithFleetSize needs WithFailurePolicy(FailLocal)"))
	}
	return errors.Join(errs...)
}

// WithPrefix starts every key the store writes with prefix (default
// DefaultPrefix), to share a Redis database with other data or to keep
// apart limiters whose keys could clash. The prefix may not contain braces:
// the store places its own Cluster hash tag after it.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.fail("WithPrefix(%q): braces would change the Cluster hash tag", prefix)
		}
		c.prefix = prefix
	}
}

// WithTimeout bounds every call to Redis to d (default DefaultTimeout),
// counted from when Take is called; with leases on, a Take or Reset waits
// for Redis at most d in all, the returns of the leases it ends included.
// A call that runs out of time is a failure, handled by the
// FailurePolicy; it may still have been counted in Redis.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithTimeout(%v): want > 0", d)
		}
		c.timeout = d
	}
}

// WithFailurePolicy says what Take does when Redis fails or times out
// (default FailClosed).
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) {
		if p < FailClosed || p > FailLocal {
			c.fail("WithFailurePolicy: unknown policy %d", int(p))
		}
		c.policy = p
	}
}

// WithFallback makes s the store that decides while Redis is failing,
// under FailLocal, instead of a memory store that New makes. The caller
// owns s: Store.Close does not close it. A nil s, or one holding a nil
// pointer, is a configuration error.
func WithFallback(s ratelimit.Store) Option {
	return func(c *config) {
		if isNil(s) {
			c.fail("WithFallback: nil store")
			return
		}
		c.fallback = s
	}
}

// WithFailureHook calls fn with the error of every failed call to Redis,
// before the FailurePolicy applies, to log it or count it. fn runs on the
// request path: it must be fast and safe for simultaneous use. The error
// never contains the client key.
func WithFailureHook(fn func(err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.fail("WithFailureHook: nil func")
		}
		c.onFailure = fn
	}
}

// WithRefusalCache sets how many refusals the store remembers (default
// DefaultRefusalCache), so that a client flooding past its limit is
// answered without a round trip to Redis until its request could fit;
// 0 turns the cache off. The cache is a fixed array of n slots of 8
// bytes, and a slot in use holds an entry of 160 bytes plus a copy of the
// client key. See the package documentation for the rule that keeps it
// exact.
func WithRefusalCache(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithRefusalCache(%d): want >= 0", n)
		}
		c.refusals = n
	}
}

// WithLeases turns leases on or off (default off): a process that sees a
// client's key busy takes a lease of several of its slots in one call and
// admits the key's requests from it without a round trip, for at most
// 50 ms; see the package documentation for why this stays exact, and
// what it costs. With leases, a sliding log's Refund often misses its
// request, logged at a lease's end, which stays counted: leave leases off
// for a limiter that takes requests back (ratelimit.WithCountIf).
func WithLeases(on bool) Option {
	return func(c *config) { c.leases = on }
}

// WithFleetSize says how many servers share the limits under FailLocal
// (default 1): while Redis is down each decides with its share of every
// limit, the limit divided by n (at least 1), so that the fleet admits no
// more than the limit in all instead of n times it. A fleet that grows
// beyond n admits more; one that shrinks admits less.
func WithFleetSize(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("WithFleetSize(%d): want >= 1", n)
		}
		c.fleet = n
	}
}
