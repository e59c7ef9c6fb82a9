package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit/redisstore"
)

// The tests here call the library's functions directly, with the clock
// as an argument, where the store's API cannot reach a case: the same
// state under both of take's paths, or a lease's return at an instant of
// the test's choosing.

// fnRelease is the library's release function.
var fnRelease = strings.Replace(redisstore.FnTake, "_take_", "_release_", 1)

// callAt calls fn with keys and args, the library reading now (µs) as
// its clock.
func callAt(t *testing.T, c *redis.Client, fn string, keys []string, now int64, args ...any) []int64 {
	t.Helper()
	args = append(args, strconv.FormatInt(now, 10), "3600000")
	r, err := c.FCall(context.Background(), fn, keys, args...).Int64Slice()
	if err != nil {
		t.Fatalf("%s at %d: %v", fn, now, err)
	}
	return r
}

// takeReply is a take's reply in the full form, the short one spelled
// out: mark is the first policy's lease mark.
type takeReply struct {
	Allowed, R1, Policy, Remaining, Retry, Reset, Lease, LeaseEnd, Mark int64
}

func parseTake(r []int64) takeReply {
	if len(r) == 3 { // {now, remaining, reset}: admitted, no lease
		return takeReply{Allowed: 1, Policy: 1, Remaining: r[1], Reset: r[2]}
	}
	tr := takeReply{r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], 0}
	if len(r) > 9 {
		tr.Mark = r[9]
	}
	return tr
}

// TestFastPathsAgreeWithTheGeneralPath: take has a path of its own for a
// set of one log, one counter or one GCRA policy, and a general one for
// sets of several. The same traffic goes to a set of one policy and to a
// set of that policy and a GCRA policy too loose to matter, so that the
// first goes the fast path and the second the general one: every reply,
// and the first policy's state after it, must be the same. The clock
// moves as a fleet's does: forward, back by less than StepTolerance (a
// server whose clock lags), back by more (a clock that stepped), and on
// by whole windows; refunds and lease returns go to both sets between
// takes.
func TestFastPathsAgreeWithTheGeneralPath(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	p := testPrefix(t, c)
	if err := c.FunctionLoadReplace(ctx, redisstore.Library).Err(); err != nil {
		t.Fatal(err)
	}
	const w = 1_000_000 // µs
	lag := redisstore.StepTolerance.Microseconds() / 2
	for _, algo := range []string{"l", "c", "g"} {
		t.Run(algo, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(algo[0])))
			tag := p + "{" + algo + "}:"
			one := []string{tag + "one"}
			two := []string{tag + "two", tag + "loose"}
			policy := []any{algo, 100, w}
			both := append(append([]any{}, policy...), "g", 1_000_000_000, w)
			now := int64(1_767_225_600_000_000) // 2026-01-01, µs
			for step := range 600 {
				switch x := rng.IntN(100); {
				case x < 10:
					now -= rng.Int64N(lag + 1)
				case x < 13:
					now -= w + rng.Int64N(w)
				case x < 18:
					now += w + rng.Int64N(2*w)
				default:
					now += rng.Int64N(w / 16)
				}
				cost := 1 + rng.IntN(3)
				if rng.IntN(10) == 0 {
					cost = 10 + rng.IntN(30)
				}
				want := 0
				if rng.IntN(2) == 0 {
					want = 1 + rng.IntN(40)
				}
				rawGeneral := callAt(t, c, redisstore.FnTake, two, now, append([]any{cost, want}, both...)...)
				fast := parseTake(callAt(t, c, redisstore.FnTake, one, now, append([]any{cost, want}, policy...)...))
				general := parseTake(rawGeneral)
				if fast != general {
					t.Fatalf("step %d at %d: take of %d with a lease of up to %d:\nfast path    %+v\ngeneral path %+v", step, now, cost, want, fast, general)
				}
				if got, want := libState(t, c, algo, one[0]), libState(t, c, algo, two[0]); got != want {
					t.Fatalf("step %d at %d: state after the fast path %q, after the general path %q", step, now, got, want)
				}
				switch {
				case fast.Allowed == 1 && rng.IntN(8) == 0:
					callAt(t, c, redisstore.FnRefund, append(one, tag+"m1"), now, append([]any{cost, now}, policy...)...)
					callAt(t, c, redisstore.FnRefund, append(two, tag+"m2"), now, append([]any{cost, now}, both...)...)
				case fast.Lease > 0 && rng.IntN(4) == 0:
					unused := 1 + rng.Int64N(fast.Lease) // the store returns no lease with none unused
					callAt(t, c, fnRelease, append(one, tag+"m1"), now, append(append([]any{0, now}, policy...), unused, fast.Mark)...)
					callAt(t, c, fnRelease, append(two, tag+"m2"), now, append(append([]any{0, now}, both...), unused, rawGeneral[9], rawGeneral[10])...)
				}
			}
		})
	}
}

// libState returns the state key k holds for algorithm algo.
func libState(t *testing.T, c *redis.Client, algo, k string) string {
	t.Helper()
	ctx := context.Background()
	if algo == "l" {
		v, err := c.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(v, ",")
	}
	v, err := c.Get(ctx, k).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGCRALeaseReturnGivesBackWhatHasNotRefilled: a GCRA lease's slots are
// the last shares of the bucket before its mark, and returning them gives
// back what of those shares has not refilled, as a refund of requests at
// the instant the shares begin does; nothing once they have refilled.
// Limit 100 a second (an interval of 10 ms): a request and a lease of 8
// at 0 take the shares up to 90 ms, the lease's being 10 to 90 ms; 80
// more at 0 bring the bucket's arrival time to 890 ms.
func TestGCRALeaseReturnGivesBackWhatHasNotRefilled(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	p := testPrefix(t, c)
	if err := c.FunctionLoadReplace(ctx, redisstore.Library).Err(); err != nil {
		t.Fatal(err)
	}
	const t0, ms = int64(1_767_225_600_000_000), int64(1000)
	policy := []any{"g", 100, 1_000_000}
	for i, tc := range []struct {
		name          string
		after, unused int64
		tat           int64 // want, after the return, since t0
	}{
		{"at once", 0, 8, 810 * ms},
		{"40 ms of the 80 refilled", 50 * ms, 8, 850 * ms},
		{"3 unused, 20 ms of their 30 refilled", 70 * ms, 3, 870 * ms},
		{"all refilled", 120 * ms, 8, 890 * ms},
	} {
		key := p + "{g" + strconv.Itoa(i) + "}:"
		lease := parseTake(callAt(t, c, redisstore.FnTake, []string{key + "s"}, t0, append([]any{1, 8}, policy...)...))
		if lease.Lease != 8 || lease.Mark != t0+90*ms {
			t.Fatalf("%s: a request with a lease of up to 8 in a full bucket: %+v, want 8 slots, marked at %d", tc.name, lease, t0+90*ms)
		}
		if r := parseTake(callAt(t, c, redisstore.FnTake, []string{key + "s"}, t0, append([]any{80, 0}, policy...)...)); r.Allowed != 1 {
			t.Fatalf("%s: 80 more: %+v, want allowed", tc.name, r)
		}
		callAt(t, c, fnRelease, []string{key + "s", key + "m"}, t0+tc.after, append(append([]any{0, t0}, policy...), tc.unused, lease.Mark)...)
		if got, want := libState(t, c, "g", key+"s"), strconv.FormatInt(t0+tc.tat, 10); got != want {
			t.Errorf("%s: %d unused slots returned at %d ms: arrival time %s, want %s (t0 + %d ms)", tc.name, tc.unused, tc.after/ms, got, want, tc.tat/ms)
		}
	}
}

// TestLeaseEndsWithItsWindow: the counter and the calendar periods count
// a lease's slots in the window they are granted in, so a lease ends with
// that window: near its end, a lease is one that ends then, or none (a
// window's end less than half a lease away), and the reply says when to
// ask again. One counter goes take's fast path; a counter, or a period,
// beside a loose GCRA policy the general one.
func TestLeaseEndsWithItsWindow(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	p := testPrefix(t, c)
	if err := c.FunctionLoadReplace(ctx, redisstore.Library).Err(); err != nil {
		t.Fatal(err)
	}
	const day, ms = int64(86_400_000_000), int64(1000)
	end := int64(1_767_225_600_000_000) + day // a midnight, and a whole number of windows
	loose := []any{"g", 1_000_000_000, day}
	period := func(now int64) string { // the day around now, as a caller sends it
		start := end - day
		if now >= end {
			start = end
		}
		return strconv.FormatInt(start-day, 10) + "," + strconv.FormatInt(start, 10) + "," + strconv.FormatInt(start+day, 10) + "," + strconv.FormatInt(start+2*day, 10)
	}
	for _, before := range []int64{100 * ms, 50 * ms, 40 * ms, 25 * ms, 10 * ms} {
		now := end - before
		for i, tc := range []struct {
			name   string
			policy []any
		}{
			{"counter", []any{"c", 1000, 1_000_000}},
			{"counter beside GCRA", append([]any{"c", 1000, 1_000_000}, loose...)},
			{"daily beside GCRA", append([]any{"p", 1000, period(now)}, loose...)},
		} {
			keys := []string{p + "{" + strconv.Itoa(i) + ":" + strconv.FormatInt(before, 10) + "}:a"}
			if len(tc.policy) > 3 {
				keys = append(keys, keys[0]+"b")
			}
			r := parseTake(callAt(t, c, redisstore.FnTake, keys, now, append([]any{1, 100}, tc.policy...)...))
			wantLease, wantEnd := int64(100), now+redisstore.MaxLease.Microseconds()
			switch {
			case now+redisstore.MaxLease.Microseconds() <= end:
			case end-now < redisstore.MaxLease.Microseconds()/2:
				wantLease, wantEnd = 0, end
			default:
				wantEnd = end
			}
			if r.Allowed != 1 || r.Lease != wantLease || r.LeaseEnd != wantEnd {
				t.Errorf("%s, %d ms before the window's end: %+v, want allowed, a lease of %d ending %d ms before the window's end",
					tc.name, before/ms, r, wantLease, (end-wantEnd)/ms)
			}
		}
	}
}

// TestExpiryCoversOddWindows: on the server's own clock, every state the
// library writes lasts until it stops mattering, for windows that are no
// whole number of milliseconds (a third of a second), where an expiry
// rounded down to the millisecond ends too soon: a log until its newest
// instant leaves the window, a counter until its window's successor ends,
// a GCRA bucket until it is full again. The key lives through the
// millisecond PEXPIRETIME names.
func TestExpiryCoversOddWindows(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	p := testPrefix(t, c)
	if err := c.FunctionLoadReplace(ctx, redisstore.Library).Err(); err != nil {
		t.Fatal(err)
	}
	const w = 333_333 // µs
	for _, algo := range []string{"l", "c", "g"} {
		for _, keys := range [][]string{{p + "{" + algo + "}:one"}, {p + "{" + algo + "}:two", p + "{" + algo + "}:loose"}} {
			args := []any{1, 0, algo, 1000, w} // GCRA: an interval of 334 µs
			if len(keys) > 1 {
				args = append(args, "g", 1_000_000_000, w)
			}
			for i := range 100 {
				until, expiry, now := takeDeadline(t, c, algo, keys, w, args)
				if (expiry+1)*1000 < until {
					t.Fatalf("%s in a set of %d, take %d at %d µs: the state expires after %d ms, before it stops mattering at %d µs",
						algo, len(keys), i, now, expiry, until)
				}
			}
		}
	}
}

// takeDeadline takes under keys with args and reads, in the same
// transaction (where no key expires), the state of the first policy, of
// algorithm algo over a window of w µs; it returns when the state stops
// mattering (µs), its expiry (PEXPIRETIME, ms) and the server's time (µs).
func takeDeadline(t *testing.T, c *redis.Client, algo string, keys []string, w int64, args []any) (until, expiry, now int64) {
	t.Helper()
	ctx := context.Background()
	k := keys[0]
	var tm *redis.TimeCmd
	var newest *redis.StringSliceCmd
	var v *redis.StringCmd
	var at *redis.DurationCmd
	if _, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.FCall(ctx, redisstore.FnTake, keys, args...)
		tm = pipe.Time(ctx)
		if algo == "l" {
			newest = pipe.LRange(ctx, k, -1, -1)
		} else {
			v = pipe.Get(ctx, k)
		}
		at = pipe.PExpireTime(ctx, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	switch algo {
	case "l":
		x, err := strconv.ParseInt(newest.Val()[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		until = x + w
	case "c":
		idx, err := strconv.ParseInt(strings.SplitN(v.Val(), ":", 2)[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		until = idx*w + 2*w
	default:
		tat, err := strconv.ParseInt(v.Val(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		until = tat
	}
	return until, at.Val().Milliseconds(), tm.Val().UnixMicro()
}
