package ratelimit

import (
	"encoding/binary"
	"unsafe"
)

// slidingLog is the exact algorithm: a ring of the instants of allowed
// requests. The ring grows on demand up to the limit and shrinks as it
// drains, so a policy of a billion per hour costs nothing until it is used.
//
// A key's first instant is held inline in its state (most keys, one visit
// from an address say, never log a second). From the second on, instants
// live in a ring of 7-byte offsets from a base instant, the state's t:
// 7 bytes span two years of nanoseconds, as long as the longest window,
// and cost an eighth less than whole instants.
type slidingLog struct{}

const (
	// slotBytes is the width of one instant in a ring.
	slotBytes = 7
	// maxOffset is the largest offset a slot holds, about 2.28 years in
	// nanoseconds; windows are shorter (see MaxWindow), so rebasing the
	// ring on its oldest instant always brings a new one into range.
	maxOffset = 1<<(8*slotBytes) - 1
	// minLogCap is the smallest ring that shrinks: below it, shrinking
	// would only churn allocations.
	minLogCap = 4
)

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

func (l slidingLog) peek(s *state, limit, window, now int64) verdict {
	// decide on a copy: evicting from the copy moves only its own head
	// and count, and a ring it shrinks is a new one.
	c := *s
	v := l.decide(&c, limit, window, now, 1)
	if v.ok {
		v.remaining++
		if c.n > 0 {
			v.reset = c.at(0) + window - now
		}
	}
	return v
}

// refund removes up to cost instants equal to at, the newest first; the
// instants after them move up one place each.
func (slidingLog) refund(s *state, _, _, _, at, cost int64) {
	n := int64(s.n)
	j := n // one past the last instant equal to at
	for j > 0 && s.at(j-1) > at {
		j--
	}
	i := j // the first instant equal to at
	for i > 0 && i > j-cost && s.at(i-1) == at {
		i--
	}
	k := j - i
	if k == 0 {
		return
	}
	if s.ring == nil { // the one instant held inline
		s.n = 0
		return
	}
	slots := s.slots()
	size := int64(len(slots) / slotBytes)
	for x := i; x+k < n; x++ {
		putSlot(slots, s.slot(x, size), s.at(x+k)-s.t)
	}
	s.n -= int32(k)
	if s.n == 0 {
		s.ring, s.head = nil, 0
	}
}

func (slidingLog) last(s *state) int64 {
	if s.n == 0 {
		return -1 << 63
	}
	return s.at(int64(s.n) - 1)
}

// idleAt: once the newest instant has left the window, the log is empty.
func (l slidingLog) idleAt(s *state, _, window int64) int64 {
	if s.n == 0 {
		return -1 << 63
	}
	return l.last(s) + window
}

func (slidingLog) minIdle(_, window int64) int64 { return window }

// The ring is one allocation: its capacity in instants as a 4-byte
// header (kept there rather than in the state, so that a state fits 24
// bytes and an entry 48), then the slots, then one byte more, so that
// every slot can be read with one 8-byte load.
const ringHeader = 4

// size returns the ring's capacity in instants; 0 without a ring.
func (s *state) size() int32 {
	if s.ring == nil {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(unsafe.Slice(s.ring, ringHeader)))
}

// ringBytes returns the ring's whole allocation.
func (s *state) ringBytes() []byte {
	return unsafe.Slice(s.ring, ringHeader+int(s.size())*slotBytes+1)
}

// slots returns the ring's slots and the byte after them.
func (s *state) slots() []byte { return s.ringBytes()[ringHeader:] }

// slot returns the index of the i-th oldest instant's slot in a ring of
// size slots.
func (s *state) slot(i, size int64) int64 {
	j := int64(s.head) + i
	if j >= size {
		j -= size
	}
	return j
}

// at returns the i-th oldest instant held.
func (s *state) at(i int64) int64 {
	if s.ring == nil {
		return s.t // the one instant held inline
	}
	slots := s.slots()
	j := s.slot(i, int64(len(slots)/slotBytes))
	return s.t + int64(binary.LittleEndian.Uint64(slots[j*slotBytes:])&maxOffset)
}

// putSlot writes offset off to slot j of ring, keeping the byte after it,
// which belongs to the next slot.
func putSlot(ring []byte, j int64, off int64) {
	b := ring[j*slotBytes:]
	v := binary.LittleEndian.Uint64(b)
	binary.LittleEndian.PutUint64(b, v&^maxOffset|uint64(off))
}

// evict drops instants at or before cut: an instant exactly one window old
// no longer counts.
func (s *state) evict(cut int64) {
	if s.ring == nil {
		if s.n == 1 && s.t <= cut {
			s.n = 0
		}
		return
	}
	size := s.size()
	for s.n > 0 && s.at(0) <= cut {
		s.head++
		if s.head == size {
			s.head = 0
		}
		s.n--
	}
	switch {
	case s.n == 0:
		s.ring, s.head = nil, 0
	case size > minLogCap && s.n <= size/4:
		s.resize(int(size / 2))
	}
}

// push appends t, which is no older than any instant held, growing the
// ring (doubling, capped at limit) when full.
func (s *state) push(t, limit int64) {
	switch {
	case s.n == 0 && s.ring == nil:
		s.t, s.n = t, 1
		return
	case s.ring == nil:
		s.resize(int(min(2, limit)))
	case s.n == s.size():
		s.resize(int(min(2*int64(s.n), limit)))
	}
	if t-s.t > maxOffset {
		s.rebase()
	}
	slots := s.slots()
	putSlot(slots, s.slot(int64(s.n), int64(len(slots)/slotBytes)), t-s.t)
	s.n++
}

// resize moves the held instants (at least one), oldest first, into a ring
// of size c.
func (s *state) resize(c int) {
	ring := make([]byte, ringHeader+c*slotBytes+1)
	binary.LittleEndian.PutUint32(ring, uint32(c))
	if s.ring != nil {
		// The offsets keep their base: copy the slots as bytes, in at
		// most two runs, as the ring wraps.
		old, slots := s.slots(), ring[ringHeader:]
		head, n, size := int(s.head), int(s.n), int(s.size())
		k := copy(slots, old[head*slotBytes:min(head+n, size)*slotBytes])
		if head+n > size {
			copy(slots[k:], old[:(head+n-size)*slotBytes])
		}
	}
	// Without a ring, the one instant held inline becomes the base, at
	// offset 0.
	s.ring, s.head = &ring[0], 0
}

// rebase moves the ring's base to its oldest instant, rewriting every
// offset, so that a new instant's offset fits a slot: instants in the ring
// are all within a window of each other, and windows are shorter than a
// slot spans. A key has to stay active for two years to need it.
func (s *state) rebase() {
	base := s.at(0)
	slots := s.slots()
	size := int64(s.size())
	for i := range int64(s.n) {
		putSlot(slots, s.slot(i, size), s.at(i)-base)
	}
	s.t = base
}
