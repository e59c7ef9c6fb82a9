package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestRunAgainstDemo drives the demo in-process over real TCP for a short
// while and checks the run finds it exact. It takes two seconds of wall
// time: the point is real timing through the network stack.
func TestRunAgainstDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("drives real TCP for 2 s")
	}
	var out strings.Builder
	rep, err := run(context.Background(), config{
		self:        true,
		path:        "/api/v1/hello",
		duration:    2 * time.Second,
		maxRequests: 2000,
		profiles: []profile{
			{name: "calm", rate: 4},
			{name: "eager", rate: 40},
			{name: "bursty", burst: 25, every: time.Second},
		},
	}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !rep.ok() {
		t.Fatalf("run found the demo inexact:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "RESULT: exact.") {
		t.Errorf("summary lacks the result line:\n%s", out.String())
	}
	byName := map[string]clientReport{}
	for _, c := range rep.clients {
		byName[c.name] = c
	}
	if c := byName["calm"]; c.limited != 0 || c.ok == 0 || c.errs != 0 {
		t.Errorf("calm: %d ok, %d limited, %d errors; want all allowed", c.ok, c.limited, c.errs)
	}
	for _, name := range []string{"eager", "bursty"} {
		c := byName[name]
		if c.limited == 0 || c.ok == 0 {
			t.Errorf("%s: %d ok, %d limited; want both", name, c.ok, c.limited)
		}
		if len(c.checks) != 2 {
			t.Errorf("%s: %d policies checked, want 2 (api and burst)", name, len(c.checks))
		}
	}
}

// TestRunWithoutServer runs against a closed port over real TCP, for
// the whole of the default -duration if it did not stop early.
func TestRunWithoutServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	const duration = 15 * time.Second
	calm := []profile{{name: "calm", rate: 10}}
	var out strings.Builder
	rep, err := run(context.Background(), config{
		addr: addr, path: "/api/v1/hello", duration: duration, maxRequests: 1000, profiles: calm,
	}, &out)
	if err == nil || !strings.Contains(err.Error(), "no answers") {
		t.Errorf("run against a closed port: error %v, want one saying there were no answers", err)
	}
	if rep == nil {
		t.Fatal("run against a closed port: no report")
	}
	if rep.ok() {
		t.Errorf("run against a closed port: report ok, want not ok")
	}
	if all := politeDemand(calm, duration); rep.requests >= all {
		t.Errorf("run against a closed port sent %d requests, all of its schedule: want it to stop when nothing answered", rep.requests)
	}
	if strings.Contains(out.String(), "RESULT: exact") {
		t.Errorf("run against a closed port claims exactness:\n%s", out.String())
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRunNothingAnswers runs in a bubble of fake time, without a network,
// against a server that refuses every connection, one that accepts and
// never answers, and one that answers: the first two must stop the run
// noAnswerWait into it, within 2 s whatever -duration says, having
// recorded every request sent, and say that nothing answered; the last
// must run on to its clients' last request before the end of -duration.
func TestRunNothingAnswers(t *testing.T) {
	refused := errors.New("connection refused")
	tests := []struct {
		name     string
		rt       roundTripFunc
		duration time.Duration
		minTook  time.Duration // how long the run may take, in fake time
		maxTook  time.Duration
		wantErr  bool
	}{
		{"refused", func(*http.Request) (*http.Response, error) { return nil, refused }, time.Hour, noAnswerWait, 2 * time.Second, true},
		{"silent", func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}, time.Hour, noAnswerWait, 2 * time.Second, true},
		{"answering", func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}, 3 * time.Second, 2 * time.Second, 3 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int64
				counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sent.Add(1)
					return tt.rt(r)
				})
				var out strings.Builder
				start := time.Now()
				rep, err := run(context.Background(), config{
					addr: "127.0.0.1:8080", path: "/api/v1/hello", duration: tt.duration, maxRequests: 1 << 20,
					profiles: profiles, transport: counting,
				}, &out)
				took := time.Since(start)
				if took < tt.minTook || took > tt.maxTook {
					t.Errorf("run took %v, want %v to %v", took, tt.minTook, tt.maxTook)
				}
				if gotErr := err != nil && strings.Contains(err.Error(), "no answers"); gotErr != tt.wantErr {
					t.Errorf("run: error %v, want one saying there were no answers: %v", err, tt.wantErr)
				}
				if rep == nil || sent.Load() == 0 || int64(rep.requests) != sent.Load() {
					t.Fatalf("run sent %d requests, report %+v: want some, all in the report", sent.Load(), rep)
				}
			})
		})
	}
}

func TestRunStopsAtMaxRequests(t *testing.T) {
	var out strings.Builder
	rep, err := run(context.Background(), config{
		self: true, path: "/api/v1/hello", duration: time.Second, maxRequests: 7,
		profiles: []profile{{name: "bursty", burst: 25, every: time.Second}},
	}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if rep.requests != 7 {
		t.Errorf("sent %d requests, want -max-requests 7", rep.requests)
	}
}

// TestRunTwiceAgainstOneDemo runs twice within one window against the same
// demo, as a person does who runs the load generator again: each run must
// use keys of its own, or the second finds the first's windows spent and
// calls its 429s unjustified.
func TestRunTwiceAgainstOneDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("drives real TCP for 2 s")
	}
	addr, stop, err := startDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var keys []string
	for i := range 2 {
		var out strings.Builder
		rep, err := run(context.Background(), config{
			addr: addr, path: "/api/v1/hello", duration: time.Second, maxRequests: 500,
			profiles: []profile{{name: "eager", rate: 40}},
		}, &out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
		if !rep.ok() {
			t.Errorf("run %d found the demo inexact:\n%s", i+1, out.String())
		}
		keys = append(keys, rep.keys)
	}
	if keys[0] == keys[1] {
		t.Errorf("both runs used the keys %s, want keys of their own", keys[0])
	}
}

// TestRunCatchesNoLimit runs, in a bubble of fake time, against servers
// that admit every request: one that advertises the demo's quotas, one
// that advertises quotas large enough to cover what it admits, and one
// that sends no RateLimit headers at all. The run must fail all three:
// the quotas checked are the demo's, not what the server under test says.
func TestRunCatchesNoLimit(t *testing.T) {
	for name, policy := range map[string]string{
		"demo's quotas":   `"api";q=50;w=10, "burst";q=10;w=1`,
		"inflated quotas": `"api";q=1000;w=10, "burst";q=1000;w=1`,
		"no headers":      "",
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				admitAll := roundTripFunc(func(*http.Request) (*http.Response, error) {
					h := http.Header{}
					if policy != "" {
						h.Set("RateLimit-Policy", policy)
					}
					return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody}, nil
				})
				var out strings.Builder
				rep, err := run(context.Background(), config{
					addr: "127.0.0.1:8080", path: "/api/v1/hello", duration: 2 * time.Second, maxRequests: 1000,
					profiles: []profile{{name: "eager", rate: 30}}, transport: admitAll,
				}, &out)
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if rep.ok() || !strings.Contains(out.String(), "RESULT: FAILED.") {
					t.Errorf("a server admitting all 30 a second passed:\n%s", out.String())
				}
			})
		})
	}
}
