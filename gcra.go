package ratelimit

// gcra is the generic cell rate algorithm: a token bucket of limit tokens
// refilled at limit per window, kept as a single instant, the theoretical
// arrival time (tat) at which the bucket would be full again.
//
// Each request advances tat by the emission interval T = window/limit
// (rounded up, so the rate never exceeds limit per window); a request fits
// while tat, after it, is at most limit*T (the bucket's depth, one window
// give or take the rounding) ahead of now.
type gcra struct{}

// interval returns the emission interval, rounded up.
func interval(limit, window int64) int64 { return (window + limit - 1) / limit }

func (gcra) decide(s *state, limit, window, now, cost int64) verdict {
	t := interval(limit, window)
	depth := limit * t
	tat := max(s.t, now)
	if next := tat + cost*t; next-depth > now {
		return verdict{
			remaining: (now + depth - tat) / t,
			retry:     next - depth - now,
			reset:     gcraReset(tat, now, depth, t),
		}
	}
	return verdict{ok: true, remaining: (now+depth-tat)/t - cost}
}

func (gcra) record(s *state, limit, window, now, cost int64) verdict {
	t := interval(limit, window)
	depth := limit * t
	s.t = max(s.t, now) + cost*t
	return verdict{ok: true, remaining: (now + depth - s.t) / t, reset: gcraReset(s.t, now, depth, t)}
}

// gcraReset returns how long until one more request fits than fits now:
// until tat - depth + (remaining+1)*T, or 0 when the bucket is full.
func gcraReset(tat, now, depth, t int64) int64 {
	if tat <= now {
		return 0
	}
	r := (now + depth - tat) / t
	return tat - depth + (r+1)*t - now
}

func (gcra) peek(s *state, limit, window, now int64) verdict {
	t := interval(limit, window)
	depth := limit * t
	tat := max(s.t, now)
	v := verdict{remaining: (now + depth - tat) / t, reset: gcraReset(tat, now, depth, t)}
	if next := tat + t; next-depth > now {
		v.retry = next - depth - now
	} else {
		v.ok = true
	}
	return v
}

// refund gives back the share of the bucket cost requests took.
func (gcra) refund(s *state, limit, window, _, _, cost int64) {
	s.t -= cost * interval(limit, window)
}

// idleAt: once tat is past, the bucket is full, as for a new key.
func (gcra) idleAt(s *state, _, _ int64) int64 { return s.t }

func (gcra) minIdle(limit, window int64) int64 { return interval(limit, window) }

func (gcra) last(s *state) int64 { return s.t }
