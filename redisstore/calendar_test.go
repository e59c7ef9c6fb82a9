package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// TestCalendarCallerAheadOfTheServer: at a period's boundary, the
// server's clock picks the period, whichever way a caller's clock
// disagrees with it. A caller ahead of the server, already in the next
// day by its own clock, neither starts that day early (admitting past the
// spent limit of the server's day) nor takes it from the server's day,
// and a caller behind it at midnight counts in the new day.
func TestCalendarCallerAheadOfTheServer(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t, ratelimit.Policy{Name: "d", Limit: 2, Algorithm: ratelimit.Daily})
	takeOK(t, st, "warm", set, 1) // loads the library
	key := stateKey(p, "k", set, "d")
	// take calls the function as the store does, the server's clock at
	// server and the caller's at caller, and reports whether it admitted.
	take := func(server, caller time.Time) bool {
		t.Helper()
		r, err := c.FCall(ctx, redisstore.FnTake, []string{key}, 1, 0, "p", 2, redisstore.PeriodBounds(set.At(0), caller),
			strconv.FormatInt(server.UnixMicro(), 10), "3600000").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return r[1] == 1
	}
	midnight := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := midnight.Add(-500 * time.Millisecond)
	for i, want := range []bool{true, true, false} {
		if take(at, at) != want {
			t.Fatalf("the day's request %d: admitted %v, want %v", i+1, !want, want)
		}
	}
	if take(at.Add(100*time.Millisecond), at.Add(700*time.Millisecond)) {
		t.Error("a caller 600 ms ahead, in the next day by its clock: admitted in the server's spent day")
	}
	if take(at.Add(200*time.Millisecond), at.Add(200*time.Millisecond)) {
		t.Error("a caller in step, after one 600 ms ahead: admitted in the server's spent day")
	}
	if !take(midnight, midnight.Add(-300*time.Millisecond)) || !take(midnight.Add(time.Millisecond), midnight) {
		t.Error("at the server's midnight, callers behind it and in step: refused, want the new day's two admitted")
	}
	if take(midnight.Add(2*time.Millisecond), midnight.Add(2*time.Millisecond)) {
		t.Error("a third request in the new day: admitted")
	}
}

// TestCalendarStepBackKeepsTheDay: a server whose clock steps back across
// midnight (a failover to a replica whose clock is behind) into the day
// before counts its requests in the day it had counted in, and keeps that
// day's count until the day ends by its clock: it expired when its clock
// reached midnight again, which gave the day a second quota.
func TestCalendarStepBackKeepsTheDay(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t, ratelimit.Policy{Name: "d", Limit: 3, Algorithm: ratelimit.Daily})
	takeOK(t, st, "warm", set, 1) // loads the library
	key := stateKey(p, "k", set, "d")
	// take calls the function as the store does, with the server's
	// clock at now and no expiry slack, and reports whether it admitted.
	take := func(now time.Time) bool {
		t.Helper()
		r, err := c.FCall(ctx, redisstore.FnTake, []string{key}, 1, 0, "p", 3, redisstore.PeriodBounds(set.At(0), now),
			strconv.FormatInt(now.UnixMicro(), 10), "0").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return r[1] == 1
	}
	midnight := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if !take(midnight.Add(time.Second)) {
			t.Fatalf("the day's request %d: refused", i+1)
		}
	}
	if !take(midnight.Add(-time.Second)) {
		t.Fatal("the third, the clock 2 s back in the day before: refused, want counted in the day")
	}
	// The day ends a day and a second after the clock's reading.
	if ttl := c.PTTL(ctx, key).Val(); ttl < 24*time.Hour {
		t.Errorf("PTTL %v, want the day's count kept until the day ends, a day and a second on", ttl)
	}
	if take(midnight.Add(2 * time.Second)) {
		t.Error("a fourth request in the day: admitted")
	}
}

// TestCalendarCallerPeriodsOff: a caller whose clock is so far off the
// server's that its bounds hold neither the server's period nor one
// either side of it fails its calls, which the store handles as failures
// of Redis, and changes no count. It moved the day's count into a period
// already over (to expire at once: the client had its quota again) or
// one yet to come, and admitted there.
func TestCalendarCallerPeriodsOff(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t, ratelimit.Policy{Name: "d", Limit: 2, Algorithm: ratelimit.Daily})
	takeOK(t, st, "warm", set, 1) // loads the library
	key := stateKey(p, "k", set, "d")
	// call calls fn as the store does, the server's clock at server and
	// the caller's at caller.
	call := func(fn string, server, caller time.Time) ([]int64, error) {
		keys, x := []string{key}, int64(0)
		if fn == redisstore.FnRefund { // of a request at server, and the marker
			keys, x = append(keys, key+":reset"), server.UnixMicro()
		}
		return c.FCall(ctx, fn, keys, 1, x, "p", 2, redisstore.PeriodBounds(set.At(0), caller),
			strconv.FormatInt(server.UnixMicro(), 10), "0").Int64Slice()
	}
	noon := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for i := range 2 {
		if r, err := call(redisstore.FnTake, noon, noon); err != nil || r[1] != 1 {
			t.Fatalf("the day's request %d: %v, %v; want admitted", i+1, r, err)
		}
	}
	before := c.Get(ctx, key).Val()
	for _, off := range []time.Duration{-49 * time.Hour, -72 * time.Hour, 36 * time.Hour, 72 * time.Hour} {
		for _, fn := range []string{redisstore.FnTake, redisstore.FnPeek, redisstore.FnRefund} {
			if r, err := call(fn, noon, noon.Add(off)); err == nil || !strings.Contains(err.Error(), "clock") {
				t.Errorf("%s by a caller %v off: %v, %v; want an error about its clock", fn, off, r, err)
			}
		}
		if got := c.Get(ctx, key).Val(); got != before {
			t.Errorf("after calls by a caller %v off: the day's count %q, want %q kept", off, got, before)
		}
	}
	if r, err := call(redisstore.FnTake, noon.Add(time.Second), noon.Add(time.Second)); err != nil || r[1] != 0 {
		t.Errorf("a third request in the day, in step: %v, %v; want refused", r, err)
	}
}
