package main

import (
	"strings"
	"testing"
	"time"
)

// burst2 is the quota the tests' clients are checked against.
var burst2 = []policy{{"burst", 2, time.Second}}

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
			// The header's quota is what is being checked, not the bound
			// to check against: 3 in a second is over the real limit of
			// 2, however much the server advertises.
			name: "advertises a larger quota",
			client: &client{profile: profile{name: "eager"},
				ok: []span{at(100*ms, ms), at(200*ms, ms), at(300*ms, ms)}},
			policy: `"burst";q=3;w=1`,
			want: []string{
				"eager: RateLimit-Policy advertises [burst 3/1s], but the quotas are [burst 2/1s]",
				"eager: policy burst 2/1s admitted 3 requests certainly inside the window ending at 0.300s, over its limit of 2",
			},
		},
		{
			// No answer said what its quota was: the windows are still
			// checked, and the missing header is a failure.
			name: "no RateLimit-Policy",
			client: &client{profile: profile{name: "eager"},
				ok: []span{at(100*ms, ms), at(200*ms, ms), at(300*ms, ms)}},
			want: []string{
				"eager: missing RateLimit-Policy",
				"eager: policy burst 2/1s admitted 3 requests certainly inside the window ending at 0.300s, over its limit of 2",
			},
		},
		{
			// A lost answer means its 429s cannot be judged: the run
			// must not then say every 429 was due.
			name: "lost answers",
			client: &client{profile: profile{name: "calm"}, errs: 1,
				rejected: []limited{{at(200*ms, ms), "burst"}}},
			policy: `"burst";q=2;w=1`,
			want:   []string{"calm: 1 requests lost or answered with neither 200 nor 429, so its 429s were not judged"},
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
		rep := newReport([]*client{tc.client}, "http://demo", time.Second, burst2)
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
	rep := newReport([]*client{c}, "http://demo", time.Second, burst2)
	if fs := rep.failures(); len(fs) != 0 || !rep.ok() {
		t.Errorf("failures %q, want none", fs)
	}
}
