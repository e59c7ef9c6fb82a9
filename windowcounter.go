package ratelimit

import (
	"math"
	"math/bits"
	"time"
)

// windowCounter is the sliding window counter: counts for the current and
// the previous fixed window, the previous one weighted by the share of it
// the rolling window still covers. Fixed windows are aligned to multiples
// of the window since the Unix epoch, as in every store, so that stores
// agree. The weighted count is rounded up, so the estimate errs toward
// refusing. In the state, t is the current window's start, n its count and
// prev the previous window's.
type windowCounter struct{}

// roll moves s to the fixed window containing now.
func (windowCounter) roll(s *state, window, now int64) {
	start := now - (now%window+window)%window // now's window, before the epoch too
	switch {
	case start == s.t[0]+window:
		s.prev, s.n = s.n, 0
	case start > s.t[0]:
		s.prev, s.n = 0, 0
	}
	s.t[0] = max(s.t[0], start) // a clock stepping back stays in the window it had
}

// used returns the estimated count in the rolling window ending at now.
func (windowCounter) used(s *state, window, now int64) int64 {
	elapsed := min(max(now-s.t[0], 0), window)
	return int64(s.n) + mulDivCeil(int64(s.prev), window-elapsed, window)
}

func (c windowCounter) take(s *state, p *Policy, now int64, cost int, record bool) verdict {
	window, limit := int64(p.Window), int64(p.Limit)
	c.roll(s, window, now)
	used := c.used(s, window, now)
	v := verdict{ok: used+int64(cost) <= limit}
	if !v.ok {
		v.retry = c.wait(s, window, limit, int64(cost), now)
	} else if record {
		s.n += int32(cost)
		used += int64(cost)
	}
	v.remaining = int(max(limit-used, 0))
	if used > 0 {
		// One more request fits once the estimate drops by one, or, when
		// it is above the limit (the limit was lowered), to one below it.
		v.reset = c.wait(s, window, min(used, limit), 1, now)
	}
	return v
}

// wait returns how long until k more requests fit under limit; they do
// not now.
func (windowCounter) wait(s *state, window, limit, k, now int64) time.Duration {
	elapsed := now - s.t[0]
	cur, prev := int64(s.n), int64(s.prev)
	if fit := limit - cur - k; fit >= 0 {
		// Fits in this window once the previous window's weight has
		// decayed to fit: prev*(window-elapsed-d) <= fit*window.
		return time.Duration(window - elapsed - mulDivFloor(fit, window, prev))
	}
	// Fits only in the next window, once this window's count, then the
	// previous one, has decayed to limit-k.
	return time.Duration(window - elapsed + max(0, window-mulDivFloor(limit-k, window, cur)))
}

// refund takes cost requests off the count of the window at fell in.
func (c windowCounter) refund(s *state, p *Policy, now, at int64, cost int) {
	window := int64(p.Window)
	c.roll(s, window, now)
	switch {
	case at >= s.t[0]:
		s.n -= int32(min(cost, int(s.n)))
	case at >= s.t[0]-window:
		s.prev -= int32(min(cost, int(s.prev)))
	}
}

// idleAt: two windows after the current one started, both counts have
// rolled out; the previous one's, when the current one counts nothing,
// once the current window ends.
func (windowCounter) idleAt(s *state, p *Policy) int64 {
	switch {
	case s.n > 0:
		return s.t[0] + 2*int64(p.Window)
	case s.prev > 0:
		return s.t[0] + int64(p.Window)
	}
	return minInstant
}

// mulDivFloor returns floor(a*b/c) for non-negative a, b and positive c,
// without overflowing: a limit times a window in nanoseconds can exceed
// 64 bits. It is capped at math.MaxInt64.
func mulDivFloor(a, b, c int64) int64 { return mulDiv(a, b, c, false) }

// mulDivCeil returns ceil(a*b/c), as mulDivFloor.
func mulDivCeil(a, b, c int64) int64 { return mulDiv(a, b, c, true) }

func mulDiv(a, b, c int64, up bool) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if up && r != 0 && q < math.MaxInt64 {
		q++
	}
	return int64(min(q, math.MaxInt64))
}
