package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// msFloodKey is the i-th key of a flood, shaped as KeyByIP's are.
func msFloodKey(buf []byte, i int) string {
	b := append(buf[:0], "ip:10."...)
	b = strconv.AppendInt(b, int64(i>>16&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i>>8&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i&255), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(i>>24), 10)
	return string(b)
}

// msHeapInUse returns the live heap after a full collection.
func msHeapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// msFloodSet is the policy of the flood: an hour, so that nothing the
// flood counts goes idle while it lasts.
func msFloodSet(t testing.TB) PolicySet {
	return msSet(t, Policy{Name: "default", Limit: 20, Window: time.Hour})
}

// msBytesPerKey measures what n live keys with one logged request each
// cost in a memory store without a bound.
func msBytesPerKey(t *testing.T, n int) float64 {
	clk := fakeclock.New()
	set := msFloodSet(t)
	before := msHeapInUse()
	s := newMemoryStore(MemoryConfig{Clock: clk.Now})
	var buf [32]byte
	for i := range n {
		_, err := s.Take(context.Background(), msFloodKey(buf[:], i), set, 1)
		require.NoError(t, err)
	}
	after := msHeapInUse()
	require.Equal(t, n, s.Stats().Keys, "unbounded store")
	s.Close()
	runtime.KeepAlive(s)
	return float64(after-before) / float64(n)
}

// TestKeyFlood floods a store bounded to bound entries with flood distinct
// keys, all live, from two goroutines (as many as the CI machine's cores),
// while a legitimate client keeps making requests. Live entries must never
// exceed the bound, the heap must stay within 1.5 times bound times the
// measured cost of a key, and when the store does not evict the
// legitimate client's count must stay exact.
//
// The full size (1,000,000 keys against 100,000) runs unless -short (a
// tenth of it) or the race detector is on, which slows the store more
// than tenfold (a twentieth).
func TestKeyFlood(t *testing.T) {
	bound, flood := 100_000, 1_000_000
	switch {
	case msRaceEnabled:
		bound, flood = 5_000, 50_000
	case testing.Short():
		bound, flood = 10_000, 100_000
	}
	perKey := msBytesPerKey(t, bound)
	t.Logf("memory per live key with one logged request: %.0f bytes (%d keys, unbounded store)", perKey, bound)
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprintf("evict=%v", evict), func(t *testing.T) {
			msKeyFlood(t, bound, flood, evict, perKey)
		})
	}
}

func msKeyFlood(t *testing.T, bound, flood int, evict bool, perKey float64) {
	const (
		limit   = 20
		workers = 2
		checks  = 10 // the legitimate client's requests during the flood
	)
	ctx := context.Background()
	clk := fakeclock.New()
	set := msFloodSet(t)
	before := msHeapInUse()
	s := newMemoryStore(MemoryConfig{MaxKeys: bound, EvictLeastRecent: evict, Clock: clk.Now})
	defer s.Close()

	const legit = "apikey:legitimate"
	var (
		mu         sync.Mutex // serialises the legitimate client's requests
		used       int        // requests it has made
		reinserted int        // times its count started over (evicted)
		legitErr   error
	)
	take := func(when string) {
		mu.Lock()
		defer mu.Unlock()
		res, err := s.Take(ctx, legit, set, 1)
		used++
		switch {
		case err != nil:
			legitErr = fmt.Errorf("legitimate request %d (%s): %w", used, when, err)
		case !evict && (!res.Allowed || res.Remaining != limit-used):
			legitErr = fmt.Errorf("legitimate request %d (%s): allowed %v, remaining %d; want true and %d", used, when, res.Allowed, res.Remaining, limit-used)
		case used > 1 && res.Remaining == limit-1:
			reinserted++
		}
	}
	for range 5 {
		take("before the flood")
	}

	start := time.Now()
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		accepted atomic.Int64
		full     atomic.Int64
		maxSeen  atomic.Int64
		failed   atomic.Value
	)
	for range workers {
		wg.Go(func() {
			var buf [32]byte
			for {
				i := int(next.Add(1)) - 1
				if i >= flood {
					return
				}
				if i%1000 == 0 {
					clk.Advance(time.Millisecond) // time passes, but nothing goes idle within the hour
				}
				if i > 0 && i%(flood/checks) == 0 {
					// The legitimate client comes back, and an operator
					// looks at the count of entries.
					take(fmt.Sprintf("during the flood, at key %d", i))
					if k := int64(s.Stats().Keys); k > maxSeen.Load() {
						maxSeen.Store(k)
					}
				}
				_, err := s.Take(ctx, msFloodKey(buf[:], i), set, 1)
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, errStoreFull):
					full.Add(1)
				default:
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		require.NoError(t, err, "flood")
	}
	require.NoError(t, legitErr)

	st := s.Stats()
	maxKeys := max(maxSeen.Load(), int64(st.Keys))
	heap := msHeapInUse() - before
	allowedHeap := 1.5 * float64(bound) * perKey
	t.Logf("%d keys in %v (%.0f ns/key, %d workers; a measure, not a check); entries at most %d (bound %d), at the end %d; accepted %d, refused %d; evicted %d, rejected %d; heap %.1f MiB (%.0f bytes per bound entry; allowed %.1f MiB)",
		flood, elapsed.Round(time.Millisecond), float64(elapsed.Nanoseconds())/float64(flood), workers,
		maxKeys, bound, st.Keys, accepted.Load(), full.Load(), st.Evicted, st.Rejected,
		float64(heap)/(1<<20), float64(heap)/float64(bound), allowedHeap/(1<<20))

	assert.LessOrEqual(t, maxKeys, int64(bound), "entries, at most the bound")
	assert.LessOrEqual(t, float64(heap), allowedHeap, "heap growth, at most 1.5 x %d keys x %.0f bytes", bound, perKey)
	if !evict {
		assert.Positive(t, full.Load(), "keys refused")
		assert.Equal(t, uint64(full.Load()), st.Rejected, "Stats().Rejected: the keys refused")
		assert.Zero(t, st.Evicted, "Stats().Evicted of a store that does not evict")
		assert.Equal(t, accepted.Load()+1, int64(st.Keys), "keys accepted plus the legitimate one, and entries tracked: none dropped")
		// The legitimate client's count survived the flood exactly.
		for used < limit {
			take("after the flood")
		}
		require.NoError(t, legitErr)
		res, err := s.Take(ctx, legit, set, 1)
		require.NoError(t, err)
		assert.False(t, res.Allowed, "legitimate request %d: its count was kept", limit+1)
		return
	}
	assert.Zero(t, full.Load(), "keys refused by an evicting store")
	assert.Zero(t, st.Rejected, "Stats().Rejected of an evicting store")
	// Every key added (the flood's, the legitimate one's, and its returns
	// after being evicted) is either kept or was evicted.
	assert.Equal(t, uint64(flood+1+reinserted-st.Keys), st.Evicted, "Stats().Evicted: keys added minus keys kept")
}
