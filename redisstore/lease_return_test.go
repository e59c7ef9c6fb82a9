package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// While a lease's unused slots are on their way back, Redis counts them:
// the key's requests that the lease cannot admit wait for their return
// rather than be refused for want of them (within their deadline: here a
// request's own, which the held return outlasts). They were decided by
// Redis then, and refused, a process's own slots stranded until the
// return landed.
func TestRequestsWaitForTheirKeysLeaseReturn(t *testing.T) {
	c := sharedClient(t)
	held := &heldReturns{gate: make(chan struct{}), reached: make(chan struct{}, 8)}
	c.AddHook(held)
	clk := &storetest.Clock{}
	clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, p := clockedStore(t, c, clk, redisstore.WithLeases(true), redisstore.WithRefusalCache(0))
	t.Cleanup(held.open)
	other, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	set := policySet(t, ratelimit.Policy{Name: "default", Limit: 100, Window: time.Hour, Algorithm: ratelimit.GCRA})

	takeOK(t, st, "k", set, 1)
	takeOK(t, st, "k", set, 1)             // busy: it asks for a lease
	for taken := 0; taken < 100; taken++ { // Redis's room, the lease's slots aside
		if r := takeOK(t, other, "k", set, 1); !r.Allowed {
			break
		}
	}
	clk.Advance(time.Second) // the lease ends: the janitor returns its slots
	returns(t, "the janitor's return", func() { <-held.reached })

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var res ratelimit.Result
	returns(t, "a Take while the return is held", func() { res, err = st.Take(ctx, "k", set, 1) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Take while the key's lease slots are on their way back: %+v, %v; want it to wait for them, to its deadline", res, err)
	}
	held.open()
	returns(t, "a Take once the return is let through", func() { res, err = st.Take(context.Background(), "k", set, 1) })
	if err != nil || !res.Allowed {
		t.Fatalf("a Take once the lease's slots are back: %+v, %v; want allowed", res, err)
	}
}
