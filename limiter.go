package ratelimit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limiter decides, per client, whether a request fits its quota. Build
// one with New; its Handler method is the middleware.
//
// A Limiter is safe for simultaneous use by multiple goroutines.
type Limiter struct {
	config                // as the options left it, store included
	key      Keyer        // whom a request counts against
	owned    bool         // the store is New's, closed by Close
	def      *plan        // the default policies
	cache    *limitsCache // of WithLimits' answers; nil without it
	pkSecret []byte       // keys RateLimit's pk; nil when it is off
}

// New returns a Limiter that admits at most limit requests per client in
// any rolling window, the client of a request being what key returns for
// it. There is no default key: what to limit by is a security decision
// (see KeyByIP).
//
// Limiters sharing a store never touch each other's counts unless they
// are configured alike, with the same default policies, as the servers of
// a fleet are: the default policies, limits included, are the limiter's
// identity in the store.
//
// New reports every invalid argument and option at once, joined with
// errors.Join; it never panics on bad configuration.
func New(limit int, window time.Duration, key Keyer, opts ...Option) (*Limiter, error) {
	c := defaultConfig()
	var errs []error
	if isNilValue(key) {
		errs = append(errs, errorf("nil Keyer: say what to limit by, e.g. KeyByIP()"))
	} else {
		errs = append(errs, keyError(key)) // an extractor built from invalid options
	}
	for _, o := range opts {
		if o == nil {
			errs = append(errs, errorf("nil Option"))
			continue
		}
		o(&c)
	}
	errs = append(errs, c.errs...)
	policies := append([]Policy{{Name: c.name, Limit: limit, Window: window, Algorithm: c.algorithm}}, c.policies...)
	scope := limiterScope(policies)
	def, err := newPlan(scope, policies)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	l := &Limiter{config: c, key: key, def: def}
	if c.limits != nil {
		// The monotonic clock alone, as the memory store reads it: a step
		// of the wall clock moves no expiry, and it is the cheaper read.
		base := time.Now()
		now := func() int64 { return int64(time.Since(base)) }
		if clock := c.clock; clock != nil {
			now = func() int64 { return clock().UnixNano() }
		}
		l.cache = &limitsCache{lookup: c.limits, ttl: c.ttl, timeout: c.lookupWithin, scope: scope, maxKeys: maxCachedKeys,
			inflight: map[string]*flight{}, turns: make(chan struct{}, maxLookups), now: now}
	}
	if c.partitionKey {
		l.pkSecret = make([]byte, 32)
		rand.Read(l.pkSecret)
	}
	if l.store == nil {
		l.store, l.owned = newMemoryStore(MemoryConfig{Clock: l.config.clock}), true
	}
	return l, nil
}

// limiterScope returns the scope of a limiter's sets in the store: a
// digest of its default policies, limits included, so that limiters
// configured alike share counts and others never do. They are taken in
// their set's order, by name, since the order they were given in means
// nothing else.
func limiterScope(ps []Policy) string {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, p := range ps {
		fmt.Fprintf(h, "%q %d %d %d %s\n", p.Name, p.Limit, p.Window, p.Algorithm, locationName(p.Location))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// errorf returns an error with the package's prefix.
func errorf(format string, args ...any) error {
	return fmt.Errorf("ratelimit: "+format, args...)
}

// Peek reports the standing of the client key under its policies (see
// WithLimits), counting nothing: Allowed says whether one more request
// would fit now, Remaining how many would, RetryAfter how long until one
// would if none does. A client l has never counted has its full quota.
//
// key is what l's Keyer returns for the client's requests: a handler
// passes the key of its own request; an operator who knows a client's
// credential asks the Keyer for the key of a request carrying it, so that
// kind prefixes, hashing and IPv6 grouping are the Keyer's business:
//
//	r := httptest.NewRequest("GET", "/", nil)
//	r.Header.Set("X-API-Key", customerKey)
//	key, err := keyer.Key(r)
func (l *Limiter) Peek(ctx context.Context, key string) (Result, error) {
	p, err := l.planOf(ctx, nil, key)
	if err != nil {
		return Result{}, err
	}
	return l.store.Peek(ctx, key, p.set)
}

// Reset forgets the counts of the client key (see Peek) under its
// policies and the default ones: after a support ticket, a successful
// login, between end-to-end tests. A request counted before the Reset and
// taken back after it (WithCountIf) changes nothing that the Reset made
// new.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	p, err := l.planOf(ctx, nil, key)
	if err != nil {
		return err
	}
	errs := []error{l.store.Reset(ctx, key, l.def.set)}
	if p.set.ID() != l.def.set.ID() {
		errs = append(errs, l.store.Reset(ctx, key, p.set))
	}
	return errors.Join(errs...)
}

// Stats reports the counters of the limiter's store, if it keeps any (the
// memory store and redisstore do).
func (l *Limiter) Stats() Stats {
	if s, ok := l.store.(interface{ Stats() Stats }); ok {
		return s.Stats()
	}
	return Stats{}
}

// Close stops the background work of the store New made and waits for it.
// A store passed with WithStore belongs to the caller, who closes it. Close
// is safe to call more than once.
func (l *Limiter) Close() error {
	if l.owned {
		return l.store.Close()
	}
	return nil
}
