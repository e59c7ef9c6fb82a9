package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// heldReturns holds every call of the release function (the return of a
// lease's unused slots) until open is called.
type heldReturns struct {
	gate    chan struct{}
	once    sync.Once
	reached chan struct{} // if not nil, a value for each call held
}

func (h *heldReturns) open() { h.once.Do(func() { close(h.gate) }) }

func (h *heldReturns) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *heldReturns) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "fcall" && strings.HasPrefix(cmd.Args()[1].(string), "ratelimit_release_") {
			if h.reached != nil {
				select {
				case h.reached <- struct{}{}:
				default:
				}
			}
			select {
			case <-h.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *heldReturns) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// leasedWithHeldReturns returns a store with leases, a timeout of an hour
// and a clock that stands still (no lease ends but by a change of limits),
// whose returns of lease slots wait until the test ends; and the set of a
// quota it holds a lease of for key, and the same quota with its limit
// raised: a Take or Reset under that one ends the lease, whose slots go
// back.
func leasedWithHeldReturns(t *testing.T, key string) (st *redisstore.Store, raised ratelimit.PolicySet) {
	c := sharedClient(t)
	held := &heldReturns{gate: make(chan struct{})}
	c.AddHook(held)
	at := time.Now()
	st, _ = newStore(t, c, redisstore.WithLeases(true), redisstore.WithTimeout(time.Hour),
		redisstore.WithLocalClock(func() time.Time { return at }))
	t.Cleanup(held.open) // before Close, which gives back what is left
	p := ratelimit.Policy{Name: "default", Limit: 1000, Window: time.Hour}
	set := policySet(t, p)
	takeOK(t, st, key, set, 1)
	takeOK(t, st, key, set, 1) // busy: it asks for a lease
	p.Limit = 2000
	return st, policySet(t, p)
}

// A Take that ends a lease gives its unused slots back within its own
// deadline: here its caller's, a second. It gave them back with a timeout
// of their own, the store's (an hour here), after its caller had gone.
func TestTakeGivesLeaseSlotsBackWithinItsDeadline(t *testing.T) {
	st, raised := leasedWithHeldReturns(t, "k")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var err error
	returns(t, "Take ending a lease whose return hangs", func() { _, err = st.Take(ctx, "k", raised, 1) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take: %v, want the caller's deadline", err)
	}
}

// So does a Reset, which ends the key's lease before its call.
func TestResetGivesLeaseSlotsBackWithinItsDeadline(t *testing.T) {
	st, raised := leasedWithHeldReturns(t, "k")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var err error
	returns(t, "Reset ending a lease whose return hangs", func() { err = st.Reset(ctx, "k", raised) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reset: %v, want the caller's deadline", err)
	}
}
