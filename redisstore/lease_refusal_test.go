package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// A refusal remembered while a lease's unused slots were on their way
// back is stale once they are back, as one remembered before a Refund:
// the next request that fits is admitted, not answered from the refusal
// cache for up to a second.
func TestALeaseReturnForgetsTheRefusalsBeforeIt(t *testing.T) {
	c := sharedClient(t)
	held := &heldReturns{gate: make(chan struct{}), reached: make(chan struct{}, 8)}
	c.AddHook(held)
	clk := &storetest.Clock{}
	clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, p := clockedStore(t, c, clk, redisstore.WithLeases(true))
	t.Cleanup(held.open)
	other, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	set := policySet(t, ratelimit.Policy{Name: "default", Limit: 100, Window: time.Hour, Algorithm: ratelimit.SlidingWindowCounter})

	takeOK(t, st, "k", set, 1)
	takeOK(t, st, "k", set, 1) // busy: it asks for a lease
	taken := 0
	for ; taken < 100; taken++ { // Redis's room, the lease's slots aside
		if r := takeOK(t, other, "k", set, 1); !r.Allowed {
			break
		}
	}
	lease := 100 - 2 - taken
	if lease < 1 {
		t.Fatalf("no lease: %d slots", lease)
	}

	clk.Advance(time.Second) // the lease ends: the janitor returns its slots
	returns(t, "the janitor's return", func() { <-held.reached })
	if r := takeOK(t, st, "k", set, 1); r.Allowed {
		t.Fatalf("a request while the lease's slots are on their way back: allowed")
	}
	// Once the janitor has the reply, the refusal is forgotten: until
	// then the cache answers, and the clock, which stands still, never
	// ends the refusal it remembers.
	held.open()
	waitFor(t, hangLimit, "a request admitted after the lease's slots came back", func() bool {
		return takeOK(t, st, "k", set, 1).Allowed
	})
	r, err := other.Peek(context.Background(), "k", set)
	if err != nil || r.Remaining != lease-1 {
		t.Fatalf("Peek after one of the %d returned slots was taken: %+v, %v; want %d remaining", lease, r, err, lease-1)
	}
}
