package ratelimit

import "time"

// An algorithm decides for one policy of one key, on the memory store.
// Instants are nanoseconds since the Unix epoch on the store's clock; the
// caller holds the key's lock and passes a now that never goes backwards
// for that key.
//
// A request checked against several policies is recorded in all of them
// or in none: the store asks each whether it fits before it asks each to
// record it.
type algorithm interface {
	// take forgets what has left the window and reports whether cost more
	// requests fit, recording them at now if they do and record is set,
	// with the standing after that: how many more fit, how long until
	// cost would if they do not, and until the quota next grows. With
	// record unset it changes no count, and with cost 1 it is a Peek's
	// answer.
	take(s *state, p *Policy, now int64, cost int, record bool) verdict
	// refund takes back cost requests recorded at the instant at.
	refund(s *state, p *Policy, now, at int64, cost int)
	// idleAt returns the instant from which s remembers nothing that
	// could affect a decision, so that it may be dropped.
	idleAt(s *state, p *Policy) int64
}

// algorithmOf returns a's implementation, or nil for an unknown value.
func algorithmOf(a Algorithm) algorithm {
	switch a {
	case SlidingLog:
		return slidingLog{}
	case SlidingWindowCounter:
		return windowCounter{}
	case GCRA:
		return gcra{}
	case Daily, Weekly, Monthly:
		return calendar{}
	}
	return nil
}

// state is one policy's memory for one key, inline in its entry. Each
// algorithm reads the fields as its file says; they are shared so that an
// entry has one size whatever its algorithm.
type state struct {
	// t is, for the log, its instant while it holds at most one (an
	// array, so that the log can be sliced from it); for GCRA, the
	// theoretical arrival time; for the counter and calendar periods, the
	// window's or period's start.
	t    [1]int64
	log  *[]int64 // log: its instants once it holds more than one
	n    int32    // log: instants held in t; counter, period: current count
	prev int32    // counter: previous window's count
}

// newState returns the state of a key never seen: its t is before any
// instant, a clock's before 1970 included.
func newState() state { return state{t: [1]int64{minInstant}} }

// verdict is one policy's answer.
type verdict struct {
	ok        bool
	remaining int
	retry     time.Duration // when !ok: until cost more requests would fit
	reset     time.Duration // until the quota next grows
}

// tighter reports whether v binds tighter than w: a refusal before an
// allowance, then the longer retry; among allowances the fewer remaining,
// then the longer reset (see Store).
func (v verdict) tighter(w verdict) bool {
	switch {
	case v.ok != w.ok:
		return !v.ok
	case !v.ok:
		return v.retry > w.retry
	case v.remaining != w.remaining:
		return v.remaining < w.remaining
	}
	return v.reset > w.reset
}
