package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// The memory store's tests of the Store contract are in storetest, run by
// TestMemoryStoreConformance; these test what only the memory store does,
// and look at its internals to do it.

// msAlgorithms are the algorithms every test that is about all of them
// runs over.
var msAlgorithms = []Algorithm{SlidingLog, SlidingWindowCounter, GCRA}

// msStore returns a memory store made from c, closed when t ends.
func msStore(t testing.TB, c MemoryConfig) *memoryStore {
	t.Helper()
	st, err := NewMemoryStore(c)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st.(*memoryStore)
}

// msSet returns the set of ps, failing t if they are not one.
func msSet(t testing.TB, ps ...Policy) PolicySet {
	t.Helper()
	s, err := NewPolicySet(ps...)
	require.NoError(t, err)
	return s
}

// msTake is s.Take of cost 1, failing t on an error.
func msTake(t testing.TB, s Store, key string, set PolicySet) Result {
	t.Helper()
	res, err := s.Take(context.Background(), key, set, 1)
	require.NoError(t, err, "Take(%q)", key)
	return res
}

// msPeek is s.Peek, failing t on an error.
func msPeek(t testing.TB, s Store, key string, set PolicySet) Result {
	t.Helper()
	res, err := s.Peek(context.Background(), key, set)
	require.NoError(t, err, "Peek(%q)", key)
	return res
}

// msEntry returns the entry of key under the i-th policy of set, or nil.
func msEntry(s *memoryStore, key string, set PolicySet, i int) *entry {
	sh := s.shardOf(key)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if g := sh.sets[set.ID()]; g != nil {
		return g.m[i][key]
	}
	return nil
}

// msLog returns the log of key under the first policy of set (a sliding
// log): its instants, a copy, how many its memory has room for, and
// whether it is held inline in the state (no slice).
func msLog(t testing.TB, s *memoryStore, key string, set PolicySet) (instants []int64, capacity int, inline bool) {
	t.Helper()
	e := msEntry(s, key, set, 0)
	require.NotNil(t, e, "no entry for %q", key)
	e.mu.Lock()
	defer e.mu.Unlock()
	capacity = len(e.st.t)
	if e.st.log != nil {
		capacity = cap(*e.st.log)
	}
	return append([]int64(nil), e.st.instants()...), capacity, e.st.log == nil
}

// msSweepAll sweeps every shard of s as the background sweep does, at the
// store's present reading of its clock.
func msSweepAll(s *memoryStore) {
	for i := range s.shards {
		sh := &s.shards[i]
		now := s.now()
		sh.mu.Lock()
		s.sweep(sh, now)
		sh.mu.Unlock()
	}
}

// msSince returns the instant d after fakeclock.Start, in Unix nanoseconds.
func msSince(d time.Duration) int64 { return fakeclock.Start.Add(d).UnixNano() }

// The log grows on demand, never beyond the limit, and goes back to the
// instant held inline in the state when it drains to one: a limit of a
// billion costs nothing until it is used.
func TestSlidingLogGrowsOnDemand(t *testing.T) {
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{Clock: clk.Now})
	huge := msSet(t, Policy{Name: "huge", Limit: 1_000_000_000, Window: time.Hour})

	require.True(t, msTake(t, s, "k", huge).Allowed)
	ts, _, inline := msLog(t, s, "k", huge)
	assert.True(t, inline, "one request under a limit of a billion: want the instant inline, no slice")
	assert.Len(t, ts, 1)

	for range 98 {
		require.True(t, msTake(t, s, "k", huge).Allowed, "request refused under a limit of a billion")
	}
	clk.Advance(time.Millisecond)
	msTake(t, s, "k", huge) // the 100th, a millisecond after the others
	ts, c, inline := msLog(t, s, "k", huge)
	require.False(t, inline)
	assert.Len(t, ts, 100)
	assert.LessOrEqual(t, c, 128, "100 requests under a limit of a billion: capacity %d, want <= 128 (grown on demand)", c)

	// The 99 first leave the window; the last is held inline again.
	clk.Advance(time.Hour - time.Millisecond)
	res := msPeek(t, s, "k", huge)
	assert.Equal(t, 1_000_000_000-1, res.Remaining, "Peek an hour after the first 99")
	ts, _, inline = msLog(t, s, "k", huge)
	assert.True(t, inline, "a log drained to one instant: want it inline, the slice let go")
	assert.Equal(t, []int64{msSince(time.Millisecond)}, ts, "the instant kept")

	// And grows again from there.
	msTake(t, s, "k", huge)
	ts, _, inline = msLog(t, s, "k", huge)
	assert.False(t, inline)
	assert.Equal(t, []int64{msSince(time.Millisecond), msSince(time.Hour)}, ts)
}

// However a key's traffic goes, its log never holds, nor has room for,
// more instants than its limit: filling up to the limit, then sustained at
// the limit's rate, where each request lets one instant go and logs one.
func TestSlidingLogCapacityNeverExceedsTheLimit(t *testing.T) {
	limits := []int{300, 1000}
	for l := 1; l <= 20; l++ {
		limits = append(limits, l)
	}
	for _, limit := range limits {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set := msSet(t, Policy{Name: "p", Limit: limit, Window: time.Minute})
			// The sustained rate, rounded up: always allowed, and the log
			// is full from the limit-th request on.
			step := (time.Minute + time.Duration(limit) - 1) / time.Duration(limit)
			for i := range 3 * limit {
				clk.Advance(step)
				require.True(t, msTake(t, s, "k", set).Allowed, "request %d", i)
				ts, c, _ := msLog(t, s, "k", set)
				require.LessOrEqual(t, len(ts), limit, "request %d: instants logged", i)
				require.LessOrEqual(t, c, limit, "request %d: capacity of the log of %d instants, limit %d", i, len(ts), limit)
			}
		})
	}
}

// A flood of distinct keys that then go idle does not keep its memory:
// new keys sweep idle ones as they arrive, and the background sweep clears
// the rest and gives the shards maps of their new size.
func TestIdleKeysAreSweptUnderAFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := NewMemoryStore(MemoryConfig{})
		require.NoError(t, err)
		defer st.Close()
		s := st.(*memoryStore)
		p := msSet(t, Policy{Name: "p", Limit: 10, Window: time.Second})
		const wave = 20_000
		for i := range wave {
			msTake(t, s, "flood-"+strconv.Itoa(i), p)
		}
		require.Equal(t, wave, s.Stats().Keys, "after one wave within a window")

		// The first wave is idle now; a second wave sweeps it as it comes.
		time.Sleep(2 * time.Second) // synctest's clock
		for i := range wave {
			msTake(t, s, "second-"+strconv.Itoa(i), p)
		}
		assert.LessOrEqual(t, s.Stats().Keys, wave+wave/2, "after a second wave (idle keys swept by new ones)")

		// With no traffic at all, the background sweep drops everything.
		time.Sleep(sweepInterval + time.Second)
		synctest.Wait()
		assert.Equal(t, 0, s.Stats().Keys, "after a quiet sweep interval")
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.RLock()
			peak := sh.peak
			sh.mu.RUnlock()
			assert.Less(t, peak, 64, "shard %d after the sweep: a map sized for %d entries, want a fresh one", i, peak)
		}
	})
}

// msKeysIn returns n keys, prefix and a number, that fall in shard sh of s.
func msKeysIn(s *memoryStore, sh *shard, prefix string, n int) []string {
	keys := make([]string, 0, n)
	var buf []byte
	for i := 0; len(keys) < n; i++ {
		buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
		// Only the keys kept are made strings: most candidates fall
		// elsewhere.
		if s.shardOf(unsafe.String(&buf[0], len(buf))) == sh {
			keys = append(keys, string(buf))
		}
	}
	return keys
}

// New keys sweep the idle keys of their shard, for every algorithm, as
// soon as those can be idle: for GCRA that is after one emission interval,
// however long the window. Over many waves of keys, each a quiet time
// after the one before, a shard never holds many more than two waves: the
// one arriving and the one before, not idle yet. The waves are aimed at
// one shard, so that they are large for it and cheap for the test.
func TestNewKeysSweepIdleOnes(t *testing.T) {
	for _, tt := range []struct {
		p     Policy
		quiet time.Duration // until a key with one request is idle
	}{
		{Policy{Name: "p", Limit: 10, Window: time.Second}, time.Second},
		{Policy{Name: "p", Limit: 10, Window: time.Second, Algorithm: SlidingWindowCounter}, 2 * time.Second},
		{Policy{Name: "p", Limit: 1_000_000, Window: time.Second, Algorithm: GCRA}, time.Microsecond},
	} {
		t.Run(tt.p.Algorithm.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set := msSet(t, tt.p)
			sh := &s.shards[0]
			const wave = 1000
			fill := func(prefix string) {
				for _, k := range msKeysIn(s, sh, prefix, wave) {
					msTake(t, s, k, set)
				}
			}
			fill("first-")
			clk.Advance(tt.quiet - 1)
			fill("second-")
			require.Equal(t, 2*wave, s.Stats().Keys, "a nanosecond before the first wave is idle")
			clk.Advance(1)
			fill("third-")
			assert.LessOrEqual(t, s.Stats().Keys, 2*wave+wave/10, "after a third wave (the first swept by new keys)")
			for i := range 6 {
				clk.Advance(tt.quiet)
				fill("wave-" + strconv.Itoa(i) + "-")
				assert.LessOrEqual(t, s.Stats().Keys, 2*wave+wave/10, "after wave %d", i+4)
			}
		})
	}
}

// A new entry does not send its shard to be swept before the entry could
// be idle: a flood of new keys within one window costs no sweep, for the
// log and the counter a window after their first request, for GCRA one
// emission interval, and for a day at its end.
func TestNewEntriesPutTheSweepOffUntilTheyCanBeIdle(t *testing.T) {
	for _, tt := range []struct {
		p     Policy
		quiet time.Duration
	}{
		{Policy{Name: "p", Limit: 10, Window: time.Minute}, time.Minute},
		{Policy{Name: "p", Limit: 10, Window: time.Minute, Algorithm: SlidingWindowCounter}, time.Minute},
		{Policy{Name: "p", Limit: 10, Window: time.Minute, Algorithm: GCRA}, 6 * time.Second},
		{Policy{Name: "p", Limit: 10, Algorithm: Daily}, 24 * time.Hour},
	} {
		t.Run(tt.p.Algorithm.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set, sh := msSet(t, tt.p), &s.shards[0]
			for _, k := range msKeysIn(s, sh, "k-", 2*minSweepLen) {
				msTake(t, s, k, set)
			}
			sh.mu.RLock()
			defer sh.mu.RUnlock()
			assert.Equal(t, clk.Now().Add(tt.quiet).UnixNano(), sh.sweepAt, "the shard's next sweep")
			assert.Equal(t, minSweepLen, sh.sweepLen, "the shard holds %d entries and was never swept", sh.n)
		})
	}
}

// A key's entry goes idle by its own policy's window, not by the longest
// window the store has seen: a daily policy beside a per-second one does
// not keep a flood of per-second keys for a day, nor lock new clients out
// of a bounded store; and of one key under both, the per-second entry
// goes while the daily one stays.
func TestKeysGoIdleByTheirOwnWindows(t *testing.T) {
	ctx := context.Background()
	daily := msSet(t, Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour})
	perSecond := msSet(t, Policy{Name: "default", Limit: 10, Window: time.Second})
	t.Run("bounded", func(t *testing.T) {
		clk := fakeclock.New()
		// A bound of 1024 in 64 shards of 16: the 100 new clients would
		// have to crowd 16 into one shard to fill it once the flood is
		// idle, a chance of about one in 10^11.
		s := msStore(t, MemoryConfig{MaxKeys: 1024, Clock: clk.Now})
		require.True(t, msTake(t, s, "daily-client", daily).Allowed)
		refused := 0
		for i := range 2000 {
			if _, err := s.Take(ctx, "flood-"+strconv.Itoa(i), perSecond, 1); err != nil {
				require.ErrorIs(t, err, errStoreFull)
				refused++
			}
		}
		require.Positive(t, refused, "the flood of 2000 keys never filled a store of 1024")
		clk.Advance(10 * time.Second)
		refused = 0
		for i := range 100 {
			if _, err := s.Take(ctx, "new-"+strconv.Itoa(i), perSecond, 1); err != nil {
				refused++
			}
		}
		assert.Zero(t, refused, "10s after a flood of 1s-window keys: new clients refused (the flood is idle)")
		assert.Equal(t, 998, msTake(t, s, "daily-client", daily).Remaining, "the daily client's count")
	})
	t.Run("unbounded", func(t *testing.T) {
		clk := fakeclock.New()
		s := msStore(t, MemoryConfig{Clock: clk.Now})
		msTake(t, s, "daily-client", daily)
		for i := range 1000 {
			msTake(t, s, "flood-"+strconv.Itoa(i), perSecond)
		}
		clk.Advance(2 * time.Second)
		msSweepAll(s)
		assert.Equal(t, 1, s.Stats().Keys, "2s after a flood of 1s-window keys: entries kept (the daily client's)")
		assert.Equal(t, 998, msTake(t, s, "daily-client", daily).Remaining, "the daily client after the sweep")
	})
	t.Run("one key under both", func(t *testing.T) {
		clk := fakeclock.New()
		s := msStore(t, MemoryConfig{Clock: clk.Now})
		both := msSet(t, Policy{Name: "burst", Limit: 10, Window: time.Second}, Policy{Name: "daily", Limit: 5, Window: 24 * time.Hour})
		for range 3 {
			msTake(t, s, "k", both)
		}
		require.Equal(t, 2, s.Stats().Keys, "one key under a set of two policies: one entry per policy")
		clk.Advance(2 * time.Second)
		msSweepAll(s)
		assert.Equal(t, 1, s.Stats().Keys, "2s later: entries kept (the daily one)")
		assert.Nil(t, msEntry(s, "k", both, 0), "the burst entry, idle, is still kept")
		assert.NotNil(t, msEntry(s, "k", both, 1), "the daily entry is gone")
		res := msPeek(t, s, "k", both)
		assert.Equal(t, "daily", res.Policy)
		assert.Equal(t, 2, res.Remaining, "the daily count after the sweep")
	})
}

// Sets of different windows first used at once never make the store
// forget a count early: what an entry may be dropped by comes from its own
// policy, which its group's set gives it by its set's ID.
func TestFirstUsesOfWindowsAtOnce(t *testing.T) {
	long := msSet(t, Policy{Name: "p", Limit: 1, Window: time.Hour})
	shorts := make([]PolicySet, 8)
	for i := range shorts {
		shorts[i] = msSet(t, Policy{Name: "p", Limit: 1, Window: time.Duration(i+1) * time.Millisecond})
	}
	for round := range 50 {
		clk := fakeclock.New()
		s := msStore(t, MemoryConfig{Clock: clk.Now})
		var wg sync.WaitGroup
		wg.Go(func() { s.Take(context.Background(), "long", long, 1) })
		for i := range shorts {
			wg.Go(func() { s.Take(context.Background(), "short", shorts[i], 1) })
		}
		wg.Wait()
		clk.Advance(time.Second)
		msSweepAll(s)
		require.False(t, msTake(t, s, "long", long).Allowed, "round %d: the hour-long count was forgotten after a second", round)
	}
}

// msLoops is what msGuard's clock panics with.
type msLoops struct{ reads int64 }

// msGuard is a clock that stops a store looping: read more than 100
// times in one call of take, which reads it once or twice, it panics out
// of the store (which reads it holding no lock), and take fails the test.
type msGuard struct {
	clk   *fakeclock.Clock
	reads atomic.Int64
}

func (g *msGuard) Now() time.Time {
	if n := g.reads.Add(1); n > 100 {
		panic(msLoops{n})
	}
	return g.clk.Now()
}

// take is s.Take of cost 1, failing t if it loops.
func (g *msGuard) take(t testing.TB, s Store, key string, set PolicySet) (res Result, err error) {
	t.Helper()
	g.reads.Store(0)
	defer func() {
		if r := recover(); r != nil {
			l, ok := r.(msLoops)
			if !ok {
				panic(r)
			}
			t.Fatalf("Take(%q) loops: it read the clock %d times and goes on", key, l.reads)
		}
	}()
	return s.Take(context.Background(), key, set, 1)
}

// msBounds are the MaxKeys the bound tests run over: those of one shard
// (bounded exactly), around the first of two, and larger.
func msBounds() []int {
	bounds := []int{31, 32, 33, 100, 1000, 4099}
	for n := 1; n <= 17; n++ {
		bounds = append(bounds, n)
	}
	return bounds
}

// A store bounded by MaxKeys never holds more entries than that, whatever
// the bound (small ones make a store of one shard, bounded exactly), and
// refuses the rest with errStoreFull.
func TestMaxKeys(t *testing.T) {
	p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Minute})
	for _, n := range msBounds() {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			g := &msGuard{clk: fakeclock.New()}
			s := msStore(t, MemoryConfig{MaxKeys: n, Clock: g.Now})
			served, full := 0, 0
			for i := range 3 * n {
				_, err := g.take(t, s, "k"+strconv.Itoa(i), p)
				switch {
				case err == nil:
					served++
				case errors.Is(err, errStoreFull):
					full++
				default:
					require.NoError(t, err, "key %d", i)
				}
				if i%(n/64+1) == 0 { // Stats visits every shard
					require.LessOrEqual(t, s.Stats().Keys, n, "after key %d: entries tracked", i)
				}
			}
			st := s.Stats()
			assert.Equal(t, served, st.Keys, "keys served and entries tracked")
			assert.Equal(t, uint64(full), st.Rejected, "Stats().Rejected, %d keys refused", full)
			assert.Zero(t, st.Evicted)
			if n < 2*minPerShard {
				assert.Equal(t, n, served, "a store of one shard is bounded exactly")
			} else {
				assert.Positive(t, full, "%d keys into a store of %d: none refused", 3*n, n)
			}
		})
	}
}

// MaxKeys bounds entries, one per key and policy, so a key under a set of
// two needs two places: a store with one place left refuses it, or makes
// room, and never loops, making room for one of its entries by dropping
// the other, new and so still idle.
func TestMaxKeysWithSetsOfTwoPolicies(t *testing.T) {
	two := msSet(t, Policy{Name: "a", Limit: 5, Window: time.Minute}, Policy{Name: "b", Limit: 50, Window: time.Hour})
	for _, evict := range []bool{false, true} {
		for _, n := range msBounds() {
			t.Run(fmt.Sprintf("evict=%v/%d", evict, n), func(t *testing.T) {
				g := &msGuard{clk: fakeclock.New()}
				s := msStore(t, MemoryConfig{MaxKeys: n, EvictLeastRecent: evict, Clock: g.Now})
				full := 0
				for i := range 3 * n {
					_, err := g.take(t, s, "k"+strconv.Itoa(i), two)
					if err != nil {
						require.ErrorIs(t, err, errStoreFull, "key %d", i)
						full++
					}
					if i%(n/64+1) == 0 { // Stats visits every shard
						require.LessOrEqual(t, s.Stats().Keys, n, "after key %d: entries tracked", i)
					}
				}
				assert.Equal(t, uint64(full), s.Stats().Rejected, "Stats().Rejected, %d keys refused", full)
			})
		}
	}
}

// A full store that does not evict keeps the exact count of the keys it
// tracks, whatever a flood of new keys does.
func TestMaxKeysKeepsTrackedCounts(t *testing.T) {
	p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Minute})
	s := msStore(t, MemoryConfig{MaxKeys: 64})
	msTake(t, s, "legit", p)
	refused := 0
	for i := range 1000 {
		if _, err := s.Take(context.Background(), "k"+strconv.Itoa(i), p, 1); errors.Is(err, errStoreFull) {
			refused++
		}
	}
	st := s.Stats()
	assert.LessOrEqual(t, st.Keys, 64, "entries tracked")
	assert.Positive(t, refused, "keys refused")
	assert.Equal(t, uint64(refused), st.Rejected, "Stats().Rejected")
	res := msTake(t, s, "legit", p)
	assert.True(t, res.Allowed)
	assert.Equal(t, 3, res.Remaining, "the legitimate key's second request after the flood")
}

// An evicting store serves every new key, dropping live ones.
func TestMaxKeysEvicting(t *testing.T) {
	p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Minute})
	s := msStore(t, MemoryConfig{MaxKeys: 64, EvictLeastRecent: true})
	for i := range 1000 {
		msTake(t, s, "k"+strconv.Itoa(i), p)
	}
	st := s.Stats()
	assert.LessOrEqual(t, st.Keys, 64, "entries tracked")
	assert.Equal(t, uint64(1000-st.Keys), st.Evicted, "Stats().Evicted: keys added minus keys kept")
	assert.Zero(t, st.Rejected)
}

// Of the entries it samples, a full evicting store drops the one least
// recently decided. A store of 8 keys is one shard whose sample is all of
// it, so the victim is the store's least recent key.
func TestEvictLeastRecentDropsTheLeastRecentlyDecided(t *testing.T) {
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{MaxKeys: evictSample, EvictLeastRecent: true, Clock: clk.Now})
	require.Len(t, s.shards, 1)
	p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour})
	for i := range evictSample {
		clk.Advance(time.Millisecond)
		msTake(t, s, "k"+strconv.Itoa(i), p)
	}
	clk.Advance(time.Millisecond)
	msTake(t, s, "k0", p) // k1 is the least recent now
	clk.Advance(time.Millisecond)
	msTake(t, s, "new", p)
	assert.Nil(t, msEntry(s, "k1", p, 0), "k1, the least recently decided, is still kept")
	for _, k := range []string{"k0", "k2", "k3", "k4", "k5", "k6", "k7", "new"} {
		assert.NotNil(t, msEntry(s, k, p, 0), "%s was evicted, want k1", k)
	}
	assert.Equal(t, uint64(1), s.Stats().Evicted)

	clk.Advance(time.Millisecond)
	assert.Equal(t, 4, msTake(t, s, "k1", p).Remaining, "k1 returns: its count starts over")
	assert.Nil(t, msEntry(s, "k2", p, 0), "k2, now the least recently decided, is still kept")
	assert.Equal(t, uint64(2), s.Stats().Evicted)
}

// A full evicting store samples the entries of every policy it holds, not
// those of the policy numbered first alone: a flood of new keys under one
// policy does not evict the keys just decided under another while its own
// older keys stay.
func TestEvictLeastRecentSamplesEveryPolicy(t *testing.T) {
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{MaxKeys: 2 * evictSample, EvictLeastRecent: true, Clock: clk.Now})
	require.Len(t, s.shards, 1)
	recent := msSet(t, Policy{Name: "recent", Limit: 5, Window: time.Hour})
	flood := msSet(t, Policy{Name: "flood", Limit: 5, Window: time.Hour})
	msPeek(t, s, "k", recent) // numbered first
	for i := range evictSample {
		msTake(t, s, "flood"+strconv.Itoa(i), flood)
	}
	clk.Advance(time.Minute)
	for i := range evictSample {
		msTake(t, s, "recent"+strconv.Itoa(i), recent)
	}
	clk.Advance(time.Millisecond)
	msTake(t, s, "new", flood)
	require.Equal(t, uint64(1), s.Stats().Evicted)
	for i := range evictSample {
		k := "recent" + strconv.Itoa(i)
		assert.NotNil(t, msEntry(s, k, recent, 0), "%s, decided a minute after every flood key, was evicted", k)
	}
}

// An eviction samples evictSample of a shard's maps when more hold
// entries, not every one, so that a shard of many sets (WithLimits can
// give each client a window of its own) costs an eviction no more than a
// shard of one: the oldest of 30 keys, each under a set of its own, is
// not the victim every time, as it would be if all 30 were sampled.
func TestEvictLeastRecentSamplesABoundedNumberOfSets(t *testing.T) {
	const keys, rounds = 30, 40
	sets := make([]PolicySet, keys+1)
	for i := range sets {
		sets[i] = msSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour + time.Duration(i)*time.Millisecond})
	}
	oldestEvicted := 0
	for range rounds {
		clk := fakeclock.New()
		s := msStore(t, MemoryConfig{MaxKeys: keys, EvictLeastRecent: true, Clock: clk.Now})
		require.Len(t, s.shards, 1)
		msTake(t, s, "oldest", sets[0])
		clk.Advance(time.Minute)
		for i := 1; i < keys; i++ {
			msTake(t, s, "k"+strconv.Itoa(i), sets[i])
		}
		clk.Advance(time.Millisecond)
		msTake(t, s, "new", sets[keys])
		require.Equal(t, uint64(1), s.Stats().Evicted)
		if msEntry(s, "oldest", sets[0], 0) == nil {
			oldestEvicted++
		}
	}
	assert.Less(t, oldestEvicted, rounds, "rounds in which the oldest of %d keys under sets of their own was evicted", keys)
}

// A full store that does not evict drops an idle key for a new one
// whenever it holds one, even where a sample of its keys would miss it.
func TestMaxKeysFindsTheIdleKey(t *testing.T) {
	short := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Second})
	long := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour})
	for round := range 40 {
		clk := fakeclock.New()
		s := msStore(t, MemoryConfig{MaxKeys: 16, Clock: clk.Now})
		msTake(t, s, "idle soon", short)
		clk.Advance(2 * time.Second)
		for i := range 15 {
			msTake(t, s, "live-"+strconv.Itoa(i), long)
		}
		_, err := s.Take(context.Background(), "new", long, 1)
		require.NoError(t, err, "round %d: a new key beside 15 live ones and an idle one", round)
	}
}

// An entry a refund leaves idle is as idle as one whose window passed: a
// full store that does not evict drops it for a new key, even where its
// sample misses it and its last sweep found nothing to drop.
func TestMaxKeysFindsTheKeyARefundLeftIdle(t *testing.T) {
	ctx := context.Background()
	for _, a := range msAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour, Algorithm: a})
			for round := range 40 {
				clk := fakeclock.New()
				const n = 2*minPerShard - 1 // the most one shard holds
				s := msStore(t, MemoryConfig{MaxKeys: n, Clock: clk.Now})
				require.Len(t, s.shards, 1)
				var first Result
				for i := range n {
					res := msTake(t, s, "live-"+strconv.Itoa(i), p)
					if i == 0 {
						first = res
					}
				}
				// The store is full of live keys: it sweeps, finds nothing
				// and refuses.
				_, err := s.Take(ctx, "refused", p, 1)
				require.ErrorIs(t, err, errStoreFull)
				// Now live-0 gives its only request back, and is idle.
				require.NoError(t, s.Refund(ctx, "live-0", p, 1, first.At))
				res := msPeek(t, s, "live-0", p)
				require.Equal(t, Result{Allowed: true, Limit: 5, Remaining: 5, Policy: "p", Window: time.Hour, At: first.At}, res, "live-0 after its refund")
				_, err = s.Take(ctx, "new", p, 1)
				require.NoError(t, err, "round %d: a new key beside %d live keys and one a refund left idle", round, n-1)
			}
		})
	}
}

// msShardKeys returns n keys of one shard of s, named after prefix.
func msShardKeys(s *memoryStore, prefix string, n int) []string {
	var ks []string
	want := s.shardOf(prefix + "0")
	for i := 0; len(ks) < n; i++ {
		if k := prefix + strconv.Itoa(i); s.shardOf(k) == want {
			ks = append(ks, k)
		}
	}
	return ks
}

// msShardBound is the bound per shard of the stores msFullShardStore makes.
const msShardBound = 256

// msFullShardStore returns a store of msShardBound entries a shard on clk.
func msFullShardStore(t *testing.T, clk *fakeclock.Clock) *memoryStore {
	t.Helper()
	s := msStore(t, MemoryConfig{MaxKeys: msShardBound * maxShards, Clock: clk.Now})
	require.Equal(t, msShardBound, s.perShard)
	return s
}

// A full shard sweeps for room at most once msShardBound sweepGap unless it has
// been asked to hold enough new keys to pay for it, so that a flood of new keys at a
// full store, its keys going idle one by one as it churns, costs each new
// key a few entry visits and not a sweep of the shard.
func TestAFullShardSweepsForRoomWithinABudget(t *testing.T) {
	clk := fakeclock.New()
	s := msFullShardStore(t, clk)
	p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Second})
	ks := msShardKeys(s, "k", 2*msShardBound)
	live, fresh := ks[:msShardBound], ks[msShardBound:]
	for _, k := range live { // live[i] goes idle at i ms past a second
		msTake(t, s, k, p)
		clk.Advance(time.Millisecond)
	}
	clk.Advance(time.Second - msShardBound*time.Millisecond + time.Microsecond)
	ctx := context.Background()
	_, err := s.Take(ctx, fresh[0], p, 1)
	require.NoError(t, err, "the first new key at a full shard, live[0] idle: the shard sweeps")
	require.Nil(t, msEntry(s, live[0], p, 0), "live[0], idle, swept")

	clk.Advance(time.Millisecond) // live[1] is idle too
	// At sweepVisits entry visits each, msShardBound/sweepVisits new keys
	// pay for the next sweep, the one that asks included.
	asks := msShardBound/sweepVisits - 1
	for i := 1; i < asks; i++ {
		_, err := s.Take(ctx, fresh[i], p, 1)
		require.ErrorIs(t, err, errStoreFull, "ask %d for room within the budget", i)
	}
	require.NotNil(t, msEntry(s, live[1], p, 0), "live[1], idle, waits for the sweep")
	_, err = s.Take(ctx, fresh[asks], p, 1)
	require.NoError(t, err, "ask %d for room pays for a sweep", asks)
	require.Nil(t, msEntry(s, live[1], p, 0), "live[1], idle, swept")

	clk.Advance(time.Millisecond) // live[2] is idle too
	_, err = s.Take(ctx, fresh[asks+1], p, 1)
	require.ErrorIs(t, err, errStoreFull, "a new key a millisecond after a sweep")
	clk.Advance(sweepGap)
	_, err = s.Take(ctx, fresh[asks+2], p, 1)
	require.NoError(t, err, "a new key sweepGap after a sweep")
	assert.Equal(t, uint64(asks), s.Stats().Rejected, "new keys refused")
}

// A shard that swept at an instant an injected clock then stepped back
// from counts sweepGap from the clock's new readings, not from the sweep's
// instant, which the clock may not read again for as long as it stepped
// back: a full shard still looks for idle entries a second later.
func TestAFullShardSweepsForRoomAfterTheClockStepsBack(t *testing.T) {
	clk := fakeclock.New()
	s := msFullShardStore(t, clk)
	long := msSet(t, Policy{Name: "long", Limit: 5, Window: time.Hour})
	short := msSet(t, Policy{Name: "short", Limit: 5, Window: time.Second})
	ks := msShardKeys(s, "k", msShardBound+4)
	for _, k := range ks[:msShardBound-1] {
		msTake(t, s, k, long)
	}
	msTake(t, s, ks[msShardBound-1], short) // idle a second later
	clk.Advance(10 * time.Minute)
	ctx := context.Background()
	y, err := s.Take(ctx, ks[msShardBound], short, 1)
	require.NoError(t, err, "a new key at the full shard, one of its keys idle: the shard sweeps")

	clk.Advance(-9 * time.Minute) // back to 1m, before the sweep
	require.NoError(t, s.Refund(ctx, ks[msShardBound], short, 1, y.At), "the new key gives its request back: idle")
	_, err = s.Take(ctx, ks[msShardBound+1], short, 1)
	require.ErrorIs(t, err, errStoreFull, "a new key right after the refund, within the budget")
	clk.Advance(sweepGap + time.Millisecond)
	_, err = s.Take(ctx, ks[msShardBound+2], short, 1)
	assert.NoError(t, err, "a new key sweepGap after the clock stepped back, beside an idle key")
}

func TestCloseStopsTheSweepAndIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := NewMemoryStore(MemoryConfig{})
		require.NoError(t, err)
		s := st.(*memoryStore)
		p := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Second})
		msTake(t, s, "k", p)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "second Close")
		// No sweep runs any more; the store still answers.
		time.Sleep(2 * sweepInterval) // synctest's clock
		assert.Equal(t, 1, s.Stats().Keys, "two sweep intervals after Close: the idle key was swept")
		assert.Equal(t, 4, msTake(t, s, "k2", p).Remaining, "a Take after Close")
		// synctest.Test fails if the sweep goroutine outlives the bubble.
	})
}

// An injected clock that steps back is taken, for each entry, as the
// latest instant that entry was decided at, so that no window is measured
// backwards and logs stay in order; another entry, which has not seen the
// later instant, is decided at the reading itself.
func TestInjectedClockSteppingBack(t *testing.T) {
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{Clock: clk.Now})
	p := msSet(t, Policy{Name: "p", Limit: 2, Window: time.Minute})
	msTake(t, s, "k", p)
	clk.Advance(30 * time.Second)
	msTake(t, s, "k", p)
	clk.Advance(-20 * time.Second) // back to 10s: read as 30s for k
	res := msTake(t, s, "k", p)
	assert.False(t, res.Allowed, "after the clock stepped back")
	assert.Equal(t, 30*time.Second, res.RetryAfter, "RetryAfter, measured from 30s")
	assert.Equal(t, msSince(30*time.Second), res.At.UnixNano(), "At: k's latest instant")
	assert.Equal(t, msSince(10*time.Second), msTake(t, s, "other", p).At.UnixNano(), "At of a key first seen at 10s")
	assert.Equal(t, msSince(30*time.Second), msPeek(t, s, "k", p).At.UnixNano(), "At of a Peek of k")

	clk.Advance(50 * time.Second) // 60s
	res = msTake(t, s, "k", p)
	assert.True(t, res.Allowed, "at 60s")
	assert.Equal(t, 30*time.Second, res.Reset, "Reset at 60s (the instant at 30s is the oldest)")
	ts, _, _ := msLog(t, s, "k", p)
	assert.Equal(t, []int64{msSince(30 * time.Second), msSince(60 * time.Second)}, ts, "k's log")
}

// A request reads the clock before it waits for its entry's lock, so a
// request that read the clock earlier may get the lock after one that read
// it later. It is then decided at the later instant, within its own span,
// so that the entry's instants stay in order. The clock signals when the
// request has read it, while the test holds the entry's lock.
func TestReadingsBeforeTheLockStayInOrder(t *testing.T) {
	var (
		mu     sync.Mutex
		now    = fakeclock.Start
		called = make(chan struct{}, 1)
		signal bool
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if signal {
			signal = false
			called <- struct{}{}
		}
		return now
	}
	s := msStore(t, MemoryConfig{Clock: clock})
	p := msSet(t, Policy{Name: "p", Limit: 10, Window: time.Minute})
	msTake(t, s, "k", p)

	e := msEntry(s, "k", p, 0)
	require.NotNil(t, e)
	e.mu.Lock()
	mu.Lock()
	now, signal = fakeclock.Start.Add(time.Second), true
	mu.Unlock()
	type taken struct {
		res Result
		err error
	}
	done := make(chan taken)
	go func() {
		res, err := s.Take(context.Background(), "k", p, 1)
		done <- taken{res, err}
	}()
	<-called // it has read 1s and waits for the lock
	// Meanwhile a request that read 2s got the lock first, and was
	// decided as lock and Take decide it.
	later := msSince(2 * time.Second)
	v, _ := takeAll(p.p, []*entry{e}, later, 1, true)
	e.seen = later
	require.True(t, v.ok, "the request holding the lock: refused, want allowed")
	e.mu.Unlock()

	got := <-done
	require.NoError(t, got.err)
	assert.True(t, got.res.Allowed)
	assert.Equal(t, later, got.res.At.UnixNano(), "At of the request that read 1s: want 2s")
	ts, _, _ := msLog(t, s, "k", p)
	assert.Equal(t, []int64{msSince(0), later, later}, ts, "instants logged")
}

// A request that read the clock before a sweep dropped its key's idle
// entry, and makes the entry again after it, decides no earlier than the
// instant the dropped entry went idle: at its own reading it would count
// within a window of what the dropped entry counted (a limit of 1 would
// admit two requests 900ms apart in a window of 1s). The clock holds the
// request between its reading and its lookup while the sweep runs.
func TestAKeyMadeAgainDecidesNoEarlierThanItsSweep(t *testing.T) {
	var (
		mu      sync.Mutex
		now     = fakeclock.Start
		hold    bool
		read    = make(chan struct{})
		release = make(chan struct{})
	)
	clock := func() time.Time {
		mu.Lock()
		t, h := now, hold
		hold = false
		mu.Unlock()
		if h {
			read <- struct{}{}
			<-release
		}
		return t
	}
	set := func(t time.Time, h bool) {
		mu.Lock()
		now, hold = t, h
		mu.Unlock()
	}
	s := msStore(t, MemoryConfig{Clock: clock})
	p := msSet(t, Policy{Name: "p", Limit: 1, Window: time.Second})
	msTake(t, s, "k", p)

	set(fakeclock.Start.Add(900*time.Millisecond), true)
	done := make(chan Result)
	go func() {
		res, _ := s.Take(context.Background(), "k", p, 1)
		done <- res
	}()
	<-read // the request has read 900ms
	set(fakeclock.Start.Add(time.Second), false)
	msSweepAll(s)
	require.Equal(t, 0, s.Stats().Keys, "entries after the sweep at 1s")
	close(release)

	res := <-done
	assert.True(t, res.Allowed, "the request that read 900ms")
	assert.Equal(t, msSince(time.Second), res.At.UnixNano(), "At: want the instant the dropped entry went idle (1s), not the reading (900ms)")
}

// A key cut from a larger string is copied before the store keeps it, so
// that it does not pin the larger one.
func TestStoreKeepsNoLargerString(t *testing.T) {
	big := strings.Repeat("k", 1<<16)
	s := msStore(t, MemoryConfig{})
	p := msSet(t, Policy{Name: "p", Limit: 2, Window: time.Minute})
	msTake(t, s, big[:10], p)
	sh := s.shardOf(big[:10])
	start := uintptr(unsafe.Pointer(unsafe.StringData(big)))
	found := 0
	for key := range sh.sets[p.ID()].m[0] {
		found++
		assert.Equal(t, big[:10], key, "the entry's key")
		k := uintptr(unsafe.Pointer(unsafe.StringData(key)))
		assert.False(t, k >= start && k < start+uintptr(len(big)), "the store keeps a slice of the string the key was cut from")
	}
	assert.Equal(t, 1, found, "entries in the key's shard")
}

// A key has an entry per policy of each set it is counted under: sets of
// different IDs count apart, sets of one ID share counts, and every entry
// goes when it is idle.
func TestEntriesOfSeveralSets(t *testing.T) {
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{Clock: clk.Now})
	one := msSet(t, Policy{Name: "a", Limit: 1, Window: time.Minute})
	two := msSet(t, Policy{Name: "a", Limit: 1, Window: time.Minute}, Policy{Name: "b", Limit: 5, Window: time.Hour})
	again := msSet(t, Policy{Name: "a", Limit: 1, Window: time.Minute}) // one's ID
	for i, tt := range []struct {
		set     PolicySet
		allowed bool
	}{{one, true}, {two, true}, {one, false}, {two, false}, {again, false}} {
		assert.Equal(t, tt.allowed, msTake(t, s, "k", tt.set).Allowed, "request %d", i)
	}
	assert.Equal(t, 3, s.Stats().Keys, "one key under a set of one policy and one of two")
	assert.NotSame(t, msEntry(s, "k", one, 0), msEntry(s, "k", two, 0), `the entries of policy "a" of each set`)
	assert.Same(t, msEntry(s, "k", one, 0), msEntry(s, "k", again, 0), "the entries of two sets of one ID")

	clk.Advance(time.Minute)
	msSweepAll(s)
	assert.Equal(t, 1, s.Stats().Keys, "a minute later: entries kept (the hour-long one)")
	clk.Advance(time.Hour)
	msSweepAll(s)
	assert.Equal(t, 0, s.Stats().Keys, "an hour later")
}

// Peek of a key the store has never seen reports its full quota and
// creates nothing; nor does Refund.
func TestPeekAndRefundOfAnUnseenKeyCreateNothing(t *testing.T) {
	ctx := context.Background()
	for _, a := range msAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set := msSet(t, Policy{Name: "burst", Limit: 10, Window: time.Second, Algorithm: a}, Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Algorithm: a})
			msTake(t, s, "seen", set)
			require.Equal(t, 2, s.Stats().Keys)

			res := msPeek(t, s, "unseen", set)
			assert.Equal(t, Result{Allowed: true, Limit: 10, Remaining: 10, Policy: "burst", Window: time.Second, At: time.Unix(0, msSince(0))}, res, "Peek of an unseen key")
			assert.Equal(t, 2, s.Stats().Keys, "entries after the Peek")

			require.NoError(t, s.Refund(ctx, "unseen", set, 1, fakeclock.Start))
			assert.Equal(t, 2, s.Stats().Keys, "entries after the Refund")
			assert.Nil(t, msEntry(s, "unseen", set, 0))
			assert.Nil(t, msEntry(s, "unseen", set, 1))
			assert.Equal(t, 9, msTake(t, s, "unseen", set).Remaining, "the key's first Take after the Refund")
		})
	}
}

// msRefundCase counts request A of key k, makes the store forget k's
// entry with forget, counts k twice more, and checks that refunding A
// changes nothing of k's new count: a refund never reaches counts made
// after the store forgot the key.
func msRefundCase(t *testing.T, s *memoryStore, clk *fakeclock.Clock, set PolicySet, forget func()) {
	t.Helper()
	ctx := context.Background()
	a := msTake(t, s, "k", set)
	require.True(t, a.Allowed, "request A")
	forget()
	require.Nil(t, msEntry(s, "k", set, 0), "k's entry is still kept")
	require.Equal(t, set.At(0).Limit-1, msTake(t, s, "k", set).Remaining, "k's first request after it was forgotten: its count starts over")
	msTake(t, s, "k", set)
	before := msPeek(t, s, "k", set)
	require.NoError(t, s.Refund(ctx, "k", set, 1, a.At))
	after := msPeek(t, s, "k", set)
	assert.Equal(t, before, after, "k's standing before and after request A was refunded")
}

// A refund of a request counted before the store evicted its key changes
// nothing of the key's new count, for every algorithm: with a clock that
// moves, and with one that does not, so that A, the eviction and the new
// requests are all at one instant.
func TestRefundAfterEvictionChangesNothing(t *testing.T) {
	for _, a := range msAlgorithms {
		for _, step := range []time.Duration{time.Millisecond, 0} {
			t.Run(fmt.Sprintf("%v/step=%v", a, step), func(t *testing.T) {
				clk := fakeclock.New()
				s := msStore(t, MemoryConfig{MaxKeys: evictSample, EvictLeastRecent: true, Clock: clk.Now})
				set := msSet(t, Policy{Name: "p", Limit: 10, Window: time.Hour, Algorithm: a})
				msRefundCase(t, s, clk, set, func() {
					// With the clock stopped every entry is as recent as
					// k, and the victim is whichever comes first in the
					// sample: new keys come until it is k.
					for i := 0; msEntry(s, "k", set, 0) != nil; i++ {
						require.Less(t, i, 10_000, "k never evicted")
						clk.Advance(step)
						msTake(t, s, "new-"+strconv.Itoa(i), set)
					}
					clk.Advance(step)
				})
			})
		}
	}
}

// A refund of a request counted before the store swept its key as idle
// changes nothing of the key's new count, for every algorithm, whichever
// sweep drops it: the background sweep's, or a full store's making room
// for a new key. Moving forward, the refund is of a request that has left
// the window (or, for GCRA, whose share has refilled). A clock stepped
// back to the very instant of A after the sweep is the hard case: the new
// entry knows nothing of the one swept.
func TestRefundAfterIdleSweepChangesNothing(t *testing.T) {
	for _, a := range msAlgorithms {
		set := msSet(t, Policy{Name: "p", Limit: 10, Window: time.Hour, Algorithm: a})
		for _, back := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/sweep/back=%v", a, back), func(t *testing.T) {
				clk := fakeclock.New()
				s := msStore(t, MemoryConfig{Clock: clk.Now})
				msRefundCase(t, s, clk, set, func() {
					clk.Advance(2 * time.Hour)
					msSweepAll(s)
					if back {
						clk.Set(fakeclock.Start)
					}
				})
			})
			t.Run(fmt.Sprintf("%v/full/back=%v", a, back), func(t *testing.T) {
				clk := fakeclock.New()
				s := msStore(t, MemoryConfig{MaxKeys: evictSample, Clock: clk.Now})
				msRefundCase(t, s, clk, set, func() {
					for i := range evictSample - 1 {
						msTake(t, s, "other-"+strconv.Itoa(i), set)
					}
					clk.Advance(2 * time.Hour)
					last := ""
					for i := 0; msEntry(s, "k", set, 0) != nil; i++ {
						require.Less(t, i, 1000, "k never swept")
						last = "new-" + strconv.Itoa(i)
						msTake(t, s, last, set)
					}
					require.Zero(t, s.Stats().Evicted, "k was evicted, not swept")
					// Room for k's return: the new key that swept it
					// goes, as if it had never come.
					msDelete(s, last, set)
					if back {
						clk.Set(fakeclock.Start)
					}
				})
			})
		}
	}
}

// msDelete deletes the entry of key under the first policy of set from
// its shard, as if it had never been there: not as the store forgets an
// entry, which may change what it refunds.
func msDelete(s *memoryStore, key string, set PolicySet) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g := sh.sets[set.ID()]; g != nil && g.m[0][key] != nil {
		e := g.m[0][key]
		e.mu.Lock()
		e.seen = dropped
		delete(g.m[0], key)
		if g.n--; g.n == 0 {
			delete(sh.sets, set.ID())
		}
		sh.n--
		e.mu.Unlock()
	}
}

// A decision on a key the store knows allocates nothing, for every
// algorithm: Take, Peek and Refund of a key whose log stays inline (a
// limit of one, the clock moving a window each time).
func TestDecisionsOnAKnownKeyAllocateNothing(t *testing.T) {
	ctx := context.Background()
	for _, a := range msAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set := msSet(t, Policy{Name: "p", Limit: 1, Window: time.Second, Algorithm: a})
			msTake(t, s, "k", set)
			for _, op := range []struct {
				name string
				f    func()
			}{
				{"Take", func() { s.Take(ctx, "k", set, 1) }},
				{"Peek", func() { s.Peek(ctx, "k", set) }},
				{"Refund", func() { s.Refund(ctx, "k", set, 1, fakeclock.Start) }},
			} {
				allocs := testing.AllocsPerRun(100, func() {
					clk.Advance(2 * time.Second)
					op.f()
				})
				assert.Zero(t, allocs, "allocations per %s", op.name)
			}
		})
	}
}

// instants returns a copy of the log's instants, oldest first.
func (s *state) instants() []int64 {
	ts := make([]int64, s.n)
	for i := range ts {
		ts[i] = s.at(i)
	}
	return ts
}

// A full shard finds its idle entries of every algorithm, calendar
// periods included, without waiting for the background sweep: each entry
// tells the shard when it can first go idle.
func TestAFullStoreFindsIdleEntriesOfEveryAlgorithm(t *testing.T) {
	for _, a := range []Algorithm{SlidingLog, SlidingWindowCounter, GCRA, Daily, Weekly, Monthly} {
		t.Run(a.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{MaxKeys: minPerShard, Clock: clk.Now})
			require.Len(t, s.shards, 1)
			p := Policy{Name: "p", Limit: 5, Window: time.Minute, Algorithm: a}
			if isCalendar(a) {
				p.Window = 0
			}
			set := msSet(t, p)
			for i := range minPerShard {
				require.True(t, msTake(t, s, "k"+strconv.Itoa(i), set).Allowed)
			}
			_, err := s.Take(context.Background(), "new", set, 1)
			require.ErrorIs(t, err, errStoreFull, "a new key while every entry is live")

			clk.Advance(32 * 24 * time.Hour) // past every window and period
			_, err = s.Take(context.Background(), "new", set, 1)
			require.NoError(t, err, "a new key beside %d idle entries", minPerShard)
		})
	}
}

// A clock before 1970, as a replay of old traffic may have, finds a new
// key with its full quota, and windows and periods that roll on.
func TestAClockBeforeTheEpoch(t *testing.T) {
	for _, a := range []Algorithm{SlidingLog, SlidingWindowCounter, GCRA, Daily} {
		t.Run(a.String(), func(t *testing.T) {
			clk := fakeclock.New()
			clk.Set(time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC))
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			p := Policy{Name: "p", Limit: 1, Window: time.Minute, Algorithm: a}
			if isCalendar(a) {
				p.Window = 0
			}
			set := msSet(t, p)
			require.True(t, msPeek(t, s, "k", set).Allowed, "Peek of a new key")
			require.True(t, msTake(t, s, "k", set).Allowed, "first request")
			require.False(t, msTake(t, s, "k", set).Allowed, "second request at once")
			clk.Advance(48 * time.Hour)
			require.True(t, msTake(t, s, "k", set).Allowed, "two days later")
		})
	}
}

// A Take refused by one policy of a set may make the entry of another
// (swept meanwhile) and count nothing in it: that entry is idle at once,
// and a full store drops it for a new key rather than refusing the key
// (or, evicting, dropping a live one).
func TestAFullStoreFindsTheEntryARefusedTakeMade(t *testing.T) {
	ctx := context.Background()
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprintf("evict=%v", evict), func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{MaxKeys: 2, EvictLeastRecent: evict, Clock: clk.Now})
			require.Len(t, s.shards, 1)
			set := msSet(t, Policy{Name: "daily", Limit: 1, Window: time.Hour}, Policy{Name: "burst", Limit: 10, Window: time.Second})
			other := msSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour})

			require.True(t, msTake(t, s, "k", set).Allowed)
			clk.Advance(2 * time.Second)
			msSweepAll(s) // the background sweep drops k's burst entry, now idle
			require.Equal(t, 1, s.Stats().Keys)

			require.False(t, msTake(t, s, "k", set).Allowed, "k's second request in the hour")
			// k's burst entry is back, counting nothing: idle.
			_, err := s.Take(ctx, "new", other, 1)
			require.NoError(t, err, "a new key beside one live entry and one idle")
			assert.Equal(t, Stats{Keys: 2}, s.Stats(), "k's daily entry and the new key's")
			assert.False(t, msPeek(t, s, "k", set).Allowed, "k's count was kept")
		})
	}
}

// A key whose set has more policies than a shard may hold is refused by
// an evicting store: it evicts nobody for it, since it makes no room.
func TestASetLargerThanAShardEvictsNobody(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New()
	s := msStore(t, MemoryConfig{MaxKeys: 2, EvictLeastRecent: true, Clock: clk.Now})
	require.Len(t, s.shards, 1)
	small := msSet(t, Policy{Name: "p", Limit: 2, Window: time.Hour})
	big := msSet(t, Policy{Name: "a", Limit: 5, Window: time.Hour}, Policy{Name: "b", Limit: 5, Window: time.Hour},
		Policy{Name: "c", Limit: 5, Window: time.Hour})

	require.Equal(t, 1, msTake(t, s, "k", small).Remaining)
	for range 3 {
		_, err := s.Take(ctx, "big", big, 1)
		require.ErrorIs(t, err, errStoreFull)
	}
	st := s.Stats()
	assert.Equal(t, Stats{Keys: 1, Rejected: 3}, st, "after three refusals of the key too large")
	res := msTake(t, s, "k", small)
	assert.True(t, res.Allowed)
	assert.Equal(t, 0, res.Remaining, "k's second request: its count was kept")
}

// A new key that a full store makes room for counts its first request as
// any other: a refund of it takes it back, whether the store evicted a
// live key for it or swept one that went idle at that very instant. What
// the key dropped counted is another key's.
func TestRefundOfTheFirstRequestOfAKeyThatMadeRoom(t *testing.T) {
	ctx := context.Background()
	for _, a := range msAlgorithms {
		for _, evict := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/evict=%v", a, evict), func(t *testing.T) {
				clk := fakeclock.New()
				s := msStore(t, MemoryConfig{MaxKeys: evictSample, EvictLeastRecent: evict, Clock: clk.Now})
				require.Len(t, s.shards, 1)
				set := msSet(t, Policy{Name: "p", Limit: 10, Window: time.Second, Algorithm: a})
				for i := range evictSample {
					msTake(t, s, "k"+strconv.Itoa(i), set)
				}
				if evict {
					clk.Advance(time.Millisecond) // all live: one is evicted
				} else {
					// Just when k0 to k7 go idle: a window later under the
					// log, two under the counter, an interval under GCRA.
					clk.Advance(map[Algorithm]time.Duration{SlidingLog: time.Second, SlidingWindowCounter: 2 * time.Second, GCRA: 100 * time.Millisecond}[a])
				}
				first := msTake(t, s, "new", set)
				require.True(t, first.Allowed)
				if evict {
					require.Equal(t, Stats{Keys: evictSample, Evicted: 1}, s.Stats())
				} else {
					require.Equal(t, Stats{Keys: 1}, s.Stats(), "k0 to k7 swept")
				}
				require.NoError(t, s.Refund(ctx, "new", set, 1, first.At))
				res := msPeek(t, s, "new", set)
				assert.Equal(t, 10, res.Remaining, "new's standing after its only request was refunded")
			})
		}
	}
}

// A window counter whose current window counts nothing is idle once that
// window ends, when the previous window's count stops weighing: a client
// refused at the start of a window, after filling the one before, does
// not keep its entry, nor a full store's room, a window longer.
func TestACounterWithOnlyAPreviousCountGoesIdleWithItsWindow(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		then func(s *memoryStore, key string, set PolicySet)
	}{
		{"refused", func(s *memoryStore, key string, set PolicySet) {
			res, err := s.Take(ctx, key, set, 1)
			require.NoError(t, err)
			require.False(t, res.Allowed, "%s in the next window, its first filled", key)
		}},
		{"peeked", func(s *memoryStore, key string, set PolicySet) { msPeek(t, s, key, set) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{MaxKeys: minPerShard, Clock: clk.Now})
			require.Len(t, s.shards, 1)
			set := msSet(t, Policy{Name: "p", Limit: 1, Window: time.Minute, Algorithm: SlidingWindowCounter})
			for i := range minPerShard {
				require.True(t, msTake(t, s, "k"+strconv.Itoa(i), set).Allowed)
			}
			clk.Advance(time.Minute + time.Second)
			for i := range minPerShard {
				tt.then(s, "k"+strconv.Itoa(i), set)
			}
			clk.Advance(time.Minute - time.Second) // the next window: no count weighs
			_, err := s.Take(ctx, "new", set, 1)
			assert.NoError(t, err, "a new key beside %d idle entries", minPerShard)
			for i := range minPerShard {
				assert.Equal(t, 1, msPeek(t, s, "k"+strconv.Itoa(i), set).Remaining, "k%d's standing", i)
			}
		})
	}
}

// A log's ring does not outlast the burst it grew for: once the key logs
// a quarter of its ring or less, by requests leaving the window or by
// refunds, the ring is cut to twice what it holds, so that a key costs
// about 8 bytes per request logged, not per request of its busiest window.
func TestSlidingLogShrinksAfterABurst(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		drain func(t *testing.T, s *memoryStore, clk *fakeclock.Clock, set PolicySet)
	}{
		{"the burst leaves the window", func(t *testing.T, s *memoryStore, clk *fakeclock.Clock, set PolicySet) {
			clk.Advance(time.Minute - time.Second)
		}},
		{"the burst is refunded", func(t *testing.T, s *memoryStore, _ *fakeclock.Clock, set PolicySet) {
			require.NoError(t, s.Refund(ctx, "k", set, 1000, fakeclock.Start))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New()
			s := msStore(t, MemoryConfig{Clock: clk.Now})
			set := msSet(t, Policy{Name: "p", Limit: 100_000, Window: time.Minute})
			res, err := s.Take(ctx, "k", set, 1000) // the burst
			require.NoError(t, err)
			require.True(t, res.Allowed)
			clk.Advance(time.Second)
			for range 10 {
				require.True(t, msTake(t, s, "k", set).Allowed)
			}
			_, c, _ := msLog(t, s, "k", set)
			require.GreaterOrEqual(t, c, 1010, "capacity after the burst")

			tt.drain(t, s, clk, set)
			msTake(t, s, "k", set)
			ts, c, _ := msLog(t, s, "k", set)
			require.Len(t, ts, 11, "instants after the burst")
			assert.LessOrEqual(t, c, 4*len(ts), "capacity of a log of %d instants after a burst of 1000", len(ts))
		})
	}
}
