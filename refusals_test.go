package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// A flooding client's refusals are answered without its entry's lock,
// and counted.
func TestRefusalsAnswerWithoutTheLock(t *testing.T) {
	clk := fakeclock.New()
	s := newTestStore(t, WithClock(clk.Now))
	p := mustSet(t, Policy{Name: "p", Limit: 2, Window: time.Minute})
	take(t, s, "k", p)
	take(t, s, "k", p)
	first := take(t, s, "k", p)
	if first.Allowed {
		t.Fatal("a third request allowed under a limit of 2")
	}
	e, _ := findEntry(s, "k", p)
	e.mu.Lock()
	done := make(chan Result)
	go func() {
		for range 1000 {
			s.Take(context.Background(), "k", p, 1)
		}
		res, _ := s.Take(context.Background(), "k", p, 1)
		done <- res
	}()
	select {
	case res := <-done:
		if res.Allowed || res.RetryAfter != first.RetryAfter {
			t.Errorf("refusal while the entry is locked: %+v, want %+v", res, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("refusals wait for the entry's lock")
	}
	e.mu.Unlock()
	if got := s.Stats().CachedRefusals; got != 1001 {
		t.Errorf("Stats.CachedRefusals %d, want 1001", got)
	}
	// A cost the refusal was not decided for takes the lock.
	clk.Advance(time.Second)
	if res, err := s.Take(context.Background(), "k", p, 2); err != nil || res.Allowed {
		t.Errorf("cost 2: %+v, %v; want refused", res, err)
	}
	if got := s.Stats().CachedRefusals; got != 1001 {
		t.Errorf("after a cost of 2: Stats.CachedRefusals %d, want 1001", got)
	}
}

// Remembered refusals answer as the locked path would, over random
// traffic of every algorithm, mixed, with costs: a key whose refusals are
// forgotten before each request is decided exactly as its twin.
func TestRefusalsMatchTheLockedPath(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		clk := fakeclock.New()
		s := newTestStore(t, WithClock(clk.Now))
		var ps []Policy
		for i := range 1 + rng.IntN(3) {
			limit := 1 + rng.IntN(6)
			ps = append(ps, Policy{
				Name:      string(rune('a' + i)),
				Limit:     limit,
				Window:    time.Duration(limit*(1+rng.IntN(50))) * time.Millisecond,
				Algorithm: Algorithm(rng.IntN(3)),
			})
		}
		set := mustSet(t, ps...)
		// Keys whose refusals share no slot, so that forgetting one
		// does not forget the other.
		twinKey := "twin"
		for i := 0; s.hash(twinKey, set.p)&(refusalSlots-1) == s.hash("remembered", set.p)&(refusalSlots-1); i++ {
			twinKey = fmt.Sprint("twin-", i)
		}
		hits := uint64(0)
		for step := range 400 {
			if rng.IntN(3) == 0 {
				clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
			cost := 1
			if rng.IntN(4) == 0 {
				cost = 1 + rng.IntN(set.p.maxLimit)
			}
			remembered, err := s.Take(context.Background(), "remembered", set, cost)
			if err != nil {
				t.Fatal(err)
			}
			if h := s.Stats().CachedRefusals; h > hits {
				hits = h
			}
			// Forget the twin's refusal, if any, so that it takes the lock.
			twin, _ := findEntry(s, twinKey, set)
			if twin != nil {
				twin.mu.Lock()
				s.refused.forget(s.hash(twinKey, set.p), twin)
				twin.mu.Unlock()
			}
			locked, err := s.Take(context.Background(), twinKey, set, cost)
			if err != nil {
				t.Fatal(err)
			}
			if remembered != locked {
				t.Fatalf("seed %d step %d (%s, cost %d): remembered %+v, locked %+v", seed, step, set.ID(), cost, remembered, locked)
			}
		}
		if hits == 0 {
			t.Errorf("seed %d: no refusal was ever answered from memory", seed)
		}
	}
}
