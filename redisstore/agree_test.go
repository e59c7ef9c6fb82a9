package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// TestAgreesWithMemoryStore drives one seeded random sequence of Take
// (costs 1 to 3), Peek, Refund (of an earlier admission's cost and At)
// and Reset, on a few keys and sets of small limits and windows, through
// this store (without leases; the refusal cache on, as by default, and
// off) and through the memory store, both on one clock that moves by
// whole microseconds or not at all, and wants the same answer from both
// every time: the same error, and the same Result, every field.
//
// The sets are one policy of each algorithm (a Daily quota in New York,
// whose midnight the clock crosses into a day of 23 hours) and mixes of
// two or three; windows are whole multiples of 60 ms, so that GCRA's
// interval (window/limit, limits 2 to 6) is a whole number of
// microseconds, where the README says this store's arithmetic is the
// memory store's exactly.
//
// Two differences are tolerated, both documented: the memory store's
// RetryAfter and Reset are rounded up to a microsecond, as this store
// counts (sameResult; only the window counter's waits have fractions of
// one here), and a refund of requests counted after a Reset at its very
// instant is left out (see resetAt in runAgreement).
func TestAgreesWithMemoryStore(t *testing.T) {
	c := sharedClient(t)
	for _, cache := range []bool{true, false} {
		t.Run(fmt.Sprintf("cache=%v", cache), func(t *testing.T) {
			var total agreeStats
			for seed := range uint64(agreeSeeds) {
				total.add(runAgreement(t, c, seed, cache, agreeOps))
			}
			t.Logf("%+v", total)
			// The traffic did what it is for.
			if total.allowed == 0 || total.refused < total.allowed/4 || total.refunds == 0 || total.resets == 0 || total.dayRolled == 0 {
				t.Errorf("the traffic missed a case: %+v", total)
			}
			if cache && total.cached == 0 {
				t.Errorf("no refusal answered from the cache: %+v", total)
			}
			if !cache && total.cached != 0 {
				t.Errorf("%d refusals answered from a cache that is off", total.cached)
			}
		})
	}
}

// agreeSeeds runs of agreeOps operations each, per variant: 16,000
// operations in all, each on both stores. It is a seeded test, not a fuzz
// target: the corpus would be seeds, and each input costs Redis hundreds of
// calls. 300 seeds (about 40 s) agreed when it was written.
const agreeSeeds, agreeOps = 8, 1000

// agreeStats counts what a run did.
type agreeStats struct {
	takes, allowed, refused, cached, peeks, refunds, resets, dayRolled int
}

func (s *agreeStats) add(o agreeStats) {
	s.takes += o.takes
	s.allowed += o.allowed
	s.refused += o.refused
	s.cached += o.cached
	s.peeks += o.peeks
	s.refunds += o.refunds
	s.resets += o.resets
	s.dayRolled += o.dayRolled
}

// agreeSets returns the sets of a run: one policy of each algorithm, then
// three mixes of two or three, each policy named apart so that no two
// sets share an ID (and so a count).
func agreeSets(t testing.TB, rng *rand.Rand, ny *time.Location) []ratelimit.PolicySet {
	algos := []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA, ratelimit.Daily}
	policy := func(name string, a ratelimit.Algorithm) ratelimit.Policy {
		p := ratelimit.Policy{Name: name, Limit: 2 + rng.IntN(5), Algorithm: a}
		if a == ratelimit.Daily {
			p.Location = ny
		} else {
			// 1 s to 10 s in steps of 60 ms, which every limit divides.
			p.Window = time.Duration(17+rng.IntN(151)) * 60 * time.Millisecond
		}
		return p
	}
	var sets []ratelimit.PolicySet
	for i, a := range algos {
		sets = append(sets, policySet(t, policy(fmt.Sprintf("s%d", i), a)))
	}
	for i := len(algos); i < len(algos)+3; i++ {
		var ps []ratelimit.Policy
		for j := range 2 + rng.IntN(2) {
			ps = append(ps, policy(fmt.Sprintf("s%dp%d", i, j), algos[rng.IntN(len(algos))]))
		}
		sets = append(sets, policySet(t, ps...))
	}
	return sets
}

// runAgreement runs ops random operations on this store, with the refusal
// cache on or off, and on the memory store, and fails t at the first
// answer on which they differ, with the operations that led to it.
func runAgreement(t *testing.T, c *redis.Client, seed uint64, cache bool, ops int) agreeStats {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// Up to two minutes before midnight, in New York, of the day before
	// the spring change: the day that begins has 23 hours.
	start := time.Date(2026, 3, 7, 23, 58, 0, 0, ny).Add(time.Duration(rng.Int64N(120e6)) * time.Microsecond)
	midnight := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	clk := storetest.Clock{}
	clk.Set(start)
	var opts []redisstore.Option
	if !cache {
		opts = append(opts, redisstore.WithRefusalCache(0))
	}
	rs, _ := clockedStore(t, c, &clk, opts...)
	ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()

	sets := agreeSets(t, rng, ny)
	keys := []string{"a", "b", "c"}
	type admitted struct {
		key  string
		set  int
		cost int
		at   time.Time
		// afterReset: a key was Reset under a set at the same instant,
		// before this admission.
		afterReset bool
	}
	var allowed []admitted
	// resetAt holds the instants at which a key was Reset under a set.
	// Store's documentation lets a store ignore a refund of requests
	// counted at the very instant it forgot counts, by a Reset of this key
	// and set or of another: this store ignores those it counted after a
	// Reset of the key and set (its marker says "counted at or before"),
	// since it cannot tell them apart from those it counted before it, and
	// the memory store those a key's new entries counted at the instant
	// its shard forgot others' (a shard tells forgotten entries apart by
	// the instants they were decided at). Such a refund is left out, the
	// one difference the documentation allows; a refund of requests
	// counted at that instant before the Reset, which both must ignore, is
	// not.
	resetAt := map[int64]bool{}
	var st agreeStats
	var trail []string // the operations so far, for the failure message
	key, si := keys[0], 0
	fail := func(format string, args ...any) {
		t.Helper()
		// The operations on the key and set that failed: no other
		// touches their counts.
		var ours []string
		tag := fmt.Sprintf(" %s set %d:", key, si)
		for _, op := range trail {
			if strings.Contains(op, tag) {
				ours = append(ours, op)
			}
		}
		t.Fatalf("seed %d, cache %v: %s: %s\nafter %d operations, these on %s:\n  %s", seed, cache, fmt.Sprintf(format, args...),
			describeSet(sets[si]), len(trail), strings.TrimSuffix(tag, ":"), strings.Join(ours, "\n  "))
	}
	ctx := context.Background()
	cachedBefore := rs.Stats().CachedRefusals
	for range ops {
		switch r := rng.IntN(20); {
		case r < 8: // many requests at one instant
		case r < 16:
			clk.Advance(time.Duration(rng.Int64N(500_000)) * time.Microsecond)
		case r < 19:
			clk.Advance(time.Duration(rng.Int64N(3_000)) * time.Millisecond)
		default: // every rolling window rolls over
			clk.Advance(time.Duration(rng.Int64N(15_000)) * time.Millisecond)
		}
		now := clk.Now()
		if rng.IntN(2) == 0 {
			// Often the key and set before again: a client that keeps
			// asking, past its limit too.
			key, si = keys[rng.IntN(len(keys))], rng.IntN(len(sets))
		}
		set := sets[si]
		head := fmt.Sprintf("+%v %s set %d:", now.Sub(start), key, si)
		switch r := rng.IntN(20); {
		case r < 12:
			cost := 1 + rng.IntN(3)
			if rng.IntN(2) == 0 {
				cost = 1
			}
			got, gerr := rs.Take(ctx, key, set, cost)
			want, werr := ms.Take(ctx, key, set, cost)
			trail = append(trail, fmt.Sprintf("%s Take(%d) = %+v %v", head, cost, want, werr))
			if (gerr == nil) != (werr == nil) || (werr != nil && errors.Is(werr, ratelimit.ErrInvalidCost) != errors.Is(gerr, ratelimit.ErrInvalidCost)) {
				fail("Take(%d): error %v, the memory store's %v", cost, gerr, werr)
			}
			if werr != nil {
				continue
			}
			if !sameResult(got, want) {
				fail("Take(%d): %+v, the memory store's %+v", cost, got, want)
			}
			st.takes++
			if got.Allowed {
				st.allowed++
				allowed = append(allowed, admitted{key, si, cost, got.At, resetAt[got.At.UnixNano()]})
			} else {
				st.refused++
			}
		case r < 15:
			got, gerr := rs.Peek(ctx, key, set)
			want, werr := ms.Peek(ctx, key, set)
			trail = append(trail, fmt.Sprintf("%s Peek = %+v %v", head, want, werr))
			if gerr != nil || werr != nil {
				fail("Peek: error %v, the memory store's %v", gerr, werr)
			}
			if !sameResult(got, want) {
				fail("Peek: %+v, the memory store's %+v", got, want)
			}
			st.peeks++
		case r < 19:
			if len(allowed) == 0 {
				continue
			}
			// Mostly a recent admission, whose request still counts.
			i := len(allowed) - 1 - rng.IntN(min(len(allowed), 8))
			if rng.IntN(4) == 0 {
				i = rng.IntN(len(allowed))
			}
			a := allowed[i]
			allowed = append(allowed[:i], allowed[i+1:]...)
			if a.afterReset {
				continue
			}
			key, si = a.key, a.set
			gerr := rs.Refund(ctx, a.key, sets[a.set], a.cost, a.at)
			werr := ms.Refund(ctx, a.key, sets[a.set], a.cost, a.at)
			trail = append(trail, fmt.Sprintf("+%v %s set %d: Refund(%d, +%v)", now.Sub(start), key, si, a.cost, a.at.Sub(start)))
			if gerr != nil || werr != nil {
				fail("Refund: error %v, the memory store's %v", gerr, werr)
			}
			st.refunds++
		default:
			gerr := rs.Reset(ctx, key, set)
			werr := ms.Reset(ctx, key, set)
			trail = append(trail, fmt.Sprintf("%s Reset", head))
			resetAt[now.UnixNano()] = true
			if gerr != nil || werr != nil {
				fail("Reset: error %v, the memory store's %v", gerr, werr)
			}
			st.resets++
		}
	}
	if clk.Now().After(midnight) {
		st.dayRolled++
	}
	st.cached = int(rs.Stats().CachedRefusals - cachedBefore)
	return st
}

// describeSet lists a set's policies, for a failure message.
func describeSet(s ratelimit.PolicySet) string {
	var parts []string
	for i := range s.Len() {
		p := s.At(i)
		parts = append(parts, fmt.Sprintf("%s %v %d/%v", p.Name, p.Algorithm, p.Limit, p.Window))
	}
	return strings.Join(parts, ", ")
}
