package ratelimit

import "time"

// gcra is the generic cell rate algorithm: a token bucket of limit tokens
// refilled at limit per window, kept as a single instant, the theoretical
// arrival time (tat, in state.t) at which the bucket would be full again.
//
// Each request advances tat by the emission interval T = window/limit
// (rounded up, so the rate never exceeds limit per window); a request fits
// while tat, after it, is at most limit*T (the bucket's depth, one window
// give or take the rounding) ahead of now.
type gcra struct{}

// interval returns the emission interval, rounded up.
func interval(p *Policy) int64 {
	limit := int64(p.Limit)
	return (int64(p.Window) + limit - 1) / limit
}

func (gcra) take(s *state, p *Policy, now int64, cost int, record bool) verdict {
	t := interval(p)
	depth := int64(p.Limit) * t
	tat := max(s.t[0], now)
	next := tat + int64(cost)*t
	v := verdict{ok: next-depth <= now}
	if !v.ok {
		v.retry = time.Duration(next - depth - now)
	} else if record {
		tat, s.t[0] = next, next
	}
	// The bucket holds less than nothing (tat is beyond now+depth) when
	// the limit was lowered since it was last used.
	r := max(now+depth-tat, 0) / t
	v.remaining = int(r)
	if tat > now {
		// One more request fits at tat - depth + (r+1)*T; a full bucket
		// (tat past) never grows.
		v.reset = time.Duration(tat - depth + (r+1)*t - now)
	}
	return v
}

// refund gives back what of the requests' share of the bucket has not
// refilled since at: their share is cost*T, and the bucket refills one T
// per T. It never gives back more, however the bucket was used since, so
// that a request whose share refilled long ago is not counted twice.
func (gcra) refund(s *state, p *Policy, now, at int64, cost int) {
	share := int64(cost) * interval(p)
	s.t[0] -= max(min(share, at+share-now), 0)
}

// idleAt: once tat is past, the bucket is full, as for a new key.
func (gcra) idleAt(s *state, _ *Policy) int64 { return s.t[0] }
