package main

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// at is a request decided at d with a round trip of rtt around it.
func at(d, rtt time.Duration) span { return span{d - rtt/2, d + rtt/2} }

func TestParsePolicies(t *testing.T) {
	tests := []struct {
		in      string
		want    []policy
		wantErr bool
	}{
		{in: `"api";q=50;w=10`, want: []policy{{"api", 50, 10 * time.Second}}},
		{in: `"api";q=50;w=10, "burst";q=10;w=1`, want: []policy{{"api", 50, 10 * time.Second}, {"burst", 10, time.Second}}},
		{in: `default;q=5;w=1`, wantErr: true},
		{in: `"d";q=5`, wantErr: true},
		{in: `"d";q=x;w=1`, wantErr: true},
		{in: ``, wantErr: true},
	}
	for _, tc := range tests {
		got, err := parsePolicies(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parsePolicies(%q): error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !equalPolicies(got, tc.want) {
			t.Errorf("parsePolicies(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func equalPolicies(a, b []policy) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPolicyName(t *testing.T) {
	for in, want := range map[string]string{
		`"burst";r=0;t=1`: "burst",
		`"default"`:       "default",
		`burst;r=0`:       "",
		``:                "",
	} {
		if got := policyName(in); got != want {
			t.Errorf("policyName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWindowBounds(t *testing.T) {
	const w = time.Second
	tests := []struct {
		name                      string
		ok                        []span
		wantCertain, wantPossible int
	}{
		{name: "none", ok: nil},
		{name: "one", ok: []span{at(0, ms)}, wantCertain: 1, wantPossible: 1},
		{
			// Decided 1 s apart exactly: never in one window (t-w, t].
			name:        "a window apart, zero round trip",
			ok:          []span{at(0, 0), at(w, 0), at(2*w, 0)},
			wantCertain: 1, wantPossible: 1,
		},
		{
			// With a 2 ms round trip the client cannot tell whether the
			// two were decided a window apart or just under.
			name:        "a window apart, 2ms round trip",
			ok:          []span{at(0, 2*ms), at(w, 2*ms)},
			wantCertain: 1, wantPossible: 2,
		},
		{
			// What a fixed window allows: 3 before a boundary, 3 after.
			name:        "fixed-window burst at a boundary",
			ok:          []span{at(900*ms, ms), at(910*ms, ms), at(920*ms, ms), at(1000*ms, ms), at(1010*ms, ms), at(1020*ms, ms)},
			wantCertain: 6, wantPossible: 6,
		},
		{
			// A round trip longer than the window is never certainly in one.
			name:        "round trip longer than the window",
			ok:          []span{{0, 2 * w}},
			wantCertain: 0, wantPossible: 1,
		},
	}
	for _, tc := range tests {
		if got, _ := certainMax(tc.ok, w); got != tc.wantCertain {
			t.Errorf("%s: certainMax = %d, want %d", tc.name, got, tc.wantCertain)
		}
		if got := possibleMax(tc.ok, w); got != tc.wantPossible {
			t.Errorf("%s: possibleMax = %d, want %d", tc.name, got, tc.wantPossible)
		}
	}
}

func TestUnjustified(t *testing.T) {
	p := policy{"default", 2, time.Second}
	q := policy{"burst", 1, 100 * ms}
	ok := []span{at(0, ms), at(500*ms, ms)}
	tests := []struct {
		name     string
		rejected []limited
		ps       []policy
		want     int
	}{
		{name: "window full", rejected: []limited{{at(600*ms, ms), "default"}}, ps: []policy{p}, want: 0},
		{name: "first request has left", rejected: []limited{{at(1200*ms, ms), "default"}}, ps: []policy{p}, want: 1},
		// The round trip reaches back into the window of both 200s.
		{name: "long round trip", rejected: []limited{{span{900 * ms, 1100 * ms}, "default"}}, ps: []policy{p}, want: 0},
		{name: "too early", rejected: []limited{{at(300*ms, ms), "default"}}, ps: []policy{p}, want: 1},
		{name: "other policy named and full", rejected: []limited{{at(550*ms, ms), "burst"}}, ps: []policy{p, q}, want: 0},
		// default is full at 700ms, but the 429 blames burst, whose
		// window is empty then: the header lied.
		{name: "full policy not the one named", rejected: []limited{{at(700*ms, ms), "burst"}}, ps: []policy{p, q}, want: 1},
		{name: "unnamed, some policy full", rejected: []limited{{at(550*ms, ms), ""}}, ps: []policy{{"default", 3, time.Second}, q}, want: 0},
		{name: "unnamed, none full", rejected: []limited{{at(700*ms, ms), ""}}, ps: []policy{{"default", 3, time.Second}, q}, want: 1},
	}
	for _, tc := range tests {
		if got, _ := unjustified(ok, tc.rejected, tc.ps); got != tc.want {
			t.Errorf("%s: unjustified = %d, want %d", tc.name, got, tc.want)
		}
	}
}
