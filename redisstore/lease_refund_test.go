package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// TestRefundLeased refunds requests a lease admitted. Such a request
// reports the lease's grant as At, the instant Redis counted it, but a
// sliding log records a lease's slots at the lease's end, up to a lease's
// length later: a refund must find them there too, or it is lost (found
// by the fleet proof: refunding two such requests took back one). The
// counter and calendar periods count a lease in the window it is granted
// in, and are the control.
func TestRefundLeased(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.Daily} {
		t.Run(a.String(), func(t *testing.T) {
			ctx := context.Background()
			c := sharedClient(t)
			leased, p := newStore(t, c, redisstore.WithLeases(true))
			plain, err := redisstore.New(c, redisstore.WithPrefix(p))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { plain.Close() })
			window := time.Minute
			if a == ratelimit.Daily {
				window = 0
			}
			set := policySet(t, ratelimit.Policy{Name: "p", Limit: 100, Window: window, Algorithm: a})
			// A request whose At an earlier one reported came from a lease:
			// the first of an instant asked for it.
			var fromLease []ratelimit.Result
			seen := map[time.Time]bool{}
			for i := 0; i < 20 && len(fromLease) < 3; i++ {
				r, err := leased.Take(ctx, "k", set, 1)
				if err != nil || !r.Allowed {
					t.Fatalf("take %d: %+v, %v", i, r, err)
				}
				if seen[r.At] {
					fromLease = append(fromLease, r)
				}
				seen[r.At] = true
			}
			if len(fromLease) < 2 {
				t.Fatalf("%d requests admitted from a lease, want at least 2", len(fromLease))
			}
			leased.Close() // gives back the lease's unused slots
			before, err := plain.Peek(ctx, "k", set)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range fromLease {
				if err := plain.Refund(ctx, "k", set, 1, r.At); err != nil {
					t.Fatal(err)
				}
			}
			after, err := plain.Peek(ctx, "k", set)
			if err != nil {
				t.Fatal(err)
			}
			if want := before.Remaining + len(fromLease); after.Remaining != want {
				t.Errorf("refunded %d requests a lease admitted: remaining %d, want %d (was %d)",
					len(fromLease), after.Remaining, want, before.Remaining)
			}
		})
	}
}

// TestRefundLeasedNearWindowEnd refunds every request admitted under a
// set of a log and a counter 40 ms before the counter's window ends, on a
// clock that stands still, with leases on: a lease there would have to
// end with the counter's window, sooner than a lease's length, and the
// log's slots would then lie where a refund does not look. A set with a
// log takes no such lease, so the refunds give the whole quota back.
func TestRefundLeasedNearWindowEnd(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := storetest.Clock{}
	clk.Set(time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC).Add(-40 * time.Millisecond)) // minutes align windows
	leased, p := clockedStore(t, c, &clk, redisstore.WithLeases(true))
	plain, err := redisstore.New(c, redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	set := policySet(t,
		ratelimit.Policy{Name: "log", Limit: 100, Window: time.Hour},
		ratelimit.Policy{Name: "counter", Limit: 100, Window: time.Minute, Algorithm: counter},
	)
	var admitted []ratelimit.Result
	for i := range 20 {
		r, err := leased.Take(ctx, "k", set, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("take %d: %+v, %v", i, r, err)
		}
		admitted = append(admitted, r)
	}
	leased.Close()
	for _, r := range admitted {
		if err := plain.Refund(ctx, "k", set, 1, r.At); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := plain.Peek(ctx, "k", set); err != nil || r.Remaining != 100 {
		t.Errorf("after refunding all %d: %+v, %v; want 100 remaining", len(admitted), r, err)
	}
}

// TestRefundLeasedAtTheWindowsEdge: a request a lease admitted reports
// the grant as At, but the log holds its slot a lease later, so that a
// window after At the slot still counts: a refund then must still find
// it, not take the request for one that left the window.
func TestRefundLeasedAtTheWindowsEdge(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := storetest.Clock{}
	clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	leased, p := clockedStore(t, c, &clk, redisstore.WithLeases(true))
	plain, err := redisstore.New(c, redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithLocalClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	set := policySet(t, ratelimit.Policy{Name: "log", Limit: 100, Window: time.Second})
	var last ratelimit.Result
	seen := map[time.Time]bool{}
	fromLease := 0
	for i := 0; i < 20 && fromLease < 2; i++ {
		last = takeOK(t, leased, "k", set, 1)
		if seen[last.At] {
			fromLease++
		}
		seen[last.At] = true
	}
	if fromLease < 2 {
		t.Fatalf("%d requests admitted from a lease, want 2", fromLease)
	}
	leased.Close()                                 // gives back the lease's unused slots
	clk.Advance(time.Second + 10*time.Millisecond) // a window after At, within a lease of it
	before, err := plain.Peek(ctx, "k", set)
	if err != nil {
		t.Fatal(err)
	}
	if before.Remaining == 100 {
		t.Fatalf("peek %+v: the lease's slots have left the window; want them still counted", before)
	}
	if err := plain.Refund(ctx, "k", set, 1, last.At); err != nil {
		t.Fatal(err)
	}
	after, err := plain.Peek(ctx, "k", set)
	if err != nil {
		t.Fatal(err)
	}
	if after.Remaining != before.Remaining+1 {
		t.Errorf("refund of a leased request whose slot is still in the window: remaining %d -> %d, want %d",
			before.Remaining, after.Remaining, before.Remaining+1)
	}
}

// TestLeaseSlotCollision: two busy keys whose leases take one slot of the
// table. A lease whose slot the other key took used to be forgotten, its
// unused slots held in Redis until the window ended, so that each key
// admitted less than its limit, and a month's quota could drain without a
// request. Now a key's lease keeps its slot until it ends: the other key
// goes to Redis without a lease meanwhile, and each admits exactly its
// limit. The clock stands still, so no lease ends by time.
func TestLeaseSlotCollision(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingWindowCounter, ratelimit.GCRA, ratelimit.Monthly} {
		t.Run(a.String(), func(t *testing.T) {
			ctx := context.Background()
			c := sharedClient(t)
			clk := storetest.Clock{}
			clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			st, _ := clockedStore(t, c, &clk, redisstore.WithLeases(true))
			window := 24 * time.Hour
			if a == ratelimit.Monthly {
				window = 0
			}
			const limit = 200
			set := policySet(t, ratelimit.Policy{Name: "p", Limit: limit, Window: window, Algorithm: a})
			other := ""
			for i := 0; other == ""; i++ {
				if k := fmt.Sprint("b-", i); redisstore.SameLeaseSlot(st, "a", k, set) {
					other = k
				}
			}
			allowed := map[string]int{}
			for i := range 2 * 300 {
				// Runs of three of one key, so that each is busy enough
				// for a lease, then of the other.
				k := map[bool]string{true: "a", false: other}[i/3%2 == 0]
				r, err := st.Take(ctx, k, set, 1)
				if err != nil {
					t.Fatalf("take %d of %s: %v", i, k, err)
				}
				if r.Allowed {
					allowed[k]++
				}
			}
			for _, k := range []string{"a", other} {
				if allowed[k] != limit {
					t.Errorf("%s: %d allowed of 300, want exactly %d", k, allowed[k], limit)
				}
			}

			// A lease that has ended gives its unused slots back when the
			// other key takes its slot.
			ended, taker := "ended", ""
			for i := 0; taker == ""; i++ {
				if k := fmt.Sprint("taker-", i); redisstore.SameLeaseSlot(st, ended, k, set) {
					taker = k
				}
			}
			for i := range 3 {
				if r, err := st.Take(ctx, ended, set, 1); err != nil || !r.Allowed {
					t.Fatalf("take %d of %s: %+v, %v", i, ended, r, err)
				}
			}
			clk.Advance(time.Second) // the lease has ended
			if _, err := st.Take(ctx, taker, set, 1); err != nil {
				t.Fatal(err)
			}
			if r, err := st.Peek(ctx, ended, set); err != nil || r.Remaining != limit-3 {
				t.Errorf("Peek(%s) after its lease ended: %+v, %v; want %d remaining", ended, r, err, limit-3)
			}
		})
	}
}

// TestResetMarkerOutlivesALeasesReturn: the marker a Reset leaves, which
// keeps the return of a lease granted before it from touching what was
// counted after it, outlives a lease's return (two leases after its grant
// on a process that keeps up) even when the window is shorter than that:
// a second beyond the window.
func TestResetMarkerOutlivesALeasesReturn(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t, ratelimit.Policy{Name: "c", Limit: 100, Window: 40 * time.Millisecond, Algorithm: ratelimit.SlidingWindowCounter})
	takeOK(t, st, "k", set, 1)
	if err := st.Reset(ctx, "k", set); err != nil {
		t.Fatal(err)
	}
	keys := scanKeys(t, c, p)
	if len(keys) != 1 {
		t.Fatalf("keys after a Reset: %q, want the marker alone", keys)
	}
	ttl, err := c.PTTL(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The marker was set with a second and the window to live; what a
	// busy machine took since is far less than the 860 ms of headroom.
	if ttl < 40*time.Millisecond+2*50*time.Millisecond {
		t.Errorf("the Reset's marker lives %v more, want more than the window and two leases (140ms)", ttl)
	}
}

// TestRefundOfAnAskLoggedAhead: a request that asked for a lease while
// the log already held an instant ahead of the clock (an earlier lease's
// end) is logged at that instant, not at its At; its Refund must not
// take one of the new lease's slots instead, which are logged later: the
// lease's requests, admitted after the instant the request's entry holds,
// would then leave the window early, and another server admit past the
// limit.
func TestRefundOfAnAskLoggedAhead(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := storetest.Clock{}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk.Set(t0)
	leased, p := clockedStore(t, c, &clk, redisstore.WithLeases(true))
	plain, err := redisstore.New(c, redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithLocalClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	const limit = 100
	set := policySet(t, ratelimit.Policy{Name: "log", Limit: limit, Window: time.Second})
	log := stateKey(p, "k", set, "log")
	// At t0: two requests, the second granted a lease of 2, logged at
	// t0+50ms, which the next two use up.
	for range 4 {
		takeOK(t, leased, "k", set, 1)
	}
	ahead := "0" + strconv.FormatInt(t0.Add(50*time.Millisecond).UnixMicro(), 10)
	if got, err := c.LRange(ctx, log, 0, -1).Result(); err != nil || len(got) != 4 || got[3] != ahead {
		t.Fatalf("log after a lease at t0: %q, %v; want 2 requests and 2 slots at %s", got, err, ahead)
	}
	// At t0+10ms the lease is used up: the next request asks Redis, is
	// logged at t0+50ms, the newest instant, and granted a lease of its
	// own, logged at t0+60ms. It is refunded.
	clk.Advance(10 * time.Millisecond)
	asked := takeOK(t, leased, "k", set, 1)
	if err := leased.Refund(ctx, "k", set, 1, asked.At); err != nil {
		t.Fatal(err)
	}
	// The new lease's slots are used at t0+55ms, after the instant the
	// refunded request's entry holds, then one more request asks Redis.
	clk.Set(t0.Add(55 * time.Millisecond))
	late := 0
	for {
		late++
		if r := takeOK(t, leased, "k", set, 1); !r.At.Equal(asked.At) {
			break // from Redis: the lease is used up
		}
	}
	if late < 3 {
		t.Fatalf("%d requests at t0+55ms, want at least 2 from the second lease and one more", late)
	}
	leased.Close()
	// Admitted and not refunded: 4 at t0, late at t0+55ms. Another server
	// fills the window at t0+60ms.
	clk.Set(t0.Add(60 * time.Millisecond))
	fill := limit - 4 - late
	if r, err := plain.Take(ctx, "k", set, fill); err != nil || !r.Allowed {
		t.Fatalf("fill of %d: %+v, %v", fill, r, err)
	}
	// Just after t0+1.05s, the window holds the fill and the late
	// requests: limit-fill-late = 4 fit, and no more.
	clk.Set(t0.Add(time.Second + 50*time.Millisecond + time.Microsecond))
	if r, err := plain.Take(ctx, "k", set, 5); err != nil || r.Allowed {
		t.Errorf("take of 5 when the window holds %d of %d: %+v, %v; want refused", fill+late, limit, r, err)
	}
}
