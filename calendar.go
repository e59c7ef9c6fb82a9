package ratelimit

import "time"

// calendar counts requests per calendar period: a day, a week (from
// Monday) or a month, in the policy's Location, starting afresh at each
// boundary, as a customer's invoice counts them. In the state, t is the
// current period's start and n its count. Periods are computed with
// time.Date, so that a day of a change of daylight saving time has its 23
// or 25 hours, and a month its days.
type calendar struct{}

// period returns the bounds of Period in Unix nanoseconds.
func period(p *Policy, now int64) (start, end int64) {
	s, e := p.Period(time.Unix(0, now))
	return s.UnixNano(), e.UnixNano()
}

func (calendar) take(s *state, p *Policy, now int64, cost int, record bool) verdict {
	start, end := period(p, now)
	if s.t[0] < start {
		s.t[0], s.n = start, 0 // a new period
	}
	v := verdict{ok: int(s.n)+cost <= p.Limit}
	if !v.ok {
		v.retry = time.Duration(end - now)
	} else if record {
		s.n += int32(cost)
	}
	if v.remaining = max(p.Limit-int(s.n), 0); s.n > 0 {
		v.reset = time.Duration(end - now)
	}
	return v
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
