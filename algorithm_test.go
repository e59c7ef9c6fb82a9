package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var algorithms = []Algorithm{SlidingLog, SlidingWindowCounter, GCRA}

// model is a deliberately simple reference for one algorithm and one
// policy: it answers whether cost more requests fit at now, and records
// them if so.
type model interface {
	take(now, cost int64) bool
}

// logModel keeps every allowed instant in a plain slice.
type logModel struct {
	limit, window int64
	at            []int64
}

func (m *logModel) take(now, cost int64) bool {
	m.at = slices.DeleteFunc(m.at, func(t int64) bool { return t <= now-m.window })
	if int64(len(m.at))+cost > m.limit {
		return false
	}
	for range cost {
		m.at = append(m.at, now)
	}
	return true
}

// bucketModel is a token bucket in nanosecond units: GCRA by another
// route. It holds up to limit*T and refills one unit per nanosecond; a
// request takes T units.
type bucketModel struct {
	limit, t, level, last int64
	started               bool
}

func (m *bucketModel) take(now, cost int64) bool {
	depth := m.limit * m.t
	if !m.started {
		m.level, m.started = depth, true
	} else {
		m.level = min(depth, m.level+now-m.last)
	}
	m.last = now
	if m.level < cost*m.t {
		return false
	}
	m.level -= cost * m.t
	return true
}

// counterModel counts per fixed window in a map and weighs the previous
// window in floating point, as the sliding window counter is usually
// described.
type counterModel struct {
	limit, window int64
	counts        map[int64]int64
}

func (m *counterModel) take(now, cost int64) bool {
	w := now / m.window
	elapsed := float64(now-w*m.window) / float64(m.window)
	est := float64(m.counts[w]) + math.Ceil(float64(m.counts[w-1])*(1-elapsed)-1e-9)
	if est+float64(cost) > float64(m.limit) {
		return false
	}
	m.counts[w] += cost
	return true
}

func newModel(a Algorithm, limit, window int64) model {
	switch a {
	case SlidingWindowCounter:
		return &counterModel{limit: limit, window: window, counts: map[int64]int64{}}
	case GCRA:
		return &bucketModel{limit: limit, t: interval(limit, window)}
	}
	return &logModel{limit: limit, window: window}
}

// clone deep-copies s, so a test can ask it hypothetical questions.
func (s state) clone() state {
	if s.ring != nil {
		ring := slices.Clone(s.ringBytes())
		s.ring = &ring[0]
	}
	return s
}

// Each algorithm decides as its reference model does over random traffic,
// reports figures within range, and advertises a RetryAfter that is exact:
// a nanosecond sooner the request still does not fit, at RetryAfter it
// does.
func TestAlgorithmsMatchTheirModels(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for seed := range uint64(40) {
				rng := rand.New(rand.NewPCG(seed, 7))
				limit := int64(1 + rng.IntN(12))
				window := int64(time.Duration(1+rng.IntN(5000)) * time.Millisecond)
				impl, ref := a.impl(), newModel(a, limit, window)
				var s state
				now := int64(0)
				for i := range 300 {
					if rng.IntN(4) != 0 { // else a burst at one instant
						now += rng.Int64N(window / 2)
					}
					cost := int64(1)
					if rng.IntN(5) == 0 {
						cost = 1 + rng.Int64N(limit)
					}
					v := impl.decide(&s, limit, window, now, cost)
					if want := ref.take(now, cost); v.ok != want {
						t.Fatalf("seed %d step %d (limit %d, window %d, now %d, cost %d): allowed %v, model says %v", seed, i, limit, window, now, cost, v.ok, want)
					}
					if v.ok {
						v = impl.record(&s, limit, window, now, cost)
					} else {
						if v.retry <= 0 {
							t.Fatalf("seed %d step %d: refused with retry %d, want > 0", seed, i, v.retry)
						}
						before, at := s.clone(), s.clone()
						if impl.decide(&before, limit, window, now+v.retry-1, cost).ok {
							t.Fatalf("seed %d step %d: fits 1ns before the advertised retry %d", seed, i, v.retry)
						}
						if !impl.decide(&at, limit, window, now+v.retry, cost).ok {
							t.Fatalf("seed %d step %d: does not fit at the advertised retry %d", seed, i, v.retry)
						}
					}
					if v.remaining < 0 || v.remaining > limit {
						t.Fatalf("seed %d step %d: remaining %d outside [0, %d]", seed, i, v.remaining, limit)
					}
					if v.reset < 0 || v.reset > 2*window+interval(limit, window) {
						t.Fatalf("seed %d step %d: reset %d out of range", seed, i, v.reset)
					}
				}
			}
		})
	}
}

// Per algorithm, at the window edges, with the store's injected clock.
func TestAlgorithmEdges(t *testing.T) {
	type req struct {
		at        time.Duration
		allowed   bool
		remaining int
		retry     time.Duration
	}
	tests := []struct {
		algo  Algorithm
		name  string
		limit int
		steps []req
	}{
		{GCRA, "a full burst, then one every window/limit", 3, []req{
			{0, true, 2, 0},
			{0, true, 1, 0},
			{0, true, 0, 0},
			{0, false, 0, 20 * time.Second},
			{20*time.Second - time.Millisecond, false, 0, time.Millisecond},
			{20 * time.Second, true, 0, 0},
			{time.Minute + 20*time.Second, true, 2, 0}, // refilled
		}},
		{SlidingWindowCounter, "the previous window weighs by overlap", 4, []req{
			{0, true, 3, 0},
			{10 * time.Second, true, 2, 0},
			{20 * time.Second, true, 1, 0},
			{30 * time.Second, true, 0, 0},
			{40 * time.Second, false, 0, 20*time.Second + 15*time.Second},
			// 75% into the next window, 4 * 0.25 = 1 still counts.
			{time.Minute + 45*time.Second, true, 2, 0},
			{2*time.Minute + 59*time.Second, true, 2, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.algo.String()+"/"+tt.name, func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			s := newTestStore(t, WithClock(clk.Now), WithAlgorithm(tt.algo))
			p := []Policy{{Name: "p", Limit: tt.limit, Window: time.Minute}}
			for i, st := range tt.steps {
				clk.Advance(start.Add(st.at).Sub(clk.Now()))
				res, err := s.Take(context.Background(), "k", p, 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed != st.allowed || res.Remaining != st.remaining || res.RetryAfter != st.retry {
					t.Errorf("request %d at %v: got allowed %v remaining %d retry %v, want %v %d %v",
						i, st.at, res.Allowed, res.Remaining, res.RetryAfter, st.allowed, st.remaining, st.retry)
				}
			}
		})
	}
}

// Every algorithm is exact for its own definition under concurrency: within
// one window, a fresh key admits exactly limit requests whatever the
// interleaving.
func TestAlgorithmsExactUnderConcurrency(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			const limit, goroutines, each = 400, 64, 16
			s := newTestStore(t, WithAlgorithm(a))
			p := []Policy{{Name: "p", Limit: limit, Window: time.Hour}}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range each {
						if res, err := s.Take(context.Background(), "hot", p, 1); err == nil && res.Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := allowed.Load(); got != limit {
				t.Errorf("%d allowed, want exactly %d", got, limit)
			}
		})
	}
}

// No policy records a request that another refused, whatever the
// algorithm.
func TestMultiPolicyAtomicityPerAlgorithm(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clk := newFakeClock()
			s := newTestStore(t, WithClock(clk.Now), WithAlgorithm(a))
			p := []Policy{{Name: "small", Limit: 2, Window: time.Hour}, {Name: "big", Limit: 100, Window: time.Hour}}
			for range 50 {
				s.Take(context.Background(), "k", p, 1)
				clk.Advance(time.Millisecond)
			}
			// Ask the big policy alone through the same entry's state.
			e, st := findEntry(s, "k")
			e.mu.Lock()
			v := s.algo.decide(st.at(1), 100, int64(time.Hour), s.now(), 1)
			e.mu.Unlock()
			if v.remaining != 100-2-1 {
				t.Errorf("big policy: %d remaining before this request, want %d (only the 2 allowed requests recorded)", v.remaining+1, 100-2)
			}
		})
	}
}

// findEntry returns key's entry in s and its states, or nil.
func findEntry(s *MemoryStore, key string) (*entry, states) {
	h := maphash.String(s.seed, key)
	sh := &s.shards[h&s.shardMask]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := sh.find(h, key)
	if e == nil {
		return nil, states{}
	}
	return e, sh.states(e)
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
