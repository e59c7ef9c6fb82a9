package main

import (
	"strings"
	"testing"
	"time"
)

// TestFailures checks that a failed run says what failed: which client,
// which policy and window, and which count against which limit.
func TestFailures(t *testing.T) {
	tests := []struct {
		name   string
		client *client
		policy string // RateLimit-Policy
		want   []string
	}{
		{
			name: "over the limit",
			client: &client{profile: profile{name: "eager"},
				ok: []span{at(100*ms, ms), at(200*ms, ms), at(300*ms, ms)}},
			policy: `"burst";q=2;w=1`,
			want:   []string{"eager: policy burst 2/1s admitted 3 requests certainly inside the window ending at 0.300s, over its limit of 2"},
		},
		{
			name: "429 with room left",
			client: &client{profile: profile{name: "calm"},
				ok:       []span{at(100*ms, ms)},
				rejected: []limited{{at(200*ms, 0), "burst"}, {at(300*ms, 0), "burst"}}},
			policy: `"burst";q=2;w=1`,
			want:   []string{"calm: 2 of 2 429s unjustified; the first, sent at 0.200s and answered at 0.200s, named policy burst 2/1s, whose window held at most 1 200s then, under its limit of 2"},
		},
		{
			name: "429 naming no advertised policy",
			client: &client{profile: profile{name: "calm"},
				ok:       []span{at(100*ms, ms)},
				rejected: []limited{{at(200*ms, 0), "hourly"}}},
			policy: `"burst";q=2;w=1`,
			want:   []string{`calm: 1 of 1 429s unjustified; the first, sent at 0.200s and answered at 0.200s, named policy "hourly", which was not advertised, and no advertised policy was full: the closest, burst 2/1s, held at most 1 200s in its window then, under its limit of 2`},
		},
		{
			name:   "unreadable policy",
			client: &client{profile: profile{name: "calm"}, ok: []span{at(100*ms, ms)}},
			policy: `burst;q=2`,
			want:   []string{"calm: unreadable RateLimit-Policy"},
		},
	}
	for _, tc := range tests {
		tc.client.policies = tc.policy
		rep := newReport([]*client{tc.client}, "http://demo", time.Second)
		got := rep.failures()
		if len(got) != len(tc.want) {
			t.Errorf("%s: failures %q, want %d", tc.name, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: failure %q, want it to start %q", tc.name, got[i], w)
			}
		}
		var out strings.Builder
		rep.print(&out)
		if !strings.Contains(out.String(), "RESULT: FAILED.\n  "+got[0]) {
			t.Errorf("%s: the summary does not list the failure:\n%s", tc.name, out.String())
		}
	}
}

func TestNoFailures(t *testing.T) {
	c := &client{profile: profile{name: "calm"}, ok: []span{at(100*ms, ms), at(200*ms, ms)},
		rejected: []limited{{at(300*ms, ms), "burst"}}, policies: `"burst";q=2;w=1`}
	rep := newReport([]*client{c}, "http://demo", time.Second)
	if fs := rep.failures(); len(fs) != 0 || !rep.ok() {
		t.Errorf("failures %q, want none", fs)
	}
}
