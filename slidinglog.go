package ratelimit

import (
	"sort"
	"time"
)

// slidingLog is the exact algorithm: the instants of the allowed requests
// still in the window, oldest first. A log of one instant is kept in the
// state itself (most keys, one visit from an address say, never log a
// second); a longer one in a ring that grows on demand up to the limit,
// so that a policy of a billion per hour costs nothing until it is used,
// and shrinks as the log drains, so that a burst costs nothing once it
// has left; a key at its limit logs a request in place of the one that
// left.
// In the state, n is how many instants the log holds and prev, for a
// ring, where its oldest is.
type slidingLog struct{}

func (slidingLog) take(s *state, p *Policy, now int64, cost int, record bool) verdict {
	// An instant one window old no longer counts. Each instant is passed
	// over once before it is dropped, so the scan costs O(1) a request.
	window, k := int64(p.Window), 0
	for k < int(s.n) && s.at(k) <= now-window {
		k++
	}
	if k > 0 {
		s.n -= int32(k)
		s.prev = int32((int(s.prev) + k) % len(s.ring()))
		s.shrink()
	}
	n := int(s.n)
	v := verdict{ok: n+cost <= p.Limit}
	if !v.ok {
		// The request fits once the oldest n+cost-limit instants have
		// left; the last of them to leave is at index n+cost-limit-1.
		v.retry = time.Duration(s.at(n+cost-p.Limit-1) + window - now)
	} else if record {
		if n+cost > len(s.ring()) {
			s.regrow(min(max(2*n, n+cost), p.Limit)) // by doubling, never beyond the limit
		}
		for i := range cost {
			*s.slot(n + i) = now
		}
		n += cost
		s.n = int32(n)
	}
	// n is above the limit when the limit was lowered: one more request
	// fits once the n-limit+1 oldest have left.
	v.remaining = max(p.Limit-n, 0)
	if n > 0 {
		v.reset = time.Duration(s.at(max(n-p.Limit, 0)) + window - now)
	}
	return v
}

// refund removes up to cost instants equal to at, the newest first.
func (slidingLog) refund(s *state, _ *Policy, _, at int64, cost int) {
	j := s.searchAfter(at)
	i := max(j-cost, s.searchAfter(at-1))
	for k := j; k < int(s.n); k++ {
		*s.slot(i + k - j) = s.at(k)
	}
	s.n -= int32(j - i)
	s.shrink()
}

// idleAt: once the newest instant has left the window, the log is empty.
func (slidingLog) idleAt(s *state, p *Policy) int64 {
	if s.n > 0 {
		return s.at(int(s.n)-1) + int64(p.Window)
	}
	return minInstant
}

// ring returns the memory of the log: t while it holds at most one
// instant, else the ring.
func (s *state) ring() []int64 {
	if s.log == nil {
		return s.t[:]
	}
	return *s.log
}

// slot returns where the log keeps its i-th instant, oldest first.
func (s *state) slot(i int) *int64 {
	ring := s.ring()
	if i += int(s.prev); i >= len(ring) {
		i -= len(ring)
	}
	return &ring[i]
}

func (s *state) at(i int) int64 { return *s.slot(i) }

// searchAfter returns the index of the first instant of the log after t.
func (s *state) searchAfter(t int64) int {
	return sort.Search(int(s.n), func(i int) bool { return s.at(i) > t })
}

// shrink keeps a log of at most one instant in the state, freeing the
// ring, and moves one that fills a quarter of its ring or less to a ring
// of twice its size, so that a ring grown for a burst does not outlast it.
// A log must then halve or double before it moves again, so that moves
// cost O(1) a request, amortized, as growing by doubling does.
func (s *state) shrink() {
	switch {
	case s.log == nil:
	case s.n <= 1:
		s.t[0] = s.at(0) // the one left, if any
		s.log, s.prev = nil, 0
	case int(s.n) <= len(*s.log)/4:
		s.regrow(2 * int(s.n))
	}
}

// regrow moves the log to a ring of size instants, as many as it holds at
// least.
func (s *state) regrow(size int) {
	ring := make([]int64, size)
	for i := range int(s.n) {
		ring[i] = s.at(i)
	}
	s.log, s.prev = &ring, 0
}
