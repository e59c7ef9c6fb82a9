package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// BenchmarkAlgorithm measures, per algorithm, a decision on an existing
// key (ns/op, allocs/op) and reports two figures for choosing between
// them: heap bytes per key holding limit requests (B/key), and the most
// requests an adversary gets admitted in any rolling window of the nominal
// length, as a multiple of the limit (burst/limit).
//
//	go test -run '^$' -bench BenchmarkAlgorithm -benchmem
func BenchmarkAlgorithm(b *testing.B) {
	for _, a := range msAlgorithms {
		for _, limit := range []int{300, 10_000} {
			b.Run(fmt.Sprintf("%v/limit=%d", a, limit), func(b *testing.B) {
				clk := fakeclock.New()
				s := newMemoryStore(MemoryConfig{Clock: clk.Now})
				defer s.Close()
				p := msSet(b, Policy{Name: "p", Limit: limit, Window: time.Minute, Algorithm: a})
				ctx := context.Background()
				// The sustained rate, rounded up: allowed, but by the
				// window counter, whose estimate errs toward refusing.
				step := (time.Minute + time.Duration(limit) - 1) / time.Duration(limit)
				b.ReportAllocs()
				for b.Loop() {
					clk.Advance(step)
					if _, err := s.Take(ctx, "hot", p, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(msBytesPerFullKey(b, a, limit), "B/key")
				b.ReportMetric(msWorstBurst(a, limit), "burst/limit")
			})
		}
	}
}

// msBytesPerFullKey returns the heap bytes per key of keys that each hold
// limit requests in their window: logged one by one, as a log grows, or
// for the algorithms of one size whatever they count, in one Take of cost
// limit.
func msBytesPerFullKey(b *testing.B, a Algorithm, limit int) float64 {
	// Enough keys that the store's fixed cost (its shard maps) vanishes
	// in the average, without logging millions of instants.
	keys := 20_000
	if a == SlidingLog && limit > 1000 {
		keys = 200
	}
	clk := fakeclock.New()
	p := msSet(b, Policy{Name: "p", Limit: limit, Window: time.Hour, Algorithm: a})
	names := make([]string, keys)
	for i := range names {
		names[i] = "key-" + strconv.Itoa(i) // the key strings count
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newMemoryStore(MemoryConfig{Clock: clk.Now})
	for _, k := range names {
		if a != SlidingLog {
			if res, _ := s.Take(context.Background(), k, p, limit); !res.Allowed || res.Remaining != 0 {
				b.Fatalf("%v: key %s: %+v, want its whole limit allowed", a, k, res)
			}
			continue
		}
		for range limit {
			clk.Advance(time.Microsecond)
			if res, _ := s.Take(context.Background(), k, p, 1); !res.Allowed {
				b.Fatalf("%v: key %s refused before its limit", a, k)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	s.Close()
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)
}

// msWorstBurst replays adversarial patterns at 1ms resolution and returns
// the most requests admitted in any window of the nominal length (t-W, t],
// divided by the limit.
func msWorstBurst(a Algorithm, limit int) float64 {
	const window = time.Minute
	const tick = time.Millisecond
	patterns := map[string]func(t time.Duration) int{
		// As many as allowed, every millisecond.
		"greedy": func(time.Duration) int { return limit },
		// Silent, then the whole limit just before a window boundary, then
		// greedy: what fixed windows and their approximations fear most.
		"boundary": func(t time.Duration) int {
			if t < window-10*tick {
				return 0
			}
			return limit
		},
	}
	worst := 0
	for _, send := range patterns {
		clk := fakeclock.New()
		s := newMemoryStore(MemoryConfig{Clock: clk.Now})
		p, _ := NewPolicySet(Policy{Name: "p", Limit: limit, Window: window, Algorithm: a})
		var admitted []time.Duration // instants of admitted requests, in order
		for t := time.Duration(0); t < 3*window; t += tick {
			for range send(t) {
				res, _ := s.Take(context.Background(), "k", p, 1)
				if !res.Allowed {
					break
				}
				admitted = append(admitted, t)
			}
			clk.Advance(tick)
		}
		s.Close()
		// Slide a window ending at each admitted instant.
		lo := 0
		for hi, t := range admitted {
			for admitted[lo] <= t-window {
				lo++
			}
			worst = max(worst, hi-lo+1)
		}
	}
	return float64(worst) / float64(limit)
}

// BenchmarkPlanMemory reports the heap a key costs under a plan of a
// per-second burst (a sliding log) and a daily quota, with each algorithm
// for the daily policy (B/key), for a client that has sent a day's worth
// of requests and a full burst in the last second: two entries, one per
// policy. Each op is one decision of such a key; B/key is what to
// compare.
//
//	go test -run '^$' -bench BenchmarkPlanMemory -benchtime 1000x
func BenchmarkPlanMemory(b *testing.B) {
	const burst, daily = 10, 100_000
	for _, a := range []Algorithm{GCRA, SlidingWindowCounter, SlidingLog} {
		b.Run("daily="+a.String(), func(b *testing.B) {
			set := msSet(b,
				Policy{Name: "burst", Limit: burst, Window: time.Second},
				Policy{Name: "daily", Limit: daily, Window: 24 * time.Hour, Algorithm: a})
			// The O(1) states are as large after a hundred requests as
			// after the day's; the log holds every one of the day's.
			keys, sent := 2000, 100
			if a == SlidingLog {
				keys, sent = 20, daily-burst
			}
			names := make([]string, keys)
			for k := range names {
				names[k] = "key-" + strconv.Itoa(k)
			}
			clk := fakeclock.New()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s := newMemoryStore(MemoryConfig{Clock: clk.Now})
			ctx := context.Background()
			step := 23 * time.Hour / time.Duration(sent)
			for range sent {
				clk.Advance(step)
				for _, k := range names {
					s.Take(ctx, k, set, 1)
				}
			}
			clk.Advance(time.Hour)
			for _, k := range names {
				for range burst {
					if res, _ := s.Take(ctx, k, set, 1); !res.Allowed {
						b.Fatalf("%s refused within its quota: %+v", k, res)
					}
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perKey := float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)
			b.ReportAllocs()
			for b.Loop() {
				s.Take(ctx, "key-0", set, 1)
			}
			b.ReportMetric(perKey, "B/key")
			runtime.KeepAlive(s)
			s.Close()
		})
	}
}
