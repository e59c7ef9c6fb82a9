// Package storetest checks an implementation of ratelimit.Store against
// the contract ratelimit.Store documents, as testing/fstest checks an
// fs.FS: a store's own tests call Run with a function that makes a fresh
// store.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
//			s, err := mystore.New(mystore.WithClock(clock.Now))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run checks exact counts under many goroutines; all-or-none recording
// across the policies of a set, of every algorithm and of mixed ones;
// isolation between keys, between policy sets and between limiters
// sharing the store; the policy a Result reports; window edges and
// RetryAfter, against reference models of the algorithms over random
// traffic; refusals repeated while a client floods; cost rules and invalid
// arguments; expiry, and a flood of new keys, which a store may forget
// once idle, beside keys whose counts it must keep; context
// cancellation; Peek, of a key never seen under every algorithm too,
// Reset and Refund, of a cost above one and of the very instants counted,
// refunds of more than was counted, which leave no more than a full
// quota, refunds after a Reset, of a share GCRA has refilled and of an
// instant still to come, which change nothing; calendar
// periods across month ends, leap days and changes of daylight saving
// time; a clock that steps back; and limits that change, counting on where the old limit left off,
// under a Limiter whose lookup changes them while 32 goroutines send, and
// a Limiter's refund of a request counted before its limits changed. The
// memory store and package redisstore run it in their own tests.
//
// Most cases move time. A store that reads its time from the Clock that
// NewStore is given runs them all; one that can only read a clock of its
// own is run with RealTime, and the cases that move time are skipped.
package storetest

import (
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// Clock is the clock Run moves by hand. Its Now starts at a whole day since
// the Unix epoch, so that fixed windows aligned to the epoch (the sliding
// window counter's) are aligned to the start of each case too.
type Clock = fakeclock.Clock

// NewStore returns a new, empty store for one test, reading its time from
// clock (its Now) unless Run is given RealTime. It should register the
// store's Close, if any, with t.Cleanup. Stores made for one test must not
// share counts with those of another.
type NewStore func(t *testing.T, clock *Clock) ratelimit.Store

// An Option adjusts Run to what a store can do.
type Option func(*config)

type config struct {
	resolution time.Duration
	realTime   bool
	algorithms []ratelimit.Algorithm
}

// Resolution says the finest step of time the store tells apart (default
// 1ns; a store that counts in microseconds, as redisstore does, gives
// time.Microsecond). Run then moves the clock in whole steps, gives
// windows of whole steps, and accepts a RetryAfter up to one step short of
// the next step beyond the exact wait, never less than the exact wait.
func Resolution(d time.Duration) Option {
	return func(c *config) { c.resolution = d }
}

// RealTime says the store reads a clock of its own, not the Clock NewStore
// is given: Run then skips the cases that move time.
func RealTime() Option {
	return func(c *config) { c.realTime = true }
}

// Algorithms says which algorithms the store implements (default all
// six: the three rolling ones and the three calendar periods); Run skips
// what needs the others. A store that does not implement
// an algorithm must refuse a set that names it with an error.
func Algorithms(as ...ratelimit.Algorithm) Option {
	return func(c *config) { c.algorithms = as }
}

// Run runs the whole contract against stores made by newStore, each case
// a subtest of t.
func Run(t *testing.T, newStore NewStore, opts ...Option) {
	cfg := config{resolution: time.Nanosecond, algorithms: []ratelimit.Algorithm{
		ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA, ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly,
	}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.resolution <= 0 {
		t.Fatalf("storetest: Resolution(%v): want > 0", cfg.resolution)
	}
	s := &suite{newStore: newStore, cfg: cfg}
	for _, c := range s.cases() {
		t.Run(c.name, func(t *testing.T) {
			if c.timed && cfg.realTime {
				t.Skip("storetest: the store reads its own clock (RealTime)")
			}
			c.run(t)
		})
	}
}

// suiteCase is one case of the contract.
type suiteCase struct {
	name  string
	timed bool // moves the clock
	run   func(*testing.T)
}

// cases lists the contract's cases, in the order Run runs them.
func (s *suite) cases() []suiteCase {
	return []suiteCase{
		{"Sequence", false, s.sequence},
		{"Costs", false, s.costs},
		{"InvalidArguments", false, s.invalidArguments},
		{"ContextCancellation", false, s.contextCancellation},
		{"Tightest", false, s.tightest},
		{"IsolationBetweenKeys", false, s.isolationBetweenKeys},
		{"IsolationBetweenSets", false, s.isolationBetweenSets},
		{"IsolationBetweenLimiters", false, s.isolationBetweenLimiters},
		{"ExactUnderConcurrency", false, s.exactUnderConcurrency},
		{"AllOrNone", true, s.allOrNone},
		{"WindowEdges", true, s.windowEdges},
		{"Models", true, s.models},
		{"Expiry", true, s.expiry},
		{"Forgetting", true, s.forgetting},
		{"RepeatedRefusals", true, s.repeatedRefusals},
		{"Peek", false, s.peekCase},
		{"PeekModels", true, s.peekModels},
		{"Reset", false, s.resetCase},
		{"Refund", true, s.refundCase},
		{"RefundUnderConcurrency", false, s.refundUnderConcurrency},
		{"RefundAfterReset", true, s.refundAfterReset},
		{"LateRefund", true, s.lateRefund},
		{"RefundLeftWindow", true, s.refundLeftWindow},
		{"RefundToCome", true, s.refundToCome},
		{"ResetAlgorithms", true, s.resetAlgorithms},
		{"Calendar", true, s.calendarCase},
		{"LimitChange", true, s.limitChange},
		{"LimitChangeUnderConcurrency", true, s.limitChangeUnderConcurrency},
		{"RefundAfterLimitChange", true, s.refundAfterLimitChange},
		{"ClockStepsBack", true, s.clockStepsBack},
	}
}
