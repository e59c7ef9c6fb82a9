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
	t.Run("RealTime", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, _ *storetest.Clock) ratelimit.Store {
			st, _ := newStore(t, c)
			return st
		}, storetest.Resolution(time.Microsecond), storetest.RealTime())
	})
}
