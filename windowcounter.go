package ratelimit

import "math/bits"

// windowCounter is the sliding window counter: counts for the current and
// the previous fixed window (aligned to multiples of the window since the
// Unix epoch, as in every store, so that stores agree), the previous one
// weighted by the share of it the rolling window still covers. The weighted count is rounded up, so the estimate
// errs toward refusing.
type windowCounter struct{}

// roll moves s to the fixed window containing now.
func (windowCounter) roll(s *state, window, now int64) {
	start := now - now%window
	if now < 0 && now%window != 0 {
		start -= window
	}
	switch {
	case start == s.t:
	case start == s.t+window:
		s.head, s.n = s.n, 0
	case start > s.t:
		s.head, s.n = 0, 0
	default:
		return // a clock stepping back stays in the window it had
	}
	s.t = start
}

// used returns the estimated count in the rolling window ending at now.
func (windowCounter) used(s *state, window, now int64) int64 {
	elapsed := min(max(now-s.t, 0), window)
	return int64(s.n) + mulDivCeil(int64(s.head), window-elapsed, window)
}

func (c windowCounter) decide(s *state, limit, window, now, cost int64) verdict {
	c.roll(s, window, now)
	used := c.used(s, window, now)
	if used+cost <= limit {
		return verdict{ok: true, remaining: limit - used - cost}
	}
	elapsed := now - s.t
	cur, prev := int64(s.n), int64(s.head)
	var retry int64
	if k := limit - cur - cost; k >= 0 {
		// Fits in this window once the previous window's weight has
		// decayed to k: prev*(window-elapsed-d) <= k*window.
		retry = window - elapsed - mulDivFloor(k, window, prev)
	} else {
		// Fits only in the next window, once this window's count, then
		// the previous one, has decayed to limit-cost.
		retry = window - elapsed + max(0, window-mulDivFloor(limit-cost, window, cur))
	}
	return verdict{remaining: max(limit-used, 0), retry: retry, reset: c.reset(s, window, now)}
}

func (c windowCounter) record(s *state, limit, window, now, cost int64) verdict {
	s.n += int32(cost)
	return verdict{ok: true, remaining: max(limit-c.used(s, window, now), 0), reset: c.reset(s, window, now)}
}

func (c windowCounter) peek(s *state, limit, window, now int64) verdict {
	// decide on a copy, which it may roll to now's window.
	cp := *s
	v := c.decide(&cp, limit, window, now, 1)
	if v.ok {
		v.remaining++
		v.reset = c.reset(&cp, window, now)
	}
	return v
}

// refund takes cost requests off the count of the window at fell in.
func (c windowCounter) refund(s *state, _, window, now, at, cost int64) {
	c.roll(s, window, now)
	switch {
	case at >= s.t:
		s.n -= int32(min(cost, int64(s.n)))
	case at >= s.t-window:
		s.head -= int32(min(cost, int64(s.head)))
	}
}

// reset returns how long until the estimate drops by one request.
func (windowCounter) reset(s *state, window, now int64) int64 {
	elapsed := now - s.t
	prev, cur := int64(s.head), int64(s.n)
	if w := mulDivCeil(prev, window-elapsed, window); w > 0 {
		// The weighted previous count drops to w-1.
		return window - elapsed - mulDivFloor(w-1, window, prev)
	}
	if cur == 0 {
		return 0
	}
	// Next window: this window's count decays by one after window/cur.
	return window - elapsed + max(1, window-mulDivFloor(cur-1, window, cur))
}

// idleAt: two windows after the current one started, both counts have
// rolled out.
func (windowCounter) idleAt(s *state, _, window int64) int64 {
	if s.n == 0 && s.head == 0 {
		return -1 << 63
	}
	return s.t + 2*window
}

// minIdle: the current window started at most one window back.
func (windowCounter) minIdle(_, window int64) int64 { return window }

func (windowCounter) last(s *state) int64 { return s.t }

// mulDivFloor returns floor(a*b/c) for non-negative a, b and positive c,
// without overflowing: a limit times a window in nanoseconds can exceed
// 64 bits.
func mulDivFloor(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, 1<<63-1))
}

// mulDivCeil returns ceil(a*b/c) for non-negative a, b and positive c.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(min(q, 1<<63-1))
}
