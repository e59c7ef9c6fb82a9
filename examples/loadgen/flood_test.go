package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunWithFlood runs the flood beside a polite client against the demo
// over real TCP, and checks the mechanics, not the figures, which depend
// on the machine: both phases measured and printed, the flood limited and
// every one of its 429s justified, the polite client's schedule untouched.
func TestRunWithFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("drives real TCP for 1 s")
	}
	var out strings.Builder
	rep, err := run(context.Background(), config{
		self: true, path: "/api/v1/hello", duration: time.Second, maxRequests: 100000, flood: true,
		profiles: []profile{{name: "calm", rate: 10}},
	}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !rep.ok() {
		t.Fatalf("run with the flood found the demo inexact:\n%s", out.String())
	}
	fr := rep.flood
	if fr == nil {
		t.Fatalf("no flood report:\n%s", out.String())
	}
	if fr.from != 500*time.Millisecond || fr.until < fr.from {
		t.Errorf("flood from %v until %v, want from 500ms, until no earlier", fr.from, fr.until)
	}
	if fr.limited == 0 || fr.ok == 0 || fr.requests != fr.ok+fr.limited {
		t.Errorf("flood: %d requests, %d allowed, %d limited; want both, and no errors", fr.requests, fr.ok, fr.limited)
	}
	// calm sends at 0, 100ms, ..., 900ms: about five before the flood and
	// five under it (TestCompareFlood checks the split exactly; here a
	// loaded machine may delay a send across the flood's start).
	if fr.without.n < 1 || fr.without.n+fr.with.n > 10 {
		t.Errorf("%d polite requests measured without the flood and %d under it, want some before, and 10 at most in all", fr.without.n, fr.with.n)
	}
	if !fr.spent && fr.with.n < 1 {
		t.Errorf("no polite request measured under the flood, which ran to the end")
	}
	byName := map[string]clientReport{}
	for _, c := range rep.clients {
		byName[c.name] = c
	}
	if c := byName["calm"]; c.ok != 10 || c.limited != 0 {
		t.Errorf("calm: %d allowed, %d limited; want its 10, all allowed", c.ok, c.limited)
	}
	if c := byName["flood"]; c.unjustified != 0 || c.limited != fr.limited {
		t.Errorf("flood: %d unjustified of %d 429s, want 0 of %d", c.unjustified, c.limited, fr.limited)
	}
	for _, want := range []string{"round trip of the polite clients: p50 ", "flood: ", "without the flood (sent before 0.500s)", "under the flood (sent 0.500s to "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFloodLeavesThePoliteBudget caps the run below the flood's appetite:
// the polite client still sends its whole schedule, and the flood only
// what is left.
func TestFloodLeavesThePoliteBudget(t *testing.T) {
	var out strings.Builder
	rep, err := run(context.Background(), config{
		self: true, path: "/api/v1/hello", duration: time.Second, maxRequests: 13, flood: true,
		profiles: []profile{{name: "calm", rate: 10}},
	}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if rep.requests != 13 {
		t.Errorf("%d requests, want -max-requests 13", rep.requests)
	}
	if rep.flood.requests != 3 || !rep.flood.spent {
		t.Errorf("flood: %d requests, spent %v; want the 3 the polite client leaves, spent", rep.flood.requests, rep.flood.spent)
	}
	if !strings.Contains(out.String(), "when its share of -max-requests ran out") {
		t.Errorf("summary does not say the flood ran out:\n%s", out.String())
	}
}

func TestPoliteDemand(t *testing.T) {
	tests := []struct {
		ps   []profile
		d    time.Duration
		want int
	}{
		{[]profile{{rate: 10}}, time.Second, 10},
		{[]profile{{rate: 3}}, time.Second + time.Millisecond, 4},
		{[]profile{{burst: 25, every: 4 * time.Second}}, 15 * time.Second, 100},
		{[]profile{{burst: 25, every: 4 * time.Second}}, 16 * time.Second, 100},
		{[]profile{{rate: 10}, floodProfile}, time.Second, 10},
		// 1 s / 3 is cut to whole nanoseconds, so 46 steps fit in 15 s,
		// and drive sends the 46th too.
		{profiles, 15 * time.Second, 46 + 120 + 451 + 100},
	}
	for _, tc := range tests {
		if got := politeDemand(tc.ps, tc.d); got != tc.want {
			t.Errorf("politeDemand(%v, %v) = %d, want %d", tc.ps, tc.d, got, tc.want)
		}
	}
}

// TestCompareFlood splits polite round trips by the flood's start and its
// last answer.
func TestCompareFlood(t *testing.T) {
	flood := &client{profile: floodProfile,
		ok:       []span{{500 * ms, 510 * ms}},
		rejected: []limited{{span{520 * ms, 800 * ms}, "burst"}}}
	polite := &client{profile: profile{name: "calm"},
		ok: []span{
			{100 * ms, 101 * ms}, {200 * ms, 203 * ms}, // before: 1 ms, 3 ms
			{500 * ms, 520 * ms}, {700 * ms, 710 * ms}, // under: 20 ms, 10 ms
			{900 * ms, 901 * ms}, // after the flood's last answer: neither
		},
		rejected: []limited{{span{300 * ms, 302 * ms}, "burst"}}} // before: 2 ms
	fr := compareFlood([]*client{polite, flood}, flood, 500*ms, false)
	if fr.from != 500*ms || fr.until != 800*ms || fr.requests != 2 || fr.ok != 1 || fr.limited != 1 {
		t.Errorf("flood %v to %v, %d requests (%d ok, %d limited); want 500ms to 800ms, 2 (1, 1)", fr.from, fr.until, fr.requests, fr.ok, fr.limited)
	}
	if want := (latency{3, 2 * ms, 3 * ms, 3 * ms}); fr.without != want {
		t.Errorf("without = %+v, want %+v", fr.without, want)
	}
	if want := (latency{2, 20 * ms, 20 * ms, 20 * ms}); fr.with != want {
		t.Errorf("with = %+v, want %+v", fr.with, want)
	}
}
