package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// newStore returns a Store on c under a prefix of t's own.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) (*redisstore.Store, string) {
	t.Helper()
	p := testPrefix(t, c)
	st, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(p)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, p
}

// logKey is the documented name of a policy's log.
func logKey(prefix, key, policy, window string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + "{" + hex.EncodeToString(sum[:]) + "}:" + policy + ":" + window
}

type take struct {
	cost      int
	allowed   bool
	remaining int
	policy    string
}

// TestTakeSequence runs the same decisions against the Redis store and the
// memory store: both must agree on every figure that does not depend on
// elapsed time.
func TestTakeSequence(t *testing.T) {
	c := sharedClient(t)
	minute := time.Minute
	tests := []struct {
		name     string
		policies []ratelimit.Policy
		takes    []take
	}{
		{
			name:     "one policy",
			policies: []ratelimit.Policy{{Name: "default", Limit: 3, Window: minute}},
			takes: []take{
				{1, true, 2, "default"}, {1, true, 1, "default"}, {1, true, 0, "default"},
				{1, false, 0, "default"}, {1, false, 0, "default"},
			},
		},
		{
			name:     "weighted",
			policies: []ratelimit.Policy{{Name: "default", Limit: 5, Window: minute}},
			takes: []take{
				{3, true, 2, "default"}, {3, false, 2, "default"}, {2, true, 0, "default"},
				{1, false, 0, "default"},
			},
		},
		{
			name: "two policies, the tighter reported",
			policies: []ratelimit.Policy{
				{Name: "default", Limit: 5, Window: minute},
				{Name: "burst", Limit: 2, Window: time.Second},
			},
			takes: []take{
				{1, true, 1, "burst"}, {1, true, 0, "burst"}, {1, false, 0, "burst"},
			},
		},
		{
			name: "all or nothing",
			policies: []ratelimit.Policy{
				{Name: "default", Limit: 4, Window: minute},
				{Name: "hour", Limit: 3, Window: time.Hour},
			},
			takes: []take{
				// The second take fits "default" but not "hour": it
				// must not be recorded in "default" either, or the
				// third could not fit.
				{2, true, 1, "hour"}, {2, false, 1, "hour"}, {1, true, 0, "hour"},
				{1, false, 0, "hour"},
			},
		},
		{
			name: "ties go to the longer reset",
			policies: []ratelimit.Policy{
				{Name: "short", Limit: 2, Window: time.Second},
				{Name: "long", Limit: 2, Window: minute},
			},
			takes: []take{{1, true, 1, "long"}, {1, true, 0, "long"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, _ := newStore(t, c)
			ms, err := ratelimit.NewMemoryStore()
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			for name, st := range map[string]ratelimit.Store{"redis": rs, "memory": ms} {
				for i, tk := range tt.takes {
					res, err := st.Take(context.Background(), "client", tt.policies, tk.cost)
					if err != nil {
						t.Fatalf("%s: take %d: %v", name, i+1, err)
					}
					if res.Allowed != tk.allowed || res.Remaining != tk.remaining || res.Policy != tk.policy {
						t.Errorf("%s: take %d (cost %d): allowed %v, remaining %d, policy %q; want %v, %d, %q",
							name, i+1, tk.cost, res.Allowed, res.Remaining, res.Policy, tk.allowed, tk.remaining, tk.policy)
					}
					var limit int
					for _, p := range tt.policies {
						if p.Name == res.Policy {
							limit = p.Limit
						}
					}
					if res.Limit != limit {
						t.Errorf("%s: take %d: limit %d, want %d", name, i+1, res.Limit, limit)
					}
					if res.Allowed && res.RetryAfter != 0 {
						t.Errorf("%s: take %d: allowed with RetryAfter %v, want 0", name, i+1, res.RetryAfter)
					}
					if !res.Allowed && (res.RetryAfter <= 0 || res.RetryAfter > res.Reset) {
						t.Errorf("%s: take %d: RetryAfter %v, Reset %v; want 0 < RetryAfter <= Reset", name, i+1, res.RetryAfter, res.Reset)
					}
				}
			}
		})
	}
}

// serverTime reads the server's clock in microseconds.
func serverTime(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

// seed replaces the log at k with the given instants (microseconds) and a
// TTL of an hour.
func seed(t testing.TB, c redis.UniversalClient, k string, instants ...int64) {
	t.Helper()
	ctx := context.Background()
	c.Del(ctx, k)
	for _, at := range instants {
		if err := c.RPush(ctx, k, at).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.Expire(ctx, k, time.Hour)
}

// TestExactFigures pins the decision's instant by seeding logs whose newest
// instant lies an hour ahead of the server's clock: the store never lets a
// key's time go backwards, so it decides at exactly that instant, and every
// figure can be checked to the microsecond.
func TestExactFigures(t *testing.T) {
	c := sharedClient(t)
	const s = int64(time.Second / time.Microsecond)
	minute := ratelimit.Policy{Name: "default", Limit: 3, Window: time.Minute}
	tests := []struct {
		name       string
		log        []int64 // offsets from the pinned instant T
		cost       int
		allowed    bool
		remaining  int
		retryAfter time.Duration
		reset      time.Duration
		after      []int64 // the log afterwards
		unpinned   bool    // offsets from the server's clock, not T
	}{
		{
			name: "full: wait for the oldest", log: []int64{-50 * s, -20 * s, 0}, cost: 1,
			remaining: 0, retryAfter: 10 * time.Second, reset: 10 * time.Second,
			after: []int64{-50 * s, -20 * s, 0},
		},
		{
			name: "full, cost 2: wait for the second oldest", log: []int64{-50 * s, -20 * s, 0}, cost: 2,
			remaining: 0, retryAfter: 40 * time.Second, reset: 10 * time.Second,
			after: []int64{-50 * s, -20 * s, 0},
		},
		{
			name: "one window old no longer counts", log: []int64{-70 * s, -60 * s, -59 * s, 0}, cost: 1,
			allowed: true, remaining: 0, reset: time.Second,
			after: []int64{-59 * s, 0, 0},
		},
		{
			name: "a microsecond younger still counts", log: []int64{-60*s + 1, -30 * s, 0}, cost: 1,
			remaining: 0, retryAfter: time.Microsecond, reset: time.Microsecond,
			after: []int64{-60*s + 1, -30 * s, 0},
		},
		{
			name: "all expired", log: []int64{-90 * s, -80 * s, -61 * s}, cost: 3, unpinned: true,
			allowed: true, remaining: 0, reset: time.Minute,
			// The decision's instant is the server's own, unknown
			// here: only the count is checked.
		},
		{
			name: "long drain", log: append(spread(-200*s, -61*s, 40), 0), cost: 2,
			allowed: true, remaining: 0, reset: time.Minute,
			after: []int64{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, p := newStore(t, c)
			k := logKey(p, "client", "default", "60s")
			T := serverTime(t, c)
			if !tt.unpinned {
				T += 3600 * s
			}
			abs := func(offs []int64) []int64 {
				out := make([]int64, len(offs))
				for i, o := range offs {
					out[i] = T + o
				}
				return out
			}
			seed(t, c, k, abs(tt.log)...)
			res, err := st.Take(context.Background(), "client", []ratelimit.Policy{minute}, tt.cost)
			if err != nil {
				t.Fatal(err)
			}
			want := ratelimit.Result{Allowed: tt.allowed, Limit: 3, Remaining: tt.remaining,
				RetryAfter: tt.retryAfter, Reset: tt.reset, Policy: "default"}
			if res != want {
				t.Errorf("got %+v\nwant %+v", res, want)
			}
			got, err := c.LRange(context.Background(), k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if tt.after == nil {
				if len(got) != tt.cost {
					t.Errorf("log holds %d instants, want %d", len(got), tt.cost)
				}
				return
			}
			if w := strings.Join(itoa(abs(tt.after)), " "); strings.Join(got, " ") != w {
				t.Errorf("log %v\nwant %v", got, w)
			}
		})
	}
}

// spread returns n instants evenly from a to b.
func spread(a, b int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = a + (b-a)*int64(i)/int64(n-1)
	}
	return out
}

func itoa(xs []int64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatInt(x, 10)
	}
	return out
}

// TestKeyLayout checks the documented key names, the hash tag and the TTL
// of each log.
func TestKeyLayout(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	policies := []ratelimit.Policy{
		{Name: "default", Limit: 10, Window: time.Minute},
		{Name: "burst", Limit: 5, Window: 1500 * time.Millisecond},
		{Name: "tiny", Limit: 5, Window: 250 * time.Microsecond},
	}
	const secret = "Bearer s3cr3t {not-a-tag}\x00\xff"
	if _, err := st.Take(context.Background(), secret, policies, 1); err != nil {
		t.Fatal(err)
	}
	want := []string{
		logKey(p, secret, "default", "60s"),
		logKey(p, secret, "burst", "1500ms"),
		logKey(p, secret, "tiny", "250us"),
	}
	got := scanKeys(t, c, p)
	if len(got) > len(want) {
		t.Errorf("keys %q, want at most %q", got, want)
	}
	for i, k := range want[:2] { // tiny may have expired already
		ttl, err := c.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > maxTTL(policies[i].Window) {
			t.Errorf("PTTL %s = %v, want in (0, %v]", k, ttl, maxTTL(policies[i].Window))
		}
		if strings.Contains(k, "s3cr3t") {
			t.Errorf("key %q contains the client key", k)
		}
	}
	for _, k := range got {
		if !strings.HasPrefix(k, p+"{") || strings.Count(k, "{") != 1 {
			t.Errorf("key %q: want %q, one hash tag", k, p+"{...}")
		}
	}
}

// TestWeightedCost checks that a request of cost n is logged n times.
func TestWeightedCost(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	pol := []ratelimit.Policy{{Name: "default", Limit: 3000, Window: time.Minute}}
	for _, cost := range []int{1, 7, 1500} {
		if _, err := st.Take(context.Background(), "bulk", pol, cost); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.LLen(context.Background(), logKey(p, "bulk", "default", "60s")).Val(); n != 1508 {
		t.Errorf("LLEN = %d, want 1508", n)
	}
	if _, err := st.Take(context.Background(), "bulk", pol, 3001); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("cost 3001 of 3000: error %v, want ErrCostExceedsLimit", err)
	}
}

// TestSameTick makes 1,000 concurrent requests decide at one and the same
// microsecond (the log is seeded with an instant ahead of the server's
// clock, which the store will not go back from): each must be counted.
func TestSameTick(t *testing.T) {
	c := sharedClient(t)
	// A generous timeout: this is about counting, not latency, and 1,000
	// goroutines share two cores under -race.
	st, p := newStore(t, c, redisstore.WithTimeout(10*time.Second))
	k := logKey(p, "tick", "default", "60s")
	T := serverTime(t, c) + int64(time.Hour/time.Microsecond)
	seed(t, c, k, T)
	const n = 1000
	pol := []ratelimit.Policy{{Name: "default", Limit: 1_000_000, Window: time.Minute}}
	remaining := make([]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := st.Take(context.Background(), "tick", pol, 1)
			if err != nil || !res.Allowed {
				errs <- errors.Join(err, errors.New("not allowed"))
				return
			}
			remaining[i] = res.Remaining
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := c.LRange(context.Background(), k, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 {
		t.Fatalf("log holds %d instants, want %d", len(got), n+1)
	}
	for i, g := range got {
		if g != strconv.FormatInt(T, 10) {
			t.Fatalf("instant %d is %s, want %d: not one tick", i, g, T)
		}
	}
	// Each decision saw a different count: remaining takes every value
	// from limit-2 down to limit-1-n exactly once.
	seen := make(map[int]bool)
	for _, r := range remaining {
		seen[r] = true
	}
	for r := pol[0].Limit - 1 - n; r <= pol[0].Limit-2; r++ {
		if !seen[r] {
			t.Fatalf("no decision reported remaining %d", r)
		}
	}
}

// TestServerTime: the store reads no local clock, so two stores in
// processes whose clocks disagree behave as one. Two stores on separate
// clients share a key: they admit exactly the limit between them, and the
// instants logged lie within the server's own clock readings around the
// run, not the processes'.
func TestServerTime(t *testing.T) {
	c := sharedClient(t)
	// Generous timeouts: this is about counting, not latency.
	a, p := newStore(t, c, redisstore.WithTimeout(5*time.Second))
	c2 := sharedClient(t)
	b, err := redisstore.New(c2, redisstore.WithPrefix(p), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pol := []ratelimit.Policy{{Name: "default", Limit: 100, Window: time.Minute}}
	before := serverTime(t, c)
	allowed := hammer(t, []ratelimit.Store{a, b}, "shared", pol, 8, 40)
	after := serverTime(t, c)
	if allowed != 100 {
		t.Errorf("allowed %d, want 100", allowed)
	}
	got, _ := c.LRange(context.Background(), logKey(p, "shared", "default", "60s"), 0, -1).Result()
	if len(got) != 100 {
		t.Fatalf("log holds %d instants, want 100", len(got))
	}
	for _, g := range got {
		at, _ := strconv.ParseInt(g, 10, 64)
		if at < before || at > after {
			t.Fatalf("instant %d outside the server's clock [%d, %d]", at, before, after)
		}
	}
}

// hammer makes each store take from key on g goroutines, n times each, and
// returns how many were allowed.
func hammer(t testing.TB, stores []ratelimit.Store, key string, pol []ratelimit.Policy, g, n int) int {
	t.Helper()
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for _, st := range stores {
		for range g {
			wg.Go(func() {
				mine := 0
				for range n {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res, err := st.Take(ctx, key, pol, 1)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						mine++
					}
				}
				mu.Lock()
				allowed += mine
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return allowed
}
