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
}

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
		r := ratelimit.Result{Allowed: len(kept)+cost <= p.Limit, Limit: p.Limit, Remaining: p.Limit - len(kept), Policy: p.Name, At: time.Unix(0, now)}
		if !r.Allowed {
			r.RetryAfter = time.Duration(kept[len(kept)+cost-p.Limit-1] + int64(p.Window) - now)
			allowed = false
		}
		if len(kept) > 0 {
			r.Reset = time.Duration(kept[0] + int64(p.Window) - now)
		}
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
	return ratelimit.Tightest(results), nil
}

func newNaive(ignoreSet, recordRefused bool) storetest.NewStore {
	return func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
		return &naiveStore{now: clock.Now, logs: map[string][]int64{}, ignoreSet: ignoreSet, recordRefused: recordRefused}
	}
}

// The suite passes a plain but correct store (the naive store without its
// defects), so that the failures below are the defects'.
func TestNaiveStoreConforms(t *testing.T) {
	storetest.Run(t, newNaive(false, false), storetest.Algorithms(ratelimit.SlidingLog))
}

// TestBrokenStore runs the suite against a broken store when the
// environment names one; TestSuiteCatchesBrokenStores runs it so, in a
// process of its own, since the suite failing is the expected outcome.
func TestBrokenStore(t *testing.T) {
	switch os.Getenv("STORETEST_BROKEN") {
	case "ignore-set":
		storetest.Run(t, newNaive(true, false), storetest.Algorithms(ratelimit.SlidingLog))
	case "record-refused":
		storetest.Run(t, newNaive(false, true), storetest.Algorithms(ratelimit.SlidingLog))
	default:
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
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
