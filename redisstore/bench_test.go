package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// The benchmarks run against the Redis at REDIS_ADDR, side by side in one
// run: a bare PING (the floor: one round trip), the store, and
// github.com/go-redis/redis_rate (GCRA, one script, not exact), each at 1,
// 8 and 32 concurrent callers, on one hot key and on 10,000 keys. Besides
// ns/op (wall time over all callers: 1e9 / decisions a second) they report
// each call's latency, p50 and p99, and the share of calls allowed.
//
//	go test -run '^$' -bench . -count 6 | tee bench.txt
//	benchstat -col /impl bench.txt

// benchCallers are the concurrent callers each benchmark runs with.
var benchCallers = []int{1, 8, 32}

// benchPolicy is the example: 300 a minute. On the hot key nearly
// every call is refused; over 10,000 keys nearly every call is allowed.
var benchPolicy = []ratelimit.Policy{{Name: "default", Limit: 300, Window: time.Minute}}

var benchSet, _ = ratelimit.NewPolicySet(benchPolicy...)

const benchKeys = 10_000

// runCallers runs op b.N times on callers goroutines (one goroutine runs
// it serially), passing each call its sequence number, and reports
// latency percentiles and the share of calls op reports as allowed.
func runCallers(b *testing.B, callers int, op func(ctx context.Context, i int) (bool, error)) {
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
	if callers == 1 {
		n := 0
		body(func() bool { n++; return n <= b.N })
	} else {
		// RunParallel starts parallelism x GOMAXPROCS goroutines.
		b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) { body(pb.Next) })
	}
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

// benchKey returns the client key of call i: the one hot key, or one of
// benchKeys in turn.
func benchKey(hot bool, i int) string {
	if hot {
		return "hot"
	}
	return "key-" + strconv.Itoa(i%benchKeys)
}

// BenchmarkDecision runs, on the same client and server, the store
// (impl=store), github.com/go-redis/redis_rate/v10 with the same quota
// (impl=redis_rate) and the floor, a bare PING (impl=ping), so that
//
//	benchstat -col /impl bench.txt
//
// sets them side by side with their ratios.
func BenchmarkDecision(b *testing.B) {
	c := sharedClient(b)
	rr := redis_rate.NewLimiter(c)
	quota := redis_rate.PerMinute(benchPolicy[0].Limit)
	for _, hot := range []bool{true, false} {
		for _, n := range benchCallers {
			for _, impl := range []string{"ping", "store", "redis_rate"} {
				name := fmt.Sprintf("keys=%s/callers=%d/impl=%s", map[bool]string{true: "hot", false: "10000"}[hot], n, impl)
				b.Run(name, func(b *testing.B) {
					p := testPrefix(b, c)
					var op func(ctx context.Context, i int) (bool, error)
					switch impl {
					case "ping":
						op = func(ctx context.Context, _ int) (bool, error) { return true, c.Ping(ctx).Err() }
					case "store":
						st, err := redisstore.New(c, redisstore.WithPrefix(p), redisstore.WithTimeout(10*time.Second))
						if err != nil {
							b.Fatal(err)
						}
						op = func(ctx context.Context, i int) (bool, error) {
							res, err := st.Take(ctx, benchKey(hot, i), benchSet, 1)
							return res.Allowed, err
						}
					case "redis_rate":
						b.Cleanup(func() { deleteKeys(b, c, "rate:"+p) }) // redis_rate's own prefix
						op = func(ctx context.Context, i int) (bool, error) {
							res, err := rr.Allow(ctx, p+benchKey(hot, i), quota)
							if err != nil {
								return false, err
							}
							return res.Allowed > 0, nil
						}
					}
					runCallers(b, n, op)
				})
			}
		}
	}
}

// BenchmarkMemoryUsage reports MEMORY USAGE of one client's log under the
// default prefix, at 1 and 300 requests, for the store and for a sorted
// set; ns/op means nothing here.
func BenchmarkMemoryUsage(b *testing.B) {
	c := sharedClient(b)
	list, zset := keyBytes(b, c, redisstore.DefaultPrefix)
	for b.Loop() {
	}
	b.ReportMetric(float64(list[0]), "list-B@1")
	b.ReportMetric(float64(list[1]), "list-B@300")
	b.ReportMetric(float64(zset[0]), "zset-B@1")
	b.ReportMetric(float64(zset[1]), "zset-B@300")
}
