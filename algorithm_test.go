package ratelimit

import (
	"testing"
	"time"
)

// The models, edges, concurrency and all-or-none tests of the algorithms
// run against every store in package storetest.

// findEntry returns the entry of key and set in s, and its states, or
// nil.
func findEntry(s *MemoryStore, key string, set PolicySet) (*entry, states) {
	h := s.hash(key, set.p)
	sh := &s.shards[h&s.shardMask]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := sh.find(h, key, set.p)
	if e == nil {
		return nil, states{}
	}
	return e, statesOf(sh, e, e.set)
}

// mustSet returns the set of ps, failing t if they are not one.
func mustSet(t testing.TB, ps ...Policy) PolicySet {
	t.Helper()
	s, err := NewPolicySet(ps...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The sliding log keeps its instants as 7-byte offsets from a base: a key
// that stays active longer than the offsets span (with the longest window
// allowed, so that old instants stay in it) is rebased without losing or
// moving an instant, and its first instant, held inline, moves into the
// ring intact.
func TestSlidingLogRebasesItsRing(t *testing.T) {
	const year = int64(365 * 24 * time.Hour)
	limit, window := int64(4), int64(MaxWindow)
	var s state
	var model []int64
	for i, now := range []int64{0, year / 10, year / 2, 23 * year / 10, 23*year/10 + 1, 3 * year, 4 * year, 6 * year} {
		v := slidingLog{}.decide(&s, limit, window, now, 1)
		for len(model) > 0 && model[0] <= now-window {
			model = model[1:]
		}
		if want := int64(len(model)) < limit; v.ok != want {
			t.Fatalf("step %d: allowed %v, want %v", i, v.ok, want)
		}
		if v.ok {
			slidingLog{}.record(&s, limit, window, now, 1)
			model = append(model, now)
		}
		if int(s.n) != len(model) {
			t.Fatalf("step %d: %d instants held, want %d", i, s.n, len(model))
		}
		for j, want := range model {
			if got := s.at(int64(j)); got != want {
				t.Fatalf("step %d: instant %d is %d, want %d", i, j, got, want)
			}
		}
		if s.ring != nil && s.at(int64(s.n)-1)-s.t > maxOffset {
			t.Fatalf("step %d: offset beyond a slot", i)
		}
	}
}
