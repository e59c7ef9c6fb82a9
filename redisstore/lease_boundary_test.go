package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// TestLeaseAfterAWindowsEnd: a window counter refuses a lease too near
// the end of its fixed window, where the lease would end; its busy key
// then asks again once the window has ended, not a whole lease period
// later, in which every request would be a round trip: a hot key crossing
// a window's end cost twice the script calls it does elsewhere.
func TestLeaseAfterAWindowsEnd(t *testing.T) {
	c := sharedClient(t)
	const window = 10 * time.Second
	counted := ratelimit.Policy{Name: "ten", Limit: 10_000, Window: window, Algorithm: counter}
	for _, tt := range []struct {
		name string
		set  []ratelimit.Policy
	}{
		{"counter", []ratelimit.Policy{counted}},
		// A set with a log takes only a lease of a whole lease period.
		{"log and counter", []ratelimit.Policy{counted, {Name: "second", Limit: 5_000, Window: time.Second}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// 10 ms before a window's end, on the script's clock and the
			// local one alike.
			end := time.Unix(1_700_000_000, 0).Truncate(window).Add(window)
			clock := new(storetest.Clock)
			clock.Set(end.Add(-10 * time.Millisecond))
			leased, p := newStore(t, c, redisstore.WithLeases(true), redisstore.WithScriptClock(clock.Now), redisstore.WithLocalClock(clock.Now))
			plain, err := redisstore.New(c, redisstore.WithPrefix(p), redisstore.WithRefusalCache(0), redisstore.WithScriptClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { plain.Close() })
			pol := policySet(t, tt.set...)
			takeOK(t, leased, "k", pol, 1)
			takeOK(t, leased, "k", pol, 1) // busy: asks, and is refused a lease ending 10 ms on
			clock.Advance(11 * time.Millisecond)
			takeOK(t, leased, "k", pol, 1) // a new window: asks again
			res, err := plain.Peek(context.Background(), "k", pol)
			if err != nil {
				t.Fatal(err)
			}
			// Three requests at most, and a lease's slots if the third
			// asked for one.
			if res.Remaining >= res.Limit-3 {
				t.Errorf("after a window's end: %s Remaining %d of %d, want under %d (a lease's slots counted): no lease was asked for", res.Policy, res.Remaining, res.Limit, res.Limit-3)
			}
		})
	}
}
