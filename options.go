package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// An Option configures a Limiter in New. Options write into a private
// configuration: defaults are laid first, options applied in order, and the
// result validated once, so a bad option is an error from New. The zero
// Option is invalid.
type Option struct {
	name   string
	memory bool // configures the memory store (NewMemoryStore accepts it)
	apply  func(*config)
}

type config struct {
	mem          memoryConfig
	memSet       bool
	store        Store
	algorithm    Algorithm
	policies     []Policy
	plans        map[string][]Policy
	choose       func(r *http.Request, key string) string
	cost         func(r *http.Request) int
	skip         func(r *http.Request) bool
	countIf      func(r *http.Request, status int) bool
	headers      HeaderSet
	resetFmt     ResetFormat
	denied       func(w http.ResponseWriter, r *http.Request, res Result)
	keyErr       func(w http.ResponseWriter, r *http.Request, err error)
	storeErr     func(w http.ResponseWriter, r *http.Request, err error)
	failOpen     bool
	dryRun       bool
	hooks        Hooks
	partitionKey bool
	inContext    bool
	errs         []error
}

func defaultConfig() config {
	return config{
		headers:  HeadersBoth,
		resetFmt: ResetSeconds,
		denied:   defaultDenied,
		keyErr:   defaultKeyError,
		storeErr: defaultStoreError,
	}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("ratelimit: "+format, args...))
}

func memOption(name string, f func(*config)) Option {
	return Option{name: name, memory: true, apply: func(c *config) { c.memSet = true; f(c) }}
}

func limiterOption(name string, f func(*config)) Option {
	return Option{name: name, apply: f}
}

// plan is a validated set of policies and what never changes in their
// headers, computed once.
type plan struct {
	set      PolicySet
	prefix   string   // namespaces this plan's keys in the store
	policyHV string   // RateLimit-Policy value
	limitHV  []string // X-RateLimit-Limit value, per policy of set
}

func newPlan(name string, policies []Policy) (*plan, error) {
	set, err := NewPolicySet(policies...)
	if err != nil {
		if name != "" {
			err = fmt.Errorf("ratelimit: plan %q: %w", name, err)
		}
		return nil, err
	}
	p := &plan{set: set}
	if name != "" {
		p.prefix = "plan:" + name + "|"
	}
	// The header lists the policies in the order they were given.
	hv := make([]string, len(policies))
	for i, pol := range policies {
		hv[i] = fmt.Sprintf("%q;q=%d;w=%d", pol.Name, pol.Limit, ceilSeconds(pol.Window))
	}
	p.policyHV = strings.Join(hv, ", ")
	for i := range set.Len() {
		p.limitHV = append(p.limitHV, strconv.Itoa(set.At(i).Limit))
	}
	return p, nil
}

// index returns the index in p.set of the policy named name.
func (p *plan) index(name string) int {
	ps := p.set.p.policies
	if len(ps) == 1 {
		return 0 // the usual plan: no name to compare
	}
	for i := range ps {
		if ps[i].Name == name {
			return i
		}
	}
	return 0
}

// Answers to a cost no Take can count, which the middleware gives through
// the key error handler.
var (
	errCostInvalid = withCause(&KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: invalid request cost"}, ErrInvalidCost)
	errCostTooHigh = withCause(&KeyError{Status: http.StatusRequestEntityTooLarge, Message: "413 Content Too Large: the request costs more than the rate limit allows in a window"}, ErrCostExceedsLimit)
)

// checkCost reports a cost no Take of p's policies can count: below 1, or
// above a policy's limit. The error is a *KeyError whose status the
// middleware answers with (400 or 413), matching ErrInvalidCost or
// ErrCostExceedsLimit.
func (p *plan) checkCost(cost int) error {
	switch err := p.set.CheckCost(cost); err {
	case nil:
		return nil
	case ErrInvalidCost:
		return errCostInvalid
	default:
		return errCostTooHigh
	}
}

// WithStore makes the limiter keep its state in s instead of a memory store
// of its own, for example a redisstore.Store shared by a fleet of servers.
// The caller owns s: Limiter.Close does not close it.
func WithStore(s Store) Option {
	return limiterOption("WithStore", func(c *config) {
		if s == nil {
			c.fail("WithStore: nil store")
		}
		c.store = s
	})
}

// WithAlgorithm selects the algorithm of the policy New's limit and window
// make (default SlidingLog). Policies given with WithPolicies and WithPlans
// name their own in Policy.Algorithm.
func WithAlgorithm(a Algorithm) Option {
	return limiterOption("WithAlgorithm", func(c *config) { c.algorithm = a })
}

// WithMaxKeys bounds how many keys the memory store tracks (default: no
// bound beyond idle keys being swept), a key counting once per policy set
// it is limited under (per plan, say). When a new key arrives at a full
// store an idle key is dropped if there is one; otherwise whenFull decides.
// The bound is kept per shard, so the store may refuse or evict a little
// before n keys in all, never after.
func WithMaxKeys(n int, whenFull Overflow) Option {
	return memOption("WithMaxKeys", func(c *config) {
		if n < 1 {
			c.fail("WithMaxKeys: %d, want >= 1", n)
		}
		c.mem.maxKeys, c.mem.overflow = n, whenFull
	})
}

// WithClock makes the memory store read time from now instead of
// time.Now, for simulations that replay traffic. A reading earlier than
// the store's latest is taken as that latest one, so time never steps
// back.
func WithClock(now func() time.Time) Option {
	return memOption("WithClock", func(c *config) {
		if now == nil {
			c.fail("WithClock: nil clock")
		}
		c.mem.clock = now
	})
}

// WithPolicies adds policies that every request must also fit, besides the
// one New's limit and window make (named DefaultPolicyName): for example 10
// per second and 1000 per hour. A request is counted in all of them or, if
// any refuses it, in none.
func WithPolicies(ps ...Policy) Option {
	return limiterOption("WithPolicies", func(c *config) { c.policies = append(c.policies, ps...) })
}

// WithPlans gives different requests different policies: choose names a
// plan for each request (from its key, its route, a tier the auth
// middleware put in its context, ...), and plans maps names to policies. A
// request whose plan name is not in plans, the empty name included, gets
// the default policies. Each plan's keys are counted apart from the
// others', so a client that changes plan starts that plan afresh.
func WithPlans(choose func(r *http.Request, key string) string, plans map[string][]Policy) Option {
	return limiterOption("WithPlans", func(c *config) {
		if choose == nil {
			c.fail("WithPlans: nil choose function")
		}
		for name := range plans {
			if name == "" {
				c.fail("WithPlans: empty plan name")
			}
		}
		c.choose, c.plans = choose, plans
	})
}

// WithCost makes the middleware count a request as cost(r) requests, for
// endpoints that do more work per call. A cost that cannot be counted is
// refused by the key error handler, whatever the failure mode (WithFailOpen
// included) and without touching the client's count: below 1 with 400 Bad
// Request (ErrInvalidCost), above a policy's limit, which no wait could
// fit, with 413 Content Too Large (ErrCostExceedsLimit).
func WithCost(cost func(r *http.Request) int) Option {
	return limiterOption("WithCost", func(c *config) {
		if cost == nil {
			c.fail("WithCost: nil cost function")
		}
		c.cost = cost
	})
}

// WithSkip exempts the requests for which skip returns true (health checks,
// internal callers): they pass straight to the next handler, without a key,
// a decision or headers.
func WithSkip(skip func(r *http.Request) bool) Option {
	return limiterOption("WithSkip", func(c *config) {
		if skip == nil {
			c.fail("WithSkip: nil function")
		}
		c.skip = skip
	})
}

// WithCountIf keeps an allowed request counted only if keep, called with
// the request and the status its handler answered with once the handler
// has returned, reports true; otherwise the store takes the request back
// (a Refunder, which New requires). The decision is still made before the
// handler runs, so that no more than the limit ever run within a window.
// For a login endpoint, count only failures:
//
//	ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
//		return status == http.StatusUnauthorized || status == http.StatusForbidden
//	})
//
// and a user who logs in is never locked out by a guesser's attempts nor
// by their own successes; or keep 5xx answers from counting against the
// client with status < 500. A response that writes no status is a 200; a
// hijacked connection stays counted. The rate-limit headers, sent before
// the handler runs, describe the standing when the decision was made,
// counting this request. Without the option the middleware adds nothing.
func WithCountIf(keep func(r *http.Request, status int) bool) Option {
	return limiterOption("WithCountIf", func(c *config) {
		if keep == nil {
			c.fail("WithCountIf: nil function")
		}
		c.countIf = keep
	})
}

// WithDryRun decides and reports every request as usual (headers, hooks,
// FromContext under WithResultInContext) but never rejects one: how to roll out a new limit and
// watch, through OnLimit, whom it would have limited.
func WithDryRun() Option {
	return limiterOption("WithDryRun", func(c *config) { c.dryRun = true })
}

// WithResultInContext puts each decision in the request's context, where
// the wrapped handler reads it with FromContext (to show callers their
// standing, say). It costs a copy of the request per request
// (Request.WithContext), a large share of the middleware's own time (see
// the README), so it is off by default: headers, hooks and the denied
// handler receive the decision without it.
func WithResultInContext() Option {
	return limiterOption("WithResultInContext", func(c *config) { c.inContext = true })
}

// WithHeaders selects which rate-limit headers responses carry (default
// HeadersBoth). Retry-After is sent on every 429 whatever the choice.
func WithHeaders(set HeaderSet) Option {
	return limiterOption("WithHeaders", func(c *config) {
		if set < HeadersNone || set > HeadersBoth {
			c.fail("WithHeaders: unknown header set %d", int(set))
		}
		c.headers = set
	})
}

// WithResetFormat selects what X-RateLimit-Reset carries (default
// ResetSeconds).
func WithResetFormat(f ResetFormat) Option {
	return limiterOption("WithResetFormat", func(c *config) {
		if f != ResetSeconds && f != ResetUnix {
			c.fail("WithResetFormat: unknown format %d", int(f))
		}
		c.resetFmt = f
	})
}

// WithDeniedHandler replaces the response to a rejected request. The
// rate-limit headers and Retry-After are already set when h runs; h writes
// the status (429 unless it has reason to differ) and body. If unset, the
// middleware answers 429 with a short plain-text body, or, to a client
// whose Accept header names application/problem+json, with RFC 9457
// problem details of the draft's quota-exceeded type, naming the violated policy in
// "violated-policies".
func WithDeniedHandler(h func(w http.ResponseWriter, r *http.Request, res Result)) Option {
	return limiterOption("WithDeniedHandler", func(c *config) {
		if h == nil {
			c.fail("WithDeniedHandler: nil handler")
		}
		c.denied = h
	})
}

// WithKeyErrorHandler replaces the response to a request that cannot be
// counted as sent: its key cannot be extracted, or its cost (WithCost) is
// invalid. If unset, a *KeyError is answered with its Status (and
// WWW-Authenticate challenge, if any) and any other error with 400; the
// body never repeats what the client sent.
func WithKeyErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return limiterOption("WithKeyErrorHandler", func(c *config) {
		if h == nil {
			c.fail("WithKeyErrorHandler: nil handler")
		}
		c.keyErr = h
	})
}

// WithErrorHandler replaces the response to a request the store could not
// decide (it failed, or is full). If unset, the
// middleware answers 503 Service Unavailable with Retry-After: 1, without
// the error's text.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return limiterOption("WithErrorHandler", func(c *config) {
		if h == nil {
			c.fail("WithErrorHandler: nil handler")
		}
		c.storeErr = h
	})
}

// WithFailOpen lets a request through, without rate-limit headers, when the
// store cannot decide it, instead of answering with the error handler. The
// OnError hook still sees every failure. Failing open trades protection for
// availability: choose it knowingly. It never serves a request whose key
// or cost is invalid: those are the request's faults, not the store's.
func WithFailOpen() Option {
	return limiterOption("WithFailOpen", func(c *config) { c.failOpen = true })
}

// WithPartitionKey adds a partition key (pk) to the RateLimit header, so a
// client can tell which quota a response counted against. The pk is a keyed
// hash of the request's key under a secret drawn when New runs: stable for
// the limiter's life, never the key itself, and not guessable back from it.
// Servers of a fleet each draw their own secret, so their pks differ.
func WithPartitionKey() Option {
	return limiterOption("WithPartitionKey", func(c *config) { c.partitionKey = true })
}

// Hooks are called on the request path after each decision, to log or
// count. Nil hooks cost nothing. Hooks must be fast and safe for
// simultaneous use; they must not write the response.
type Hooks struct {
	// OnAllow is called for each allowed request.
	OnAllow func(r *http.Request, res Result)
	// OnLimit is called for each rejected request (in dry-run mode, each
	// request that would have been rejected).
	OnLimit func(r *http.Request, res Result)
	// OnError is called when a key cannot be extracted, a cost is
	// invalid, or the store fails.
	OnError func(r *http.Request, err error)
}

// WithHooks installs h.
func WithHooks(h Hooks) Option {
	return limiterOption("WithHooks", func(c *config) { c.hooks = h })
}
