package ratelimit

import "fmt"

// Algorithm selects how a Policy counts requests. The zero value is
// SlidingLog.
type Algorithm int

const (
	// SlidingLog keeps the instant of every allowed request in the window
	// and is exact: no rolling window ever holds more than the limit. A key
	// costs 7 bytes per logged request on top of its fixed cost.
	SlidingLog Algorithm = iota
	// SlidingWindowCounter counts requests in fixed windows and weighs the
	// previous window's count by how much of it the rolling window still
	// covers. It costs a few bytes per key whatever the limit, but is
	// approximate: it assumes the previous window's requests were spread
	// evenly, so a rolling window can admit somewhat more than the limit.
	SlidingWindowCounter
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// instant: bursts up to the limit, then one request every window/limit.
	// It costs a few bytes per key whatever the limit and is exact for its
	// own definition, but a rolling window can admit up to about twice the
	// limit (a full burst, then the refill).
	GCRA
)

func (a Algorithm) String() string {
	switch a {
	case SlidingLog:
		return "SlidingLog"
	case SlidingWindowCounter:
		return "SlidingWindowCounter"
	case GCRA:
		return "GCRA"
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// impl returns the algorithm's implementation, or nil for an unknown value.
func (a Algorithm) impl() algorithm {
	switch a {
	case SlidingLog:
		return slidingLog{}
	case SlidingWindowCounter:
		return windowCounter{}
	case GCRA:
		return gcra{}
	}
	return nil
}

// An algorithm decides for one policy of one key. Times are nanoseconds on
// the store's monotonic scale; callers hold the key's lock and pass a now
// that never goes backwards for that key.
//
// Deciding and recording are separate so that a request checked against
// several policies is recorded in all of them or in none.
type algorithm interface {
	// decide forgets what has left the window and reports whether cost
	// more requests fit, without recording them.
	decide(s *state, limit, window, now, cost int64) verdict
	// record counts cost requests at now (decide said they fit) and
	// reports the standing after them.
	record(s *state, limit, window, now, cost int64) verdict
	// idleAt returns the instant from which s, under the policy (limit,
	// window), remembers nothing that could affect a future decision, so
	// that it may be dropped; it only moves later as the state is used.
	idleAt(s *state, limit, window int64) int64
	// minIdle returns the least time a state of the policy (limit,
	// window) takes to go idle after it records a request: a lower bound
	// on idleAt - now just after record.
	minIdle(limit, window int64) int64
	// last returns an instant that grows with the key's activity, to find
	// the least recently active key.
	last(s *state) int64
	// peek reports, without changing s, whether one more request fits at
	// now (ok), how many do (remaining), how long until one does (retry,
	// when none does) and reset.
	peek(s *state, limit, window, now int64) verdict
	// refund takes back cost requests recorded at the instant at, which is
	// within the window of now.
	refund(s *state, limit, window, now, at, cost int64)
}

// verdict is one policy's answer; durations are nanoseconds.
type verdict struct {
	ok        bool
	remaining int64
	retry     int64 // when !ok: until cost more requests would fit
	reset     int64 // until the quota next grows
}

// tighter reports whether v binds tighter than w: a refusal before an
// allowance, then the longer retry; among allowances the fewer remaining,
// then the longer reset. Tightest orders Results by it.
func (v *verdict) tighter(w *verdict) bool {
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

// verdictOf returns the verdict r reports.
func verdictOf(r *Result) verdict {
	return verdict{ok: r.Allowed, remaining: int64(r.Remaining), retry: int64(r.RetryAfter), reset: int64(r.Reset)}
}

// state is one policy's memory for one key. Its fields are shared by the
// algorithms so that an entry holds its first state inline, without a
// separate allocation, in 24 bytes.
type state struct {
	ring *byte // SlidingLog: ring of instants, nil while it holds at most one (see slidinglog.go)
	t    int64 // GCRA: theoretical arrival time; counter: current window's start; SlidingLog: the instant held inline, or the ring's base
	head int32 // SlidingLog: index of the oldest instant; counter: previous window's count
	n    int32 // SlidingLog: instants held; counter: current window's count
}
