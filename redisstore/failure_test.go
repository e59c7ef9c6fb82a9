package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// hangLimit is how long a call to a store may take before a test calls it
// hung: far beyond any timeout of the store, so that no scheduling delay
// of a loaded machine reaches it. Whether a call was bounded by the
// store's timeout is told by its error (a deadline), not by the clock.
const hangLimit = 30 * time.Second

// returns runs f and fails t if it does not return within hangLimit.
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangLimit):
		t.Fatalf("%s: hung for %v", what, hangLimit)
	}
}

// load runs g goroutines taking from their own keys until stop is closed,
// and checks that every call decides or fails as the policy says.
type load struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	calls int
	bad   []error
}

func startLoad(st ratelimit.Store, g int, policy redisstore.FailurePolicy) *load {
	l := &load{stop: make(chan struct{})}
	pol, _ := ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: 1_000_000, Window: time.Minute})
	for i := range g {
		key := "load-" + string(rune('a'+i))
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				res, err := st.Take(context.Background(), key, pol, 1)
				l.mu.Lock()
				l.calls++
				switch {
				case err != nil && (policy != redisstore.FailClosed || !errors.Is(err, redisstore.ErrUnavailable)):
					l.bad = append(l.bad, err)
				case err == nil && !res.Allowed:
					l.bad = append(l.bad, errors.New("load request refused"))
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *load) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	returns(t, "the load's calls", l.wg.Wait)
	t.Logf("load: %d calls", l.calls)
	for i, err := range l.bad {
		if i == 5 {
			t.Errorf("... %d more", len(l.bad)-5)
			break
		}
		t.Errorf("load: %v", err)
	}
}

// waitFor polls cond every 10 ms until it holds or d has passed. It waits
// for another process (a restarted server, a reconnecting pool), not for
// the clock.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clientOptions are the client settings the README recommends, for the
// server at addr: a call that fails fails at once, or at the store's
// timeout, not after go-redis's dial retries and command retries.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           redisstore.DefaultTimeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		PoolTimeout:           redisstore.DefaultTimeout,
	}
}

// TestRedisDown stops the store's Redis under load and starts it again:
// every policy behaves as documented while it is down, no call outlives
// the timeout, and the store uses Redis again once it is back.
func TestRedisDown(t *testing.T) {
	for _, fp := range []redisstore.FailurePolicy{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		t.Run(fp.String(), func(t *testing.T) {
			srv := startServer(t)
			c := redis.NewClient(clientOptions(srv.addr))
			t.Cleanup(func() { c.Close() })
			var hooked atomic.Uint64
			st, err := redisstore.New(c, redisstore.WithFailurePolicy(fp),
				redisstore.WithFailureHook(func(error) { hooked.Add(1) }))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 5, Window: time.Minute})
			takeN := func(key string, n int) (allowed int, errs []error) {
				for range n {
					res, err := st.Take(ctx, key, pol, 1)
					if err != nil {
						errs = append(errs, err)
					} else if res.Allowed {
						allowed++
					}
				}
				return allowed, errs
			}

			if a, errs := takeN("up", 6); a != 5 || errs != nil {
				t.Fatalf("Redis up: allowed %d of 6, errors %v; want 5, none", a, errs)
			}
			l := startLoad(st, 4, fp)
			srv.stop()
			waitFor(t, 5*time.Second, "failures under load", func() bool { return st.Failures() >= 20 })

			switch fp {
			case redisstore.FailClosed:
				_, err := st.Take(ctx, "fresh", pol, 1)
				if !errors.Is(err, redisstore.ErrUnavailable) {
					t.Errorf("Redis down: error %v, want ErrUnavailable", err)
				}
				// A refusal remembered before the outage still holds.
				if res, err := st.Take(ctx, "up", pol, 1); err != nil || res.Allowed {
					t.Errorf("Redis down: a remembered refusal: %+v, %v; want refused, no error", res, err)
				}
				lim, err := ratelimit.New(5, time.Minute, ratelimit.KeyByHeader("X-Key"), ratelimit.WithStore(st))
				if err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-Key", "m")
				lim.Handler(http.NotFoundHandler()).ServeHTTP(rec, req)
				if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
					t.Errorf("middleware: status %d, Retry-After %q; want 503, \"1\"", rec.Code, rec.Header().Get("Retry-After"))
				}
			case redisstore.FailOpen:
				// "up" is full in Redis, and its refusal is remembered
				// until it could change: still refused. Open, a key
				// Redis never refused passes.
				if a, errs := takeN("up", 3); a != 0 || errs != nil {
					t.Errorf("Redis down: a remembered refusal: allowed %d of 3, errors %v; want 0, none", a, errs)
				}
				if a, errs := takeN("open", 10); a != 10 || errs != nil {
					t.Errorf("Redis down: allowed %d of 10, errors %v; want 10, none", a, errs)
				}
			case redisstore.FailLocal:
				// The local store counts on its own, exactly.
				if a, errs := takeN("local", 8); a != 5 || errs != nil {
					t.Errorf("Redis down: allowed %d of 8, errors %v; want 5, none", a, errs)
				}
			}

			srv.restart(t)
			waitFor(t, 10*time.Second, "recovery", func() bool {
				before := st.Failures()
				_, err := st.Take(ctx, "probe", pol, 1)
				return err == nil && st.Failures() == before
			})
			l.end(t)
			if a, errs := takeN("after", 7); a != 5 || errs != nil {
				t.Errorf("Redis back: allowed %d of 7, errors %v; want 5, none", a, errs)
			}
			if n := len(scanKeys(t, c, redisstore.DefaultPrefix)); n < 2 {
				t.Errorf("Redis back: %d keys in Redis, want the probe's and after's", n)
			}
			if h, f := hooked.Load(), st.Failures(); h != f || f == 0 {
				t.Errorf("hook saw %d failures, Failures() = %d; want equal, > 0", h, f)
			}
		})
	}
}

// TestSlowRedis puts a proxy that delays replies between the store and
// Redis: calls end at the store's timeout however slow Redis is, with or
// without ContextTimeoutEnabled on the client (their error is the
// deadline, not Redis's late answer), and succeed again once it is fast.
func TestSlowRedis(t *testing.T) {
	sharedClient(t) // skip without Redis
	for _, bounded := range []bool{true, false} {
		name := map[bool]string{true: "ContextTimeoutEnabled", false: "plain client"}[bounded]
		t.Run(name, func(t *testing.T) {
			px := startProxy(t, redisAddr())
			c := redis.NewClient(&redis.Options{Addr: px.addr(), ContextTimeoutEnabled: bounded})
			t.Cleanup(func() { c.Close() })
			st, _ := newStore(t, c, redisstore.WithTimeout(redisstore.DefaultTimeout))
			ctx := context.Background()
			pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 100, Window: time.Minute})
			if _, err := st.Take(ctx, "k", pol, 1); err != nil {
				t.Fatalf("no delay: %v", err)
			}
			for _, delay := range []time.Duration{300 * time.Millisecond, time.Hour} {
				px.setDelay(delay)
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						_, err := st.Take(ctx, "k", pol, 1)
						if !errors.Is(err, redisstore.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("delay %v: error %v, want ErrUnavailable at the store's deadline", delay, err)
						}
					})
				}
				returns(t, "slow calls", wg.Wait)
			}
			if f := st.Failures(); f != 16 {
				t.Errorf("Failures() = %d, want 16", f)
			}
			px.setDelay(5 * time.Millisecond)
			waitFor(t, 5*time.Second, "recovery", func() bool {
				_, err := st.Take(ctx, "k", pol, 1)
				return err == nil
			})
		})
	}
}

// TestOutageClientSettings: while nothing listens at the server's
// address, a call through a client with the README's settings fails at
// once, on the refused dial, where one through go-redis's defaults waits
// out the store's whole timeout on dial retries and command retries,
// every request of an outage then taking that long under FailOpen or
// FailLocal. Which of the two happened is told by the failure's error:
// the refused connection, or the store's deadline.
func TestOutageClientSettings(t *testing.T) {
	addr, err := spareAddr()
	if err != nil {
		t.Fatal(err)
	}
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 5, Window: time.Minute})
	// The README's settings, with bounds on the dial and the wait for a
	// connection that no busy machine reaches before a refused dial on
	// loopback comes back: 50 ms is the README's, and a loaded machine
	// may not run the dial within it.
	readme := clientOptions(addr)
	readme.DialTimeout, readme.PoolTimeout = 5*time.Second, 5*time.Second
	for _, tt := range []struct {
		name     string
		opts     *redis.Options
		deadline bool // the calls wait for the store's deadline
		// The store's: the default for go-redis's defaults, which reach
		// it; for the README's settings, one no busy machine reaches
		// before a refused dial on loopback comes back.
		timeout time.Duration
	}{
		{"defaults", &redis.Options{Addr: addr, ContextTimeoutEnabled: true}, true, 50 * time.Millisecond},
		{"the README's settings", readme, false, 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClient(tt.opts)
			t.Cleanup(func() { c.Close() })
			var mu sync.Mutex
			var failures []error
			st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailOpen), redisstore.WithTimeout(tt.timeout),
				redisstore.WithFailureHook(func(err error) { mu.Lock(); failures = append(failures, err); mu.Unlock() }))
			if err != nil {
				t.Fatal(err)
			}
			returns(t, "calls during the outage", func() {
				for range 5 {
					if res, err := st.Take(context.Background(), "k", set, 1); err != nil || !res.Allowed {
						t.Errorf("Take: %+v, %v; want allowed (FailOpen)", res, err)
					}
				}
			})
			mu.Lock()
			defer mu.Unlock()
			if len(failures) != 5 {
				t.Fatalf("%d failures, want 5", len(failures))
			}
			for _, err := range failures {
				refused := errors.Is(err, syscall.ECONNREFUSED)
				if deadline := errors.Is(err, context.DeadlineExceeded); deadline != tt.deadline || refused == tt.deadline {
					t.Errorf("failure %v: deadline %v, refused dial %v; want the deadline %v", err, deadline, refused, tt.deadline)
				}
			}
		})
	}
}

// TestRestart kills a server of its own (SIGKILL, as a crash would) and
// starts it again: without persistence every count is forgotten and a
// full client gets its whole quota again, for every algorithm; with the
// append-only file synced on every write, as the README recommends, the
// counts survive. A store of its own after the restart reads Redis
// afresh, as another process would.
func TestRestart(t *testing.T) {
	set := policySet(t,
		ratelimit.Policy{Name: "log", Limit: 5, Window: time.Hour},
		ratelimit.Policy{Name: "gcra", Limit: 5, Window: time.Hour, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 5, Window: time.Hour, Algorithm: counter},
	)
	for _, tt := range []struct {
		name     string
		args     []string
		remember bool
	}{
		{"no persistence", nil, false},
		{"appendonly, fsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.args...)
			c := redis.NewClient(clientOptions(srv.addr))
			t.Cleanup(func() { c.Close() })
			before, _ := newStore(t, c)
			if got := len(hammer(t, []ratelimit.Store{before}, "k", set, 1, 5)); got != 5 {
				t.Fatalf("%d of 5 allowed before the restart, want 5", got)
			}
			srv.stop()
			srv.restart(t)
			after, err := redisstore.New(c, redisstore.WithPrefix(prefixOf(t, before)), redisstore.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var res ratelimit.Result
			waitFor(t, 5*time.Second, "the client reconnects", func() bool {
				res, err = after.Take(context.Background(), "k", set, 1)
				return err == nil
			})
			if res.Allowed == tt.remember {
				t.Errorf("after the restart: %+v; want allowed %v (counts remembered: %v)", res, !tt.remember, tt.remember)
			}
		})
	}
}

// TestRecoveryAfterOutage stops a server of its own for long enough that
// go-redis's pool gives up dialling (more failed dials in a row than its
// PoolSize), then starts it again: with Dial as the client's dialer, the
// very first call once the server answers goes through Redis. With
// go-redis's own dialer it would fail for up to a second, until the
// pool's next probe.
func TestRecoveryAfterOutage(t *testing.T) {
	srv := startServer(t)
	opts := clientOptions(srv.addr)
	opts.Dialer = redisstore.Dial
	// Timeouts no busy machine reaches before a refused dial on loopback
	// comes back, the dial's and the pool's as the store's: every call of
	// the outage must be a refused dial, which is what latches go-redis's
	// dialling.
	opts.DialTimeout, opts.PoolTimeout = 5*time.Second, 5*time.Second
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithRefusalCache(0), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1000, Window: time.Minute})
	if _, err := st.Take(ctx, "k", pol, 1); err != nil {
		t.Fatalf("Redis up: %v", err)
	}
	srv.stop()
	for i := range 5 * c.Options().PoolSize {
		if _, err := st.Take(ctx, "k", pol, 1); !errors.Is(err, redisstore.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Redis down, call %d: %v, want ErrUnavailable from a refused dial", i, err)
		}
	}
	srv.restart(t)
	probe := redis.NewClient(clientOptions(srv.addr))
	defer probe.Close()
	waitFor(t, 10*time.Second, "the server answers", func() bool { return probe.Ping(ctx).Err() == nil })
	if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed {
		t.Errorf("the first call once the server answers: %+v, %v; want it decided by Redis", res, err)
	}
}

// TestRecoveryWithIdleConnections: a pool that keeps idle connections
// (MinIdleConns) dials them ahead of need, during an outage too, through
// Dial, which reports each refused dial as a connection that fails. Such
// a connection, taken from the idle ones once Redis is back, failed the
// call it served: each of them cost a decision after Redis answered,
// however long after. go-redis checks an idle connection before it uses
// it, and now finds these broken and dials again.
func TestRecoveryWithIdleConnections(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("go-redis checks idle connections on Unix only")
	}
	srv := startServer(t)
	opts := clientOptions(srv.addr)
	opts.Dialer = redisstore.Dial
	opts.DialTimeout, opts.PoolTimeout = 5*time.Second, 5*time.Second // as TestRecoveryAfterOutage
	opts.MinIdleConns = 4
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithRefusalCache(0), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 1000, Window: time.Minute})
	if _, err := st.Take(ctx, "k", pol, 1); err != nil {
		t.Fatalf("Redis up: %v", err)
	}
	srv.stop()
	for i := range 2 * opts.MinIdleConns {
		if _, err := st.Take(ctx, "k", pol, 1); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("Redis down, call %d: %v, want ErrUnavailable", i, err)
		}
	}
	// The pool dials its idle connections again, in the background.
	waitFor(t, 10*time.Second, "idle connections dialled during the outage", func() bool {
		return c.PoolStats().IdleConns >= uint32(opts.MinIdleConns)
	})
	srv.restart(t)
	probe := redis.NewClient(clientOptions(srv.addr))
	defer probe.Close()
	waitFor(t, 10*time.Second, "the server answers", func() bool { return probe.Ping(ctx).Err() == nil })
	if res, err := st.Take(ctx, "k", pol, 1); err != nil || !res.Allowed {
		t.Errorf("the first call once the server answers: %+v, %v; want it decided by Redis", res, err)
	}
}

// TestFleetShare: during an outage, four servers under FailLocal with a
// fleet size of four each admit a quarter of the limit, so that the fleet
// admits the limit in all, not four times it.
func TestFleetShare(t *testing.T) {
	addr, err := spareAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(clientOptions(addr)) // nothing listens there
	t.Cleanup(func() { c.Close() })
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 20, Window: time.Minute}, ratelimit.Policy{Name: "burst", Limit: 9, Window: time.Second, Algorithm: gcra})
	total := 0
	for range 4 {
		st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFleetSize(4))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		n := 0
		for range 30 {
			res, err := st.Take(context.Background(), "k", pol, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				n++
			}
		}
		if n != 2 {
			t.Errorf("one server of four: %d allowed, want 2 (a quarter of 9 per second, the tighter)", n)
		}
		total += n
	}
	if total > 9 {
		t.Errorf("the fleet admitted %d, want at most the limit of 9 in a second", total)
	}
}

// TestFleetShareOfACostAboveIt: during an outage, a cost that fits the
// limit but not this server's share of it is no invalid cost: the store
// cannot decide it locally and answers ErrUnavailable, as FailClosed does.
func TestFleetShareOfACostAboveIt(t *testing.T) {
	addr, err := spareAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(clientOptions(addr)) // nothing listens there
	t.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFleetSize(4))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 10, Window: time.Minute})
	_, err = st.Take(context.Background(), "k", pol, 5) // the share is 2
	if !errors.Is(err, redisstore.ErrUnavailable) || errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("a cost of 5 under a limit of 10, a share of 2: %v; want ErrUnavailable, not ErrInvalidCost", err)
	}
	if res, err := st.Take(context.Background(), "k", pol, 2); err != nil || !res.Allowed {
		t.Errorf("a cost of 2, the whole share: %+v, %v; want it admitted locally", res, err)
	}
}
