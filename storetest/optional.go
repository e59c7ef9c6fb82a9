package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// The cases of Peek, Reset and Refund, and of refusals repeated while a
// client floods.

func peek(t *testing.T, st ratelimit.Store, key string, ps ratelimit.PolicySet) ratelimit.Result {
	t.Helper()
	res, err := st.Peek(context.Background(), key, ps)
	if err != nil {
		t.Fatalf("Peek(%q, %s): %v", key, ps.ID(), err)
	}
	if res.Allowed != (res.RetryAfter == 0) || res.Remaining < 0 || res.Remaining > res.Limit || res.Allowed != (res.Remaining > 0) {
		t.Fatalf("Peek(%q, %s): inconsistent %+v: want Allowed exactly when RetryAfter is 0 and Remaining > 0", key, ps.ID(), res)
	}
	return res
}

// peekCase: Peek reports a standing and changes nothing.
func (s *suite) peekCase(t *testing.T) {
	st, _ := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "hour", Limit: 5, Window: time.Hour}, ratelimit.Policy{Name: "minute", Limit: 3, Window: time.Minute})
	if res := peek(t, st, "unseen", ps); !res.Allowed || res.Remaining != 3 || res.Limit != 3 || res.Policy != "minute" || res.Reset != 0 {
		t.Errorf("a key never seen: %+v, want its full quota: allowed, minute with 3 remaining, no reset", res)
	}
	for _, a := range s.cfg.algorithms {
		one := set(t, policy("p", 3, time.Minute, a))
		if res := peek(t, st, "unseen", one); !res.Allowed || res.Remaining != 3 || res.Reset != 0 {
			t.Errorf("%v: a key never seen: %+v, want its full quota: allowed with 3 remaining, no reset", a, res)
		}
	}
	take(t, st, "k", ps, 1)
	take(t, st, "k", ps, 1)
	for i := range 5 {
		if res := peek(t, st, "k", ps); !res.Allowed || res.Remaining != 1 || res.Policy != "minute" {
			t.Fatalf("peek %d after 2 of 3: %+v, want allowed with 1 remaining under minute", i, res)
		}
	}
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 0 {
		t.Errorf("the third request after the peeks: %+v, want allowed with 0 remaining (peeks count nothing)", res)
	}
	if res := peek(t, st, "k", ps); res.Allowed || res.Remaining != 0 || res.Policy != "minute" {
		t.Errorf("peek at the limit: %+v, want not allowed, 0 remaining, minute", res)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Peek(canceled, "k", ps); !errors.Is(err, context.Canceled) {
		t.Errorf("Peek with a canceled context: %v, want context.Canceled", err)
	}
	if _, err := st.Peek(context.Background(), "k", ratelimit.PolicySet{}); err == nil {
		t.Error("Peek with an empty set: no error")
	}
}

// peekModels: over random traffic, peeks agree with the models and leave
// every decision as it would have been: a key peeked at before each
// request is decided exactly as a twin never peeked at.
func (s *suite) peekModels(t *testing.T) {
	for _, c := range [][]ratelimit.Algorithm{
		{ratelimit.SlidingLog}, {ratelimit.SlidingWindowCounter}, {ratelimit.GCRA},
		{ratelimit.SlidingLog, ratelimit.GCRA, ratelimit.SlidingWindowCounter},
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			for _, a := range c {
				s.skipUnless(t, ratelimit.Policy{Algorithm: a})
			}
			s.peekTraffic(t, c)
		})
	}
}

// peekTraffic runs the 200 steps of peekModels on a fresh store, under a
// set of one random policy of each algorithm of algos: a peek at the key
// "peeked", checked against the models, then a request to it and one to
// its twin, which must be decided alike.
func (s *suite) peekTraffic(t *testing.T, algos []ratelimit.Algorithm) {
	st, clk := s.store(t)
	res := s.cfg.resolution
	rng := rand.New(rand.NewPCG(3, 5))
	var policies []ratelimit.Policy
	var models []model
	for i, a := range algos {
		limit := 2 + rng.IntN(6)
		pol := ratelimit.Policy{Name: fmt.Sprint("p", i), Limit: limit, Window: time.Duration(limit) * time.Duration(10+rng.IntN(90)) * 1000 * res, Algorithm: a}
		policies = append(policies, pol)
		models = append(models, newModel(pol))
	}
	ps := set(t, policies...)
	for step := range 200 {
		clk.Advance(time.Duration(rng.Int64N(int64(ps.At(0).Window/4/res))) * res)
		now := clk.Now().UnixNano()
		checkPeek(t, step, peek(t, st, "peeked", ps), models, now)
		a, b := take(t, st, "peeked", ps, 1), take(t, st, "twin", ps, 1)
		a.At, b.At = time.Time{}, time.Time{}
		if a != b {
			t.Fatalf("step %d: the peeked key got %+v, its twin %+v", step, a, b)
		}
		if a.Allowed {
			for _, m := range models {
				m.record(now, 1)
			}
		}
	}
}

// checkPeek checks the peek got of step at now against the models: it
// is allowed exactly when every model fits one more request, reports
// the least any model has left, and, when refused, a RetryAfter at which
// every model fits.
func checkPeek(t *testing.T, step int, got ratelimit.Result, models []model, now int64) {
	t.Helper()
	fits, least := true, int64(1<<62)
	for _, m := range models {
		fits = fits && m.fits(now, 1)
		least = min(least, m.remaining(now))
	}
	if got.Allowed != fits || int64(got.Remaining) != least {
		t.Fatalf("step %d: peek %+v, the models say allowed %v with %d remaining", step, got, fits, least)
	}
	if !fits {
		at := now + int64(got.RetryAfter)
		for _, m := range models {
			if !m.fits(at, 1) {
				t.Fatalf("step %d: peek says one fits after %v, but a model disagrees", step, got.RetryAfter)
			}
		}
	}
}

// resetCase: Reset forgets a key's counts under one set, and nothing else.
func (s *suite) resetCase(t *testing.T) {
	st, _ := s.store(t)
	r := st
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 2, Window: time.Hour})
	other := set(t, ratelimit.Policy{Name: "q", Limit: 2, Window: time.Hour})
	for _, k := range []string{"k", "neighbour"} {
		takeN(t, st, k, ps, 3)
	}
	takeN(t, st, "k", other, 3)
	if err := r.Reset(context.Background(), "k", ps); err != nil {
		t.Fatal(err)
	}
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 1 {
		t.Errorf("after Reset: %+v, want the full quota (1 remaining after this one)", res)
	}
	if take(t, st, "neighbour", ps, 1).Allowed {
		t.Error("Reset of k reset another key")
	}
	if take(t, st, "k", other, 1).Allowed {
		t.Error("Reset of k under one set reset it under another")
	}
	if err := r.Reset(context.Background(), "never-seen", ps); err != nil {
		t.Errorf("Reset of a key never seen: %v, want nil", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Reset(canceled, "neighbour", ps); !errors.Is(err, context.Canceled) {
		t.Errorf("Reset with a canceled context: %v, want context.Canceled", err)
	}
	if take(t, st, "neighbour", ps, 1).Allowed {
		t.Error("a Reset with a canceled context reset the key")
	}
}

// refundCase: a refunded request no longer counts, in any policy.
func (s *suite) refundCase(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) { s.refundOne(t, a) })
	}
	for _, a := range s.cfg.algorithms {
		t.Run(a.String()+", a cost of 2 in every policy", func(t *testing.T) { s.refundCost(t, a) })
	}
	for _, a := range s.cfg.algorithms {
		t.Run(a.String()+", more than counted", func(t *testing.T) { s.refundBeyondCount(t, a) })
	}
	t.Run("exact instants", s.refundExactInstants)
	t.Run("the oldest instant", s.refundOldest)
	t.Run("counter, previous window", s.refundPreviousWindow)
}

// refundCost is refundCase under a set of a policy of a and one of the
// default algorithm, both of 5: 3 then 2 fill both, and a refund of 2 of
// the first 3 frees 2 in each: 2 more fit, and not a third.
func (s *suite) refundCost(t *testing.T, a ratelimit.Algorithm) {
	st, _ := s.store(t)
	ps := set(t, policy("p", 5, time.Hour, a), ratelimit.Policy{Name: "q", Limit: 5, Window: 24 * time.Hour})
	first := take(t, st, "k", ps, 3)
	if res := take(t, st, "k", ps, 2); !first.Allowed || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("3 then 2 under limits of 5: %+v, then %+v, want both allowed, 0 remaining", first, res)
	}
	if err := st.Refund(context.Background(), "k", ps, 2, first.At); err != nil {
		t.Fatal(err)
	}
	if res := peek(t, st, "k", ps); res.Remaining != 2 {
		t.Errorf("after a refund of 2: peek %+v, want 2 remaining under both policies", res)
	}
	if res := take(t, st, "k", ps, 2); !res.Allowed || res.Remaining != 0 {
		t.Errorf("2 more after a refund of 2: %+v, want allowed with 0 remaining", res)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Errorf("then: %+v, want refused", res)
	}
}

// refundBeyondCount: refunds of more than was counted, a request refunded
// twice or with a greater cost, leave a key its full quota and no more:
// with one request of 3 counted, after such refunds 3 fit, not a fourth.
func (s *suite) refundBeyondCount(t *testing.T, a ratelimit.Algorithm) {
	st, _ := s.store(t)
	ctx := context.Background()
	ps := set(t, policy("p", 3, time.Hour, a))
	at := take(t, st, "k", ps, 1).At
	for _, cost := range []int{1, 1, 3} {
		if err := st.Refund(ctx, "k", ps, cost, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := takeN(t, st, "k", ps, 4); n != 3 {
		t.Errorf("after refunds of 5 of 1 request counted: %d of 4 allowed, want 3 (a full quota, no more)", n)
	}
}

// refundOldest: the sliding log removes the instant refunded, not the
// newest: with A at 0, B at 10 s and C at 20 s under 3 a minute, a
// refund of A leaves B the oldest, so that a request at 30 s fits and
// the next waits until B leaves, at 70 s. A store that took back the
// newest instant instead would still measure the wait from A.
func (s *suite) refundOldest(t *testing.T) {
	s.skipUnless(t, ratelimit.Policy{Algorithm: ratelimit.SlidingLog})
	st, clk := s.store(t)
	ctx := context.Background()
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Minute})
	start := clk.Now()
	var ats []time.Time
	for i := range 3 {
		clk.Set(start.Add(time.Duration(i) * 10 * time.Second))
		ats = append(ats, take(t, st, "k", ps, 1).At)
	}
	if err := st.Refund(ctx, "k", ps, 1, ats[0]); err != nil {
		t.Fatal(err)
	}
	clk.Set(start.Add(30 * time.Second))
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 0 || !s.near(res.Reset, 40*time.Second) {
		t.Errorf("at 30 s, A refunded: %+v, want allowed, 0 remaining, Reset 40s (B the oldest)", res)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed || !s.near(res.RetryAfter, 40*time.Second) {
		t.Errorf("then: %+v, want refused until B leaves, in 40s", res)
	}
}

// refundOne is refundCase under a set of a policy of a and one of the
// default algorithm: one refund frees one request, in both; a Refund with
// a canceled context frees nothing; one of a key never seen is no error.
func (s *suite) refundOne(t *testing.T, a ratelimit.Algorithm) {
	st, clk := s.store(t)
	r := st
	ps := set(t, policy("p", 3, time.Hour, a), ratelimit.Policy{Name: "q", Limit: 4, Window: 24 * time.Hour})
	var ats []time.Time
	for range 3 {
		ats = append(ats, take(t, st, "k", ps, 1).At)
		clk.Advance(time.Millisecond)
	}
	if take(t, st, "k", ps, 1).Allowed {
		t.Fatal("a fourth request allowed under a limit of 3")
	}
	if err := r.Refund(context.Background(), "k", ps, 1, ats[1]); err != nil {
		t.Fatal(err)
	}
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("after one refund: %+v, want allowed with 0 remaining", res)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Fatalf("then: %+v, want refused", res)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Refund(canceled, "k", ps, 1, ats[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("Refund with a canceled context: %v, want context.Canceled", err)
	}
	if take(t, st, "k", ps, 1).Allowed {
		t.Error("a Refund with a canceled context refunded")
	}
	if err := r.Refund(context.Background(), "never-seen", ps, 1, ats[0]); err != nil {
		t.Errorf("Refund of a key never seen: %v, want nil", err)
	}
}

// refundExactInstants: the sliding log removes the very instants
// refunded: the oldest stays, so the wait is still measured from it.
func (s *suite) refundExactInstants(t *testing.T) {
	st, clk := s.store(t)
	r := st
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 2, Window: time.Minute})
	first := take(t, st, "k", ps, 1)
	clk.Advance(10 * time.Second)
	second := take(t, st, "k", ps, 1)
	if err := r.Refund(context.Background(), "k", ps, 1, second.At); err != nil {
		t.Fatal(err)
	}
	if err := r.Refund(context.Background(), "k", ps, 1, second.At); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	take(t, st, "k", ps, 1)
	if res := take(t, st, "k", ps, 1); res.Allowed || res.RetryAfter != 40*time.Second {
		t.Errorf("after refunding the second request (twice): %+v, want refused until the first (at %v) leaves, in 40s", res, first.At)
	}
	// Refunding what has left the window changes nothing.
	clk.Advance(time.Minute)
	if err := r.Refund(context.Background(), "k", ps, 1, first.At); err != nil {
		t.Fatal(err)
	}
}

// refundUnderConcurrency: with refunds among many goroutines, the count
// never exceeds the limit: when the requests stop fitting, exactly the
// limit is counted.
func (s *suite) refundUnderConcurrency(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, _ := s.store(t)
			r := st
			const limit, goroutines, each = 60, 16, 40
			ps := set(t, policy("p", limit, 24*time.Hour, a))
			var allowed, refunded atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						res, err := st.Take(context.Background(), "k", ps, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if !res.Allowed {
							continue
						}
						allowed.Add(1)
						if (g+i)%3 == 0 {
							if err := r.Refund(context.Background(), "k", ps, 1, res.At); err != nil {
								t.Error(err)
								return
							}
							refunded.Add(1)
						}
					}
				})
			}
			wg.Wait()
			// The last request allowed may have been refunded: fill up.
			for take(t, st, "k", ps, 1).Allowed {
				allowed.Add(1)
			}
			// On a clock of its own, time passes between a Take and its
			// Refund, and GCRA gives back only the share not refilled
			// since: a fraction of a request short of the whole. The
			// bucket may then hold one request fewer, never one more.
			least := limit
			if a == ratelimit.GCRA && s.cfg.realTime {
				least = limit - 1
			}
			if counted := allowed.Load() - refunded.Load(); counted < int64(least) || counted > limit {
				t.Errorf("%d allowed, %d refunded: %d counted, want exactly %d", allowed.Load(), refunded.Load(), counted, limit)
			}
		})
	}
}

// repeatedRefusals: a client refused again and again is refused with the
// figures a fresh decision would give, shrinking with the clock, until
// the instant its request fits, and a smaller request that fits is not
// refused. Stores that remember refusals (the memory store, redisstore)
// must keep them exact.
func (s *suite) repeatedRefusals(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) { s.refusalsShrink(t, a) })
	}
	t.Run("smaller costs", s.smallerCostAfterRefusals)
	for _, a := range s.cfg.algorithms {
		t.Run(a.String()+", a cost of 3", func(t *testing.T) { s.costlyRefusals(t, policy("p", 4, time.Minute, a)) })
	}
	// The refusal reports p, whose wait for 3 (25 s) is the longer, and
	// whose quota grows in 10 s; q, 4 per 34 s, refuses even one request
	// for 14 s: in between, p's Remaining and Reset change.
	t.Run("GCRA beside a log, a cost of 3", func(t *testing.T) {
		s.costlyRefusals(t, ratelimit.Policy{Name: "p", Limit: 4, Window: time.Minute, Algorithm: ratelimit.GCRA},
			ratelimit.Policy{Name: "q", Limit: 4, Window: 34 * time.Second})
	})
}

// costlyRefusals: refusals of a cost of 3 under the policies of ps, of 4
// each, with 2 taken at 0 s and 2 at 10 s, repeated from 20 s on, report
// what the first decision of a twin key of the same history reports at
// the same instant: also once the quota has grown (past the first
// refusal's Reset) but not enough for the cost, when Remaining and Reset
// have changed.
func (s *suite) costlyRefusals(t *testing.T, policies ...ratelimit.Policy) {
	s.skipUnless(t, policies...)
	st, clk := s.store(t)
	res := s.cfg.resolution
	ps := set(t, policies...)
	start := clk.Now()
	const twins = 6
	keys := []string{"k"}
	for i := range twins {
		keys = append(keys, fmt.Sprint("twin-", i))
	}
	for _, at := range []time.Duration{0, 10 * time.Second} {
		clk.Set(start.Add(at))
		for _, k := range keys {
			take(t, st, k, ps, 2)
		}
	}
	clk.Set(start.Add(20 * time.Second))
	first := take(t, st, "k", ps, 3)
	if first.Allowed {
		t.Fatalf("a cost of 3 with 4 of 4 taken: %+v, want refused", first)
	}
	for i, d := range []time.Duration{0, first.Reset - res, first.Reset, first.Reset + res, (first.Reset + first.RetryAfter) / 2, first.RetryAfter - res} {
		if d < 0 || d >= first.RetryAfter || first.At.Add(d).Before(clk.Now()) {
			continue
		}
		clk.Set(first.At.Add(d))
		got, want := take(t, st, "k", ps, 3), take(t, st, keys[1+i], ps, 3)
		if got != want {
			t.Errorf("%v after the first refusal %+v: %+v, a fresh decision %+v", d, first, got, want)
		}
	}
}

// refusalsShrink is repeatedRefusals under a policy of a, limit 4 a
// minute: the refusals after the first differ from it only by the time
// that has passed, until the step before RetryAfter; at RetryAfter the
// request is allowed.
func (s *suite) refusalsShrink(t *testing.T, a ratelimit.Algorithm) {
	st, clk := s.store(t)
	res := s.cfg.resolution
	ps := set(t, policy("p", 4, time.Minute, a))
	take(t, st, "k", ps, 2)
	clk.Advance(time.Second)
	take(t, st, "k", ps, 2)
	first := take(t, st, "k", ps, 1)
	if first.Allowed {
		t.Fatal("a fifth request allowed under a limit of 4")
	}
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, first.RetryAfter/2 + res} {
		// Every refusal here has the same cause, so only the
		// clock may change what it says.
		clk.Set(first.At.Add(d))
		got := take(t, st, "k", ps, 1)
		want := first
		want.RetryAfter -= d
		if want.Reset >= d {
			want.Reset -= d
		}
		want.At = first.At.Add(d) // the clock's reading
		if got != want {
			t.Fatalf("%v after the first refusal %+v: %+v, want %+v", d, first, got, want)
		}
	}
	clk.Set(first.At.Add(first.RetryAfter - res))
	if got := take(t, st, "k", ps, 1); got.Allowed {
		t.Fatalf("one step before RetryAfter: allowed, want refused")
	}
	clk.Set(first.At.Add(first.RetryAfter))
	if got := take(t, st, "k", ps, 1); !got.Allowed {
		t.Fatalf("at RetryAfter: %+v, want allowed", got)
	}
}

// smallerCostAfterRefusals: a request of cost 2 that fits is allowed
// after refusals of cost 3 that did not.
func (s *suite) smallerCostAfterRefusals(t *testing.T) {
	st, _ := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 5, Window: time.Hour})
	take(t, st, "k", ps, 3)
	for range 3 {
		if take(t, st, "k", ps, 3).Allowed {
			t.Fatal("a cost of 3 allowed with 2 remaining")
		}
	}
	if res := take(t, st, "k", ps, 2); !res.Allowed || res.Remaining != 0 {
		t.Errorf("a cost of 2 after refusals of 3: %+v, want allowed", res)
	}
}

// refundAfterReset: a request counted before a Reset and refunded after it
// changes nothing the Reset made new, whether the requests after the Reset
// come later or at the very instant of the one refunded.
func (s *suite) refundAfterReset(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		for _, later := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("%v/%v later", a, later), func(t *testing.T) {
				st, clk := s.store(t)
				ctx := context.Background()
				ps := set(t, policy("p", 2, time.Minute, a))
				old := take(t, st, "k", ps, 1)
				if err := st.Reset(ctx, "k", ps); err != nil {
					t.Fatal(err)
				}
				clk.Advance(later)
				if n := takeN(t, st, "k", ps, 2); n != 2 {
					t.Fatalf("after the Reset: %d of 2 allowed, want 2", n)
				}
				if err := st.Refund(ctx, "k", ps, 1, old.At); err != nil {
					t.Fatal(err)
				}
				if res := take(t, st, "k", ps, 1); res.Allowed {
					t.Errorf("after refunding a request of before the Reset: %+v, want refused (3 since the Reset under a limit of 2)", res)
				}
			})
		}
	}
}

// lateRefund: GCRA gives back only what of a request's share has not
// refilled. Limit 2 per 10 s: A at 0 s; at 7 s B and C fit and D does not;
// A's share refilled long ago, so refunding it frees nothing, and takes
// nothing either: the standing is as before the refund.
func (s *suite) lateRefund(t *testing.T) {
	s.skipUnless(t, ratelimit.Policy{Algorithm: ratelimit.GCRA})
	st, clk := s.store(t)
	ctx := context.Background()
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 2, Window: 10 * time.Second, Algorithm: ratelimit.GCRA})
	a := take(t, st, "k", ps, 1)
	clk.Advance(7 * time.Second)
	if n := takeN(t, st, "k", ps, 3); n != 2 {
		t.Fatalf("at 7 s: %d of 3 allowed, want 2", n)
	}
	before := peek(t, st, "k", ps)
	if err := st.Refund(ctx, "k", ps, 1, a.At); err != nil {
		t.Fatal(err)
	}
	after := peek(t, st, "k", ps)
	before.At, after.At = time.Time{}, time.Time{}
	if after != before {
		t.Errorf("refunding A, whose share refilled: peek %+v, before the refund %+v", after, before)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Errorf("after refunding A, whose share refilled: %+v, want refused (B and C fill the bucket)", res)
	}
	// A refund before the share refilled gives back what is left of it:
	// a bucket of 10 per 10 s, 10 taken at once and one refunded 0.4 s
	// later gives back the 0.6 s of its 1 s not yet refilled. With the
	// 0.4 s refilled, one more fits; the next waits the whole 1 s, not
	// the 0.6 s a refund of the whole share would leave.
	ps = set(t, ratelimit.Policy{Name: "p", Limit: 10, Window: 10 * time.Second, Algorithm: ratelimit.GCRA})
	b := take(t, st, "late", ps, 10)
	clk.Advance(400 * time.Millisecond)
	if err := st.Refund(ctx, "late", ps, 1, b.At); err != nil {
		t.Fatal(err)
	}
	if res := take(t, st, "late", ps, 1); !res.Allowed {
		t.Fatalf("0.4 s after 10 of 10, one refunded: %+v, want one more allowed", res)
	}
	res := s.cfg.resolution
	if got := take(t, st, "late", ps, 1); got.Allowed || got.RetryAfter < time.Second || got.RetryAfter >= time.Second+res {
		t.Errorf("then: %+v, want refused for 1s (only the 0.6 s not refilled was given back)", got)
	}
}

// refundLeftWindow: refunding requests that have left the window changes
// nothing, for each algorithm alone (two windows later, when the
// counter's previous window weighs nothing, or a calendar period later),
// and in a set where the request has left one policy's window but not
// the other's, which alone takes it back.
func (s *suite) refundLeftWindow(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			ps := set(t, policy("p", 2, time.Minute, a))
			old := take(t, st, "k", ps, 1)
			later := 2 * time.Minute
			if isCalendar(a) {
				later = 31 * 24 * time.Hour
			}
			clk.Advance(later)
			if n := takeN(t, st, "k", ps, 2); n != 2 {
				t.Fatalf("%v later: %d of 2 allowed, want 2", later, n)
			}
			before := peek(t, st, "k", ps)
			if err := st.Refund(context.Background(), "k", ps, 1, old.At); err != nil {
				t.Fatal(err)
			}
			after := peek(t, st, "k", ps)
			before.At, after.At = time.Time{}, time.Time{}
			if after != before {
				t.Errorf("refunding a request %v old: peek %+v, before the refund %+v", later, after, before)
			}
			if res := take(t, st, "k", ps, 1); res.Allowed {
				t.Errorf("after the refund: %+v, want refused (it left the window)", res)
			}
		})
	}
	for _, a := range s.rolling() {
		t.Run(a.String()+" beside a longer window", func(t *testing.T) { s.refundLeftOneWindow(t, a) })
	}
	t.Run("counter, still weighed", s.refundLeftWeighedWindow)
}

// refundToCome: a refund names the instant its requests were counted at,
// which the store's clock has reached. One at an instant still to come
// (sent by a clock ahead of the store's) takes back nothing, for each
// algorithm: with 3 of 3 taken, a refund of one a second from now leaves
// the key as it was, and a fourth request refused.
func (s *suite) refundToCome(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			ps := set(t, policy("p", 3, time.Hour, a))
			if n := takeN(t, st, "k", ps, 3); n != 3 {
				t.Fatalf("%d of 3 allowed, want 3", n)
			}
			before := peek(t, st, "k", ps)
			if err := st.Refund(context.Background(), "k", ps, 1, clk.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			after := peek(t, st, "k", ps)
			before.At, after.At = time.Time{}, time.Time{}
			if after != before {
				t.Errorf("after a refund at a second from now: peek %+v, before it %+v", after, before)
			}
			if res := take(t, st, "k", ps, 1); res.Allowed {
				t.Errorf("a fourth request after a refund at a second from now: %+v, want refused", res)
			}
		})
	}
}

// refundLeftWeighedWindow: a request that has left the rolling window,
// exactly one window old as an instant of the log leaves it, is not taken
// back by the window counter, though the fixed window it fell in still
// weighs. Limit 4 a minute: 4 at 5 s; at 65 s they weigh
// ceil(4 * 55/60) = 4, and a refund of one changes nothing (taking it
// back would leave ceil(3 * 55/60) = 3, and one more would fit).
func (s *suite) refundLeftWeighedWindow(t *testing.T) {
	s.skipUnless(t, ratelimit.Policy{Algorithm: ratelimit.SlidingWindowCounter})
	st, clk := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 4, Window: time.Minute, Algorithm: ratelimit.SlidingWindowCounter})
	start := clk.Now()
	clk.Set(start.Add(5 * time.Second))
	old := take(t, st, "k", ps, 4)
	clk.Set(start.Add(65 * time.Second))
	before := peek(t, st, "k", ps)
	if before.Allowed {
		t.Fatalf("at 65 s: peek %+v, want refused (4 at 5 s weigh 4)", before)
	}
	if err := st.Refund(context.Background(), "k", ps, 1, old.At); err != nil {
		t.Fatal(err)
	}
	after := peek(t, st, "k", ps)
	before.At, after.At = time.Time{}, time.Time{}
	if after != before {
		t.Errorf("refunding a request a window old: peek %+v, before the refund %+v", after, before)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Errorf("after the refund: %+v, want refused (the request had left the window)", res)
	}
}

// refundLeftOneWindow: under short (2 a minute) and long (3 an hour) of
// algorithm a, A at 0, then B and C at 2 min, fill both. A has left
// short's window, not long's: its refund frees one in long alone. At
// 4 min, short has room for two and long for one.
func (s *suite) refundLeftOneWindow(t *testing.T, a ratelimit.Algorithm) {
	st, clk := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "short", Limit: 2, Window: time.Minute, Algorithm: a},
		ratelimit.Policy{Name: "long", Limit: 3, Window: time.Hour, Algorithm: a})
	old := take(t, st, "k", ps, 1)
	clk.Advance(2 * time.Minute)
	if n := takeN(t, st, "k", ps, 2); n != 2 {
		t.Fatalf("at 2 min: %d of 2 allowed, want 2", n)
	}
	if err := st.Refund(context.Background(), "k", ps, 1, old.At); err != nil {
		t.Fatal(err)
	}
	if res := peek(t, st, "k", ps); res.Allowed || res.Policy != "short" {
		t.Errorf("after refunding A: peek %+v, want refused by short (A had left its window)", res)
	}
	clk.Advance(2 * time.Minute)
	if res := take(t, st, "k", ps, 1); !res.Allowed {
		t.Errorf("at 4 min: %+v, want allowed (A taken back from long)", res)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed || res.Policy != "long" {
		t.Errorf("then: %+v, want refused by long", res)
	}
}

// refundPreviousWindow: the window counter takes a refund off the count
// of the fixed window the request fell in, the previous one here, which
// weighs half. Limit 4 a minute: 4 at 50 s, then at 90 s the previous
// window weighs 2 and 2 more fit. One refunded leaves ceil(3/2) = 2: still
// full; a second leaves 1, and one more fits. On a twin key, a refund of 2
// at once leaves 1 too.
func (s *suite) refundPreviousWindow(t *testing.T) {
	s.skipUnless(t, ratelimit.Policy{Algorithm: ratelimit.SlidingWindowCounter})
	st, clk := s.store(t)
	ctx := context.Background()
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 4, Window: time.Minute, Algorithm: ratelimit.SlidingWindowCounter})
	start := clk.Now()
	clk.Set(start.Add(50 * time.Second))
	old := take(t, st, "k", ps, 4)
	twin := take(t, st, "twin", ps, 4)
	clk.Set(start.Add(90 * time.Second))
	for _, k := range []string{"k", "twin"} {
		if res := take(t, st, k, ps, 2); !res.Allowed || res.Remaining != 0 {
			t.Fatalf("%s at 90 s: %+v, want 2 allowed with 0 remaining", k, res)
		}
	}
	if err := st.Refund(ctx, "k", ps, 1, old.At); err != nil {
		t.Fatal(err)
	}
	if res := peek(t, st, "k", ps); res.Allowed {
		t.Errorf("one of the previous window refunded: peek %+v, want still full (2 + ceil(3/2))", res)
	}
	if err := st.Refund(ctx, "k", ps, 1, old.At); err != nil {
		t.Fatal(err)
	}
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 0 {
		t.Errorf("two refunded: %+v, want one more allowed with 0 remaining", res)
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Errorf("then: %+v, want refused", res)
	}
	if err := st.Refund(ctx, "twin", ps, 2, twin.At); err != nil {
		t.Fatal(err)
	}
	if res := take(t, st, "twin", ps, 1); !res.Allowed || res.Remaining != 0 {
		t.Errorf("the twin, 2 refunded at once: %+v, want one more allowed with 0 remaining", res)
	}
}

// resetAlgorithms: Reset forgets a key's counts under every policy of its
// set, whatever the algorithms: the key then peeks and takes as a key
// never seen.
func (s *suite) resetAlgorithms(t *testing.T) {
	cases := map[string][]ratelimit.Policy{}
	var mixed []ratelimit.Policy
	for i, a := range s.cfg.algorithms {
		cases[a.String()] = []ratelimit.Policy{policy("p", 2, time.Minute, a)}
		mixed = append(mixed, policy(fmt.Sprint("p", i), 2+i, time.Duration(1+i)*time.Minute, a))
	}
	cases["mixed"] = mixed
	for name, policies := range cases {
		t.Run(name, func(t *testing.T) {
			st, _ := s.store(t)
			ps := set(t, policies...)
			if n := takeN(t, st, "k", ps, 3); n != 2 {
				t.Fatalf("%d of 3 allowed, want 2", n)
			}
			if err := st.Reset(context.Background(), "k", ps); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				got, want := peek(t, st, "k", ps), peek(t, st, "unseen", ps)
				got.At, want.At = time.Time{}, time.Time{}
				if got != want {
					t.Errorf("peek after the Reset: %+v, a key never seen %+v", got, want)
				}
				got, want = take(t, st, "k", ps, 1), take(t, st, "unseen", ps, 1)
				got.At, want.At = time.Time{}, time.Time{}
				if got != want {
					t.Errorf("request %d after the Reset: %+v, a key never seen %+v", i, got, want)
				}
			}
		})
	}
}
