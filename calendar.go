package ratelimit

import "time"

// calendar counts requests per calendar period: a day, a week (from
// Monday) or a month, in the policy's Location, starting afresh at each
// boundary, as a customer's invoice counts them. In the state, t is the
// current period's start and n its count. Periods are computed with
// time.Date, so that a day of a change of daylight saving time has its 23
// or 25 hours, and a month its days.
type calendar struct{}

// Period returns the calendar period of p that holds t, as stores count
// it: from midnight of its first day in p.Location (UTC if nil), weeks
// from Monday; periods are computed with time.Date, so that a day of a
// change of daylight saving time has its 23 or 25 hours. For a policy of
// a rolling window, it returns the window that ends at t.
func (p Policy) Period(t time.Time) (start, end time.Time) {
	if !isCalendar(p.Algorithm) {
		return t.Add(-p.Window), t
	}
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := t.In(loc).Date()
	switch p.Algorithm {
	case Daily:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Weekly:
		d -= (int(t.In(loc).Weekday()) + 6) % 7 // back to Monday
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
}

// period returns the bounds of Period in Unix nanoseconds.
func period(p *Policy, now int64) (start, end int64) {
	s, e := p.Period(time.Unix(0, now))
	return s.UnixNano(), e.UnixNano()
}

func (calendar) decide(s *state, p *Policy, now int64, cost int) verdict {
	start, end := period(p, now)
	if s.t[0] < start {
		s.t[0], s.n = start, 0 // a new period
	}
	n := int(s.n)
	v := verdict{ok: n+cost <= p.Limit, remaining: max(p.Limit-n, 0)}
	if n > 0 {
		v.reset = time.Duration(end - now)
	}
	if !v.ok {
		v.retry = time.Duration(end - now)
	}
	return v
}

func (calendar) record(s *state, p *Policy, now int64, cost int) verdict {
	_, end := period(p, now)
	s.n += int32(cost)
	return verdict{ok: true, remaining: max(p.Limit-int(s.n), 0), reset: time.Duration(end - now)}
}

// refund takes cost requests off the count, if they were counted in the
// current period.
func (calendar) refund(s *state, _ *Policy, _, at int64, cost int) {
	if at >= s.t[0] {
		s.n -= int32(min(cost, int(s.n)))
	}
}

// idleAt: once the period of the count has ended, it counts no more.
func (calendar) idleAt(s *state, p *Policy) int64 {
	if s.n == 0 {
		return minInstant
	}
	_, end := period(p, s.t[0])
	return end
}

// isCalendar reports whether a counts per calendar period.
func isCalendar(a Algorithm) bool { return a == Daily || a == Weekly || a == Monthly }

// windowOf returns the window p counts in at the instant now: its Window,
// or the length of its calendar period then.
func windowOf(p *Policy, now int64) time.Duration {
	if !isCalendar(p.Algorithm) {
		return p.Window
	}
	start, end := period(p, now)
	return time.Duration(end - start)
}

// nominalWindow returns the window RateLimit-Policy announces for p: its
// Window, or a calendar period's usual length (a month's is 30 days).
func nominalWindow(p *Policy) time.Duration {
	switch p.Algorithm {
	case Daily:
		return 24 * time.Hour
	case Weekly:
		return 7 * 24 * time.Hour
	case Monthly:
		return 30 * 24 * time.Hour
	}
	return p.Window
}
