package ratelimit

import (
	"context"
	"errors"
	"math"
	"net/http"
)

// Outcome says how a request is to be answered.
type Outcome int

const (
	// Serve passes the request on. It was allowed and counted, or exempted
	// by WithSkip, or let through by WithDryRun though over the limit, or
	// by WithFailOpen though the store failed.
	Serve Outcome = iota
	// Refuse answers that the request is over the limit: 429 Too Many
	// Requests over HTTP, with Result.RetryAfter rounded up as Retry-After.
	Refuse
	// Reject answers that the request cannot be counted as sent: it carries
	// no usable key, or its cost is below 1 or above a policy's limit.
	// Decision.Err is a *KeyError (errors.As) with the status.
	Reject
	// Fail answers that the store could not decide: it failed, or is full.
	// Decision.Err says why; 503 Service Unavailable by default.
	Fail
)

// A Decision is what the limiter decided for one request, before anything
// is written: how to answer it and, when the store decided it, the
// store's Result.
type Decision struct {
	Outcome Outcome
	// Result is the store's decision; zero when the store did not decide
	// (a request exempted, rejected, or whose store failed).
	Result Result
	// Err is, for Reject, the key or cost error; for Fail, and for a
	// request WithFailOpen served, the store's error; for a request
	// WithDryRun served though its cost is above the limit, the cost
	// error; otherwise nil.
	Err error

	decided bool // the store decided: Result and the headers are valid
	plan    *plan
	key     string // the store's key
	cost    int
}

// Decide decides r as Handler does, without answering it: it skips r if
// WithSkip says so, extracts the key, weighs the cost, and decides. A
// server speaking another protocol (package grpclimit) describes its call
// as a request (its peer as RemoteAddr, its metadata as headers, its
// context) and answers the Decision its own way, with SetHeaders for the
// rate-limit headers, so that one limiter's Keyer, plans, costs, hooks,
// dry run and failure mode apply to every protocol alike.
func (l *Limiter) Decide(r *http.Request) Decision {
	if l.skip != nil && l.skip(r) {
		return Decision{}
	}
	key, err := l.key.Key(r)
	if err != nil {
		var ke *KeyError
		switch {
		case !errors.As(err, &ke):
			err = withCause(errNoUsableKey, err) // a Keyer of the application's own
		case ke == nil, ke.Status < 400 || ke.Status > 599:
			err = withCause(errMisconfigured, err) // no status to answer with
		case ke.Status == http.StatusTooManyRequests:
			// A 429 says when to come back, and a Keyer has no wait to say:
			// only a refusal is one.
			err = withCause(errMisconfigured, err)
		}
		l.reportError(r, err)
		return Decision{Outcome: Reject, Err: err}
	}
	cost := 1
	if l.cost != nil {
		cost = l.cost(r)
	}
	return l.decide(r.Context(), r, key, cost)
}

// Allow decides a request that costs cost for the client key, without
// HTTP: for queues, jobs or any other caller, who acts on the Outcome.
// It is Decide without a request: the client's plan, the hooks (with a nil
// request), dry run and the failure mode apply as to every request, and a
// cost below 1 or above a policy's limit is a Reject. key is what the
// limiter's Keyer would return for the client's requests, kind prefix
// included, so that both count against one quota.
func (l *Limiter) Allow(ctx context.Context, key string, cost int) Decision {
	return l.decide(ctx, nil, key, cost)
}

// decide is every way into the limiter once the client's key and the
// request's cost are known: it finds the client's policies, refuses a
// cost no wait could fit, asks the store, applies the failure mode and dry
// run, and calls the hooks. r is nil for Allow.
func (l *Limiter) decide(ctx context.Context, r *http.Request, key string, cost int) Decision {
	if cost < 1 || cost > math.MaxInt32 { // above every policy's limit
		return l.rejectCost(r, cost)
	}
	p, err := l.planOf(ctx, r, key)
	if err != nil {
		return l.failed(err)
	}
	if p.set.CheckCost(cost) != nil {
		return l.rejectCost(r, cost)
	}
	res, err := l.store.Take(ctx, key, p.set, cost)
	if err != nil {
		err = notAtFault(err)
		l.reportError(r, err)
		return l.failed(err)
	}
	d := Decision{Result: res, decided: true, plan: p, key: key, cost: cost}
	switch {
	case res.Allowed:
		if l.hooks.OnAllow != nil {
			l.hooks.OnAllow(r, res)
		}
	default:
		if l.hooks.OnLimit != nil {
			l.hooks.OnLimit(r, res)
		}
		if !l.dryRun {
			d.Outcome = Refuse
		}
	}
	return d
}

// rejectCost is the Decision of a request whose cost its plan, or every
// plan, cannot count, whatever the failure mode: the cost is the
// request's, not the store's or the lookup's, and serving it uncounted
// would be a bypass. Under WithDryRun a cost above the limit, however
// far, is served, uncounted: the limit is on trial.
func (l *Limiter) rejectCost(r *http.Request, cost int) Decision {
	err := costError(cost)
	l.reportError(r, err)
	if l.dryRun && cost > 0 { // above the limit on trial: watched, not enforced
		return Decision{Outcome: Serve, Err: err}
	}
	return Decision{Outcome: Reject, Err: err}
}

// failed is the Decision of a request the limiter could not decide, as
// the failure mode says.
func (l *Limiter) failed(err error) Decision {
	if l.failOpen {
		return Decision{Outcome: Serve, Err: err}
	}
	return Decision{Outcome: Fail, Err: err}
}

// planOf returns the plan l counts the client key under: its own, from
// WithLimits, or the default one. An error of WithLimits' lookup goes to
// the OnError hook, with r, when it happens, not each time it is
// answered.
func (l *Limiter) planOf(ctx context.Context, r *http.Request, key string) (*plan, error) {
	if l.cache == nil {
		return l.def, nil
	}
	p, err := l.cache.planOf(ctx, key, func(err error) { l.reportError(r, err) })
	if p == nil && err == nil {
		p = l.def
	}
	return p, err
}

func (l *Limiter) reportError(r *http.Request, err error) {
	if l.hooks.OnError != nil {
		l.hooks.OnError(r, err)
	}
}

// Answers to a request the limiter cannot count, which the middleware
// gives through the error handler: a key a Keyer of the application's own
// refused with an error of its own, and a cost no Take can count.
var (
	errNoUsableKey = &KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: the request carries no rate-limit key"}
	errCostTooLow  = withCause(&KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: invalid request cost"}, ErrInvalidCost)
	errCostTooHigh = withCause(&KeyError{Status: http.StatusRequestEntityTooLarge, Message: "413 Content Too Large: the request costs more than the rate limit allows in a window"}, ErrInvalidCost)
)

// notAtFault returns err, a store's or a WithLimits lookup's failure, as
// an error in which errors.As finds no *KeyError: a *KeyError says that
// the request is at fault, and the error handler would answer a failure
// with its status rather than 503. errors.Is still finds all err wraps.
func notAtFault(err error) error {
	var ke *KeyError
	if errors.As(err, &ke) {
		return failure{err}
	}
	return err
}

// failure is an error that wraps a *KeyError, hidden from errors.As.
type failure struct{ err error }

func (f failure) Error() string        { return f.err.Error() }
func (f failure) Is(target error) bool { return errors.Is(f.err, target) }

func (f failure) As(target any) bool {
	if _, ok := target.(**KeyError); ok {
		return false
	}
	return errors.As(f.err, target)
}

// costError returns the answer to cost, which CheckCost refused.
func costError(cost int) error {
	if cost < 1 {
		return errCostTooLow
	}
	return errCostTooHigh
}
