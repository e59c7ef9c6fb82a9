package ratelimit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Limiter decides, per key, whether a request fits its quota. Build one
// with New; its Handler method is the middleware.
//
// A Limiter is safe for simultaneous use by multiple goroutines.
type Limiter struct {
	config   // as the options left it, store included
	key      KeyFunc
	owned    io.Closer // the store New made, closed by Close
	def      *plan
	plans    map[string]*plan
	pkSecret []byte // keys RateLimit's pk; nil when it is off
}

// Result is one decision.
type Result struct {
	// Allowed reports whether the request fits and was counted (for
	// Peek, whether one more request would fit now).
	Allowed bool
	// Limit is the quota of the policy reported: requests per window.
	Limit int
	// Remaining is how many more requests the window admits after this
	// one (for Peek, how many it admits now).
	Remaining int
	// RetryAfter is 0 when allowed; otherwise how long until the request
	// would fit: oldest + window - now, exact (the headers round it up).
	RetryAfter time.Duration
	// Reset is how long until the oldest counted request leaves the window
	// and the quota grows again; 0 when nothing is counted.
	Reset time.Duration
	// Policy names the policy reported: on a rejection the violated one
	// with the longest wait, otherwise the one with the fewest remaining.
	Policy string
	// At is the store's reading of its clock for the decision: the
	// instant an allowed request was counted at, which a Refunder takes
	// to take it back.
	At time.Time
}

// DefaultPolicyName names the policy made from New's limit and window.
const DefaultPolicyName = "default"

// New returns a Limiter that admits at most limit requests per key in any
// rolling window, the key of a request being what key returns for it.
// There is no default key: what to limit by is a security decision (see
// KeyByIP).
//
// New reports every invalid argument and option at once, joined with
// errors.Join; it never panics on bad configuration.
func New(limit int, window time.Duration, key KeyFunc, opts ...Option) (*Limiter, error) {
	c := defaultConfig()
	var errs []error
	if key == nil {
		errs = append(errs, errors.New("ratelimit: nil KeyFunc: say what to limit by, e.g. KeyByIP()"))
	}
	errs = append(errs, keyFuncError(key)) // an extractor built from invalid options
	for _, o := range opts {
		if o.apply == nil {
			errs = append(errs, errors.New("ratelimit: zero Option"))
			continue
		}
		o.apply(&c)
	}
	errs = append(errs, c.errs...)
	policies := append([]Policy{{Name: DefaultPolicyName, Limit: limit, Window: window, Algorithm: c.algorithm}}, c.policies...)
	def, err := newPlan("", policies)
	errs = append(errs, err)
	plans := make(map[string]*plan, len(c.plans))
	for name, ps := range c.plans {
		p, err := newPlan(name, ps)
		errs = append(errs, err)
		plans[name] = p
	}
	if c.store != nil && c.memSet {
		errs = append(errs, errors.New("ratelimit: WithMaxKeys and WithClock configure the memory store and cannot be combined with WithStore"))
	}
	errs = append(errs, c.mem.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	l := &Limiter{config: c, key: key, def: def, plans: plans}
	if c.partitionKey {
		l.pkSecret = make([]byte, 32)
		rand.Read(l.pkSecret)
	}
	if l.store == nil {
		ms := newMemoryStore(c.mem)
		l.store, l.owned = ms, ms
	}
	if _, ok := l.store.(Refunder); c.countIf != nil && !ok {
		return nil, unsupported("WithCountIf", l.store, "Refunder")
	}
	return l, nil
}

// wallClock returns the time for the headers that carry one
// (WithResetFormat(ResetUnix)): the memory store's clock if one was
// injected, for simulations, else time.Now.
func (l *Limiter) wallClock() time.Time {
	if l.mem.clock != nil {
		return l.mem.clock()
	}
	return time.Now()
}

// Allow reports whether one more request for key fits the limiter's
// default policies, and counts it if so. It is the middleware's decision
// without HTTP: for gRPC, queues or any other caller.
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.store.Take(ctx, key, l.def.set, 1)
}

// AllowN is Allow for a request that costs n (a bulk call, say): it is
// allowed only if n more fit, and then counts as n. An n larger than a
// policy's limit can never fit and returns ErrCostExceedsLimit.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	return l.store.Take(ctx, key, l.def.set, n)
}

// Peek reports the standing of the client r comes from, under the plan l
// would choose for r, without counting anything: Allowed says whether one
// more request would fit now, Remaining how many would, RetryAfter how
// long until one would if none does. r describes the client to l's
// KeyFunc and plan choice as a request of theirs would: a handler passes
// its own request ("37 of 300 left"); an operator who knows a client's
// credential builds one carrying it (its API-key header, its RemoteAddr,
// its identity in the context), so that kind prefixes, hashing and IPv6
// grouping are the KeyFunc's business, as they are for its requests. A
// client l has never counted has its full quota. The store must be a
// Peeker (the memory store and redisstore are); otherwise the error
// matches ErrUnsupported.
func (l *Limiter) Peek(r *http.Request) (Result, error) {
	key, p, err := l.client(r)
	if err != nil {
		return Result{}, err
	}
	pk, ok := l.store.(Peeker)
	if !ok {
		return Result{}, unsupported("Peek", l.store, "Peeker")
	}
	return pk.Peek(r.Context(), key, p.set)
}

// Reset forgets the counts of the client r comes from (see Peek) under
// every plan of l, the default policies included: after a support ticket,
// a successful login, between end-to-end tests. The store must be a
// Resetter (the memory store and redisstore are); otherwise the error
// matches ErrUnsupported.
func (l *Limiter) Reset(r *http.Request) error {
	key, err := l.key(r)
	if err != nil {
		return err
	}
	rs, ok := l.store.(Resetter)
	if !ok {
		return unsupported("Reset", l.store, "Resetter")
	}
	errs := []error{rs.Reset(r.Context(), key, l.def.set)}
	for _, p := range l.plans {
		errs = append(errs, rs.Reset(r.Context(), p.prefix+key, p.set))
	}
	return errors.Join(errs...)
}

// unsupported returns the error of a call or option that needs an
// optional ability the store lacks.
func unsupported(what string, s Store, iface string) error {
	return fmt.Errorf("%w: %s needs a store that implements ratelimit.%s; %T does not", ErrUnsupported, what, iface, s)
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
	if l.owned != nil {
		return l.owned.Close()
	}
	return nil
}
