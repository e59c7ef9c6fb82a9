package storetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the zones of the calendar cases, whatever the machine has

	"github.com/slidelog/ratelimit"
)

// calendarCase: a calendar quota admits exactly its limit in each period,
// refuses with RetryAfter and Reset counting to the period's end, and
// admits again at it: across a month's end, a leap day, a week's start on
// Monday, and the days of a change of daylight saving time in a zone.
func (s *suite) calendarCase(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	santiago, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	cases := calendarPeriods(berlin, santiago)
	for _, z := range []string{"Asia/Amman", "America/St_Johns", "Antarctica/Casey"} {
		loc, err := time.LoadLocation(z)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, repeatedMidnights(loc)...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { s.calendarPeriod(t, c) })
	}
}

// repeatedMidnights are the cases of calendarCase where a change of time
// takes the clock back across midnight, in loc, Asia/Amman,
// America/St_Johns or Antarctica/Casey: the day begins at the first of its
// midnights, and an instant whose date is the day before, after it, is in
// the new day.
func repeatedMidnights(loc *time.Location) []calendarPeriodCase {
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	if loc.String() == "Asia/Amman" {
		// Amman's clocks went from 01:00 +03 to 00:00 +02 on 29 October
		// 2021: the 29th began at 21:00 UTC, its first midnight, and had
		// 25 hours.
		return []calendarPeriodCase{{"a midnight that comes twice", ratelimit.Daily, loc,
			utc(2021, 10, 28, 21, 0), utc(2021, 10, 28, 21, 30), utc(2021, 10, 29, 22, 0), utc(2021, 10, 30, 22, 0)}}
	}
	if loc.String() == "Antarctica/Casey" {
		// Casey's clocks went from 02:00 +11 to 23:00 +08 on the 4th, on
		// 5 March 2010: the 5th began at 13:00 UTC, its first midnight,
		// and had 27 hours; its first two hours and the 4th's last three
		// again were all in it.
		return []calendarPeriodCase{
			{"the first hours of a day the clock goes back across", ratelimit.Daily, loc,
				utc(2010, 3, 4, 13, 0), utc(2010, 3, 4, 13, 30), utc(2010, 3, 5, 16, 0), utc(2010, 3, 6, 16, 0)},
			{"hours back across midnight", ratelimit.Daily, loc,
				utc(2010, 3, 4, 13, 0), utc(2010, 3, 4, 15, 30), utc(2010, 3, 5, 16, 0), utc(2010, 3, 6, 16, 0)},
		}
	}
	// St. John's clocks went from 00:01 -02:30 to 23:01 -03:30 on 7
	// November 2010: the 7th began at 02:30 UTC, and 03:00 UTC, 23:30 on
	// the 6th again, was in it.
	return []calendarPeriodCase{{"the clock back across midnight", ratelimit.Daily, loc,
		utc(2010, 11, 7, 2, 30), utc(2010, 11, 7, 3, 0), utc(2010, 11, 8, 3, 30), utc(2010, 11, 9, 3, 30)}}
}

// calendarPeriodCase is one case of calendarCase: a quota of algo in loc
// (nil for UTC) and the period that holds at, the instant of its requests.
type calendarPeriodCase struct {
	name       string
	algo       ratelimit.Algorithm
	loc        *time.Location
	start, at  time.Time // the period's start, and the instant of the requests
	end, after time.Time // the period's end, and the next one's
}

// calendarPeriods is the table of calendarCase; berlin is the zone of its
// changes of daylight saving time, and santiago that of a change at
// midnight, which skips it: the day begins at the change, at 01:00.
func calendarPeriods(berlin, santiago *time.Location) []calendarPeriodCase {
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	inBerlin := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, berlin) }
	return []calendarPeriodCase{
		{"month end", ratelimit.Monthly, nil, utc(2026, 1, 1, 0), utc(2026, 1, 31, 23), utc(2026, 2, 1, 0), utc(2026, 3, 1, 0)},
		{"leap day", ratelimit.Daily, nil, utc(2028, 2, 28, 0), utc(2028, 2, 28, 18), utc(2028, 2, 29, 0), utc(2028, 3, 1, 0)},
		{"month of a leap day", ratelimit.Monthly, nil, utc(2028, 2, 1, 0), utc(2028, 2, 29, 10), utc(2028, 3, 1, 0), utc(2028, 4, 1, 0)},
		{"week from Monday", ratelimit.Weekly, nil, utc(2025, 12, 29, 0), utc(2026, 1, 4, 23), utc(2026, 1, 5, 0), utc(2026, 1, 12, 0)},
		{"a day of 23 hours", ratelimit.Daily, berlin, inBerlin(2026, 3, 29, 0, 0), inBerlin(2026, 3, 29, 0, 30), inBerlin(2026, 3, 30, 0, 0), inBerlin(2026, 3, 31, 0, 0)},
		{"a day of 25 hours", ratelimit.Daily, berlin, inBerlin(2026, 10, 25, 0, 0), inBerlin(2026, 10, 25, 0, 30), inBerlin(2026, 10, 26, 0, 0), inBerlin(2026, 10, 27, 0, 0)},
		{"a month across a change", ratelimit.Monthly, berlin, inBerlin(2026, 3, 1, 0, 0), inBerlin(2026, 3, 31, 23, 59), inBerlin(2026, 4, 1, 0, 0), inBerlin(2026, 5, 1, 0, 0)},
		// Santiago's clocks go from 00:00 -04 to 01:00 -03 on 6 September
		// 2026: the 6th begins at 04:00 UTC, its 01:00, and the 5th's last
		// hour runs from 03:00 UTC.
		{"the day before a skipped midnight", ratelimit.Daily, santiago, time.Date(2026, 9, 5, 0, 0, 0, 0, santiago), time.Date(2026, 9, 5, 23, 30, 0, 0, santiago), utc(2026, 9, 6, 4), time.Date(2026, 9, 7, 0, 0, 0, 0, santiago)},
		{"the day of a skipped midnight", ratelimit.Daily, santiago, utc(2026, 9, 6, 4), time.Date(2026, 9, 6, 12, 0, 0, 0, santiago), time.Date(2026, 9, 7, 0, 0, 0, 0, santiago), time.Date(2026, 9, 8, 0, 0, 0, 0, santiago)},
	}
}

// calendarPeriod runs one case of calendarCase on a fresh store: the
// period Policy.Period gives, the limit within it, the refusal's figures,
// and the quota a step before and at the period's end.
func (s *suite) calendarPeriod(t *testing.T, c calendarPeriodCase) {
	p := ratelimit.Policy{Name: "quota", Limit: 3, Algorithm: c.algo, Location: c.loc}
	s.skipUnless(t, p)
	if start, end := p.Period(c.at); !start.Equal(c.start) || !end.Equal(c.end) {
		t.Fatalf("Period(%v) = [%v, %v), want [%v, %v)", c.at, start, end, c.start, c.end)
	}
	st, clk := s.store(t)
	ps := set(t, p)
	clk.Set(c.at)
	if n := takeN(t, st, "k", ps, 5); n != 3 {
		t.Fatalf("%d of 5 allowed in the period, want 3", n)
	}
	res := take(t, st, "k", ps, 1)
	wait := c.end.Sub(c.at)
	if res.Allowed || res.Remaining != 0 || !s.near(res.RetryAfter, wait) || !s.near(res.Reset, wait) {
		t.Errorf("refused: %+v, want RetryAfter and Reset %v, to the period's end", res, wait)
	}
	if res.Window != c.end.Sub(c.start) {
		t.Errorf("Window %v, want the period's length %v", res.Window, c.end.Sub(c.start))
	}
	if pk := peek(t, st, "k", ps); pk.Allowed || pk.Remaining != 0 || !s.near(pk.RetryAfter, wait) || !s.near(pk.Reset, wait) || pk.Window != res.Window {
		t.Errorf("peek when refused: %+v, want RetryAfter and Reset %v, Window %v", pk, wait, res.Window)
	}
	clk.Set(c.end.Add(-s.cfg.resolution))
	if take(t, st, "k", ps, 1).Allowed {
		t.Errorf("a step before the period's end: allowed, want refused")
	}
	clk.Set(c.end)
	res = take(t, st, "k", ps, 1)
	if !res.Allowed || res.Remaining != 2 || !s.near(res.Reset, c.after.Sub(c.end)) || res.Window != c.after.Sub(c.end) {
		t.Errorf("at the period's end: %+v, want allowed with 2 remaining, Reset and Window %v", res, c.after.Sub(c.end))
	}
}

// near reports whether a wait a store reported is want, within the
// store's resolution and never less.
func (s *suite) near(got, want time.Duration) bool {
	return got >= want && got < want+s.cfg.resolution
}

// limitChange: sets of the same quotas under other limits have one ID,
// and a set whose limits changed counts on where the old one left off.
// The log, the counter and the calendar periods keep their counts:
// raised, a client has the new limit less what it used; lowered, it is
// refused until what it used fits the new limit. GCRA keeps the time its
// bucket takes to refill: the share of it in use.
func (s *suite) limitChange(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			limit := func(n int) ratelimit.PolicySet { return set(t, policy("p", n, time.Minute, a)) }
			if limit(100).ID() != limit(1000).ID() {
				t.Fatalf("IDs differ with the limit: %q and %q", limit(100).ID(), limit(1000).ID())
			}
			limitRaised(t, st, limit, a)
			s.limitLowered(t, st, clk, limit, a)
		})
	}
	t.Run("log drains to the new limit", s.logDrainsToNewLimit)
}

// limitRaised is the raised half of limitChange, on key "raised": 50
// used of 100, then 1,000. limit returns the set of policy p under a
// limit of n.
func limitRaised(t *testing.T, st ratelimit.Store, limit func(n int) ratelimit.PolicySet, a ratelimit.Algorithm) {
	t.Helper()
	takeN(t, st, "raised", limit(100), 50)
	want := 950
	if a == ratelimit.GCRA {
		want = 500 // half the bucket was in use
	}
	if n := takeN(t, st, "raised", limit(1000), 1100); n != want {
		t.Errorf("raised from 100 to 1,000 after 50: %d more allowed, want %d", n, want)
	}
}

// limitLowered is the lowered half of limitChange, on key "lowered": 500
// used of 1,000, then 100. GCRA admits what is left of its bucket; the
// others refuse until RetryAfter, and not a step sooner.
func (s *suite) limitLowered(t *testing.T, st ratelimit.Store, clk *Clock, limit func(n int) ratelimit.PolicySet, a ratelimit.Algorithm) {
	t.Helper()
	takeN(t, st, "lowered", limit(1000), 500)
	res := take(t, st, "lowered", limit(100), 1)
	if a == ratelimit.GCRA {
		// Half the bucket was in use: 50 of the new 100 are left.
		if n := 1 + takeN(t, st, "lowered", limit(100), 100); !res.Allowed || n != 50 {
			t.Errorf("lowered from 1,000 to 100 after 500: %d allowed, want 50", n)
		}
		return
	}
	if res.Allowed || res.Remaining != 0 || res.RetryAfter <= 0 {
		t.Fatalf("lowered from 1,000 to 100 after 500: %+v, want refused", res)
	}
	if res.Limit != 100 {
		t.Errorf("lowered: Limit %d, want the new 100", res.Limit)
	}
	at := res.At.Add(res.RetryAfter)
	clk.Set(at.Add(-s.cfg.resolution))
	if take(t, st, "lowered", limit(100), 1).Allowed {
		t.Errorf("a step before RetryAfter %v: allowed, want refused", res.RetryAfter)
	}
	clk.Set(at)
	if !take(t, st, "lowered", limit(100), 1).Allowed {
		t.Errorf("at RetryAfter %v: refused, want allowed", res.RetryAfter)
	}
}

// logDrainsToNewLimit: 200 requests a quarter second apart under 1,000
// a minute, then 100: refused until the oldest 101 have left the window,
// the 101st (at 25 s) a minute after it was logged.
func (s *suite) logDrainsToNewLimit(t *testing.T) {
	s.skipUnless(t, ratelimit.Policy{Algorithm: ratelimit.SlidingLog})
	st, clk := s.store(t)
	limit := func(n int) ratelimit.PolicySet {
		return set(t, ratelimit.Policy{Name: "p", Limit: n, Window: time.Minute})
	}
	start := clk.Now()
	for range 200 {
		take(t, st, "k", limit(1000), 1)
		clk.Advance(250 * time.Millisecond)
	}
	if res := take(t, st, "k", limit(100), 1); res.Allowed || !s.near(res.RetryAfter, 35*time.Second) {
		t.Fatalf("lowered at 50 s: %+v, want refused for 35 s", res)
	}
	clk.Set(start.Add(85 * time.Second))
	if n := takeN(t, st, "k", limit(100), 5); n != 1 {
		t.Errorf("at 85 s: %d of 5 allowed, want 1 (99 of the 200 still in the window)", n)
	}
}

// limitChangeUnderConcurrency: a Limiter whose lookup changes a client's
// limit while 32 goroutines send its requests counts on exactly where the
// old limit left off, applies the new limit once the cached answer
// expires and not before, and looks up once per expiry, however many
// requests wait for the answer.
func (s *suite) limitChangeUnderConcurrency(t *testing.T) {
	const ttl = time.Second
	day := 24 * time.Hour
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			var contract atomic.Int64
			var lookups atomic.Int64
			lookup := func(_ context.Context, key string) ([]ratelimit.Policy, error) {
				lookups.Add(1)
				return []ratelimit.Policy{policy("contract", int(contract.Load()), day, a)}, nil
			}
			key := ratelimit.KeyFunc(func(*http.Request) (string, error) { return "k", nil })
			l, err := ratelimit.New(1, time.Minute, key, ratelimit.WithStore(st), ratelimit.WithClock(clk.Now), ratelimit.WithLimits(lookup, ttl))
			if err != nil {
				t.Fatal(err)
			}
			for i, ph := range contractPhases(a == ratelimit.GCRA) {
				contract.Store(int64(ph.limit))
				if got := sendConcurrently(t, l, ph.before); got != ph.wantBefore {
					t.Errorf("phase %d, before the cached answer expires: %d of %d allowed, want %d", i, got, ph.before, ph.wantBefore)
				}
				clk.Advance(ttl)
				if got := sendConcurrently(t, l, ph.after); got != ph.wantAfter {
					t.Errorf("phase %d, limit %d: %d of %d allowed, want %d", i, ph.limit, got, ph.after, ph.wantAfter)
				}
				if got := lookups.Load(); got != int64(i+1) {
					t.Errorf("phase %d: %d lookups, want %d: one per expiry", i, got, i+1)
				}
			}
		})
	}
}

// contractPhase is one phase of limitChangeUnderConcurrency: the lookup
// starts to answer limit (a day); before requests are sent while the
// previous answer is cached, after once it has expired, and the want
// fields are how many of each are served.
type contractPhase struct {
	limit, before, after  int
	wantBefore, wantAfter int
}

// contractPhases is the table of limitChangeUnderConcurrency, whose
// figures depend on whether the algorithm is GCRA. GCRA under a limit of
// n a day takes day/n of its bucket per request and refills one second
// per second: the second the clock moves per phase refills nothing that
// counts.
func contractPhases(gcra bool) []contractPhase {
	return []contractPhase{
		{1000, 0, 500, 0, 500},
		// Lowered with 700 used of 1,000: GCRA keeps 30% of the
		// bucket, 30 of the new 100.
		{100, 200, 320, 200, pick(gcra, 30, 0)},
		// Raised with every request of the day used.
		{2000, 100, 2000, 0, pick(gcra, 0, 1300)},
	}
}

// sendConcurrently has 32 goroutines share n requests to l for key "k"
// and returns how many l served, so that the counts of a phase are exact
// while the lookup and the store see concurrent callers.
func sendConcurrently(t *testing.T, l *ratelimit.Limiter, n int) int {
	var allowed atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				d := l.Allow(context.Background(), "k", 1)
				if d.Err != nil {
					t.Error(d.Err)
					return
				}
				if d.Outcome == ratelimit.Serve {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(allowed.Load())
}

func pick(cond bool, yes, no int) int {
	if cond {
		return yes
	}
	return no
}

// refundAfterLimitChange: a Limiter under WithCountIf takes a request
// back with the set it was counted under, as its limits were, though the
// client's limits changed while its handler ran (ratelimit.Store's
// Refund): the refund frees what that request took and no more. Here 3
// units are counted under 10 a minute; the handler raises the limit to 30
// and, 2 s later, counts 3 more under it; the first 3 are then taken
// back, and every algorithm admits 27 more. GCRA gives back the 18 s of
// its bucket the 3 units took at 6 s each, less the 2 s refilled since;
// a refund under the new limits (2 s each) would give back 4 s and admit
// 21.
func (s *suite) refundAfterLimitChange(t *testing.T) {
	const key = "k"
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			var limit atomic.Int64
			limit.Store(10)
			lookup := func(context.Context, string) ([]ratelimit.Policy, error) {
				return []ratelimit.Policy{policy("contract", int(limit.Load()), time.Minute, a)}, nil
			}
			l, err := ratelimit.New(1, time.Minute, ratelimit.KeyFunc(func(*http.Request) (string, error) { return key, nil }),
				ratelimit.WithStore(st), ratelimit.WithClock(clk.Now), ratelimit.WithLimits(lookup, time.Second),
				ratelimit.WithCost(func(*http.Request) int { return 3 }),
				ratelimit.WithCountIf(func(*http.Request, int) bool { return false }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			served := false
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				served = true
				limit.Store(30)
				clk.Advance(2 * time.Second) // past the cached answer's second
				if d := l.Allow(context.Background(), key, 3); !d.Result.Allowed || d.Result.Limit != 30 {
					t.Errorf("Allow under the new limit: %+v, %v; want allowed under a limit of 30", d.Result, d.Err)
				}
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			if !served {
				t.Fatal("the request under a limit of 10 was not served")
			}
			// Admissions, not a Peek: a store may hold slots it has
			// counted but not used (redisstore's leases).
			n := 0
			for ; n <= 30; n++ {
				if d := l.Allow(context.Background(), key, 1); d.Outcome != ratelimit.Serve {
					break
				}
			}
			if n != 27 {
				t.Errorf("after the refund: %d more admitted, want 27: 30 less the 3 counted under the new limit", n)
			}
		})
	}
}
