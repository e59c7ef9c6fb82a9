package ratelimit

import "time"

// WithLookupTimeout bounds a call of WithLimits' function by d instead of
// lookupTimeout. Tests whose lookups answer at once give them a minute, so
// that a goroutine a busy machine keeps waiting past 100 ms does not turn
// an answer into a failure; those of the deadline itself keep 100 ms.
func WithLookupTimeout(d time.Duration) Option {
	return func(c *config) { c.lookupWithin = d }
}

// MaxLookups is how many calls of WithLimits' function may be under way
// at once.
const MaxLookups = maxLookups
