package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// forgetting: a store may forget a key's state once it could no longer
// refuse a request because of it, and no sooner. A flood of new keys, each
// idle a step after its one request, makes a store forget what it may (the
// memory store sweeps a shard of idle entries as it grows); the keys whose
// state still counts, under every algorithm, keep their standing exactly:
// a log whose newest instant is still in the window, a counter whose
// current window, or previous window alone, still weighs, a bucket not
// yet full again, and a calendar period not yet over.
func (s *suite) forgetting(t *testing.T) {
	flood := s.floodPolicy()
	if flood == nil {
		t.Skip("storetest: the store implements no rolling algorithm")
	}
	st, clk := s.store(t)
	kinds := forgettingKinds()
	const each = 8 // keys of each kind, so that they fall in many places of a store
	start := clk.Now()
	f := start.Add(2 * time.Hour) // a fixed window's start, in the day the case starts
	for _, ev := range forgettingEvents(kinds) {
		k := kinds[ev.kind]
		if !s.supports(k.p) {
			continue
		}
		clk.Set(f.Add(ev.step.at))
		for i := range each {
			if res := take(t, st, fmt.Sprint(k.name, i), set(t, k.p), ev.step.cost); res.Allowed != ev.step.allowed {
				t.Fatalf("%s %d at %v: %+v, want allowed %v", k.name, i, ev.step.at, res, ev.step.allowed)
			}
		}
	}
	clk.Set(f.Add(10 * time.Second))
	fs := set(t, *flood)
	for i := range 1 << 14 {
		clk.Advance(s.cfg.resolution) // so that every flooded key is idle by the next
		take(t, st, fmt.Sprint("flood-", i), fs, 1)
	}
	for _, k := range kinds {
		if !s.supports(k.p) {
			continue
		}
		for i := range each {
			if res := peek(t, st, fmt.Sprint(k.name, i), set(t, k.p)); res.Remaining != k.remaining {
				t.Errorf("%s %d after a flood of idle keys: %+v, want %d remaining (%s)", k.name, i, res, k.remaining, k.why)
			}
		}
	}
}

// floodPolicy returns the policy of the keys forgetting floods the store
// with: one request a step, which is idle a step later; nil if the store
// implements no rolling algorithm.
func (s *suite) floodPolicy() *ratelimit.Policy {
	rolling := s.rolling()
	if len(rolling) == 0 {
		return nil
	}
	a := rolling[0]
	if slices.Contains(rolling, ratelimit.GCRA) {
		a = ratelimit.GCRA
	}
	return &ratelimit.Policy{Name: "flood", Limit: 1, Window: s.cfg.resolution, Algorithm: a}
}

// forgettingKind is a kind of key of forgetting: its policy, its
// requests, at times from the start of a fixed window, and the Remaining
// a peek reports 10 s after that start.
type forgettingKind struct {
	name      string
	p         ratelimit.Policy
	steps     []forgettingStep
	remaining int
	why       string
}

type forgettingStep struct {
	at      time.Duration
	cost    int
	allowed bool
}

func forgettingKinds() []forgettingKind {
	sec, min := time.Second, time.Minute
	return []forgettingKind{
		{"log", ratelimit.Policy{Name: "log", Limit: 2, Window: min},
			[]forgettingStep{{-50 * sec, 1, true}, {0, 1, true}}, 1, "the request at -50 s has left, the one at 0 s still counts"},
		{"counter", ratelimit.Policy{Name: "counter", Limit: 4, Window: min, Algorithm: ratelimit.SlidingWindowCounter},
			[]forgettingStep{{-10 * sec, 4, true}}, 0, "4 in the previous window weigh ceil(4 * 50/60) = 4"},
		{"counter-previous", ratelimit.Policy{Name: "counter-previous", Limit: 4, Window: min, Algorithm: ratelimit.SlidingWindowCounter},
			[]forgettingStep{{-30 * sec, 4, true}, {5 * sec, 3, false}}, 0, "4 in the previous window weigh 4, the current one empty"},
		{"gcra", ratelimit.Policy{Name: "gcra", Limit: 2, Window: min, Algorithm: ratelimit.GCRA},
			[]forgettingStep{{-40 * sec, 2, true}}, 1, "the bucket, emptied 50 s ago, refills 30 s a request"},
		{"daily", ratelimit.Policy{Name: "daily", Limit: 3, Algorithm: ratelimit.Daily},
			[]forgettingStep{{-time.Hour, 3, true}}, 0, "3 spent earlier in the day"},
	}
}

// forgettingEvent is a step of a kind of key.
type forgettingEvent struct {
	kind int
	step forgettingStep
}

// forgettingEvents returns the steps of every kind, in the order of time.
func forgettingEvents(kinds []forgettingKind) []forgettingEvent {
	var evs []forgettingEvent
	for i, k := range kinds {
		for _, st := range k.steps {
			evs = append(evs, forgettingEvent{i, st})
		}
	}
	slices.SortStableFunc(evs, func(a, b forgettingEvent) int { return int((a.step.at - b.step.at) / time.Second) })
	return evs
}
