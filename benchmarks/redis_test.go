package benchmarks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// BenchmarkRedisDecision runs against the Redis at REDIS_ADDR (default
// 127.0.0.1:6379), side by side in one run: a bare PING (impl=ping, the
// floor: one round trip), redisstore (impl=store, with its refusal cache as
// it runs by default, and impl=store-nocache, every decision a round
// trip) and
// github.com/go-redis/redis_rate/v10 (impl=redis_rate: GCRA in one script,
// not an exact log) with the same quota, 300 a minute, on the same client, each at 1, 8
// and 32 concurrent callers, on one hot key and on 10,000 keys. Besides
// ns/op (wall time over all callers: 1e9 / decisions a second) it reports
// each call's latency, p50 and p99, and the share of calls allowed.
//
//	go test -run '^$' -bench RedisDecision -count 6 | tee bench.txt
//	benchstat -col /impl bench.txt
//
// It lives here rather than in redisstore so that redis_rate, a peer
// compared with, never enters redisstore's go.mod. Without a Redis it
// skips, or fails under RATELIMIT_REQUIRE_REDIS=1.
func BenchmarkRedisDecision(b *testing.B) {
	c := redisClient(b)
	rr := redis_rate.NewLimiter(c)
	quota := redis_rate.PerMinute(redisLimit)
	for _, hot := range []bool{true, false} {
		keys := map[bool]string{true: "hot", false: strconv.Itoa(redisKeys)}[hot]
		for _, n := range redisCallers {
			for _, impl := range []string{"ping", "store", "store-nocache", "redis_rate"} {
				b.Run(fmt.Sprintf("keys=%s/callers=%d/impl=%s", keys, n, impl), func(b *testing.B) {
					p := redisPrefix(b, c)
					var op func(ctx context.Context, i int) (bool, error)
					switch impl {
					case "ping":
						op = func(ctx context.Context, _ int) (bool, error) { return true, c.Ping(ctx).Err() }
					case "store", "store-nocache":
						// Through a Limiter, as users call it: its own work
						// is a fraction of a microsecond against a round
						// trip.
						opts := []redisstore.Option{redisstore.WithPrefix(p), redisstore.WithTimeout(10 * time.Second)}
						if impl == "store-nocache" {
							opts = append(opts, redisstore.WithRefusalCache(0))
						}
						st, err := redisstore.New(c, opts...)
						if err != nil {
							b.Fatal(err)
						}
						l, err := ratelimit.New(redisLimit, time.Minute, ratelimit.KeyByHeader("X-Api-Key"), ratelimit.WithStore(st))
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { l.Close() })
						op = func(ctx context.Context, i int) (bool, error) {
							d := l.Allow(ctx, redisKey(hot, i), 1)
							return d.Result.Allowed, d.Err
						}
					case "redis_rate":
						b.Cleanup(func() { redisDelete(b, c, "rate:"+p) }) // redis_rate's own prefix
						op = func(ctx context.Context, i int) (bool, error) {
							res, err := rr.Allow(ctx, p+redisKey(hot, i), quota)
							if err != nil {
								return false, err
							}
							return res.Allowed > 0, nil
						}
					}
					runRedisCallers(b, n, op)
				})
			}
		}
	}
}

// redisCallers are the concurrent callers each decision benchmark runs with.
var redisCallers = []int{1, 8, 32}

// redisLimit is the quota, per minute. On the hot key nearly every call
// is refused once the benchmark runs for a second; over redisKeys keys
// nearly every call is allowed.
const redisLimit = 300

const redisKeys = 10_000

// redisKey returns the client key of call i: the one hot key, or one of
// redisKeys in turn.
func redisKey(hot bool, i int) string {
	if hot {
		return "hot"
	}
	return "key-" + strconv.Itoa(i%redisKeys)
}

// runRedisCallers runs op b.N times on callers goroutines (one goroutine
// runs it serially), passing each call its sequence number, and reports
// latency percentiles and the share of calls op reports as allowed.
func runRedisCallers(b *testing.B, callers int, op func(ctx context.Context, i int) (bool, error)) {
	b.Helper()
	ctx := context.Background()
	var seq, allowed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	body := func(next func() bool) {
		mine := make([]time.Duration, 0, b.N/callers+64)
		var ok int64
		for next() {
			i := int(seq.Add(1))
			start := time.Now()
			a, err := op(ctx, i)
			mine = append(mine, time.Since(start))
			if err != nil {
				b.Error(err)
				return
			}
			if a {
				ok++
			}
		}
		allowed.Add(ok)
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	}
	b.ReportAllocs()
	b.ResetTimer()
	runCallers(callers, b.N, body)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
}

// runCallers runs body on exactly callers goroutines (the caller's own when
// callers is 1), which share n calls: next reports whether the goroutine
// that calls it has another call to make. Not b.RunParallel: it starts a
// multiple of GOMAXPROCS goroutines, 16 for 8 callers on 16 CPUs.
func runCallers(callers, n int, body func(next func() bool)) {
	var left atomic.Int64
	left.Store(int64(n))
	next := func() bool { return left.Add(-1) >= 0 }
	if callers <= 1 {
		body(next)
		return
	}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { body(next) })
	}
	wg.Wait()
}

// redisAddr is the address of the Redis the benchmarks use.
func redisAddr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisClient returns a client of the Redis at REDIS_ADDR, closed when b
// ends. Without one answering it skips b, or fails it when
// RATELIMIT_REQUIRE_REDIS=1 (as CI sets), so that CI cannot pass by
// skipping.
func redisClient(b *testing.B) *redis.Client {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		msg := fmt.Sprintf("no Redis at %s (set REDIS_ADDR): %v", redisAddr(), err)
		if os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1" {
			b.Fatal(msg + " (RATELIMIT_REQUIRE_REDIS=1)")
		}
		b.Skip(msg + "; set RATELIMIT_REQUIRE_REDIS=1 to fail instead of skipping")
	}
	return c
}

// redisPrefix returns a key prefix unique to this run of b, and deletes
// every key under it when b ends, so that runs share a server without
// touching each other's keys or leaving any behind.
func redisPrefix(b *testing.B, c *redis.Client) string {
	b.Helper()
	var r [6]byte
	rand.Read(r[:])
	p := "rlbench:" + hex.EncodeToString(r[:]) + ":"
	b.Cleanup(func() { redisDelete(b, c, p) })
	return p
}

// redisDelete deletes every key under prefix.
func redisDelete(b *testing.B, c *redis.Client, prefix string) {
	b.Helper()
	ctx := context.Background()
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		b.Errorf("SCAN %s*: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			b.Errorf("UNLINK: %v", err)
			return
		}
		keys = keys[n:]
	}
}

// A decision benchmark runs as many goroutines as its callers say,
// whatever GOMAXPROCS is (16 here, where RunParallel would start 16 for 8
// callers and 32 for 1), and they make n calls in all.
func TestRunCallers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	for _, callers := range append([]int{1, 3}, redisCallers...) {
		var bodies, calls atomic.Int64
		runCallers(callers, 1000, func(next func() bool) {
			bodies.Add(1)
			for next() {
				calls.Add(1)
			}
		})
		if got := bodies.Load(); got != int64(callers) {
			t.Errorf("callers=%d: %d goroutines ran, want %d", callers, got, callers)
		}
		if got := calls.Load(); got != 1000 {
			t.Errorf("callers=%d: %d calls in all, want 1000", callers, got)
		}
	}
}
