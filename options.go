package ratelimit

import (
	"context"
	"net/http"
	"reflect"
	"time"
)

// An Option configures a Limiter in New. Options write into a private
// configuration: defaults are laid first, options applied in order, and
// the result validated once, so that a bad option is an error from New.
// An option given twice replaces what the first gave, but WithPolicies,
// which adds policies.
// A nil Option is a configuration error, as is a nil function or Store
// given to any option: nil, or an interface holding a nil pointer, map,
// slice, channel or function (a Store of a nil *T), which is not == nil
// but would panic at the first request.
type Option func(*config)

type config struct {
	store        Store
	clock        func() time.Time
	name         string
	algorithm    Algorithm
	policies     []Policy
	limits       func(ctx context.Context, key string) ([]Policy, error)
	ttl          time.Duration
	lookupWithin time.Duration // how long a call of limits may take
	cost         func(r *http.Request) int
	skip         func(r *http.Request) bool
	countIf      func(r *http.Request, status int) bool
	headers      HeaderSet
	denied       func(w http.ResponseWriter, r *http.Request, res Result)
	onError      func(w http.ResponseWriter, r *http.Request, err error)
	failOpen     bool
	dryRun       bool
	partitionKey bool
	inContext    bool
	hooks        Hooks
	errs         []error
}

func defaultConfig() config {
	return config{
		name:         "default",
		lookupWithin: lookupTimeout,
		headers:      HeadersLegacy | HeadersIETF,
		denied:       defaultDenied,
		onError:      defaultError,
	}
}

// need sets *f to v, the value given to option, or records a
// configuration error if v is nil (see isNilValue); what names v in the
// error. Every option taking a function or an interface goes through it,
// so that nil means one thing to all of them.
func need[F any](c *config, option, what string, f *F, v F) {
	if isNilValue(v) {
		c.errs = append(c.errs, errorf("%s: nil %s", option, what))
		return
	}
	*f = v
}

// isNilValue reports whether v is nil: a nil interface, or one holding a
// nil pointer, map, slice, channel or function. A Store holding a nil *T
// is not == nil, but its first call, on the request path, would panic.
func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// WithStore makes the limiter keep its counts in s instead of a memory
// store of its own, for example a redisstore.Store shared by a fleet of
// servers, or a memory store shared by several limiters. The caller owns
// s: Limiter.Close does not close it. A nil s, or one holding a nil
// pointer, is a configuration error.
func WithStore(s Store) Option {
	return func(c *config) { need(c, "WithStore", "store", &c.store, s) }
}

// WithClock makes the limiter read time from now instead of time.Now,
// for simulations and tests that move time by hand: the expiries of
// WithLimits' cache, and the memory store New makes (a store given with
// WithStore reads its own: give a memory store of your own its clock with
// MemoryConfig.Clock).
func WithClock(now func() time.Time) Option {
	return func(c *config) { need(c, "WithClock", "function", &c.clock, now) }
}

// WithName names the policy New's limit and window make (default
// "default"), as the RateLimit headers show it: give limiters a request
// passes through distinct names, so that a client can tell their quotas
// apart.
func WithName(name string) Option {
	return func(c *config) { c.name = name }
}

// WithAlgorithm selects the algorithm of the policy New's limit and window
// make (default SlidingLog). Policies given with WithPolicies and
// WithLimits name their own in Policy.Algorithm.
func WithAlgorithm(a Algorithm) Option {
	return func(c *config) { c.algorithm = a }
}

// WithPolicies adds policies that every request must also fit, besides the
// one New's limit and window make: for example 10 per second and 1000 per
// hour. A request is counted in all of them or, if any refuses it, in
// none.
func WithPolicies(ps ...Policy) Option {
	return func(c *config) { c.policies = append(c.policies, ps...) }
}

// WithCost makes the middleware count a request as cost(r) requests, for
// endpoints that do more work per call. A cost that cannot be counted is
// answered by the error handler as a Reject, whatever the failure mode and
// without touching the client's count: below 1 with 400 Bad Request, above
// a policy's limit, which no wait could fit, with 413 Content Too Large
// (both match ErrInvalidCost); but under WithDryRun a cost above the limit
// is served, uncounted, and reported to OnError.
func WithCost(cost func(r *http.Request) int) Option {
	return func(c *config) { need(c, "WithCost", "function", &c.cost, cost) }
}

// WithSkip exempts the requests for which skip returns true (health checks,
// internal callers): they pass straight to the next handler, without a key,
// a decision or headers.
func WithSkip(skip func(r *http.Request) bool) Option {
	return func(c *config) { need(c, "WithSkip", "function", &c.skip, skip) }
}

// WithCountIf keeps an allowed request counted only if keep, called with
// the request and the status its handler answered with once the handler
// has returned, reports true; otherwise the store takes the request back.
// The decision is still made before the handler runs, so that no more
// than the limit ever run within a window. For a login endpoint, count
// only failures:
//
//	ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
//		return status == http.StatusUnauthorized || status == http.StatusForbidden
//	})
//
// and a user's own successes never lock them out, though a guesser's
// failures still do when the limiter is keyed by the account rather than
// by the guesser's address; or keep 5xx answers from counting against
// the client with status < 500. A response that writes no status is a
// 200; a hijacked connection stays counted, and so does the request of a
// handler that panics, keep unasked, whatever it wrote. A request taken
// back after a Reset of its client changes nothing that the Reset made
// new. The rate-limit headers, sent before the handler runs, describe
// the standing when the decision was made, counting this request.
// Without the option the middleware adds nothing.
func WithCountIf(keep func(r *http.Request, status int) bool) Option {
	return func(c *config) { need(c, "WithCountIf", "function", &c.countIf, keep) }
}

// WithDryRun decides and reports every request as usual (headers, hooks,
// the Decision, FromContext under WithResultInContext) but never refuses
// one: how to roll out a new limit and watch, through OnLimit, whom it
// would have limited. A cost above the new limit is served too, uncounted,
// and goes to OnError (ErrInvalidCost); a cost below 1 is still rejected,
// as a request no limit could count.
func WithDryRun() Option {
	return func(c *config) { c.dryRun = true }
}

// WithResultInContext puts each decision in the request's context, where
// the wrapped handler reads it with FromContext (to show callers their
// standing, say). It costs a copy of the request per request
// (Request.WithContext), so it is off by default: headers, hooks and the
// denied handler receive the decision without it. A multipart form the
// handler parses on the copy is handed back to the request the server
// gave, so that the server removes its temporary files.
func WithResultInContext() Option {
	return func(c *config) { c.inContext = true }
}

// WithHeaders selects which rate-limit headers responses carry (default
// HeadersLegacy|HeadersIETF). Retry-After is sent on every 429 whatever the
// choice.
func WithHeaders(set HeaderSet) Option {
	return func(c *config) {
		switch {
		case set&^(HeadersLegacy|HeadersIETF|HeadersUnixReset) != 0:
			c.errs = append(c.errs, errorf("WithHeaders: unknown headers %#x", int(set)))
		case set&HeadersUnixReset != 0 && set&HeadersLegacy == 0:
			c.errs = append(c.errs, errorf("WithHeaders: HeadersUnixReset without HeadersLegacy"))
		}
		c.headers = set
	}
}

// WithDeniedHandler replaces the response to a refused request. The
// rate-limit headers and Retry-After are already set when h runs; h writes
// the status (429 unless it has reason to differ) and body. If unset, the
// middleware answers 429 with a short plain-text body, or, to a client
// whose Accept header names application/problem+json, with RFC 9457
// problem details of the draft's quota-exceeded type, naming the violated
// policy in "violated-policies"; either answer adds Accept to Vary, since
// Accept chose it. The middleware adds no Vary to h's answer.
func WithDeniedHandler(h func(w http.ResponseWriter, r *http.Request, res Result)) Option {
	return func(c *config) { need(c, "WithDeniedHandler", "function", &c.denied, h) }
}

// WithErrorHandler replaces the response to a request the limiter could
// not count. err matches a *KeyError (errors.As) when the request is at
// fault (Reject: it carries no usable key, or its cost is invalid); any
// other err is the store's or the WithLimits lookup's failure (Fail). If
// unset, a *KeyError is answered with its Status (and WWW-Authenticate
// challenge, if any), and a failure with 503 Service Unavailable and
// Retry-After: 1; the body never repeats what the client sent, nor the
// error's text, which may describe internals.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) { need(c, "WithErrorHandler", "function", &c.onError, h) }
}

// WithFailOpen serves a request, without rate-limit headers, when the
// store cannot decide it, instead of answering with the error handler. The
// OnError hook still sees every failure. Failing open trades protection
// for availability: choose it knowingly. It never serves a request whose
// key or cost is invalid: those are the request's faults, not the store's.
func WithFailOpen() Option {
	return func(c *config) { c.failOpen = true }
}

// WithPartitionKey adds a partition key (pk) to the RateLimit header, so a
// client can tell which quota a response counted against. The pk is a
// keyed hash of the request's key under a secret drawn when New runs:
// stable for the limiter's life, never the key itself, and not guessable
// back from it. Servers of a fleet each draw their own secret, so their
// pks differ.
func WithPartitionKey() Option {
	return func(c *config) { c.partitionKey = true }
}

// Hooks are called after each decision, to log or count. Nil hooks cost
// nothing. Hooks must be fast and safe for simultaneous use; they must not
// write the response. r is nil for decisions made by Allow.
type Hooks struct {
	// OnAllow is called for each allowed request.
	OnAllow func(r *http.Request, res Result)
	// OnLimit is called for each refused request (in dry run, each
	// request that would have been refused).
	OnLimit func(r *http.Request, res Result)
	// OnError is called when a key cannot be extracted, a cost is
	// invalid, or the store fails.
	OnError func(r *http.Request, err error)
}

// WithHooks installs h.
func WithHooks(h Hooks) Option {
	return func(c *config) { c.hooks = h }
}
