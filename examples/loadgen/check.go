package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The exactness check works from the client's side of real TCP, where the
// instant the server decided a request is unknown: all the client knows is
// that it lies between the request's send and receive times, both read
// from this process's monotonic clock. So each count comes as a bound:
//
//   - a 200 was certainly decided in the window (t-W, t] if it was sent
//     after t-W and received by t. An exact limiter keeps that count at or
//     under the limit for every t, with no tolerance at all: a larger one
//     proves an over-admission.
//   - a 200 was possibly decided in the window if its round trip overlaps
//     it. This count may exceed the limit by the requests whose round trip
//     straddles a window edge; the gap between the two bounds is the
//     measurement's tolerance, and it shrinks with the round-trip time.
//
// A 429 is justified if, at some instant of its round trip, its policy's
// window could have held limit 200s already.

// span is one request's round trip, since the start of the run.
type span struct{ sent, recv time.Duration }

// policy is one quota advertised in a RateLimit-Policy header.
type policy struct {
	name   string
	limit  int
	window time.Duration
}

func (p policy) String() string {
	return fmt.Sprintf("%s %d/%v", p.name, p.limit, p.window)
}

// parsePolicies reads a RateLimit-Policy value such as
// `"api";q=50;w=10, "burst";q=10;w=1`.
func parsePolicies(v string) ([]policy, error) {
	var ps []policy
	for item := range strings.SplitSeq(v, ",") {
		fields := strings.Split(strings.TrimSpace(item), ";")
		name, err := strconv.Unquote(fields[0])
		if err != nil {
			return nil, fmt.Errorf("policy %q: name is not a quoted string", item)
		}
		p := policy{name: name}
		for _, f := range fields[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(f), "=")
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("policy %q: bad parameter %q", item, f)
			}
			switch k {
			case "q":
				p.limit = n
			case "w":
				p.window = time.Duration(n) * time.Second
			}
		}
		if p.limit == 0 || p.window == 0 {
			return nil, fmt.Errorf("policy %q: missing q or w", item)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// policyName returns the quoted name that a RateLimit value starts with,
// such as burst in `"burst";r=0;t=1`, or "" if there is none.
func policyName(v string) string {
	first, _, _ := strings.Cut(v, ";")
	name, err := strconv.Unquote(strings.TrimSpace(first))
	if err != nil {
		return ""
	}
	return name
}

// certainMax returns the most allowed requests certainly decided inside
// one window of length w: sent after t-w and received by t, for the worst
// t, which it returns too. Each request counts for t in [recv, sent+w), so
// the maximum is reached at some recv.
func certainMax(ok []span, w time.Duration) (n int, at time.Duration) {
	for _, a := range ok {
		t := a.recv
		c := 0
		for _, b := range ok {
			if b.recv <= t && b.sent > t-w {
				c++
			}
		}
		if c > n {
			n, at = c, t
		}
	}
	return n, at
}

// possibleMax returns the most allowed requests that may have been decided
// inside one window of length w: those whose round trip overlaps (t-w, t].
// Each counts for t in [sent, recv+w), so the maximum is at some sent.
func possibleMax(ok []span, w time.Duration) int {
	best := 0
	for _, a := range ok {
		best = max(best, possibleAt(ok, a.sent, w))
	}
	return best
}

// possibleAt counts the allowed requests that may have been decided in
// (t-w, t].
func possibleAt(ok []span, t, w time.Duration) int {
	n := 0
	for _, b := range ok {
		if b.sent <= t && b.recv > t-w {
			n++
		}
	}
	return n
}

// mostPossible returns the most allowed requests that may have been
// decided in p's window (t-w, t] at some instant t of the round trip r: a
// 429 under p is justified if that reaches p's limit. The
// possible count only grows at a send, so the instants worth trying are
// r.sent and the sends during r.
func mostPossible(ok []span, r span, p policy) int {
	best := possibleAt(ok, r.sent, p.window)
	for _, b := range ok {
		if b.sent > r.sent && b.sent <= r.recv {
			best = max(best, possibleAt(ok, b.sent, p.window))
		}
	}
	return best
}

// limited is a 429 and the policy its RateLimit header named.
type limited struct {
	span
	policy string
}

// unfair is a 429 that no policy could justify, and why: the policy it
// named (or, naming none known, the one closest to full) held at most
// possible allowed requests in its window during the round trip, fewer
// than its limit.
type unfair struct {
	limited
	against  policy
	possible int
}

// unjustified counts the 429s that no policy could justify: those naming a
// policy it cannot justify, or naming none that any policy can. It
// returns the first of them too.
func unjustified(ok []span, rejected []limited, ps []policy) (n int, first unfair) {
	for _, r := range rejected {
		var u unfair
		fair := false
		if i := slices.IndexFunc(ps, func(p policy) bool { return p.name == r.policy }); i >= 0 {
			u = unfair{r, ps[i], mostPossible(ok, r.span, ps[i])}
			fair = u.possible >= ps[i].limit
		} else {
			for j, p := range ps {
				m := mostPossible(ok, r.span, p)
				if m >= p.limit {
					fair = true
					break
				}
				if j == 0 || m-p.limit > u.possible-u.against.limit {
					u = unfair{r, p, m}
				}
			}
		}
		if !fair {
			if n == 0 {
				first = u
			}
			n++
		}
	}
	return n, first
}
