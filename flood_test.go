package ratelimit_test

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

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// floodKey is the i-th key of a flood, shaped as KeyByIP's are.
func floodKey(buf []byte, i int) string {
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

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bytesPerKey measures what n live keys with one logged request each cost
// in a memory store without a bound.
func bytesPerKey(t *testing.T, n int) float64 {
	clk := fakeclock.New()
	before := heapInUse()
	s, err := ratelimit.NewMemoryStore(ratelimit.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	policies, _ := ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: 20, Window: time.Hour})
	var buf [32]byte
	for i := range n {
		if _, err := s.Take(context.Background(), floodKey(buf[:], i), policies, 1); err != nil {
			t.Fatal(err)
		}
	}
	after := heapInUse()
	if got := s.Stats().Keys; got != n {
		t.Fatalf("unbounded store: %d keys, want %d", got, n)
	}
	s.Close()
	runtime.KeepAlive(s)
	return float64(after-before) / float64(n)
}

// TestKeyFlood floods a store bounded to bound keys with flood distinct
// keys, all live, from several goroutines, while a legitimate client
// keeps making requests. Live keys must never exceed the bound, the heap
// must stay within 1.5 times bound times the measured cost of a key, and
// under RejectNewKeys the legitimate client's count must stay exact.
//
// The full size (1,000,000 keys against 100,000) runs unless -short or
// the race detector is on, which slows it tenfold; a tenth of it always
// runs.
func TestKeyFlood(t *testing.T) {
	bound, flood := 100_000, 1_000_000
	if testing.Short() || raceEnabled {
		bound, flood = 10_000, 100_000
	}
	perKey := bytesPerKey(t, bound)
	t.Logf("memory per live key with one logged request: %.0f bytes (%d keys, unbounded store)", perKey, bound)

	for _, overflow := range []ratelimit.Overflow{ratelimit.RejectNewKeys, ratelimit.EvictLeastRecent} {
		name := map[ratelimit.Overflow]string{ratelimit.RejectNewKeys: "RejectNewKeys", ratelimit.EvictLeastRecent: "EvictLeastRecent"}[overflow]
		t.Run(name, func(t *testing.T) {
			keyFlood(t, bound, flood, overflow, perKey)
		})
	}
}

func keyFlood(t *testing.T, bound, flood int, overflow ratelimit.Overflow, perKey float64) {
	const (
		limit   = 20
		workers = 2  // as many as the CI machine's cores
		checks  = 10 // the legitimate client's requests during the flood
	)
	ctx := context.Background()
	clk := fakeclock.New()
	before := heapInUse()
	s, err := ratelimit.NewMemoryStore(ratelimit.WithClock(clk.Now), ratelimit.WithMaxKeys(bound, overflow))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	policies, _ := ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: limit, Window: time.Hour})

	const legit = "apikey:legitimate"
	var (
		mu         sync.Mutex // serialises the legitimate client's requests
		used       int        // requests it has made
		reinserted int        // times its count started over (EvictLeastRecent)
		legitErr   error
	)
	take := func(when string) {
		mu.Lock()
		defer mu.Unlock()
		res, err := s.Take(ctx, legit, policies, 1)
		used++
		switch {
		case err != nil:
			legitErr = fmt.Errorf("legitimate request %d (%s): %v", used, when, err)
		case overflow == ratelimit.RejectNewKeys && (!res.Allowed || res.Remaining != limit-used):
			legitErr = fmt.Errorf("legitimate request %d (%s): allowed %v remaining %d, want true and %d", used, when, res.Allowed, res.Remaining, limit-used)
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
					clk.Advance(time.Millisecond) // time passes, but nothing expires within the hour
				}
				if i > 0 && i%(flood/checks) == 0 {
					// The legitimate client comes back, and an operator
					// looks at the key count.
					take(fmt.Sprintf("during the flood, at key %d", i))
					if k := int64(s.Stats().Keys); k > maxSeen.Load() {
						maxSeen.Store(k)
					}
				}
				_, err := s.Take(ctx, floodKey(buf[:], i), policies, 1)
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, ratelimit.ErrStoreFull):
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
	if err := failed.Load(); err != nil {
		t.Fatalf("flood: unexpected error %v", err)
	}
	if legitErr != nil {
		t.Fatal(legitErr)
	}

	st := s.Stats()
	maxKeys := max(maxSeen.Load(), int64(st.Keys))
	heap := heapInUse() - before
	allowedHeap := 1.5 * float64(bound) * perKey
	t.Logf("%s: %d keys in %v (%.0f ns/key, %d workers); live keys at most %d (bound %d), at the end %d; accepted %d, refused %d; stats evicted %d rejected %d; heap %.1f MiB (%.0f bytes per bound key; allowed %.1f MiB)",
		overflowName(overflow), flood, elapsed.Round(time.Millisecond), float64(elapsed.Nanoseconds())/float64(flood), workers,
		maxKeys, bound, st.Keys, accepted.Load(), full.Load(), st.Evicted, st.Rejected,
		float64(heap)/(1<<20), float64(heap)/float64(bound), allowedHeap/(1<<20))

	if maxKeys > int64(bound) {
		t.Errorf("live keys reached %d, want at most the bound %d", maxKeys, bound)
	}
	if float64(heap) > allowedHeap {
		t.Errorf("heap grew by %d bytes, want at most 1.5 x %d keys x %.0f bytes = %.0f", heap, bound, perKey, allowedHeap)
	}
	switch overflow {
	case ratelimit.RejectNewKeys:
		if st.Rejected != uint64(full.Load()) || full.Load() == 0 {
			t.Errorf("Stats().Rejected = %d, want the %d refused keys (and some)", st.Rejected, full.Load())
		}
		if st.Evicted != 0 {
			t.Errorf("Stats().Evicted = %d, want 0 under RejectNewKeys", st.Evicted)
		}
		if got, want := accepted.Load()+1, int64(st.Keys); got != want {
			t.Errorf("%d keys accepted plus the legitimate one, but %d tracked: none should be dropped", got-1, want)
		}
		// The legitimate client's count survived the flood exactly.
		for used < limit {
			take("after the flood")
		}
		if legitErr != nil {
			t.Fatal(legitErr)
		}
		res, err := s.Take(ctx, legit, policies, 1)
		if err != nil || res.Allowed {
			t.Errorf("legitimate request %d: (%+v, %v), want a rejection: its count was kept", limit+1, res, err)
		}
	case ratelimit.EvictLeastRecent:
		if full.Load() != 0 || st.Rejected != 0 {
			t.Errorf("%d keys refused (Stats().Rejected %d), want none under EvictLeastRecent", full.Load(), st.Rejected)
		}
		// Every key added (the flood's, the legitimate one's, and its
		// returns after being evicted) is either kept or was evicted.
		if want := uint64(flood + 1 + reinserted - st.Keys); st.Evicted != want {
			t.Errorf("Stats().Evicted = %d, want %d (keys added minus keys kept)", st.Evicted, want)
		}
	}
}

func overflowName(o ratelimit.Overflow) string {
	if o == ratelimit.EvictLeastRecent {
		return "EvictLeastRecent"
	}
	return "RejectNewKeys"
}
