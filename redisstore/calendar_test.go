package redisstore_test

import (
	"context"
	"strconv"
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
		r, err := c.FCall(ctx, redisstore.FnTake, []string{key}, strconv.FormatInt(server.UnixMicro(), 10), "3600000",
			1, 0, "p", 2, redisstore.PeriodBounds(set.At(0), caller)).Int64Slice()
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
