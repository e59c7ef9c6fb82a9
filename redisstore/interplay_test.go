package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// beforeScript calls fn with the name of each function called, before
// the call is sent.
type beforeScript struct{ fn func(name string) }

func (h *beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "fcall" || n == "fcall_ro" {
			h.fn(fmt.Sprint(cmd.Args()[1]))
		}
		return next(ctx, cmd)
	}
}

func (h *beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaseReturnOutlivesTheRequest: a request that ends a lease (here,
// the first under the client's new limits) gives the lease's unused
// slots back to Redis on the way. If that request's context ends then
// (its client went away), the slots must still go back: they are the
// store's, not the request's, and nothing else will return them, so a
// monthly quota would keep them counted for the rest of the month. The
// clock stands still, so that no lease ends by time and the janitor
// returns nothing.
func TestLeaseReturnOutlivesTheRequest(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	var mu sync.Mutex
	cancel := context.CancelFunc(func() {})
	c.AddHook(&beforeScript{fn: func(name string) {
		if strings.HasPrefix(name, "ratelimit_release_") {
			mu.Lock()
			cancel() // the client goes away while the lease is given back
			mu.Unlock()
		}
	}})
	clk := storetest.Clock{}
	clk.Set(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	leased, p := clockedStore(t, c, &clk, redisstore.WithLeases(true))
	plain, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithLocalClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	policy := ratelimit.Policy{Name: "m", Limit: 1000, Algorithm: ratelimit.Monthly}
	before := policySet(t, policy)
	policy.Limit = 2000 // the client's new limit: the same quota, which keeps its count
	after := policySet(t, policy)

	const n = 11 // the last asks for a lease of 11 slots, all unused
	for i := range n {
		if r := takeOK(t, leased, "k", before, 1); !r.Allowed {
			t.Fatalf("take %d: %+v", i, r)
		}
	}
	if r, err := plain.Peek(ctx, "k", before); err != nil || r.Remaining >= 1000-n {
		t.Fatalf("after %d takes: %+v, %v; want a lease's unused slots counted", n, r, err)
	}

	rctx, rcancel := context.WithCancel(ctx)
	mu.Lock()
	cancel = rcancel
	mu.Unlock()
	leased.Take(rctx, "k", after, 1) // its client is gone by the answer: any answer will do
	rcancel()

	// n requests were admitted, and the cancelled one may have been
	// counted too; the lease's unused slots are back.
	if r, err := plain.Peek(ctx, "k", after); err != nil || r.Remaining < 2000-n-1 {
		t.Errorf("after the lease ended: %+v, %v; want at least %d remaining", r, err, 2000-n-1)
	}
}

// TestRefundOfARequestThatLeftTheWindow: refunding a request that has
// left the window changes nothing (ratelimit.Store), in this store as in
// the memory store. A log looks for the slots of requests a lease
// admitted a lease's length after their At; it must not take a request
// of its own logged there for one (here with leases off, a request
// logged exactly 50 ms after the one refunded): that frees a slot still
// in use, and the window admits one more than the limit.
func TestRefundOfARequestThatLeftTheWindow(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := storetest.Clock{}
	clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	rs, _ := clockedStore(t, c, &clk)
	ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	set := policySet(t, ratelimit.Policy{Name: "log", Limit: 2, Window: time.Second})
	stores := []ratelimit.Store{rs, ms}
	takeBoth := func(what string) ratelimit.Result {
		t.Helper()
		got, want := takeOK(t, rs, "k", set, 1), takeOK(t, ms, "k", set, 1)
		if !sameResult(got, want) {
			t.Fatalf("%s: %+v, the memory store's %+v", what, got, want)
		}
		return got
	}
	first := takeBoth("first")
	clk.Advance(50 * time.Millisecond)
	takeBoth("second, 50 ms later")
	clk.Advance(time.Second - 40*time.Millisecond) // the first has left the window, the second not
	takeBoth("third, once the first has left")
	for _, st := range stores {
		if err := st.Refund(ctx, "k", set, 1, first.At); err != nil {
			t.Fatal(err)
		}
	}
	if r := takeBoth("fourth, with the second and third in the window"); r.Allowed {
		t.Errorf("admitted a third request in a window of 2: %+v", r)
	}
}

// TestFleetShareKeepsLimitersApart: limiters that share a store never
// touch each other's counts (ratelimit.Store), and under FailLocal their
// fallback counts are no exception. Two limiters of one policy name and
// window but different limits (a whole API and its login route, say)
// have sets of different IDs; each's share of its limit must be counted
// apart from the other's, or, during an outage, a client's requests to
// the API refuse it the login route.
func TestFleetShareKeepsLimitersApart(t *testing.T) {
	addr, err := spareAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(clientOptions(addr)) // nothing listens there
	t.Cleanup(func() { c.Close() })
	for _, fleet := range []int{1, 2} {
		t.Run(fmt.Sprint("fleet of ", fleet), func(t *testing.T) {
			ctx := context.Background()
			st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFleetSize(fleet))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			api, err := ratelimit.New(100, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
			if err != nil {
				t.Fatal(err)
			}
			login, err := ratelimit.New(10, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if d := api.Allow(ctx, "ip:203.0.113.7", 1); d.Outcome != ratelimit.Serve || !d.Result.Allowed {
					t.Fatalf("api request %d: %+v", i, d)
				}
			}
			if d := login.Allow(ctx, "ip:203.0.113.7", 1); d.Outcome != ratelimit.Serve || !d.Result.Allowed {
				t.Errorf("the first login request, after 20 API requests: %+v; want it allowed", d)
			}
		})
	}
}

// TestResetDropsALeaseInFlight: a Reset that reaches Redis while a lease
// this process asked for is on its way back drops that lease too (Reset
// "forgets ... the lease this process holds"): its slots went with the
// state the Reset deleted, so admitting from it would let the window
// after the Reset hold more than the limit. The clock stands still.
func TestResetDropsALeaseInFlight(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := &storetest.Clock{}
	clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var st *redisstore.Store
	var armed atomic.Bool
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 40, Window: time.Hour})
	// Once armed, the first function call to come back (the take that
	// asks for a lease) is followed by a Reset before Take goes on.
	c.AddHook(&onScript{fn: func() {
		if armed.CompareAndSwap(true, false) {
			if err := st.Reset(ctx, "k", set); err != nil {
				t.Error(err)
			}
		}
	}})
	st, _ = clockedStore(t, c, clk, redisstore.WithLeases(true))
	takeOK(t, st, "k", set, 1)
	armed.Store(true)
	takeOK(t, st, "k", set, 1) // the second of a busy key asks for a lease
	if armed.Load() {
		t.Fatal("no Reset")
	}
	n := 0
	for range 100 {
		if takeOK(t, st, "k", set, 1).Allowed {
			n++
		}
	}
	if n != 40 {
		t.Errorf("%d admitted after the Reset, want the limit, 40", n)
	}
}

// failNextTake fails the next call of the take function once armed, as a
// call that found no connection in the pool within the timeout does,
// unsent: the calls after it reach Redis.
type failNextTake struct{ armed *atomic.Bool }

func (h failNextTake) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h failNextTake) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "fcall" && fmt.Sprint(cmd.Args()[1]) == redisstore.FnTake && h.armed.CompareAndSwap(true, false) {
			cmd.SetErr(redis.ErrPoolTimeout)
			return redis.ErrPoolTimeout
		}
		return next(ctx, cmd)
	}
}

func (h failNextTake) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRefundOfAnOpenAdmission: under FailOpen a request Redis failed to
// decide is served and counted nowhere. If WithCountIf then takes it back
// (its handler answered 200), the refund must not reach Redis, which never
// counted it: there it would take back another request, which Redis did
// count, and the window would admit one more than the limit.
func TestRefundOfAnOpenAdmission(t *testing.T) {
	for _, algo := range []ratelimit.Algorithm{ratelimit.SlidingLog, counter, gcra, ratelimit.Daily} {
		t.Run(algo.String(), func(t *testing.T) {
			c := sharedClient(t)
			var armed atomic.Bool
			c.AddHook(failNextTake{&armed})
			clk := &storetest.Clock{}
			clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			st, _ := clockedStore(t, c, clk, redisstore.WithFailurePolicy(redisstore.FailOpen), redisstore.WithRefusalCache(0))
			window := time.Hour
			if algo == ratelimit.Daily {
				window = 0
			}
			// Failed logins count, successful ones are taken back.
			l, err := ratelimit.New(3, window, ratelimit.KeyByHeader("X-User"), ratelimit.WithStore(st), ratelimit.WithAlgorithm(algo),
				ratelimit.WithCountIf(func(_ *http.Request, status int) bool { return status != http.StatusOK }))
			if err != nil {
				t.Fatal(err)
			}
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Password") != "right" {
					w.WriteHeader(http.StatusUnauthorized)
				}
			}))
			login := func(password string) int {
				r := httptest.NewRequest("POST", "/login", nil)
				r.Header.Set("X-User", "alice")
				r.Header.Set("X-Password", password)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			login("wrong")
			login("wrong")
			armed.Store(true)
			if got := login("right"); got != http.StatusOK || armed.Load() {
				t.Fatalf("the login Redis failed to decide: %d, want 200, served open", got)
			}
			var got []int
			for range 3 {
				got = append(got, login("wrong"))
			}
			if want := []int{401, 429, 429}; !slices.Equal(got, want) {
				t.Errorf("failed logins after 2 counted of 3 and an open one taken back: %v, want %v", got, want)
			}
		})
	}
}

// TestResetDropsALeaseGrantedBeforeIt: a lease this process asked for
// after a Reset began, but which Redis granted before the Reset reached
// it, is dropped too: its slots went with the state the Reset deleted.
// Here the ask is sent, and answered, just before the Reset's call is;
// admitting from it let the window after the Reset hold more than the
// limit. The clock stands still.
func TestResetDropsALeaseGrantedBeforeIt(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingLog, counter, gcra, ratelimit.Monthly} {
		t.Run(a.String(), func(t *testing.T) { resetDropsALeaseGrantedBeforeIt(t, a) })
	}
}

func resetDropsALeaseGrantedBeforeIt(t *testing.T, a ratelimit.Algorithm) {
	ctx := context.Background()
	c := sharedClient(t)
	clk := &storetest.Clock{}
	clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var st *redisstore.Store
	var armed atomic.Bool
	const limit = 1000
	window := time.Hour
	if a == ratelimit.Monthly {
		window = 0
	}
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: limit, Window: window, Algorithm: a})
	c.AddHook(&beforeScript{fn: func(name string) {
		if strings.HasPrefix(name, "ratelimit_reset_") && armed.CompareAndSwap(true, false) {
			takeOK(t, st, "k", set, 1) // busy: asks for a lease, granted before the Reset
		}
	}})
	st, p := clockedStore(t, c, clk, redisstore.WithLeases(true))
	plain, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(p), redisstore.WithScriptClock(clk.Now), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	for range 10 {
		takeOK(t, st, "k", set, 1)
	}
	armed.Store(true)
	if err := st.Reset(ctx, "k", set); err != nil {
		t.Fatal(err)
	}
	if armed.Load() {
		t.Fatal("no take before the Reset")
	}
	if r, err := plain.Peek(ctx, "k", set); err != nil || r.Remaining != limit {
		t.Fatalf("after the Reset: %+v, %v; want %d remaining", r, err, limit)
	}
	n := 0
	for range 2 * limit {
		if takeOK(t, st, "k", set, 1).Allowed {
			n++
		}
	}
	if n != limit {
		t.Errorf("%d admitted after the Reset, want the limit, %d", n, limit)
	}
}
