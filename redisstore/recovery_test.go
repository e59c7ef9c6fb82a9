package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// TestLeaseWaitersBoundedByTimeout: with leases on, the requests of one
// busy key that wait for another's ask while Redis hangs each return
// within the store's timeout, counted from when Take was called, not in
// turn, one timeout after the other.
func TestLeaseWaitersBoundedByTimeout(t *testing.T) {
	sharedClient(t) // skip without Redis
	px := startProxy(t, redisAddr())
	opts := clientOptions(px.addr())
	opts.PoolSize = 64
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	const timeout = 500 * time.Millisecond
	st, _ := newStore(t, c, redisstore.WithLeases(true), redisstore.WithTimeout(timeout),
		redisstore.WithFailurePolicy(redisstore.FailOpen))
	ctx := context.Background()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1_000_000, Window: time.Minute})
	if _, err := st.Peek(ctx, "k", pol); err != nil { // the library is loaded
		t.Fatal(err)
	}
	px.setDelay(time.Hour)
	const g = 16
	took := make([]time.Duration, g)
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			start := time.Now()
			res, err := st.Take(ctx, "k", pol, 1)
			took[i] = time.Since(start)
			if err != nil || !res.Allowed {
				t.Errorf("Take: %+v, %v; want allowed (FailOpen)", res, err)
			}
		})
	}
	returns(t, "hung calls", wg.Wait)
	px.setDelay(0)
	// A generous bound, for a busy machine: the documented one is the
	// timeout itself. In turn, they took up to 16 timeouts.
	late := 0
	for _, d := range took {
		if d > 4*timeout {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d of %g Takes took over 4x the timeout of %v: %v", late, float64(g), timeout, took)
	}
}

// TestLeaseReturnWithinTakeTimeout: a Take that must first give back a
// lease's unused slots (here the set's limits changed) while Redis hangs
// returns within the store's timeout, not one timeout for the return and
// another for its own call.
func TestLeaseReturnWithinTakeTimeout(t *testing.T) {
	sharedClient(t) // skip without Redis
	px := startProxy(t, redisAddr())
	c := redis.NewClient(clientOptions(px.addr()))
	t.Cleanup(func() { c.Close() })
	const timeout = 2 * time.Second
	at := time.Now()
	st, _ := newStore(t, c, redisstore.WithLeases(true), redisstore.WithTimeout(timeout),
		redisstore.WithFailurePolicy(redisstore.FailOpen),
		redisstore.WithLocalClock(func() time.Time { return at })) // no lease ends
	ctx := context.Background()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1_000_000, Window: time.Minute})
	raised := policySet(t, ratelimit.Policy{Name: "default", Limit: 2_000_000, Window: time.Minute})
	for range 2 { // the second asks for a lease
		if _, err := st.Take(ctx, "k", pol, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := st.Failures()
	if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed || st.Failures() != before {
		t.Fatalf("from the lease: %+v, %v", res, err)
	}
	px.setDelay(time.Hour)
	start := time.Now()
	res, err := st.Take(ctx, "k", raised, 1)
	took := time.Since(start)
	px.setDelay(0)
	if err != nil || !res.Allowed {
		t.Errorf("Take: %+v, %v; want allowed (FailOpen)", res, err)
	}
	if took > timeout*3/2 { // a busy machine's slack: two timeouts are 4 s
		t.Errorf("Take took %v, want about the timeout of %v", took, timeout)
	}
}

// TestCloseReturnsLeaseGrantedInFlight: a lease granted to a Take that
// was out asking when Close ran has its unused slots given back, as Close
// gives back every other lease's; nothing is left to return them later.
func TestCloseReturnsLeaseGrantedInFlight(t *testing.T) {
	plainClient := sharedClient(t)
	px := startProxy(t, redisAddr())
	c := redis.NewClient(clientOptions(px.addr()))
	t.Cleanup(func() { c.Close() })
	leased, plain := frozenLeases(t, c, plainClient)
	ctx := context.Background()
	const limit = 1000
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour})
	if _, err := leased.Take(ctx, "k", pol, 1); err != nil {
		t.Fatal(err)
	}
	px.setDelay(500 * time.Millisecond) // the reply to the ask comes after Close
	asked := make(chan error, 1)
	go func() {
		_, err := leased.Take(ctx, "k", pol, 1) // the key is busy: it asks for a lease
		asked <- err
	}()
	waitFor(t, 5*time.Second, "the ask reaches Redis", func() bool {
		r, err := plain.Peek(ctx, "k", pol)
		return err == nil && r.Remaining < limit-1
	})
	returns(t, "Close", func() { leased.Close() })
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	px.setDelay(0)
	r, err := plain.Peek(ctx, "k", pol)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != limit-2 {
		t.Errorf("after Close: %d remaining, want %d: 2 requests admitted, the lease's slots given back", r.Remaining, limit-2)
	}
}

// leasedKeys takes twice from each of n keys of st under set, so that
// each holds a lease, and returns them: keys whose leases take slots of
// their own in st's table, so that none waits for another's to end.
func leasedKeys(t *testing.T, st *redisstore.Store, set ratelimit.PolicySet, n int) []string {
	t.Helper()
	var ks []string
	for i := 0; len(ks) < n; i++ {
		k := "k" + strconv.Itoa(i)
		if slices.ContainsFunc(ks, func(o string) bool { return redisstore.SameLeaseSlot(st, k, o, set) }) {
			continue
		}
		ks = append(ks, k)
		takeOK(t, st, k, set, 1)
		takeOK(t, st, k, set, 1) // the key is busy: it asks for a lease
	}
	return ks
}

// TestCloseGivesBackManyLeases: Close gives back the unused slots of every
// lease the store holds, on many keys at once, when Redis answers.
func TestCloseGivesBackManyLeases(t *testing.T) {
	c := sharedClient(t)
	leased, plain := frozenLeases(t, c, c)
	ctx := context.Background()
	const limit = 1000
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour})
	ks := leasedKeys(t, leased, pol, 40)
	for _, k := range ks {
		if r, err := plain.Peek(ctx, k, pol); err != nil || r.Remaining >= limit-2 {
			t.Fatalf("key %s: %+v, %v; want a lease's slots counted beyond its 2 requests", k, r, err)
		}
	}
	returns(t, "Close", func() { leased.Close() })
	for _, k := range ks {
		if r, err := plain.Peek(ctx, k, pol); err != nil || r.Remaining != limit-2 {
			t.Errorf("key %s after Close: %+v, %v; want %d remaining, the lease's slots given back", k, r, err, limit-2)
		}
	}
	if f := leased.Failures(); f != 0 {
		t.Errorf("Failures() = %d, want 0", f)
	}
}

// TestCloseUnderHungRedis: Close of a store holding many leases while
// Redis hangs returns within about one timeout, not one timeout per lease
// given back in turn (20 leases: 20 timeouts).
func TestCloseUnderHungRedis(t *testing.T) {
	sharedClient(t) // skip without Redis
	px := startProxy(t, redisAddr())
	c := redis.NewClient(clientOptions(px.addr()))
	t.Cleanup(func() { c.Close() })
	const timeout = 250 * time.Millisecond
	at := time.Now()
	leased, _ := newStore(t, c, redisstore.WithLeases(true), redisstore.WithTimeout(timeout),
		redisstore.WithLocalClock(func() time.Time { return at })) // no lease ends but by Close
	const n = 20
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1000, Window: time.Hour})
	leasedKeys(t, leased, pol, n)
	px.setDelay(time.Hour)
	start := time.Now()
	returns(t, "Close", func() { leased.Close() })
	took := time.Since(start)
	px.setDelay(0)
	// In turn, the returns took n timeouts: a bound of half that leaves
	// a loaded machine n/2 timeouts of slack over the one they take.
	if took > n*timeout/2 {
		t.Errorf("Close of %d leases under a hung Redis took %v, want about the timeout of %v (under %v)", n, took, timeout, n*timeout/2)
	}
	// The first returns go out together, and none after one has waited
	// out the timeout: not a return a lease, each timing out.
	if f := leased.Failures(); f == 0 || f > redisstore.SweepCalls {
		t.Errorf("Failures() = %d, want the returns that timed out counted, at most the %d sent at once (of %d leases)", f, redisstore.SweepCalls, n)
	}
}

// TestPeriodicSweepTriesEveryLease: a sweep of ended leases while the
// store is open tries to give back each of them, though a call waits out
// the timeout: a call slow once (a pause of the server) must not cost the
// other leases their slots for the rest of their windows. Only Close,
// which must return, stops at a call that timed out.
func TestPeriodicSweepTriesEveryLease(t *testing.T) {
	sharedClient(t) // skip without Redis
	px := startProxy(t, redisAddr())
	c := redis.NewClient(clientOptions(px.addr()))
	t.Cleanup(func() { c.Close() })
	const timeout = 100 * time.Millisecond
	var at atomic.Int64
	at.Store(time.Now().UnixNano())
	leased, _ := newStore(t, c, redisstore.WithLeases(true), redisstore.WithTimeout(timeout),
		redisstore.WithLocalClock(func() time.Time { return time.Unix(0, at.Load()) }))
	const n = 20
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1000, Window: time.Hour})
	leasedKeys(t, leased, pol, n)
	px.setDelay(time.Hour)
	t.Cleanup(func() { px.setDelay(0) }) // before the prefix's keys are deleted
	before := leased.Failures()
	at.Add(int64(time.Minute)) // every lease has ended: the janitor's next sweep gives them back
	waitFor(t, 20*time.Second, "a return tried for every lease", func() bool {
		return leased.Failures()-before >= n
	})
}

// TestRefundOfLocalDecisionAfterRecovery: under FailLocal, a request the
// fallback admitted during an outage was never counted in Redis; its
// Refund once Redis is back must not take back a request Redis did count,
// which would let the key past its limit there.
func TestRefundOfLocalDecisionAfterRecovery(t *testing.T) {
	for _, algo := range []ratelimit.Algorithm{counter, gcra} {
		t.Run(algo.String(), func(t *testing.T) {
			// A server of its own, whose counts survive its restart.
			srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
			st := failLocalStore(t, srv.addr)
			ctx := context.Background()
			const limit = 5
			pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour, Algorithm: algo})
			for i := range limit - 1 {
				if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed {
					t.Fatalf("take %d: %+v, %v", i, res, err)
				}
			}
			srv.stop() // the fallback decides, and Redis counts nothing
			before := st.Failures()
			local, err := st.Take(ctx, "k", pol, 1)
			if err != nil || !local.Allowed || st.Failures() == before {
				t.Fatalf("during the outage: %+v, %v; want allowed by the fallback", local, err)
			}
			srv.restart(t)
			waitFor(t, 5*time.Second, "recovery", func() bool {
				_, err := st.Peek(ctx, "k", pol)
				return err == nil
			})
			// The handler did not count (WithCountIf): the request is
			// refunded, once Redis answers again.
			if err := st.Refund(ctx, "k", pol, 1, local.At); err != nil {
				t.Fatal(err)
			}
			allowed := 0
			for range limit {
				res, err := st.Take(ctx, "k", pol, 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					allowed++
				}
			}
			// Redis counted limit-1 requests: one more fits there.
			if allowed != 1 {
				t.Errorf("after the refund of a local decision: Redis admitted %d more, want 1 (it counted %d of %d)", allowed, limit-1, limit)
			}
		})
	}
}

// TestResetReachesFallback: under FailLocal, a Reset forgets the key's
// counts in the fallback too, so that its next request starts a full
// quota even if the fallback decides it, in a later outage.
func TestResetReachesFallback(t *testing.T) {
	srv := startServer(t)
	st := failLocalStore(t, srv.addr)
	ctx := context.Background()
	const limit = 3
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour})
	srv.stop() // the fallback decides
	for i := range limit {
		if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed {
			t.Fatalf("outage, take %d: %+v, %v; want allowed locally", i, res, err)
		}
	}
	srv.restart(t)
	waitFor(t, 5*time.Second, "recovery", func() bool {
		_, err := st.Peek(ctx, "k", pol)
		return err == nil
	})
	if err := st.Reset(ctx, "k", pol); err != nil {
		t.Fatal(err)
	}
	srv.stop() // another outage: the fallback decides again
	if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed {
		t.Errorf("the first request after the Reset, decided locally: %+v, %v; want allowed, a full quota", res, err)
	}
}

// failLocalStore returns a store on the server at addr that falls back
// to its local store while Redis fails, dialling as the README says, with
// no refusal cache, so that every decision it can make goes to Redis.
func failLocalStore(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	opts := clientOptions(addr)
	opts.Dialer = redisstore.Dial
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// frozenLeases returns a store with leases on c whose local clock stands
// still, so that no lease ends but by Close, and one on plain under the
// same prefix, without leases or a refusal cache, to read what Redis
// counts.
func frozenLeases(t *testing.T, c, plain redis.UniversalClient) (*redisstore.Store, *redisstore.Store) {
	t.Helper()
	at := time.Now()
	leased, p := newStore(t, c, redisstore.WithLeases(true), redisstore.WithLocalClock(func() time.Time { return at }))
	reader, err := redisstore.New(plain, redisstore.WithPrefix(p), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	return leased, reader
}

// TestCancelledAskKeepsItsLease: a request that asks for a lease whose
// caller goes away (its context is cancelled) while Redis answers: the
// lease Redis granted and counted is the store's, not the request's, and
// its unused slots must go back like any lease's. Abandoning the reply
// left them counted until they left their windows (a month, for a
// monthly quota).
func TestCancelledAskKeepsItsLease(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled ", bounded), func(t *testing.T) { cancelledAskKeepsItsLease(t, bounded) })
	}
}

// cancelledAskKeepsItsLease is TestCancelledAskKeepsItsLease on a client
// with ContextTimeoutEnabled set to bounded: without it the store waits
// for each call on a goroutine of its own.
func cancelledAskKeepsItsLease(t *testing.T, bounded bool) {
	plainClient := sharedClient(t)
	px := startProxy(t, redisAddr())
	opts := clientOptions(px.addr())
	opts.ContextTimeoutEnabled = bounded
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	leased, plain := frozenLeases(t, c, plainClient)
	ctx := context.Background()
	const limit = 1000
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour})
	if _, err := leased.Take(ctx, "k", pol, 1); err != nil {
		t.Fatal(err)
	}
	px.setDelay(500 * time.Millisecond) // the caller goes away before the reply
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asked := make(chan error, 1)
	go func() {
		_, err := leased.Take(cctx, "k", pol, 1) // the key is busy: it asks for a lease
		asked <- err
	}()
	waitFor(t, 5*time.Second, "the ask reaches Redis", func() bool {
		r, err := plain.Peek(ctx, "k", pol)
		return err == nil && r.Remaining < limit-2
	})
	cancel()
	var err error
	returns(t, "the cancelled Take", func() { err = <-asked })
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Take: %v; want its context's error, or its decision", err)
	}
	px.setDelay(0)
	returns(t, "Close", func() { leased.Close() }) // gives back every lease
	r, err := plain.Peek(ctx, "k", pol)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != limit-2 {
		t.Errorf("after Close: %d remaining, want %d: 2 requests counted, the lease's slots given back", r.Remaining, limit-2)
	}
}
