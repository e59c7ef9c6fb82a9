package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

type suite struct {
	newStore NewStore
	cfg      config
}

// store returns a new store and the clock it reads.
func (s *suite) store(t *testing.T) (ratelimit.Store, *Clock) {
	t.Helper()
	c := fakeclock.New()
	st := s.newStore(t, c)
	if st == nil {
		t.Fatal("storetest: NewStore returned nil")
	}
	return st, c
}

// supports reports whether the store implements every algorithm of ps.
func (s *suite) supports(ps ...ratelimit.Policy) bool {
	for _, p := range ps {
		if !slices.Contains(s.cfg.algorithms, p.Algorithm) {
			return false
		}
	}
	return true
}

// skipUnless skips t unless the store implements every algorithm of ps.
func (s *suite) skipUnless(t *testing.T, ps ...ratelimit.Policy) {
	t.Helper()
	if !s.supports(ps...) {
		t.Skip("storetest: the store does not implement every algorithm of the case (Algorithms)")
	}
}

// rolling returns the algorithms of the store that count in a rolling
// window, not per calendar period.
func (s *suite) rolling() []ratelimit.Algorithm {
	return slices.DeleteFunc(slices.Clone(s.cfg.algorithms), isCalendar)
}

func isCalendar(a ratelimit.Algorithm) bool {
	return a == ratelimit.Daily || a == ratelimit.Weekly || a == ratelimit.Monthly
}

// policy returns the policy of algorithm a: limit per window, or per
// calendar period for a calendar algorithm, which has no window.
func policy(name string, limit int, window time.Duration, a ratelimit.Algorithm) ratelimit.Policy {
	if isCalendar(a) {
		window = 0
	}
	return ratelimit.Policy{Name: name, Limit: limit, Window: window, Algorithm: a}
}

func set(t *testing.T, ps ...ratelimit.Policy) ratelimit.PolicySet {
	t.Helper()
	s, err := ratelimit.NewPolicySet(ps...)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return s
}

func take(t *testing.T, st ratelimit.Store, key string, ps ratelimit.PolicySet, cost int) ratelimit.Result {
	t.Helper()
	res, err := st.Take(context.Background(), key, ps, cost)
	if err != nil {
		t.Fatalf("Take(%q, %s, %d): %v", key, ps.ID(), cost, err)
	}
	if res.Allowed && res.RetryAfter != 0 {
		t.Fatalf("Take(%q, %s, %d): allowed with RetryAfter %v, want 0", key, ps.ID(), cost, res.RetryAfter)
	}
	if !res.Allowed && res.RetryAfter <= 0 {
		t.Fatalf("Take(%q, %s, %d): refused with RetryAfter %v, want > 0", key, ps.ID(), cost, res.RetryAfter)
	}
	if res.Remaining < 0 || res.Remaining > res.Limit {
		t.Fatalf("Take(%q, %s, %d): Remaining %d outside [0, Limit %d]", key, ps.ID(), cost, res.Remaining, res.Limit)
	}
	return res
}

// takeN takes n requests of cost 1 and returns how many were allowed.
func takeN(t *testing.T, st ratelimit.Store, key string, ps ratelimit.PolicySet, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		if take(t, st, key, ps, 1).Allowed {
			allowed++
		}
	}
	return allowed
}

// sequence: limit requests are allowed with Remaining counting down, and
// the next is refused by the policy with a wait no longer than its window.
func (s *suite) sequence(t *testing.T) {
	for _, a := range s.cfg.algorithms {
		t.Run(a.String(), func(t *testing.T) {
			st, _ := s.store(t)
			ps := set(t, policy("default", 3, time.Hour, a))
			for i, want := range []int{2, 1, 0} {
				res := take(t, st, "k", ps, 1)
				if !res.Allowed || res.Remaining != want || res.Limit != 3 || res.Policy != "default" {
					t.Fatalf("request %d: got %+v, want allowed, Remaining %d, Limit 3, Policy default", i, res, want)
				}
			}
			res := take(t, st, "k", ps, 1)
			longest := 2 * time.Hour
			if isCalendar(a) {
				longest = 31 * 24 * time.Hour
			}
			if res.Allowed || res.Remaining != 0 || res.Limit != 3 || res.Policy != "default" || res.RetryAfter > longest {
				t.Fatalf("request 3: got %+v, want refused, Remaining 0, by default, RetryAfter within the window", res)
			}
		})
	}
}

// costs: a request of cost n counts n, in full or not at all.
func (s *suite) costs(t *testing.T) {
	st, _ := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 5, Window: time.Hour})
	for i, c := range []struct {
		cost      int
		allowed   bool
		remaining int
	}{
		{3, true, 2},
		{3, false, 2}, // does not fit: nothing counted
		{2, true, 0},
		{1, false, 0},
	} {
		if res := take(t, st, "k", ps, c.cost); res.Allowed != c.allowed || res.Remaining != c.remaining {
			t.Errorf("request %d of cost %d: allowed %v, Remaining %d; want %v, %d", i, c.cost, res.Allowed, res.Remaining, c.allowed, c.remaining)
		}
	}
}

// invalidArguments: an empty set and a cost that could never be counted
// are errors, and count nothing.
func (s *suite) invalidArguments(t *testing.T) {
	st, _ := s.store(t)
	ctx := context.Background()
	ps := set(t, ratelimit.Policy{Name: "a", Limit: 5, Window: time.Hour}, ratelimit.Policy{Name: "b", Limit: 3, Window: time.Minute})
	for _, c := range invalidCalls(ps) {
		_, err := st.Take(ctx, "k", c.set, c.cost)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want one matching %v", c.name, err, c.want)
		}
	}
	if res := take(t, st, "k", ps, 3); !res.Allowed || res.Remaining != 0 {
		t.Errorf("cost 3 after the invalid calls: %+v, want allowed with Remaining 0 (nothing counted before)", res)
	}
	t.Run("refunds", s.invalidRefunds)
}

// invalidCall is a call that counts nothing: its set and cost, and the
// error it must match (nil: any error).
type invalidCall struct {
	name string
	set  ratelimit.PolicySet
	cost int
	want error
}

// invalidCalls returns the calls with ps, a set whose least limit is 3,
// that no store may count: an empty set and costs CheckCost refuses.
func invalidCalls(ps ratelimit.PolicySet) []invalidCall {
	return []invalidCall{
		{"empty set", ratelimit.PolicySet{}, 1, nil},
		{"cost 0", ps, 0, ratelimit.ErrInvalidCost},
		{"cost -1", ps, -1, ratelimit.ErrInvalidCost},
		{"cost above the least limit", ps, 4, ratelimit.ErrInvalidCost},
	}
}

// invalidRefunds: a Refund of an empty set or of a cost CheckCost refuses
// is an error and takes nothing back.
func (s *suite) invalidRefunds(t *testing.T) {
	st, _ := s.store(t)
	ctx := context.Background()
	ps := set(t, ratelimit.Policy{Name: "a", Limit: 5, Window: time.Hour}, ratelimit.Policy{Name: "b", Limit: 3, Window: time.Minute})
	full := take(t, st, "k", ps, 3)
	for _, c := range invalidCalls(ps) {
		err := st.Refund(ctx, "k", c.set, c.cost, full.At)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Refund, %s: error %v, want one matching %v", c.name, err, c.want)
		}
	}
	if res := take(t, st, "k", ps, 1); res.Allowed {
		t.Errorf("after the invalid refunds: %+v, want refused (nothing taken back)", res)
	}
}

// contextCancellation: a Take whose context is done before it starts
// returns the context's error and counts nothing.
func (s *suite) contextCancellation(t *testing.T) {
	st, _ := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 2, Window: time.Hour})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	} {
		for range 3 {
			if _, err := st.Take(c.ctx, "k", ps, 1); !errors.Is(err, c.want) {
				t.Errorf("%s: error %v, want one matching %v", c.name, err, c.want)
			}
		}
	}
	if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 1 {
		t.Errorf("after the done contexts: %+v, want allowed with Remaining 1 (nothing counted)", res)
	}
}

// tightest: the Result reports the policy that binds tightest, as the
// Store contract orders them.
func (s *suite) tightest(t *testing.T) {
	st, _ := s.store(t)
	minute := ratelimit.Policy{Name: "minute", Limit: 3, Window: time.Minute}
	hour := ratelimit.Policy{Name: "hour", Limit: 3, Window: time.Hour}
	day := ratelimit.Policy{Name: "day", Limit: 2, Window: 24 * time.Hour}

	// Allowed: the fewest remaining.
	if res := take(t, st, "a", set(t, minute, day), 1); res.Policy != "day" || res.Remaining != 1 {
		t.Errorf("allowed under minute (2 left) and day (1 left): reported %s with %d left, want day with 1", res.Policy, res.Remaining)
	}
	// Allowed, as many remaining: the longer Reset.
	if res := take(t, st, "b", set(t, minute, hour), 1); res.Policy != "hour" || res.Remaining != 2 {
		t.Errorf("allowed under minute and hour, 2 left each: reported %s with %d left, want hour (the longer reset)", res.Policy, res.Remaining)
	}
	// Refused by several: the longest wait.
	both := set(t, ratelimit.Policy{Name: "minute", Limit: 1, Window: time.Minute}, ratelimit.Policy{Name: "hour", Limit: 1, Window: time.Hour})
	take(t, st, "c", both, 1)
	if res := take(t, st, "c", both, 1); res.Allowed || res.Policy != "hour" || res.RetryAfter <= time.Minute {
		t.Errorf("refused by minute and hour: got %+v, want refused by hour, waiting more than a minute", res)
	}
	s.tightestTable(t)
}

// tightestTable: the policy reported, with its Limit and Window, for
// requests that tie: equal policies go to the first in the set's order
// (by name), allowed and refused alike.
func (s *suite) tightestTable(t *testing.T) {
	minute := ratelimit.Policy{Name: "minute", Limit: 3, Window: time.Minute}
	for _, c := range []struct {
		name     string
		ps       []ratelimit.Policy
		takes    int // before the request checked
		allowed  bool
		policy   string
		limit    int
		window   time.Duration
		leftOver int
	}{
		{"fewest remaining", []ratelimit.Policy{minute, {Name: "day", Limit: 2, Window: 24 * time.Hour}}, 0, true, "day", 2, 24 * time.Hour, 1},
		{"the longer reset", []ratelimit.Policy{minute, {Name: "hour", Limit: 3, Window: time.Hour}}, 0, true, "hour", 3, time.Hour, 2},
		// The longer reset wins over the set's order: "a" comes first.
		{"the longer reset, second in order", []ratelimit.Policy{{Name: "a", Limit: 3, Window: time.Minute}, {Name: "b", Limit: 3, Window: time.Hour}}, 0, true, "b", 3, time.Hour, 2},
		{"a tie, allowed", []ratelimit.Policy{{Name: "b", Limit: 3, Window: time.Hour}, {Name: "a", Limit: 3, Window: time.Hour}}, 0, true, "a", 3, time.Hour, 2},
		{"a tie, refused", []ratelimit.Policy{{Name: "b", Limit: 1, Window: time.Hour}, {Name: "a", Limit: 1, Window: time.Hour}}, 1, false, "a", 1, time.Hour, 0},
		{"a refusal before any allowance", []ratelimit.Policy{{Name: "x", Limit: 1, Window: time.Minute}, {Name: "y", Limit: 2, Window: time.Hour}}, 1, false, "x", 1, time.Minute, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := s.store(t)
			ps := set(t, c.ps...)
			takeN(t, st, "k", ps, c.takes)
			res := take(t, st, "k", ps, 1)
			if res.Allowed != c.allowed || res.Policy != c.policy || res.Limit != c.limit || res.Window != c.window || res.Remaining != c.leftOver {
				t.Errorf("got %+v, want allowed %v, Policy %s, Limit %d, Window %v, Remaining %d", res, c.allowed, c.policy, c.limit, c.window, c.leftOver)
			}
		})
	}
}

// isolationBetweenKeys: keys never share counts.
func (s *suite) isolationBetweenKeys(t *testing.T) {
	st, _ := s.store(t)
	ps := set(t, ratelimit.Policy{Name: "p", Limit: 2, Window: time.Hour})
	for _, k := range []string{"a", "a", "b", "a", "b", "b", "c", "", "\x00"} {
		take(t, st, k, ps, 1)
	}
	for k, want := range map[string]bool{"a": false, "b": false, "c": true, "": true, "\x00": true, "A": true} {
		if res := take(t, st, k, ps, 1); res.Allowed != want {
			t.Errorf("key %q: allowed %v, want %v", k, res.Allowed, want)
		}
	}
}

// isolationBetweenSets: a key's counts under one set are never touched by
// a Take with another set, whatever the sets have in common; equal sets
// share counts, in whatever order their policies were given (and whatever
// their limits: see limitChange).
func (s *suite) isolationBetweenSets(t *testing.T) {
	p := ratelimit.Policy{Name: "p", Limit: 2, Window: time.Hour}
	q := ratelimit.Policy{Name: "q", Limit: 5, Window: time.Minute}
	for _, c := range otherSets(p, q) {
		t.Run(c.name, func(t *testing.T) { s.otherSet(t, c.first, c.then) })
	}
	t.Run("equal sets in another order", func(t *testing.T) { s.reorderedSet(t, p, q) })
	t.Run("alternating sets", s.alternatingSets)
}

// setPair is a case of isolationBetweenSets: a set exhausted first, then
// another.
type setPair struct {
	name        string
	first, then []ratelimit.Policy
}

// otherSets is the table of isolationBetweenSets: sets that differ from
// the set of p, or of p and q, by one thing each.
func otherSets(p, q ratelimit.Policy) []setPair {
	otherName, otherWindow, otherAlgo := p, p, p
	otherName.Name = "r"
	otherWindow.Window = 2 * time.Hour
	otherAlgo.Algorithm = ratelimit.GCRA
	return []setPair{
		{"another name", []ratelimit.Policy{p}, []ratelimit.Policy{otherName}},
		{"another window", []ratelimit.Policy{p}, []ratelimit.Policy{otherWindow}},
		{"another algorithm", []ratelimit.Policy{p}, []ratelimit.Policy{otherAlgo}},
		{"a superset", []ratelimit.Policy{p}, []ratelimit.Policy{p, q}},
		{"a subset", []ratelimit.Policy{p, q}, []ratelimit.Policy{p}},
	}
}

// otherSet exhausts a key under the set of first, a limit of 2, and
// checks that the set of then still has its full quota, and that its
// Take left the first set's counts where they were.
func (s *suite) otherSet(t *testing.T, firstPolicies, thenPolicies []ratelimit.Policy) {
	s.skipUnless(t, append(firstPolicies, thenPolicies...)...)
	st, _ := s.store(t)
	first, then := set(t, firstPolicies...), set(t, thenPolicies...)
	if n := takeN(t, st, "k", first, 10); n != 2 {
		t.Fatalf("first set: %d of 10 allowed, want 2", n)
	}
	res := take(t, st, "k", then, 1)
	if !res.Allowed || res.Remaining != res.Limit-1 {
		t.Errorf("%s after the first set was exhausted: %+v, want its full quota (Remaining %d)", then.ID(), res, res.Limit-1)
	}
	// And the first set's counts are where they were.
	if res := take(t, st, "k", first, 1); res.Allowed {
		t.Errorf("the first set after a take with %s: allowed, want still refused", then.ID())
	}
}

// reorderedSet: the sets of p and q and of q and p are one set, with one
// ID and one count.
func (s *suite) reorderedSet(t *testing.T, p, q ratelimit.Policy) {
	st, _ := s.store(t)
	pq, qp := set(t, p, q), set(t, q, p)
	if pq.ID() != qp.ID() {
		t.Fatalf("IDs differ: %q and %q", pq.ID(), qp.ID())
	}
	take(t, st, "k", pq, 1)
	if res := take(t, st, "k", qp, 1); !res.Allowed || res.Remaining != 0 || res.Policy != "p" {
		t.Errorf("second take, through the reordered set: %+v, want allowed with p at 0 (one count)", res)
	}
}

// alternatingSets: two sets that share a policy, alternating on one key:
// each is counted on its own, and neither resets the other.
func (s *suite) alternatingSets(t *testing.T) {
	st, _ := s.store(t)
	one := set(t, ratelimit.Policy{Name: "default", Limit: 2, Window: time.Hour})
	two := set(t, ratelimit.Policy{Name: "default", Limit: 2, Window: time.Hour}, ratelimit.Policy{Name: "daily", Limit: 100, Window: 24 * time.Hour})
	var a, b int
	for range 10 {
		if take(t, st, "k", one, 1).Allowed {
			a++
		}
		if take(t, st, "k", two, 1).Allowed {
			b++
		}
	}
	if a != 2 || b != 2 {
		t.Errorf("alternating: %d and %d of 10 allowed, want 2 and 2", a, b)
	}
}

// isolationBetweenLimiters: limiters sharing the store keep their own
// counts.
func (s *suite) isolationBetweenLimiters(t *testing.T) {
	st, _ := s.store(t)
	key := ratelimit.KeyFunc(func(*http.Request) (string, error) { return "ip:192.0.2.1", nil })
	newLimiter := func(limit int, window time.Duration, opts ...ratelimit.Option) *ratelimit.Limiter {
		l, err := ratelimit.New(limit, window, key, append(opts, ratelimit.WithStore(st))...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// A route at 100 a second and one at 3 an hour, one client alternating.
	fast, slow := newLimiter(100, time.Second), newLimiter(3, time.Hour)
	ctx := context.Background()
	allowed := 0
	for range 20 {
		if d := fast.Allow(ctx, "ip:192.0.2.1", 1); d.Err != nil {
			t.Fatal(d.Err)
		}
		d := slow.Allow(ctx, "ip:192.0.2.1", 1)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		if d.Result.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("the 3-an-hour limiter beside a 100-a-second one: %d of 20 allowed, want 3", allowed)
	}
}

// exactUnderConcurrency: many goroutines on one key admit exactly the
// limit, for every algorithm and for sets mixing them.
func (s *suite) exactUnderConcurrency(t *testing.T) {
	for _, c := range s.concurrentSets() {
		t.Run(c.name, func(t *testing.T) {
			s.skipUnless(t, c.ps...)
			s.exactOnKeys(t, c.ps, c.limit)
		})
	}
}

// concurrentSet is a case of exactUnderConcurrency: a set of policies, a
// day each, and the least of their limits, which is what it admits.
type concurrentSet struct {
	name  string
	ps    []ratelimit.Policy
	limit int
}

// concurrentSets is the table of exactUnderConcurrency: two policies of
// the default algorithm, all three rolling ones mixed, and each algorithm
// of the store alone.
func (s *suite) concurrentSets() []concurrentSet {
	day := 24 * time.Hour
	cases := []concurrentSet{
		{"two policies", []ratelimit.Policy{{Name: "a", Limit: 200, Window: day}, {Name: "b", Limit: 250, Window: day}}, 200},
		{"mixed algorithms", []ratelimit.Policy{
			{Name: "log", Limit: 240, Window: day},
			{Name: "gcra", Limit: 150, Window: day, Algorithm: ratelimit.GCRA},
			{Name: "counter", Limit: 220, Window: day, Algorithm: ratelimit.SlidingWindowCounter},
		}, 150},
	}
	for _, a := range s.cfg.algorithms {
		cases = append(cases, concurrentSet{a.String(), []ratelimit.Policy{policy("p", 200, day, a)}, 200})
	}
	return cases
}

// exactOnKeys has 32 goroutines send 24 requests each under the set of
// policies, spread over three keys (256 a key), on a fresh store, and
// checks that each key admitted exactly limit.
func (s *suite) exactOnKeys(t *testing.T, policies []ratelimit.Policy, limit int) {
	const goroutines, each = 32, 24 // 256 requests for each of 3 keys
	st, _ := s.store(t)
	ps := set(t, policies...)
	var allowed [3]atomic.Int64 // per key
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := (g + i) % len(allowed)
				res, err := st.Take(context.Background(), fmt.Sprint("key-", k), ps, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		if got := allowed[k].Load(); got != int64(limit) {
			t.Errorf("key %d: %d allowed of %d, want exactly %d", k, got, goroutines*each/len(allowed), limit)
		}
	}
}

// allOrNone: a request one policy refuses is recorded in none of the
// others, whatever their algorithms.
func (s *suite) allOrNone(t *testing.T) {
	for _, small := range s.rolling() {
		for _, big := range s.cfg.algorithms {
			t.Run(small.String()+"+"+big.String(), func(t *testing.T) {
				st, clk := s.store(t)
				ps := set(t,
					ratelimit.Policy{Name: "small", Limit: 2, Window: time.Second, Algorithm: small},
					policy("big", 5, time.Hour, big))
				// Each phase is 50 requests a millisecond apart, after the
				// small policy has drained. Had the refused requests been
				// recorded in big, the first phase would exhaust it.
				for phase, want := range []int{2, 2, 1} {
					allowed := 0
					var last ratelimit.Result
					for range 50 {
						last = take(t, st, "k", ps, 1)
						if last.Allowed {
							allowed++
						}
						clk.Advance(time.Millisecond)
					}
					if allowed != want {
						t.Fatalf("phase %d: %d of 50 allowed, want %d", phase, allowed, want)
					}
					if phase == 2 && last.Policy != "big" {
						t.Errorf("phase %d: refused by %s, want big (exhausted by exactly the allowed requests)", phase, last.Policy)
					}
					clk.Advance(2 * time.Second)
				}
			})
		}
	}
}

// windowEdges: exact figures at the edges of the window, per algorithm.
func (s *suite) windowEdges(t *testing.T) {
	for _, tt := range slices.Concat(logEdges(), gcraEdges(), counterEdges()) {
		t.Run(tt.algo.String()+"/"+tt.name, func(t *testing.T) {
			p := ratelimit.Policy{Name: "p", Limit: tt.limit, Window: time.Minute, Algorithm: tt.algo}
			s.skipUnless(t, p)
			st, clk := s.store(t)
			start := clk.Now()
			ps := set(t, p)
			for i, step := range tt.steps {
				clk.Set(start.Add(step.at))
				got := take(t, st, "k", ps, max(step.cost, 1))
				want := ratelimit.Result{Allowed: step.allowed, Limit: tt.limit, Remaining: step.remaining, RetryAfter: step.retry, Reset: step.reset, Policy: "p", Window: time.Minute, At: clk.Now()}
				if !got.At.Equal(want.At) {
					t.Errorf("request %d at %v: At %v, want the clock's reading %v", i, step.at, got.At, want.At)
				}
				got.At = want.At
				if got != want {
					t.Errorf("request %d at %v: got %+v, want %+v", i, step.at, got, want)
				}
			}
		})
	}
	t.Run("GCRA/an interval rounded up", s.gcraRoundsUp)
}

// gcraRoundsUp: GCRA's interval is window/limit rounded up, in the
// store's steps, so that the rate never exceeds the limit: 3 per 3,001
// steps admit one every 1,001 steps once a burst has emptied the bucket,
// not one every 1,000.
func (s *suite) gcraRoundsUp(t *testing.T) {
	p := ratelimit.Policy{Name: "p", Limit: 3, Window: 3001 * s.cfg.resolution, Algorithm: ratelimit.GCRA}
	s.skipUnless(t, p)
	st, clk := s.store(t)
	ps := set(t, p)
	interval := 1001 * s.cfg.resolution
	if n := takeN(t, st, "k", ps, 4); n != 3 {
		t.Fatalf("a burst: %d of 4 allowed, want 3", n)
	}
	start := clk.Now()
	for i := 1; i <= 3; i++ {
		at := start.Add(time.Duration(i) * interval)
		clk.Set(at.Add(-s.cfg.resolution))
		if res := take(t, st, "k", ps, 1); res.Allowed || !s.near(res.RetryAfter, s.cfg.resolution) {
			t.Fatalf("a step before %d intervals of %v: %+v, want refused for a step", i, interval, res)
		}
		clk.Set(at)
		if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 0 {
			t.Fatalf("%d intervals of %v after the burst: %+v, want allowed with 0 remaining", i, interval, res)
		}
	}
}

// edgeCase is one case of WindowEdges: requests to policy p, limit per
// minute under algo, each step one request and the Result it must get.
type edgeCase struct {
	name  string
	algo  ratelimit.Algorithm
	limit int
	steps []edgeStep
}

// edgeStep is one request of an edgeCase: at, since the start of the
// case, of cost (0 for 1), and the figures of its Result.
type edgeStep struct {
	at        time.Duration
	cost      int
	allowed   bool
	remaining int
	retry     time.Duration
	reset     time.Duration
}

// logEdges are the window edges of the sliding log: an instant leaves
// the window exactly one window after it was logged, refusals are not
// logged, and the wait is measured from the oldest instant that must
// leave.
func logEdges() []edgeCase {
	const ms = time.Millisecond
	sec, min := time.Second, time.Minute
	log := ratelimit.SlidingLog
	return []edgeCase{
		{"first request ever", log, 3, []edgeStep{
			{at: 0, allowed: true, remaining: 2, reset: min},
		}},
		{"exactly at the limit", log, 3, []edgeStep{
			{at: 0, allowed: true, remaining: 2, reset: min},
			{at: 10 * sec, allowed: true, remaining: 1, reset: 50 * sec},
			{at: 20 * sec, allowed: true, remaining: 0, reset: 40 * sec},
			{at: 30 * sec, allowed: false, remaining: 0, retry: 30 * sec, reset: 30 * sec},
		}},
		{"an instant exactly one window old no longer counts", log, 2, []edgeStep{
			{at: 0, allowed: true, remaining: 1, reset: min},
			{at: 0, allowed: true, remaining: 0, reset: min},
			{at: min, allowed: true, remaining: 1, reset: min},
		}},
		{"1ms before a slot frees", log, 1, []edgeStep{
			{at: 0, allowed: true, remaining: 0, reset: min},
			{at: min - ms, allowed: false, remaining: 0, retry: ms, reset: ms},
			{at: min, allowed: true, remaining: 0, reset: min},
		}},
		{"refused requests are not logged, so a hammering client recovers", log, 2, []edgeStep{
			{at: 0, allowed: true, remaining: 1, reset: min},
			{at: 1 * sec, allowed: true, remaining: 0, reset: 59 * sec},
			{at: 2 * sec, allowed: false, retry: 58 * sec, reset: 58 * sec},
			{at: 30 * sec, allowed: false, retry: 30 * sec, reset: 30 * sec},
			{at: 59 * sec, allowed: false, retry: 1 * sec, reset: 1 * sec},
			{at: 60 * sec, allowed: true, remaining: 0, reset: 1 * sec},
		}},
		{"retry waits for the oldest logged request, not the window", log, 3, []edgeStep{
			{at: 0, allowed: true, remaining: 2, reset: min},
			{at: 50 * sec, allowed: true, remaining: 1, reset: 10 * sec},
			{at: 55 * sec, allowed: true, remaining: 0, reset: 5 * sec},
			{at: 56 * sec, allowed: false, retry: 4 * sec, reset: 4 * sec},
			{at: 61 * sec, allowed: true, remaining: 0, reset: 49 * sec},
		}},
		{"a cost waits for enough instants to leave", log, 5, []edgeStep{
			{at: 0, cost: 2, allowed: true, remaining: 3, reset: min},
			{at: 10 * sec, cost: 2, allowed: true, remaining: 1, reset: 50 * sec},
			{at: 20 * sec, cost: 4, allowed: false, remaining: 1, retry: 50 * sec, reset: 40 * sec},
			{at: 20 * sec, cost: 1, allowed: true, remaining: 0, reset: 40 * sec},
		}},
	}
}

// gcraEdges are the window edges of GCRA: a burst of the limit, then one
// request every window/limit.
func gcraEdges() []edgeCase {
	const ms = time.Millisecond
	sec, min := time.Second, time.Minute
	gcra := ratelimit.GCRA
	return []edgeCase{
		{"a full burst, then one every window/limit", gcra, 3, []edgeStep{
			{at: 0, allowed: true, remaining: 2, reset: 20 * sec},
			{at: 0, allowed: true, remaining: 1, reset: 20 * sec},
			{at: 0, allowed: true, remaining: 0, reset: 20 * sec},
			{at: 0, allowed: false, remaining: 0, retry: 20 * sec, reset: 20 * sec},
			{at: 20*sec - ms, allowed: false, remaining: 0, retry: ms, reset: ms},
			{at: 20 * sec, allowed: true, remaining: 0, reset: 20 * sec},
			{at: min + 20*sec, allowed: true, remaining: 2, reset: 20 * sec}, // refilled
		}},
	}
}

// counterEdges are the window edges of the sliding window counter: the
// previous fixed window weighs by its overlap with the rolling one.
func counterEdges() []edgeCase {
	sec, min := time.Second, time.Minute
	counter := ratelimit.SlidingWindowCounter
	return []edgeCase{
		{"the previous window weighs by overlap", counter, 4, []edgeStep{
			// Reset: until the estimate next drops by one request.
			{at: 0, allowed: true, remaining: 3, reset: 2 * min},
			{at: 10 * sec, allowed: true, remaining: 2, reset: 80 * sec},
			{at: 20 * sec, allowed: true, remaining: 1, reset: 60 * sec},
			{at: 30 * sec, allowed: true, remaining: 0, reset: 45 * sec},
			{at: 40 * sec, allowed: false, remaining: 0, retry: 35 * sec, reset: 35 * sec},
			// 75% into the next window, 4 * 0.25 = 1 still counts.
			{at: min + 45*sec, allowed: true, remaining: 2, reset: 15 * sec},
			{at: 2*min + 59*sec, allowed: true, remaining: 2, reset: 1 * sec},
		}},
	}
}

// models: over random traffic, with limits that change now and then,
// every decision matches the reference models of the set's policies: allowed exactly when every model fits,
// Remaining as the tightest model says, and RetryAfter the exact wait
// (within the store's resolution, never less).
func (s *suite) models(t *testing.T) {
	for _, c := range modelSets() {
		t.Run(c.name, func(t *testing.T) {
			for _, a := range c.algos {
				s.skipUnless(t, ratelimit.Policy{Algorithm: a})
			}
			for seed := range uint64(12) {
				s.modelTraffic(t, c.algos, seed)
			}
		})
	}
}

// modelSet names the algorithms of the policies of one set Models runs.
type modelSet struct {
	name  string
	algos []ratelimit.Algorithm
}

// modelSets is the table of Models: each rolling algorithm alone, then
// sets that mix them.
func modelSets() []modelSet {
	var cases []modelSet
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA} {
		cases = append(cases, modelSet{a.String(), []ratelimit.Algorithm{a}})
	}
	return append(cases,
		modelSet{"log+gcra", []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.GCRA}},
		modelSet{"log+counter", []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter}},
		modelSet{"all three", []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA}})
}

// modelTraffic runs the 150 steps of one seed of Models on a fresh store:
// the clock moves (or not, for a burst at one instant), a policy's limit
// changes now and then, and a request of a random cost is checked against
// the models. The random draws are made in one fixed order, so that a
// seed names the same traffic on every store.
func (s *suite) modelTraffic(t *testing.T, algos []ratelimit.Algorithm, seed uint64) {
	res := s.cfg.resolution
	rng := rand.New(rand.NewPCG(seed, 7))
	st, clk := s.store(t)
	policies, models, maxWindow := randomPolicies(rng, algos, res)
	ps := set(t, policies...)
	for step := range 150 {
		if rng.IntN(4) != 0 { // else a burst at one instant
			clk.Advance(time.Duration(rng.Int64N(int64(maxWindow/2/res))) * res)
		}
		if rng.IntN(20) == 0 {
			// The limit of a policy changes: the set keeps its
			// ID, and the store its counts.
			i := rng.IntN(len(policies))
			policies[i].Limit = 1 + rng.IntN(12)
			models[i].setLimit(int64(policies[i].Limit), clk.Now().UnixNano())
			ps = set(t, policies...)
		}
		cost := 1
		if rng.IntN(5) == 0 {
			cost = 1 + rng.IntN(leastLimit(ps))
		}
		now := clk.Now().UnixNano()
		got := take(t, st, "k", ps, cost)
		where := fmt.Sprintf("seed %d step %d (%s, now +%v, cost %d)", seed, step, ps.ID(), clk.Now().Sub(fakeclock.Start), cost)
		s.checkModels(t, where, got, policies, models, now, int64(cost))
	}
}

// randomPolicies draws one policy of each algorithm of algos, named p0,
// p1, ..., with its model, and returns the longest window among them.
func randomPolicies(rng *rand.Rand, algos []ratelimit.Algorithm, res time.Duration) ([]ratelimit.Policy, []model, time.Duration) {
	var policies []ratelimit.Policy
	var models []model
	maxWindow := time.Duration(0)
	for i, a := range algos {
		limit := 1 + rng.IntN(12)
		// Windows of whole steps, any number for the log and
		// the counter, a multiple of the limit for GCRA, so
		// that every store computes its interval exactly.
		window := time.Duration(1+rng.IntN(400*limit)) * 1000 * res
		if a == ratelimit.GCRA {
			// 27,720 is a multiple of every limit from 1 to 12,
			// those a change of limit gives too.
			window = 27720 * time.Duration(1+rng.IntN(4)) * 100 * res
		}
		p := ratelimit.Policy{Name: fmt.Sprint("p", i), Limit: limit, Window: window, Algorithm: a}
		policies = append(policies, p)
		models = append(models, newModel(p))
		maxWindow = max(maxWindow, window)
	}
	return policies, models, maxWindow
}

// leastLimit returns the least limit of the policies of ps: the greatest
// cost a Take with ps may ask.
func leastLimit(ps ratelimit.PolicySet) int {
	least := ps.At(0).Limit
	for i := range ps.Len() {
		least = min(least, ps.At(i).Limit)
	}
	return least
}

// checkModels checks the decision got, for a request of cost at now,
// against the models of policies (one each, in order): allowed exactly
// when every model fits, and then recorded in every model.
func (s *suite) checkModels(t *testing.T, where string, got ratelimit.Result, policies []ratelimit.Policy, models []model, now, cost int64) {
	t.Helper()
	fits := true
	for _, m := range models {
		fits = fits && m.fits(now, cost)
	}
	if got.Allowed != fits {
		t.Fatalf("%s: allowed %v, the models say %v", where, got.Allowed, fits)
	}
	if fits {
		s.checkAllowed(t, where, got, policies, models, now, cost)
		return
	}
	s.checkRefused(t, where, got, policies, models, now, cost)
}

// checkAllowed records an allowed request of cost at now in every model
// and checks got's Remaining against the tightest of them, and its Reset
// when one model alone is the tightest.
func (s *suite) checkAllowed(t *testing.T, where string, got ratelimit.Result, policies []ratelimit.Policy, models []model, now, cost int64) {
	t.Helper()
	least, tightest := int64(1<<62), -1
	for i, m := range models {
		m.record(now, cost)
		switch r := m.remaining(now); {
		case r < least:
			least, tightest = r, i
		case r == least:
			tightest = -1 // Reset breaks the tie
		}
	}
	if int64(got.Remaining) != least {
		t.Fatalf("%s: Remaining %d, the tightest model says %d", where, got.Remaining, least)
	}
	if tightest >= 0 {
		s.checkReset(t, where, got, policies[tightest], models[tightest], now)
	}
}

// checkRefused checks the RetryAfter of a refusal of cost at now against
// the models: every model fits cost at now+RetryAfter, and one does not a
// step sooner. Under one policy it checks the Reset too.
func (s *suite) checkRefused(t *testing.T, where string, got ratelimit.Result, policies []ratelimit.Policy, models []model, now, cost int64) {
	t.Helper()
	res := s.cfg.resolution
	at := now + int64(got.RetryAfter)
	for i, m := range models {
		if !m.fits(at, cost) {
			t.Fatalf("%s: RetryAfter %v, but policy %s does not fit then", where, got.RetryAfter, policies[i].Name)
		}
	}
	early := true
	for _, m := range models {
		early = early && m.fits(at-int64(res), cost)
	}
	if early {
		t.Fatalf("%s: RetryAfter %v, but every policy fits %v sooner", where, got.RetryAfter, res)
	}
	if len(models) == 1 {
		s.checkReset(t, where, got, policies[0], models[0], now)
	}
}

// checkReset checks a Result's Reset against the model m of the policy p
// it reports: the time until the quota next grows (Remaining, counted
// before any request, rises), 0 when nothing is counted; within the
// store's resolution, never less.
func (s *suite) checkReset(t *testing.T, where string, got ratelimit.Result, p ratelimit.Policy, m model, now int64) {
	t.Helper()
	res := int64(s.cfg.resolution)
	before := m.remaining(now)
	if before == int64(p.Limit) {
		if got.Reset != 0 {
			t.Fatalf("%s: Reset %v with nothing counted under %s, want 0", where, got.Reset, p.Name)
		}
		return
	}
	at := now + int64(got.Reset)
	if got.Reset <= 0 || m.remaining(at) <= before || m.remaining(at-res) > before {
		t.Fatalf("%s: Reset %v, but %s's remaining %d grows at another instant (%d at +Reset, %d a step sooner)",
			where, got.Reset, p.Name, before, m.remaining(at), m.remaining(at-res))
	}
}

// expiry: once the set's windows have passed without requests, a key has
// its full quota again.
func (s *suite) expiry(t *testing.T) {
	for _, a := range s.rolling() {
		t.Run(a.String(), func(t *testing.T) {
			st, clk := s.store(t)
			ps := set(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Minute, Algorithm: a})
			if n := takeN(t, st, "k", ps, 5); n != 3 {
				t.Fatalf("%d of 5 allowed, want 3", n)
			}
			clk.Advance(2 * time.Minute)
			if res := peek(t, st, "k", ps); res.Remaining != 3 || res.Reset != 0 {
				t.Errorf("peek two windows later: %+v, want the full quota (Remaining 3) with nothing counted (Reset 0)", res)
			}
			if res := take(t, st, "k", ps, 1); !res.Allowed || res.Remaining != 2 {
				t.Errorf("two windows later: %+v, want the full quota again (Remaining 2)", res)
			}
		})
	}
}
