package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// The Store contract itself is checked by storetest (conformance_test.go);
// these test what only this store does, or check its figures against the
// memory store's.

const (
	counter = ratelimit.SlidingWindowCounter
	gcra    = ratelimit.GCRA
)

// newStore returns a Store on c under a prefix of t's own, with a timeout
// generous enough for a loaded two-core machine under -race unless opts
// say otherwise.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) (*redisstore.Store, string) {
	t.Helper()
	p := testPrefix(t, c)
	st, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(p), redisstore.WithTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	prefixes.Store(st, p)
	return st, p
}

// prefixOf returns the key prefix newStore gave st.
func prefixOf(t *testing.T, st *redisstore.Store) string {
	t.Helper()
	p, ok := prefixes.Load(st)
	if !ok {
		t.Fatal("a store not made by newStore")
	}
	return p.(string)
}

// prefixes maps the stores newStore made to their prefixes.
var prefixes sync.Map

// clockedStore is newStore with clk as the scripts' time and the refusal
// cache's clock.
func clockedStore(t testing.TB, c redis.UniversalClient, clk *storetest.Clock, opts ...redisstore.Option) (*redisstore.Store, string) {
	t.Helper()
	return newStore(t, c, append([]redisstore.Option{redisstore.WithScriptClock(clk.Now), redisstore.WithLocalClock(clk.Now)}, opts...)...)
}

func policySet(t testing.TB, ps ...ratelimit.Policy) ratelimit.PolicySet {
	t.Helper()
	s, err := ratelimit.NewPolicySet(ps...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stateKey is the documented name of the state of policy name of set for
// the client key key.
func stateKey(prefix, key string, set ratelimit.PolicySet, name string) string {
	sum := sha256.Sum256([]byte(key))
	id := sha256.Sum256([]byte(set.ID()))
	b64 := base64.RawURLEncoding
	return prefix + "{" + b64.EncodeToString(sum[:16]) + "}:" + b64.EncodeToString(id[:8]) + ":" + name
}

// takeOK is st.Take, failing t on an error.
func takeOK(t testing.TB, st ratelimit.Store, key string, set ratelimit.PolicySet, cost int) ratelimit.Result {
	t.Helper()
	res, err := st.Take(context.Background(), key, set, cost)
	if err != nil {
		t.Fatalf("Take(%q, %s, %d): %v", key, set.ID(), cost, err)
	}
	return res
}

// sameResult reports whether got, of this store, is the decision want of
// the memory store. The memory store counts in nanoseconds, this store in
// microseconds: a wait the memory store computes to a fraction of a
// microsecond (the window counter's) is rounded up here.
func sameResult(got, want ratelimit.Result) bool {
	if !got.At.Equal(want.At) {
		return false
	}
	got.At, want.At = time.Time{}, time.Time{}
	up := func(d time.Duration) time.Duration { return (d + time.Microsecond - 1).Truncate(time.Microsecond) }
	want.RetryAfter, want.Reset = up(want.RetryAfter), up(want.Reset)
	return got == want
}

// TestAgainstMemoryStore runs random traffic, with refunds and peeks,
// through this store and the memory store on one clock, and wants the
// same Result from both every time, every field: the scripts port the
// memory store's arithmetic, here also where a limit times a window is
// beyond the 2^53 that Lua's numbers hold exactly, and answers from the
// refusal cache must be what a fresh decision would say.
func TestAgainstMemoryStore(t *testing.T) {
	c := sharedClient(t)
	day := 24 * time.Hour
	tests := []struct {
		name    string
		ps      []ratelimit.Policy
		maxCost int
		steps   int
	}{
		{"log", []ratelimit.Policy{{Name: "p", Limit: 7, Window: 7 * time.Second}}, 3, 300},
		{"gcra", []ratelimit.Policy{{Name: "p", Limit: 100_000, Window: day, Algorithm: gcra}}, 30_000, 300},
		{"counter", []ratelimit.Policy{{Name: "p", Limit: 50, Window: time.Minute, Algorithm: counter}}, 10, 300},
		// 2^53 µs is about 285 years: a million times two days is 600
		// times that.
		{"counter beyond 2^53", []ratelimit.Policy{{Name: "p", Limit: 1_000_000, Window: 2 * day, Algorithm: counter}}, 300_000, 300},
		{"mixed", []ratelimit.Policy{
			{Name: "second", Limit: 10, Window: time.Second},
			{Name: "daily", Limit: 100_000, Window: day, Algorithm: gcra},
			{Name: "hourly", Limit: 40, Window: time.Hour, Algorithm: counter},
		}, 4, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := storetest.Clock{}
			clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			rs, _ := clockedStore(t, c, &clk)
			ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ms.Close() })
			set := policySet(t, tt.ps...)
			longest := time.Duration(0)
			for _, p := range tt.ps {
				longest = max(longest, p.Window)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var allowed []ratelimit.Result
			ctx := context.Background()
			for step := range tt.steps {
				if rng.IntN(3) != 0 {
					clk.Advance(time.Duration(rng.Int64N(int64(longest/20/time.Microsecond))) * time.Microsecond)
				}
				where := fmt.Sprintf("step %d (+%v)", step, clk.Now().Sub(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
				switch rng.IntN(10) {
				case 0:
					got, err := rs.Peek(ctx, "k", set)
					if err != nil {
						t.Fatal(err)
					}
					want, _ := ms.Peek(ctx, "k", set)
					if !sameResult(got, want) {
						t.Fatalf("%s: Peek %+v, the memory store's %+v", where, got, want)
					}
				case 1:
					if len(allowed) == 0 {
						continue
					}
					r := allowed[rng.IntN(len(allowed))]
					cost := 1 + rng.IntN(2)
					if err := rs.Refund(ctx, "k", set, cost, r.At); err != nil {
						t.Fatal(err)
					}
					ms.Refund(ctx, "k", set, cost, r.At)
				default:
					cost := 1
					if rng.IntN(3) == 0 {
						cost = 1 + rng.IntN(tt.maxCost)
					}
					got := takeOK(t, rs, "k", set, cost)
					want := takeOK(t, ms, "k", set, cost)
					if !sameResult(got, want) {
						t.Fatalf("%s: Take of cost %d: %+v, the memory store's %+v", where, cost, got, want)
					}
					if got.Allowed {
						allowed = append(allowed, got)
					}
				}
			}
			if len(allowed) == 0 || len(allowed) == tt.steps {
				t.Errorf("%d of %d takes allowed: the traffic did not reach the limit, or stayed at it", len(allowed), tt.steps)
			}
		})
	}
}

// TestLogContents checks what a log holds after each decision, on an
// injected clock: instants in order, the cost's worth of them, evicted
// instants trimmed by the next admission and not by a refusal (which
// writes nothing), and a log drained whole replaced.
func TestLogContents(t *testing.T) {
	c := sharedClient(t)
	const s = int64(time.Second / time.Microsecond)
	clk := storetest.Clock{}
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk.Set(T)
	st, p := clockedStore(t, c, &clk, redisstore.WithRefusalCache(0))
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Minute})
	k := stateKey(p, "client", set, "p")
	t0 := T.UnixMicro()
	for i, step := range []struct {
		at      int64 // seconds after T
		cost    int
		allowed bool
		log     []int64 // seconds after T
	}{
		{0, 1, true, []int64{0}},
		{20, 2, true, []int64{0, 20, 20}},
		{30, 1, false, []int64{0, 20, 20}},
		{61, 2, false, []int64{0, 20, 20}}, // 0 has left, but a refusal writes nothing
		{62, 1, true, []int64{20, 20, 62}},
		{81, 1, true, []int64{62, 81}},
		{200, 3, true, []int64{200, 200, 200}},
	} {
		clk.Set(T.Add(time.Duration(step.at) * time.Second))
		res := takeOK(t, st, "client", set, step.cost)
		got, err := c.LRange(context.Background(), k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, x := range step.log {
			want = append(want, strconv.FormatInt(t0+x*s, 10))
		}
		if res.Allowed != step.allowed || !slices.Equal(got, want) {
			t.Errorf("take %d at +%ds, cost %d: allowed %v, log %v; want %v, %v", i, step.at, step.cost, res.Allowed, got, step.allowed, want)
		}
		if ttl := c.PTTL(context.Background(), k).Val(); ttl <= 0 {
			t.Errorf("take %d: PTTL %v, want a TTL", i, ttl)
		}
	}
}

// maxTTL is the longest TTL the store gives the state of p, written at
// the server's own time: a log until its newest instant + window, in
// steps of a quarter window; a GCRA key until its arrival time, at most a
// bucket (limit intervals) ahead; a counter until two windows after its
// window starts. Each is rounded up to the millisecond.
func maxTTL(p ratelimit.Policy) time.Duration {
	var d time.Duration
	switch p.Algorithm {
	case gcra:
		interval := (p.Window + time.Duration(p.Limit)*time.Microsecond - time.Microsecond) / time.Duration(p.Limit)
		d = time.Duration(p.Limit) * interval.Truncate(time.Microsecond)
	case counter:
		d = 2 * p.Window
	default:
		d = p.Window + max(p.Window/4, time.Microsecond)
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// checkTTLs checks that every key under prefix has a TTL, at most maxTTL
// of the policy policyOf says the key holds.
func checkTTLs(t *testing.T, c redis.UniversalClient, prefix string, policyOf func(key string) ratelimit.Policy) {
	t.Helper()
	keys := scanKeys(t, c, prefix)
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range keys {
		ttl, err := c.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl == -2*time.Nanosecond {
			continue // expired between SCAN and PTTL
		}
		// PTTL is -1 for a key without a TTL, 0 for one expiring within
		// the millisecond.
		if p := policyOf(k); ttl < 0 || ttl > maxTTL(p) {
			t.Errorf("PTTL %s = %v, want in [0, %v]", k, ttl, maxTTL(p))
		}
	}
	t.Logf("%d keys, all with a TTL", len(keys))
}

// TestKeyLayout checks the documented key names, one hash tag, no trace
// of the client key, and the TTL of each algorithm's state.
func TestKeyLayout(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t,
		ratelimit.Policy{Name: "minute", Limit: 10, Window: time.Minute},
		ratelimit.Policy{Name: "burst", Limit: 5, Window: 1500 * time.Millisecond, Algorithm: gcra},
		ratelimit.Policy{Name: "hour", Limit: 100, Window: time.Hour, Algorithm: counter},
	)
	const secret = "Bearer s3cr3t {not-a-tag}\x00\xff"
	takeOK(t, st, secret, set, 1)
	var want []string
	for i := range set.Len() {
		want = append(want, stateKey(p, secret, set, set.At(i).Name))
	}
	got := scanKeys(t, c, p)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	for _, k := range got {
		if strings.Contains(k, "s3cr3t") {
			t.Errorf("key %q contains the client key", k)
		}
		if !strings.HasPrefix(k, p+"{") || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q: want %q, one hash tag", k, p+"{...}")
		}
	}
	checkTTLs(t, c, p, func(k string) ratelimit.Policy {
		for i := range set.Len() {
			if strings.HasSuffix(k, ":"+set.At(i).Name) {
				return set.At(i)
			}
		}
		t.Fatalf("key %q of no policy", k)
		return ratelimit.Policy{}
	})
	// The README's example.
	takeOK(t, st, "ip:203.0.113.7", policySet(t, ratelimit.Policy{Name: "default", Limit: 300, Window: time.Minute}), 1)
	readme := p + "{aDaLg2r3uJwsbvmjragajQ}:yc1CcBd5uBs:default"
	if n := c.Exists(context.Background(), readme).Val(); n != 1 {
		t.Errorf("the README's example key %q not written", readme)
	}
}

// TestStateValues checks each algorithm's state after requests of
// several costs: a log holds an instant per request, a GCRA key its
// arrival time, a counter its window and counts.
func TestStateValues(t *testing.T) {
	c := sharedClient(t)
	clk := storetest.Clock{}
	T := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	clk.Set(T)
	st, p := clockedStore(t, c, &clk)
	set := policySet(t,
		ratelimit.Policy{Name: "log", Limit: 3000, Window: time.Minute},
		ratelimit.Policy{Name: "gcra", Limit: 6000, Window: time.Minute, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 3000, Window: time.Minute, Algorithm: counter},
	)
	for _, cost := range []int{1, 7, 1500} {
		takeOK(t, st, "bulk", set, cost)
	}
	ctx := context.Background()
	if n := c.LLen(ctx, stateKey(p, "bulk", set, "log")).Val(); n != 1508 {
		t.Errorf("log: LLEN %d, want 1508", n)
	}
	// 1,508 requests of 10ms each, from T.
	if got, want := c.Get(ctx, stateKey(p, "bulk", set, "gcra")).Val(), strconv.FormatInt(T.UnixMicro()+1508*10_000, 10); got != want {
		t.Errorf("gcra: %q, want %q", got, want)
	}
	if got, want := c.Get(ctx, stateKey(p, "bulk", set, "counter")).Val(), strconv.FormatInt(T.Unix()/60, 10)+":1508:0"; got != want {
		t.Errorf("counter: %q, want %q", got, want)
	}
}

// TestSameTick makes 1,000 concurrent requests decide at one and the same
// microsecond: each must be counted, each seeing a different count.
func TestSameTick(t *testing.T) {
	c := sharedClient(t)
	clk := storetest.Clock{}
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk.Set(T)
	// A generous timeout: this is about counting, not latency, and 1,000
	// goroutines share two cores under -race.
	st, p := clockedStore(t, c, &clk, redisstore.WithTimeout(10*time.Second))
	const n = 1000
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 1_000_000, Window: time.Minute})
	remaining := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := st.Take(context.Background(), "tick", set, 1)
			if err != nil || !res.Allowed {
				t.Errorf("request %d: %+v, %v; want allowed", i, res, err)
				return
			}
			remaining[i] = res.Remaining
		})
	}
	wg.Wait()
	got, err := c.LRange(context.Background(), stateKey(p, "tick", set, "p"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("log holds %d instants, want %d", len(got), n)
	}
	for i, g := range got {
		if g != strconv.FormatInt(T.UnixMicro(), 10) {
			t.Fatalf("instant %d is %s, want %d: not one tick", i, g, T.UnixMicro())
		}
	}
	slices.Sort(remaining)
	for i, r := range remaining {
		if want := 1_000_000 - n + i; r != want {
			t.Fatalf("the %d-th least remaining reported is %d, want %d: two decisions saw one count", i, r, want)
		}
	}
}

// serverTime reads the server's clock.
func serverTime(t testing.TB, c redis.UniversalClient) time.Time {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestServerTime: the store reads no local clock, so two stores in
// processes whose clocks disagree behave as one. Two stores on separate
// clients share a key: they admit exactly the limit between them, and the
// instants logged (and the At reported) lie within the server's own clock
// readings around the run.
func TestServerTime(t *testing.T) {
	c := sharedClient(t)
	a, p := newStore(t, c)
	b, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(p), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 100, Window: time.Minute})
	before := serverTime(t, c)
	allowed := hammer(t, []ratelimit.Store{a, b}, "shared", set, 8, 40)
	after := serverTime(t, c)
	if len(allowed) != 100 {
		t.Errorf("allowed %d, want 100", len(allowed))
	}
	got, _ := c.LRange(context.Background(), stateKey(p, "shared", set, "p"), 0, -1).Result()
	if len(got) != 100 {
		t.Fatalf("log holds %d instants, want 100", len(got))
	}
	for i, g := range got {
		at, _ := strconv.ParseInt(g, 10, 64)
		if at < before.UnixMicro() || at > after.UnixMicro() {
			t.Fatalf("instant %d outside the server's clock [%d, %d]", at, before.UnixMicro(), after.UnixMicro())
		}
		if i > 0 && g < got[i-1] {
			t.Fatalf("instant %d (%s) before its predecessor %s", i, g, got[i-1])
		}
	}
	for _, r := range allowed {
		if r.At.Before(before) || r.At.After(after) {
			t.Fatalf("At %v outside the server's clock [%v, %v]", r.At, before, after)
		}
	}
}

// hammer makes each store take from key on g goroutines, n times each, and
// returns the Results that were allowed.
func hammer(t testing.TB, stores []ratelimit.Store, key string, set ratelimit.PolicySet, g, n int) []ratelimit.Result {
	t.Helper()
	var mu sync.Mutex
	var allowed []ratelimit.Result
	var wg sync.WaitGroup
	for _, st := range stores {
		for range g {
			wg.Go(func() {
				var mine []ratelimit.Result
				for range n {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					res, err := st.Take(ctx, key, set, 1)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						mine = append(mine, res)
					}
				}
				mu.Lock()
				allowed = append(allowed, mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return allowed
}
