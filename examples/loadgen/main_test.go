package main

import (
	"context"
	"net"
	"strings"
	"testing"
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
			t.Errorf("%s: %d policies checked, want 2 (default and burst)", name, len(c.checks))
		}
	}
}

func TestRunWithoutServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	var out strings.Builder
	rep, err := run(context.Background(), config{
		addr: addr, path: "/api/v1/hello", duration: 300 * time.Millisecond, maxRequests: 50,
		profiles: []profile{{name: "calm", rate: 10}},
	}, &out)
	if err == nil || !strings.Contains(err.Error(), "no answers") {
		t.Errorf("run against a closed port: error %v, want one saying there were no answers", err)
	}
	if rep != nil && rep.ok() {
		t.Errorf("run against a closed port: report ok, want not ok")
	}
	if strings.Contains(out.String(), "RESULT: exact") {
		t.Errorf("run against a closed port claims exactness:\n%s", out.String())
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
