package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// msRefKey is what the reference of FuzzMemoryStore knows of a key: the
// sliding log of each policy, and what the memory store keeps beside
// them, which its answers depend on once an injected clock steps back or
// a refund follows a Reset.
type msRefKey struct {
	live  bool  // the store holds the key's entries
	seen  int64 // while live: the latest instant the key was decided at
	since int64 // while live: refunds of requests at or before it are ignored
	reset int64 // the instant of the latest Reset that dropped live entries
	// counted is the latest instant entries that Reset dropped were
	// decided at: a request counted since is the new entries'.
	counted int64
	logs    [][]int64 // per policy: the instants in the window, oldest first
	taken   []msTaken // every Take allowed, Resets or not, for refunds to pick from
}

type msTaken struct {
	at   time.Time
	cost int
}

// msReference is the memory store written plainly: one key's sliding logs
// as slices of instants, each key's instants held in order by the latest
// one it was decided at, and a refund ignored when it is of requests
// counted at or before the latest instant the entries a Reset dropped
// were decided at (or before its entries were made).
type msReference struct {
	policies []Policy // in the order of their names
	keys     map[string]*msRefKey
}

func (m *msReference) key(k string) *msRefKey {
	if m.keys[k] == nil {
		m.keys[k] = &msRefKey{reset: minInstant, counted: minInstant}
	}
	return m.keys[k]
}

// instant returns the instant the key is decided at for a reading r of the
// clock, its entries made first if create is set.
func (m *msReference) instant(rk *msRefKey, r int64, create bool) int64 {
	if !rk.live {
		if !create {
			return r
		}
		// Made after a Reset, the entries decide no earlier than it.
		rk.live, rk.seen, rk.since = true, max(r, rk.reset), max(r-1, rk.counted)
		rk.logs = make([][]int64, len(m.policies))
	}
	rk.seen = max(rk.seen, r)
	return rk.seen
}

// trim forgets what has left each window at now.
func (m *msReference) trim(rk *msRefKey, now int64) {
	for i, p := range m.policies {
		l := rk.logs[i]
		for len(l) > 0 && l[0] <= now-int64(p.Window) {
			l = l[1:]
		}
		rk.logs[i] = l
	}
}

func (m *msReference) checkCost(cost int) error {
	for _, p := range m.policies {
		if cost < 1 || cost > p.Limit {
			return ErrInvalidCost
		}
	}
	return nil
}

// standing returns each policy's verdict for cost more requests at now,
// as the sliding log gives it.
func (m *msReference) standing(logs [][]int64, now int64, cost int) []Result {
	rs := make([]Result, len(m.policies))
	for i, p := range m.policies {
		var l []int64
		if logs != nil {
			l = logs[i]
		}
		// A log may hold more than a limit lowered since.
		r := Result{Allowed: len(l)+cost <= p.Limit, Limit: p.Limit, Remaining: max(p.Limit-len(l), 0), Policy: p.Name, Window: p.Window, At: time.Unix(0, now)}
		if len(l) > 0 {
			r.Reset = time.Duration(l[max(len(l)-p.Limit, 0)] + int64(p.Window) - now)
		}
		if !r.Allowed {
			r.RetryAfter = time.Duration(l[len(l)+cost-p.Limit-1] + int64(p.Window) - now)
		}
		rs[i] = r
	}
	return rs
}

// tightest picks, as the contract says, the refusal with the longest
// wait, or the allowance with the fewest remaining, then the longest
// Reset; the first of equals.
func msTightest(rs []Result) Result {
	best := rs[0]
	for _, r := range rs[1:] {
		switch {
		case r.Allowed != best.Allowed:
			if !r.Allowed {
				best = r
			}
		case !r.Allowed:
			if r.RetryAfter > best.RetryAfter {
				best = r
			}
		case r.Remaining != best.Remaining:
			if r.Remaining < best.Remaining {
				best = r
			}
		case r.Reset > best.Reset:
			best = r
		}
	}
	return best
}

func (m *msReference) take(k string, r int64, cost int) (Result, error) {
	if err := m.checkCost(cost); err != nil {
		return Result{}, err
	}
	rk := m.key(k)
	now := m.instant(rk, r, true)
	m.trim(rk, now)
	rs := m.standing(rk.logs, now, cost)
	for _, res := range rs {
		if !res.Allowed {
			return msTightest(rs), nil
		}
	}
	for i := range m.policies {
		for range cost {
			rk.logs[i] = append(rk.logs[i], now)
		}
	}
	rk.taken = append(rk.taken, msTaken{time.Unix(0, now), cost})
	return msTightest(m.standing(rk.logs, now, 0)), nil
}

func (m *msReference) peek(k string, r int64) Result {
	rk := m.key(k)
	now := m.instant(rk, r, false)
	if !rk.live {
		return msTightest(m.standing(nil, now, 1))
	}
	m.trim(rk, now)
	return msTightest(m.standing(rk.logs, now, 1))
}

func (m *msReference) refund(k string, r int64, cost int, at int64) error {
	if err := m.checkCost(cost); err != nil {
		return err
	}
	rk := m.key(k)
	if !rk.live {
		return nil // nothing to take back from
	}
	now := m.instant(rk, r, false)
	for i, p := range m.policies {
		if at <= rk.since || at <= now-int64(p.Window) || at > now {
			continue
		}
		l := rk.logs[i]
		for n := 0; n < cost; n++ {
			j := len(l) - 1
			for j >= 0 && l[j] != at {
				j--
			}
			if j < 0 {
				break
			}
			l = append(l[:j:j], l[j+1:]...)
		}
		rk.logs[i] = l
	}
	return nil
}

func (m *msReference) resetKey(k string, r int64) {
	rk := m.key(k)
	if rk.live {
		rk.reset = max(rk.reset, max(r, rk.seen))
		rk.counted = max(rk.counted, rk.seen)
		rk.live, rk.logs = false, nil
	}
}

// msKeysApart returns n keys that fall in n different shards of s, so
// that what the store keeps per shard (when it last forgot a live entry)
// is kept per key.
func msKeysApart(s *memoryStore, n int) []string {
	var keys []string
	used := map[*shard]bool{}
	for i := 0; len(keys) < n; i++ {
		k := "k" + strconv.Itoa(i)
		if sh := s.shardOf(k); !used[sh] {
			used[sh] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// FuzzMemoryStore runs random Takes, Peeks, Refunds and Resets against a
// memory store with an injected clock, which moves forward, stands still
// or steps back, and checks every answer against msReference: the same
// decisions and figures, instant included; Remaining in [0, limit];
// RetryAfter of at least 1ms on every refusal (the clock moves in whole
// milliseconds); no log longer than its limit; and one entry per policy
// of each key the store holds, no more.
//
// Each operation is three bytes. The first picks the key (low two bits),
// the cost (1 + the next two) and the operation (the high four: 0 to 8
// Take, 9 and 10 Peek, 11 to 13 Refund of one of the key's allowed Takes,
// Resets or not, 14 Refund of an instant the third byte's low bits of
// milliseconds ago, 15 Reset). The second moves the clock by that many
// milliseconds first: times 16 when the third byte's high bit is set,
// backwards when its next bit is.
func FuzzMemoryStore(f *testing.F) {
	f.Add(uint8(3), uint16(1000), uint8(0), uint16(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 200, 0, 0, 200, 0, 0, 200, 0})
	f.Add(uint8(2), uint16(100), uint8(5), uint16(3000), []byte{4, 10, 0, 1, 10, 0, 0, 50, 0, 8, 1, 0x80, 0, 255, 0x80, 0, 0, 0})
	f.Add(uint8(1), uint16(1), uint8(0), uint16(0), []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2})
	// Take, Reset and Take at one instant, then refund the first and the
	// last: the first is ignored, the last may not be.
	f.Add(uint8(4), uint16(1000), uint8(0), uint16(0), []byte{0x00, 5, 0, 0xf0, 0, 0, 0x00, 0, 0, 0xb0, 0, 1, 0xb0, 0, 0, 0x90, 0, 0})
	// The same with the clock moving between them, and a set of two.
	f.Add(uint8(4), uint16(1000), uint8(9), uint16(4000), []byte{0x00, 5, 0, 0x00, 5, 0, 0xf0, 5, 0, 0x00, 5, 0, 0xb0, 5, 2, 0xb0, 0, 0, 0x90, 0, 0})
	// The clock stepping back across requests, Resets and refunds.
	f.Add(uint8(3), uint16(2000), uint8(2), uint16(500), []byte{0x00, 100, 0, 0x00, 100, 0x40, 0x00, 50, 0xc0, 0xb0, 0, 0, 0xf0, 10, 0x40, 0x00, 0, 0, 0xb0, 100, 1, 0xe0, 0, 3, 0x90, 1, 0})
	// A Reset after the clock stepped back is at the key's latest
	// instant: a request counted then is not taken back from the count
	// that follows.
	f.Add(uint8(4), uint16(3000), uint8(0), uint16(0), []byte{0x00, 100, 0x80, 0xf0, 100, 0xc0, 0x00, 100, 0x80, 0xb0, 0, 1, 0x90, 0, 0})
	// Peek and Refund of keys never seen create nothing.
	f.Add(uint8(4), uint16(3000), uint8(0), uint16(0), []byte{0x91, 0, 0, 0xe2, 0, 0, 0xb3, 1, 0, 0x00, 1, 0})
	f.Fuzz(func(t *testing.T, limit uint8, window uint16, limit2 uint8, window2 uint16, ops []byte) {
		policies := []Policy{{Name: "a", Limit: 1 + int(limit%8), Window: time.Duration(1+window%5000) * time.Millisecond}}
		if window2 != 0 {
			policies = append(policies, Policy{Name: "b", Limit: 1 + int(limit2%16), Window: time.Duration(1+window2%20000) * time.Millisecond})
		}
		set := msSet(t, policies...) // in the order of names, as given
		var off atomic.Int64
		s := newMemoryStore(MemoryConfig{Clock: func() time.Time { return fakeclock.Start.Add(time.Duration(off.Load())) }})
		defer s.Close()
		ref := &msReference{policies: policies, keys: map[string]*msRefKey{}}
		keys := msKeysApart(s, 4)
		ctx := context.Background()
		for i := 0; i+2 < len(ops) && i < 3000; i += 3 {
			op := i / 3
			step := time.Duration(ops[i+1]) * time.Millisecond
			if ops[i+2]&0x80 != 0 {
				step *= 16
			}
			if ops[i+2]&0x40 != 0 {
				step = -step
			}
			off.Add(int64(step))
			r := fakeclock.Start.UnixNano() + off.Load()
			key := keys[ops[i]&3]
			cost := 1 + int(ops[i]>>2&3)
			low := int(ops[i+2] & 0x3f)
			switch kind := ops[i] >> 4; {
			case kind <= 8:
				got, err := s.Take(ctx, key, set, cost)
				want, wantErr := ref.take(key, r, cost)
				if wantErr != nil {
					require.ErrorIs(t, err, wantErr, "op %d: Take(%s, cost %d)", op, key, cost)
					continue
				}
				require.NoError(t, err, "op %d: Take(%s, cost %d)", op, key, cost)
				require.Equal(t, want, got, "op %d: Take(%s, cost %d) at %v", op, key, cost, time.Duration(off.Load()))
				require.True(t, got.Remaining >= 0 && got.Remaining <= got.Limit, "op %d: Remaining %d outside [0, %d]", op, got.Remaining, got.Limit)
				require.True(t, got.Allowed || got.RetryAfter >= time.Millisecond, "op %d: refused with RetryAfter %v, want at least 1ms", op, got.RetryAfter)
			case kind <= 10:
				got, err := s.Peek(ctx, key, set)
				require.NoError(t, err, "op %d: Peek(%s)", op, key)
				require.Equal(t, ref.peek(key, r), got, "op %d: Peek(%s) at %v", op, key, time.Duration(off.Load()))
			case kind <= 14:
				var at time.Time
				if taken := ref.key(key).taken; kind < 14 && len(taken) > 0 {
					at = taken[len(taken)-1-low%len(taken)].at
				} else {
					at = time.Unix(0, r-int64(low)*int64(time.Millisecond))
				}
				err := s.Refund(ctx, key, set, cost, at)
				wantErr := ref.refund(key, r, cost, at.UnixNano())
				if wantErr != nil {
					require.ErrorIs(t, err, wantErr, "op %d: Refund(%s, cost %d)", op, key, cost)
					continue
				}
				require.NoError(t, err, "op %d: Refund(%s, cost %d, at %v)", op, key, cost, at.Sub(fakeclock.Start))
			default:
				require.NoError(t, s.Reset(ctx, key, set), "op %d: Reset(%s)", op, key)
				ref.resetKey(key, r)
			}
			msCheckEntries(t, s, ref, keys, set, op)
		}
		live := 0
		for _, rk := range ref.keys {
			if rk.live {
				live++
			}
		}
		require.Equal(t, live*set.Len(), s.Stats().Keys, "Stats().Keys at the end")
	})
}

// msCheckEntries checks that s holds one entry per policy of each key the
// reference says it holds, and none of the others (the keys' shards hold
// nothing else), and that no log is longer than its limit.
func msCheckEntries(t *testing.T, s *memoryStore, ref *msReference, keys []string, set PolicySet, op int) {
	t.Helper()
	live, entries := 0, 0
	for _, k := range keys {
		sh := s.shardOf(k)
		sh.mu.RLock()
		entries += sh.n
		sh.mu.RUnlock()
		rk := ref.keys[k]
		isLive := rk != nil && rk.live
		if isLive {
			live++
		}
		for j := range set.Len() {
			e := msEntry(s, k, set, j)
			require.Equal(t, isLive, e != nil, "op %d: key %s policy %s: an entry in the store", op, k, set.At(j).Name)
			if e == nil {
				continue
			}
			e.mu.Lock()
			n := len(e.st.instants())
			e.mu.Unlock()
			require.LessOrEqual(t, n, set.At(j).Limit, "op %d: key %s policy %s: instants logged", op, k, set.At(j).Name)
		}
	}
	require.Equal(t, live*set.Len(), entries, "op %d: entries in the store", op)
}
