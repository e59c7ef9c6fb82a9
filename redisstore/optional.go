package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/slidelog/ratelimit"
)

// Peek implements ratelimit.Store's Peek with one read-only function call
// (FCALL_RO, so that the server itself refuses any write): it evicts
// nothing, records nothing and moves no expiry, and a key it has never
// seen stays absent. A failure of Redis is counted and returned, wrapping
// ErrUnavailable, whatever the FailurePolicy: a peek decides nothing that
// a fallback could stand in for.
func (s *Store) Peek(ctx context.Context, key string, set ratelimit.PolicySet) (ratelimit.Result, error) {
	if err := set.CheckCost(1); err != nil {
		return ratelimit.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	r, err := s.fcall(ctx, fnPeek, true, keys(s.prefix, key, set, false), s.args(set, 1, 0))
	if err == nil {
		if len(r) == 6 && r[2] >= 1 && r[2] <= int64(set.Len()) {
			return result(set.At(int(r[2])-1), r[0], r[1] == 1, r[3], r[4], r[5]), nil
		}
		err = fmt.Errorf("ratelimit: redisstore: unexpected reply %v", r)
	}
	return ratelimit.Result{}, s.failed(ctx, err)
}

// Reset implements ratelimit.Store's Reset with one function call: it
// unlinks the set's keys of the client and notes the instant in a marker
// key, so that a refund or a lease's return of a request counted before
// never reaches what is counted after; and it forgets the refusal and the
// lease this process holds for them. Other processes keep answering the
// refusals they remember, and admitting from their leases, until these
// end: at most a second (see the package documentation). A failure of
// Redis is counted and returned, wrapping ErrUnavailable.
func (s *Store) Reset(ctx context.Context, key string, set ratelimit.PolicySet) error {
	if err := set.CheckCost(1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	caller := ctx
	if s.leases != nil {
		// One timeout for the call and the returns of the key's lease
		// around it (see release).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	s.dropLease(ctx, key, set, false)
	_, err := s.fcall(ctx, fnReset, false, keys(s.prefix, key, set, true), s.args(set, 1, 0))
	s.dropLease(ctx, key, set, true)
	s.invalidate(key, set)
	if s.fallback != nil {
		// What the fallback counted in an outage goes too, so that
		// the next request it decides starts a full quota.
		lkey, share := s.localKey(key, set)
		if ferr := s.fallback.Reset(context.WithoutCancel(ctx), lkey, share); ferr != nil && err == nil {
			return ferr
		}
	}
	if err != nil {
		return s.failed(caller, err)
	}
	return nil
}

// dropLease ends this process's lease of key under set for a Reset,
// before its call (the lease's slots go with the state) and after it. An
// ask out then, or a grant it brought meanwhile, may have reached Redis
// before the Reset, whose state it counted in: the ask's grant is not
// admitted from, and both are given back, which Redis ignores for a grant
// that came before the Reset (see lease.done).
func (s *Store) dropLease(ctx context.Context, key string, set ratelimit.PolicySet, after bool) {
	if s.leases == nil {
		return
	}
	l, stale := s.leases.of(key, set, s.mono())
	var give *grant
	if l != nil {
		if after {
			give = l.expire()
		} else {
			l.left = 0 // its slots went with the state, whatever its limits
		}
		l.reset = l.asking
		l.mu.Unlock()
	}
	s.release(ctx, stale, give)
}

// Refund implements ratelimit.Store's Refund with one function call: each
// policy whose window still holds the instant at takes back cost requests
// counted then, as ratelimit.Store describes, unless the client was Reset
// since; and the refusal this process remembers for key and set is
// forgotten. Requests FailOpen admitted, which Redis never counted, are
// taken back from nowhere, and those the fallback of FailLocal admitted
// from the fallback. A failure of Redis is counted and returned, wrapping
// ErrUnavailable: the requests then stay counted.
func (s *Store) Refund(ctx context.Context, key string, set ratelimit.PolicySet, cost int, at time.Time) error {
	if err := set.CheckCost(cost); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.locals != nil && s.locals.take(key, set, at) {
		// Redis never counted it: FailOpen counted it nowhere, or the
		// fallback of FailLocal did.
		if s.policy == FailOpen {
			return nil
		}
		lkey, share := s.localKey(key, set)
		return s.fallback.Refund(ctx, lkey, share, cost, at)
	}
	_, err := s.fcall(ctx, fnRefund, false, keys(s.prefix, key, set, true), s.args(set, cost, at.UnixMicro()))
	s.invalidate(key, set)
	if err != nil {
		return s.failed(ctx, err)
	}
	return nil
}

// invalidate forgets the refusal remembered for key and set, after a
// Refund or Reset has reached Redis (or failed to), and keeps refusals
// decided before it from being remembered.
func (s *Store) invalidate(key string, set ratelimit.PolicySet) {
	if s.refusals != nil {
		s.refusals.invalidate(key, set)
	}
}

// failed returns the error of a call other than Take that Redis failed,
// counting the failure, or ctx's error if ctx ended first.
func (s *Store) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.fail(err)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
