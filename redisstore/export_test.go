package redisstore

import (
	"time"

	"github.com/slidelog/ratelimit"
)

// WithScriptClock makes the store's scripts read now instead of the
// server's TIME, and keep every key an hour longer than it matters, since
// Redis expires keys by its own clock.
func WithScriptClock(now func() time.Time) Option {
	return func(c *config) { c.clock = now }
}

// WithLocalClock makes the refusal cache read now instead of time.Now.
func WithLocalClock(now func() time.Time) Option {
	return func(c *config) { c.local = now }
}

// StepTolerance is stepTolerance.
const StepTolerance = stepTolerance

// Library is the function library the store loads.
var Library = library

// SameLeaseSlot reports whether the leases of keys a and b under set take
// one slot of s's table of leases.
func SameLeaseSlot(s *Store, a, b string, set ratelimit.PolicySet) bool {
	return s.leases.slot(a, set.ID()) == s.leases.slot(b, set.ID())
}

// FnTake, FnPeek and FnRefund are the names of the library's take, peek
// and refund functions.
var FnTake, FnPeek, FnRefund = fnTake, fnPeek, fnRefund

// PeriodBounds is periodBounds: a calendar policy's bounds as the
// functions take them, from a caller's clock at now.
func PeriodBounds(p ratelimit.Policy, now time.Time) string { return periodBounds(p, now) }

// SweepCalls is sweepCalls: the lease returns a sweep sends at once.
const SweepCalls = sweepCalls
