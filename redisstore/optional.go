package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/slidelog/ratelimit"
)

// Peek implements ratelimit.Peeker with one read-only script (EVALSHA_RO
// on Redis 7.0 and later, so that the server refuses any write): it
// evicts nothing, records nothing and moves no expiry, and a key it has
// never seen stays absent. A failure of Redis is counted and returned,
// wrapping ErrUnavailable, whatever the FailurePolicy: a peek decides
// nothing that a fallback could stand in for.
func (s *Store) Peek(ctx context.Context, key string, set ratelimit.PolicySet) (ratelimit.Result, error) {
	if set.Len() == 0 {
		return ratelimit.Result{}, ratelimit.ErrEmptyPolicySet
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	reply, err := s.run(ctx, peekScript, true, keys(s.prefix, key, set), s.args(set, 1, 0))
	if err == nil {
		var buf [4]ratelimit.Result
		if res, _, ok := decode(set, reply, 1, buf[:0]); ok {
			return res, nil
		}
		err = fmt.Errorf("ratelimit: redisstore: unexpected script reply %v", reply)
	}
	return ratelimit.Result{}, s.failed(ctx, err)
}

// Reset implements ratelimit.Resetter: one UNLINK of the set's keys of
// the client, atomic as a script would be and with nothing to decide,
// and it forgets the refusal this process remembers for them. Other
// processes keep answering the refusals they remember until these expire
// (see the package documentation). A failure of Redis is counted and
// returned, wrapping ErrUnavailable.
func (s *Store) Reset(ctx context.Context, key string, set ratelimit.PolicySet) error {
	if set.Len() == 0 {
		return ratelimit.ErrEmptyPolicySet
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.client.Unlink(tctx, keys(s.prefix, key, set)...).Err()
	s.invalidate(key, set)
	if err != nil {
		return s.failed(ctx, err)
	}
	return nil
}

// Refund implements ratelimit.Refunder with one script: each policy whose
// window still holds the instant at takes back cost requests counted
// then, as ratelimit.Refunder describes, and the refusal this process
// remembers for key and set is forgotten. A failure of Redis is counted
// and returned, wrapping ErrUnavailable: the requests then stay counted.
func (s *Store) Refund(ctx context.Context, key string, set ratelimit.PolicySet, cost int, at time.Time) error {
	if err := set.CheckCost(cost); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.run(ctx, refundScript, false, keys(s.prefix, key, set), s.args(set, cost, at.UnixMicro()))
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
