package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// clockStepsBack: a clock that steps back (a failover to a server whose
// clock is behind, an NTP step) loses no counts. A store may decide at
// the reading, or at the latest instant it has seen: both keep what was
// counted, so a client at its limit stays refused, with a RetryAfter and
// a Reset to come.
func (s *suite) clockStepsBack(t *testing.T) {
	for _, a := range s.rolling() {
		for _, back := range []time.Duration{1500 * time.Millisecond, 151 * time.Second} {
			t.Run(fmt.Sprintf("%v/%v back", a, back), func(t *testing.T) { s.rollingStepBack(t, a, back) })
		}
	}
	for _, back := range []time.Duration{2 * time.Second, 25 * time.Hour} {
		t.Run(fmt.Sprintf("Daily/%v back", back), func(t *testing.T) { s.calendarStepBack(t, back) })
	}
}

// rollingStepBack fills a quota of 10 a minute under a, 9 requests a
// second before a fixed window starts (the counter's) and the 10th a
// second after, then steps the clock back by back: across that start,
// less than a window, or more than two windows. The 11th is refused, and
// once the clock has caught up with where it was, after a step back of
// less than a window, so that the 10 requests are still in the window
// that ends then, the 12th is too.
func (s *suite) rollingStepBack(t *testing.T, a ratelimit.Algorithm, back time.Duration) {
	st, clk := s.store(t)
	ps := set(t, policy("p", 10, time.Minute, a))
	start := clk.Now().Truncate(time.Minute).Add(time.Minute) // a fixed window's start
	clk.Set(start.Add(-time.Second))
	if res := take(t, st, "k", ps, 9); !res.Allowed {
		t.Fatalf("9 requests a second before a window's start: %+v, want allowed", res)
	}
	clk.Set(start.Add(time.Second))
	if res := take(t, st, "k", ps, 1); !res.Allowed {
		t.Fatalf("the 10th, a second after it: %+v, want allowed", res)
	}
	clk.Set(start.Add(time.Second - back))
	if res := take(t, st, "k", ps, 1); res.Allowed || res.Reset <= 0 {
		t.Errorf("the 11th, the clock %v back: %+v, want refused with a Reset to come, the 10 still counted", back, res)
	}
	if back >= time.Minute {
		return // as much time has passed: the requests may have left the window
	}
	clk.Set(start.Add(1500 * time.Millisecond))
	if res := take(t, st, "k", ps, 1); res.Allowed || res.Reset <= 0 {
		t.Errorf("the 12th, the clock caught up: %+v, want refused with a Reset to come, the 10 still counted", res)
	}
}

// calendarStepBack spends a daily quota a second into a day, after a
// request the day before (so that the key was seen before the clock steps
// back, as most keys were), then steps the clock back by back: into the
// day before, or the one before that.
// The next request is refused; after a step into the day before, until
// the spent day ends (its At and RetryAfter reach the day's end), since
// the clock comes back to that day before any other.
func (s *suite) calendarStepBack(t *testing.T, back time.Duration) {
	p := ratelimit.Policy{Name: "quota", Limit: 3, Algorithm: ratelimit.Daily}
	s.skipUnless(t, p)
	st, clk := s.store(t)
	ps := set(t, p)
	day := clk.Now().Truncate(24 * time.Hour).Add(24 * time.Hour)
	clk.Set(day.Add(-time.Hour))
	take(t, st, "k", ps, 1)
	clk.Set(day.Add(time.Second))
	if n := takeN(t, st, "k", ps, 3); n != 3 {
		t.Fatalf("%d of 3 allowed in the day, want 3", n)
	}
	clk.Set(day.Add(time.Second - back))
	res := take(t, st, "k", ps, 1)
	if res.Allowed || res.Reset <= 0 {
		t.Errorf("the clock %v back: %+v, want refused with a Reset to come, the day's 3 still counted", back, res)
	}
	if end := day.Add(24 * time.Hour); back < 24*time.Hour && res.At.Add(res.RetryAfter).Before(end) {
		t.Errorf("the clock %v back: refused at %v for %v, want until the spent day ends at %v", back, res.At, res.RetryAfter, end)
	}
}
