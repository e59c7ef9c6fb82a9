package redisstore_test

import (
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// TestConformance runs the Store contract twice: with the clock storetest
// moves injected as the scripts' time and the refusal cache's clock, so
// that every case runs, and with the server's own TIME and the real
// clock, as in production, where the cases that move time are skipped.
func TestConformance(t *testing.T) {
	c := sharedClient(t)
	t.Run("InjectedClock", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
			st, _ := newStore(t, c, redisstore.WithScriptClock(clock.Now), redisstore.WithLocalClock(clock.Now))
			return st
		}, storetest.Resolution(time.Microsecond))
	})
	// Leases keep the whole contract for GCRA, the counter and the
	// calendar periods. The sliding
	// log keeps all of it but one rule: a request admitted from a lease
	// is logged at the lease's end, later than its Result.At, so a Refund
	// does not find it and it stays counted (never freeing a slot too
	// soon); TestLeases checks the log with leases.
	t.Run("Leases", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
			st, _ := newStore(t, c, redisstore.WithScriptClock(clock.Now), redisstore.WithLocalClock(clock.Now), redisstore.WithLeases(true))
			return st
		}, storetest.Resolution(time.Microsecond), storetest.Algorithms(ratelimit.GCRA, ratelimit.SlidingWindowCounter, ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly))
	})
	t.Run("RealTime", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, _ *storetest.Clock) ratelimit.Store {
			st, _ := newStore(t, c)
			return st
		}, storetest.Resolution(time.Microsecond), storetest.RealTime())
	})
}
