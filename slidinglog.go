package ratelimit

// slidingLog is the exact algorithm: a ring of the instants of allowed
// requests. The ring grows on demand up to the limit and shrinks as it
// drains, so a policy of a billion per hour costs nothing until it is used.
type slidingLog struct{}

// minLogCap is the smallest ring that shrinks: below it, shrinking would
// only churn allocations. Rings start at one instant, since most keys (one
// visit from an address, say) never log a second.
const minLogCap = 4

func (slidingLog) decide(s *state, limit, window, now, cost int64) verdict {
	s.evict(now - window)
	n := int64(s.n)
	if n+cost <= limit {
		return verdict{ok: true, remaining: limit - n - cost}
	}
	// The request fits once the oldest n+cost-limit instants have left;
	// the last of them to leave is at index n+cost-limit-1.
	leave := s.at(n + cost - limit - 1)
	return verdict{
		remaining: limit - n,
		retry:     leave + window - now,
		reset:     s.at(0) + window - now,
	}
}

func (slidingLog) record(s *state, limit, window, now, cost int64) verdict {
	for range cost {
		s.push(now, limit)
	}
	return verdict{ok: true, remaining: limit - int64(s.n), reset: s.at(0) + window - now}
}

func (slidingLog) last(s *state) int64 {
	if s.n == 0 {
		return -1 << 63
	}
	return s.at(int64(s.n) - 1)
}

func (l slidingLog) idle(s *state, now, maxWindow int64) bool {
	return s.n == 0 || l.last(s) <= now-maxWindow
}

// at returns the i-th oldest instant held.
func (s *state) at(i int64) int64 {
	j := int64(s.head) + i
	if j >= int64(len(s.log)) {
		j -= int64(len(s.log))
	}
	return s.log[j]
}

// evict drops instants at or before cut: an instant exactly one window old
// no longer counts.
func (s *state) evict(cut int64) {
	for s.n > 0 && s.log[s.head] <= cut {
		s.head++
		if int(s.head) == len(s.log) {
			s.head = 0
		}
		s.n--
	}
	switch {
	case s.n == 0:
		s.log, s.head = nil, 0
	case len(s.log) > minLogCap && int(s.n) <= len(s.log)/4:
		s.resize(len(s.log) / 2)
	}
}

// push appends t, growing the ring (doubling, capped at limit) when full.
func (s *state) push(t, limit int64) {
	if int(s.n) == len(s.log) {
		s.resize(int(min(max(int64(2*len(s.log)), 1), limit)))
	}
	i := int(s.head) + int(s.n)
	if i >= len(s.log) {
		i -= len(s.log)
	}
	s.log[i] = t
	s.n++
}

// resize moves the held instants, oldest first, into a ring of size c.
func (s *state) resize(c int) {
	ring := make([]int64, c)
	for i := range int64(s.n) {
		ring[i] = s.at(i)
	}
	s.log, s.head = ring, 0
}
