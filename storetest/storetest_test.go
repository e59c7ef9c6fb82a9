package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/storetest"
)

// naiveStore is a plain sliding log with deliberate defects, to show that
// the suite catches them.
type naiveStore struct {
	mu   sync.Mutex
	now  func() time.Time
	logs map[string][]int64 // by key and policy
	// ignoreSet keys counts by the client key and the policy's place in
	// its set alone, as a store that ignores policy identity does.
	ignoreSet bool
	// recordRefused records a request even in the policies that allowed
	// it when another refused it.
	recordRefused bool
	// refundPastReset lets a refund take back requests of after a Reset.
	refundPastReset bool
	// refundNewest takes back the newest requests, whatever their instant.
	refundNewest bool
	// refundFirstOnly takes back requests from the set's first policy
	// alone.
	refundFirstOnly bool
	resets          map[string]int64 // the instant of each key and set's latest Reset
}

func (s *naiveStore) Peek(ctx context.Context, key string, set ratelimit.PolicySet) (ratelimit.Result, error) {
	if err := set.CheckCost(1); err != nil {
		return ratelimit.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	results := make([]ratelimit.Result, set.Len())
	for i := range set.Len() {
		p := set.At(i)
		kept := s.live(key+"\x00"+set.ID()+"\x00"+p.Name, p, now)
		r := ratelimit.Result{Allowed: len(kept) < p.Limit, Limit: p.Limit, Remaining: max(p.Limit-len(kept), 0), Policy: p.Name, Window: p.Window, At: time.Unix(0, now)}
		if !r.Allowed {
			r.RetryAfter = time.Duration(kept[len(kept)-p.Limit] + int64(p.Window) - now)
		}
		r.Reset = logReset(kept, p, now)
		results[i] = r
	}
	return tightest(results), nil
}

// live returns the instants of the log name still in p's window at now.
func (s *naiveStore) live(name string, p ratelimit.Policy, now int64) []int64 {
	var kept []int64
	for _, t := range s.logs[name] {
		if t > now-int64(p.Window) {
			kept = append(kept, t)
		}
	}
	s.logs[name] = kept
	return kept
}

func (s *naiveStore) Reset(ctx context.Context, key string, set ratelimit.PolicySet) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range set.Len() {
		delete(s.logs, key+"\x00"+set.ID()+"\x00"+set.At(i).Name)
	}
	s.resets[key+"\x00"+set.ID()] = s.now().UnixNano()
	return nil
}

func (s *naiveStore) Refund(ctx context.Context, key string, set ratelimit.PolicySet, cost int, at time.Time) error {
	if err := set.CheckCost(cost); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := at.UnixNano()
	if last, ok := s.resets[key+"\x00"+set.ID()]; ok && t <= last && !s.refundPastReset {
		return nil
	}
	for i := range set.Len() {
		if i > 0 && s.refundFirstOnly {
			break
		}
		name := key + "\x00" + set.ID() + "\x00" + set.At(i).Name
		log := s.logs[name]
		for n := 0; n < cost; n++ {
			j := len(log) - 1
			for j >= 0 && log[j] != t && !s.refundNewest {
				j--
			}
			if j < 0 {
				break
			}
			log = append(log[:j], log[j+1:]...)
		}
		s.logs[name] = log
	}
	return nil
}

func (s *naiveStore) Close() error { return nil }

func (s *naiveStore) Take(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (ratelimit.Result, error) {
	if err := set.CheckCost(cost); err != nil {
		return ratelimit.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	results := make([]ratelimit.Result, set.Len())
	names := make([]string, set.Len())
	allowed := true
	for i := range set.Len() {
		p := set.At(i)
		names[i] = key + "\x00" + set.ID() + "\x00" + p.Name
		if s.ignoreSet {
			names[i] = key + "\x00" + string(rune('0'+i))
		}
		var kept []int64
		for _, t := range s.logs[names[i]] {
			if t > now-int64(p.Window) {
				kept = append(kept, t)
			}
		}
		s.logs[names[i]] = kept
		r := ratelimit.Result{Allowed: len(kept)+cost <= p.Limit, Limit: p.Limit, Remaining: max(p.Limit-len(kept), 0), Policy: p.Name, Window: p.Window, At: time.Unix(0, now)}
		if !r.Allowed {
			r.RetryAfter = time.Duration(kept[len(kept)+cost-p.Limit-1] + int64(p.Window) - now)
			allowed = false
		}
		r.Reset = logReset(kept, p, now)
		results[i] = r
	}
	for i := range set.Len() {
		if !allowed && (!s.recordRefused || !results[i].Allowed) {
			continue
		}
		for range cost {
			s.logs[names[i]] = append(s.logs[names[i]], now)
		}
		if allowed {
			p := set.At(i)
			results[i].Remaining = p.Limit - len(s.logs[names[i]])
			results[i].Reset = time.Duration(s.logs[names[i]][0] + int64(p.Window) - now)
		}
	}
	return tightest(results), nil
}

// logReset is how long until one more request fits the log kept than
// fits now: until its oldest leaves, or, when a lowered limit left more
// than it holds, until all but limit-1 have left.
func logReset(kept []int64, p ratelimit.Policy, now int64) time.Duration {
	if len(kept) == 0 {
		return 0
	}
	return time.Duration(kept[max(len(kept)-p.Limit, 0)] + int64(p.Window) - now)
}

// tightest returns the Result a store reports of one per policy, as the
// Store contract says: a refusing one with the longest RetryAfter, else
// the fewest Remaining, then the longer Reset, then the first.
func tightest(results []ratelimit.Result) ratelimit.Result {
	best := results[0]
	for _, r := range results[1:] {
		switch {
		case r.Allowed != best.Allowed:
			if !r.Allowed {
				best = r
			}
		case !r.Allowed:
			if r.RetryAfter > best.RetryAfter {
				best = r
			}
		case r.Remaining != best.Remaining:
			if r.Remaining < best.Remaining {
				best = r
			}
		case r.Reset > best.Reset:
			best = r
		}
	}
	return best
}

// newNaive returns a naive store with the defect named broken, if any.
func newNaive(broken string) storetest.NewStore {
	return func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
		return &naiveStore{now: clock.Now, logs: map[string][]int64{}, resets: map[string]int64{},
			ignoreSet: broken == "ignore-set", recordRefused: broken == "record-refused", refundPastReset: broken == "refund-past-reset",
			refundNewest: broken == "refund-newest", refundFirstOnly: broken == "refund-first-only"}
	}
}

// The suite passes a plain but correct store (the naive store without its
// defects), so that the failures below are the defects'.
func TestNaiveStoreConforms(t *testing.T) {
	storetest.Run(t, newNaive(""), storetest.Algorithms(ratelimit.SlidingLog))
}

// TestBrokenStore runs the suite against a broken store when the
// environment names one; TestSuiteCatchesBrokenStores runs it so, in a
// process of its own, since the suite failing is the expected outcome.
func TestBrokenStore(t *testing.T) {
	broken := os.Getenv("STORETEST_BROKEN")
	if broken == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	storetest.Run(t, newNaive(broken), storetest.Algorithms(ratelimit.SlidingLog))
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	for _, c := range []struct {
		broken string
		fails  []string // cases that must fail
	}{
		{"ignore-set", []string{"IsolationBetweenSets", "IsolationBetweenLimiters"}},
		{"record-refused", []string{"AllOrNone"}},
		{"refund-past-reset", []string{"RefundAfterReset"}},
		{"refund-newest", []string{"Refund/the_oldest_instant"}},
		{"refund-first-only", []string{"Refund/SlidingLog,_a_cost_of_2_in_every_policy"}},
	} {
		t.Run(c.broken, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+c.broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that is broken (%s):\n%s", c.broken, out)
			}
			for _, name := range c.fails {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+name) {
					t.Errorf("the suite did not fail %s for a store that is broken (%s):\n%s", name, c.broken, out)
				}
			}
		})
	}
}
