package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones of figZones, whatever the machine has

	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// The figures of a decision, RetryAfter, Reset and Remaining, are computed
// in closed form by each algorithm. These tests check them by brute force
// against the decision itself: on a copy of the key's state after the
// decision, with no other request coming, the algorithm's take without
// recording says what would fit at any later instant. The clock moves in
// nanoseconds, so the instants just before RetryAfter and Reset are 1ns
// before them.

// figZones are where the Daily policy counts, and instants just before a
// change of daylight saving time there, from which the tests start.
var figZones = []struct {
	name  string
	start time.Time
}{
	{"Europe/Berlin", time.Date(2026, 3, 28, 21, 0, 0, 0, time.UTC)},
	{"Europe/Berlin", time.Date(2026, 10, 24, 21, 0, 0, 0, time.UTC)},
	{"America/Santiago", time.Date(2026, 9, 5, 20, 0, 0, 0, time.UTC)},
	{"America/Santiago", time.Date(2026, 4, 4, 20, 0, 0, 0, time.UTC)},
}

// figPolicy is one policy of the sets figRun counts under: its
// algorithm, its window (or, for Daily, the zone and start of figZones
// it picks), and its limit in each of the two sets, which share its counts.
type figPolicy struct {
	algo   Algorithm
	window time.Duration
	zone   int
	limits [2]int
}

// figRun drives one key of a memory store through the Takes, Peeks,
// Refunds, clock steps and limit changes that ops encode, four bytes an
// operation, under two sets of the policies ps that differ only in their
// limits, and checks the figures of every decision (see figCheck). It
// adds what it checked to n.
//
// The first byte picks the cost (1 + its low three bits, modulo the least
// limit) and the operation (its next three bits: 0 to 3 Take, 4 Peek, 5
// Refund of one of the Takes allowed so far, picked by the fourth byte,
// 6 a switch to the other set, 7 Take). The clock moves first, by the
// second byte, scaled as the fourth byte's high two bits say: 0 in
// nanoseconds, backwards if the third byte's high bit is set (the store
// then decides at the latest instant it has seen); 1 in 256ths of the
// first policy's window (an hour for Daily); 2 in 16ths of it plus the third
// byte in nanoseconds; 3 to the latest decision's RetryAfter (third byte
// odd) or Reset (even) from it, give or take a nanosecond.
func figRun(t *testing.T, ps []figPolicy, offset time.Duration, ops []byte, n *figCounts) {
	sets := [2]PolicySet{}
	least := [2]int{}
	for i := range sets {
		var pols []Policy
		least[i] = 1 << 30
		for j, fp := range ps {
			p := Policy{Name: string(rune('a' + j)), Limit: fp.limits[i], Window: fp.window, Algorithm: fp.algo}
			if isCalendar(fp.algo) {
				loc, err := time.LoadLocation(figZones[fp.zone].name)
				require.NoError(t, err)
				p.Window, p.Location = 0, loc
			}
			pols = append(pols, p)
			least[i] = min(least[i], p.Limit)
		}
		sets[i] = msSet(t, pols...)
	}
	require.Equal(t, sets[0].ID(), sets[1].ID(), "sets of other limits count as one")
	unit := int64(ps[0].window)
	start := fakeclock.Start.Add(offset)
	if isCalendar(ps[0].algo) {
		unit = int64(time.Hour)
		start = figZones[ps[0].zone].start.Add(offset)
	}
	clk := fakeclock.New()
	clk.Set(start)
	s := msStore(t, MemoryConfig{Clock: clk.Now})
	ctx := context.Background()
	const key = "k"
	cur := 0
	var taken []msTaken
	var last Result
	for i := 0; i+3 < len(ops); i += 4 {
		b0, b1, b2, b3 := ops[i], ops[i+1], ops[i+2], ops[i+3]
		var step int64
		switch b3 >> 6 {
		case 0:
			step = int64(b1)
			if b2&0x80 != 0 {
				step = -step
			}
		case 1:
			step = unit * int64(b1) / 256
		case 2:
			step = unit*int64(b1)/16 + int64(b2)
		default:
			step = int64(last.Reset)
			if b2&1 != 0 {
				step = int64(last.RetryAfter)
			}
			if !last.At.IsZero() {
				step += last.At.Sub(clk.Now()).Nanoseconds() // from the decision
			}
			step += int64(b1%3) - 1
		}
		clk.Advance(time.Duration(step))
		set := sets[cur]
		cost := 1 + int(b0&7)%least[cur]
		switch kind := b0 >> 3 & 7; kind {
		case 5:
			if len(taken) > 0 {
				tk := taken[int(b3&0x3f)%len(taken)]
				require.NoError(t, s.Refund(ctx, key, set, cost, tk.at))
			}
		case 6:
			cur = 1 - cur
		default:
			var res Result
			var err error
			if kind == 4 {
				res, err = s.Peek(ctx, key, set)
				cost = 1
			} else {
				res, err = s.Take(ctx, key, set, cost)
			}
			require.NoError(t, err)
			if kind != 4 && res.Allowed {
				taken = append(taken, msTaken{res.At, cost})
			}
			figCheck(t, s, key, set, cost, kind == 4, res, i/4, n)
			last = res
		}
	}
}

// figCounts counts the decisions figCheck checked, and some of them.
type figCounts struct {
	decisions int
	refused   int // refusals
	over      int // decisions of a policy that counts more than its limit
	dst       int // decisions of a Daily policy on a day of 23 or 25 hours
}

// figCheck checks res, the decision of a Take (or Peek) of cost for key
// under set, by brute force on copies of the key's states after it:
// whether cost requests would fit at an instant, with nothing counted
// meanwhile, is what the algorithms' take says without recording.
func figCheck(t *testing.T, s *memoryStore, key string, set PolicySet, cost int, peek bool, res Result, op int, counts *figCounts) {
	t.Helper()
	n := set.Len()
	sts := make([]state, n)
	reported := -1
	for j := range n {
		sts[j] = newState()
		if e := msEntry(s, key, set, j); e != nil {
			e.mu.Lock()
			sts[j] = e.st
			e.mu.Unlock()
		}
		if set.At(j).Name == res.Policy {
			reported = j
		}
	}
	require.NotEqual(t, -1, reported, "op %d: Policy %q is not in the set", op, res.Policy)
	now := res.At.UnixNano()
	fitsOne := func(j int, at int64, c int) bool {
		st := sts[j]
		return set.p.algos[j].take(&st, &set.p.policies[j], at, c, false).ok
	}
	fits := func(at int64, c int) bool {
		for j := range n {
			if !fitsOne(j, at, c) {
				return false
			}
		}
		return true
	}
	// remaining is the largest cost that fits the j-th policy at at.
	remaining := func(j int, at int64) int {
		r := 0
		for c := 1; c <= set.At(j).Limit && fitsOne(j, at, c); c++ {
			r = c
		}
		return r
	}
	p := set.At(reported)
	what := func(f string) []any {
		return []any{"op %d: %s; limits %v, cost %d, at %v: %+v", op, f, figLimits(set), cost, res.At.Format(time.RFC3339Nano), res}
	}
	rem := remaining(reported, now)
	counts.decisions++
	if !res.Allowed {
		counts.refused++
	}
	if figOver(sts[reported], &set.p.policies[reported], now) {
		counts.over++
	}
	require.Equal(t, p.Limit, res.Limit, what("Limit")...)
	require.Equal(t, rem, res.Remaining, what("Remaining, the largest cost that fits now")...)
	if peek {
		require.Equal(t, fits(now, 1), res.Allowed, what("Peek's Allowed")...)
	}
	if res.Allowed {
		require.Zero(t, res.RetryAfter, what("RetryAfter of an allowed request")...)
		for j := range n {
			require.True(t, rem <= remaining(j, now), what("Remaining, not the fewest of the set")...)
		}
	} else {
		r := int64(res.RetryAfter)
		require.True(t, r > 0, what("RetryAfter of a refusal")...)
		require.False(t, fits(now+r-1, cost), what("the request fits 1ns before RetryAfter")...)
		require.False(t, fits(now+r/2, cost), what("the request fits halfway to RetryAfter")...)
		require.True(t, fits(now+r, cost), what("the request does not fit at RetryAfter")...)
		require.False(t, fitsOne(reported, now+r-1, cost), what("the policy reported admits the request 1ns before RetryAfter")...)
	}
	if isCalendar(p.Algorithm) {
		// A calendar policy's waits end at the next midnight of its
		// zone: the date changes then, and not before.
		for _, d := range []time.Duration{res.RetryAfter, res.Reset} {
			if d > 0 {
				day := func(at int64) string { return time.Unix(0, at).In(p.Location).Format(time.DateOnly) }
				require.Equal(t, day(now), day(now+int64(d)-1), what("the date 1ns before the end of the period")...)
				require.NotEqual(t, day(now), day(now+int64(d)), what("the date at the end of the period")...)
			}
		}
		if res.Window != 24*time.Hour {
			counts.dst++
		}
	}
	if res.Reset == 0 {
		require.Equal(t, p.Limit, rem, what("Reset 0 while something is counted")...)
		return
	}
	require.True(t, rem < p.Limit, what("Reset while nothing is counted")...)
	r := int64(res.Reset)
	require.True(t, r > 0, what("Reset")...)
	require.Equal(t, rem, remaining(reported, now+r-1), what("Remaining 1ns before Reset")...)
	require.Equal(t, rem, remaining(reported, now+r/2), what("Remaining halfway to Reset")...)
	require.True(t, remaining(reported, now+r) > rem, what("Remaining at Reset")...)
}

// figOver reports whether st counts more than p's limit at now, which it
// may once the limit was lowered.
func figOver(st state, p *Policy, now int64) bool {
	algorithmOf(p.Algorithm).take(&st, p, now, 1, false) // to now's window or period
	switch p.Algorithm {
	case SlidingWindowCounter:
		return windowCounter{}.used(&st, int64(p.Window), now) > int64(p.Limit)
	case GCRA:
		return st.t[0]-now > int64(p.Limit)*interval(p)
	case SlidingLog:
		return len(st.instants()) > p.Limit
	}
	return int(st.n) > p.Limit
}

// figLimits returns the limits of set's policies, for messages.
func figLimits(set PolicySet) []int {
	var ls []int
	for j := range set.Len() {
		ls = append(ls, set.At(j).Limit)
	}
	return ls
}

// TestMemoryStoreFiguresBruteForce runs figRun over random operations for
// each algorithm alone and for pairs of them, with limits of 1 to 7,
// lowered and raised, and windows from 1ms to a few seconds, some not a
// multiple of the limit; and checks that it checked enough decisions of
// each kind.
func TestMemoryStoreFiguresBruteForce(t *testing.T) {
	windows := []time.Duration{time.Millisecond, 3 * time.Millisecond, 7*time.Millisecond + 1, 100 * time.Millisecond, time.Second + 3, 3 * time.Second}
	combos := [][]Algorithm{{SlidingWindowCounter}, {GCRA}, {Daily}, {SlidingWindowCounter, GCRA}, {GCRA, Daily}, {SlidingWindowCounter, SlidingLog}}
	rng := rand.New(rand.NewPCG(1, 2))
	var n figCounts
	for _, combo := range combos {
		// A calendar run is short, to stay near a change of time.
		runs, opsLen := 60, 150
		if isCalendar(combo[0]) {
			runs, opsLen = 360, 25
		}
		for range runs {
			var ps []figPolicy
			for _, a := range combo {
				ps = append(ps, figPolicy{algo: a, window: windows[rng.IntN(len(windows))], zone: rng.IntN(len(figZones)), limits: [2]int{1 + rng.IntN(7), 1 + rng.IntN(7)}})
			}
			offset := time.Duration(rng.Int64N(int64(ps[0].window)))
			if isCalendar(ps[0].algo) {
				offset = time.Duration(rng.Int64N(int64(24*time.Hour))) - 12*time.Hour
			}
			ops := make([]byte, 4*opsLen)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			t.Run(fmt.Sprint(combo), func(t *testing.T) {
				figRun(t, ps, offset, ops, &n)
			})
		}
	}
	t.Logf("%+v", n)
	require.Greater(t, n.decisions, 30000, "decisions checked")
	require.Greater(t, n.refused, 10000, "refusals checked")
	require.Greater(t, n.over, 1000, "decisions over a lowered limit checked")
	require.Greater(t, n.dst, 1000, "decisions of a Daily policy on a day of 23 or 25 hours checked")
}

// FuzzMemoryStoreFigures is figRun of fuzzed operations under one policy,
// or two when algo2 picks a second.
func FuzzMemoryStoreFigures(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(1), uint32(7_000_001), uint8(0), uint32(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0x40, 0x30, 0, 0, 0, 0, 1, 1, 0xc0, 0, 1, 0, 0xc0})
	f.Add(uint8(1), uint8(7), uint8(2), uint32(1_000_003), uint8(0), uint32(5), []byte{0x06, 0, 0, 0, 0x06, 0, 0, 0, 0x30, 0, 0, 0, 0x01, 0, 0, 0, 0x20, 0, 1, 0xc0, 0x00, 1, 0, 0xc0, 0x28, 0, 0, 0, 0x20, 0, 0, 0xc0})
	f.Add(uint8(2), uint8(2), uint8(1), uint32(0), uint8(0), uint32(1_000_000), []byte{0x01, 0, 0, 0, 0x00, 0, 0, 0, 0x00, 4, 0, 0x80, 0x30, 0, 0, 0, 0x00, 1, 1, 0xc0, 0x00, 0, 0, 0xc0, 0x00, 2, 0, 0xc0})
	f.Add(uint8(4), uint8(5), uint8(3), uint32(2_000_000), uint8(2), uint32(77), []byte{0x02, 0, 0, 0, 0x00, 9, 0, 0x40, 0x30, 0, 0, 0, 0x02, 0, 1, 0xc0, 0x20, 3, 0x80, 0, 0x00, 1, 0, 0xc0})
	f.Fuzz(func(t *testing.T, algo, limit, limit2 uint8, window uint32, algo2 uint8, offset uint32, ops []byte) {
		algos := []Algorithm{SlidingWindowCounter, GCRA, Daily, SlidingLog}
		w := time.Millisecond + time.Duration(window) // 1ms to 4.3s
		ps := []figPolicy{{algo: algos[int(algo)%3], window: w, zone: int(algo/3) % len(figZones), limits: [2]int{1 + int(limit%7), 1 + int(limit2%7)}}}
		if algo2 != 0 {
			ps = append(ps, figPolicy{algo: algos[int(algo2)%4], window: w*time.Duration(1+algo2%5) + time.Duration(algo2), zone: int(algo2/4) % len(figZones), limits: [2]int{1 + int(limit2%7), 1 + int(limit%7)}})
		}
		if len(ops) > 4*500 {
			ops = ops[:4*500]
		}
		figRun(t, ps, time.Duration(offset)*time.Microsecond, ops, &figCounts{})
	})
}
