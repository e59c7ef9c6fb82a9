package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// exampleClient returns a client of the Redis at REDIS_ADDR (default
// 127.0.0.1:6379), with the settings the package documentation
// recommends: a call to a Redis that is down fails at once, and no call
// outlives the store's timeout.
func exampleClient() *redis.Client {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		Dialer:                redisstore.Dial,
		DialTimeout:           redisstore.DefaultTimeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		PoolTimeout:           redisstore.DefaultTimeout,
	})
}

// examplePrefix is a key prefix of this run's own, so that running an
// example again starts afresh; its keys expire with their windows.
func examplePrefix() string {
	return "example:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}

// A limiter whose counts live in Redis, three requests a minute per key,
// falling back to a per-process memory store when Redis is unreachable.
// The output is the same either way: with Redis the fleet shares the
// count; without it, this process counts alone.
func Example() {
	rdb := exampleClient()
	defer rdb.Close()

	st, err := redisstore.New(rdb,
		redisstore.WithFailurePolicy(redisstore.FailLocal),
		redisstore.WithPrefix(examplePrefix()),
		// More than the default 50 ms, for a machine too busy to load
		// the library and answer within it: a call that timed out would
		// be counted both here and, maybe, in Redis.
		redisstore.WithTimeout(time.Second),
	)
	if err != nil {
		panic(err)
	}
	defer st.Close()

	l, err := ratelimit.New(3, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	for range 4 {
		d := l.Allow(context.Background(), "ip:203.0.113.7", 1)
		if d.Err != nil {
			panic(d.Err)
		}
		res := d.Result
		fmt.Printf("allowed=%v remaining=%d\n", res.Allowed, res.Remaining)
	}
	// Output:
	// allowed=true remaining=2
	// allowed=true remaining=1
	// allowed=true remaining=0
	// allowed=false remaining=0
}

// A plan of a per-second burst limit, kept exactly by a sliding log,
// beside a daily quota kept by GCRA in a few bytes per client, checked
// together in one round trip: the daily quota costs a client about 150
// bytes of Redis, where a log of its up to 100,000 instants would cost a
// megabyte. The output is the same with or without Redis (FailLocal).
func Example_plan() {
	rdb := exampleClient()
	defer rdb.Close()
	st, err := redisstore.New(rdb, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithPrefix(examplePrefix()),
		redisstore.WithTimeout(time.Second)) // as in Example
	if err != nil {
		panic(err)
	}
	defer st.Close()

	l, err := ratelimit.New(2, time.Second, ratelimit.KeyByIP(), ratelimit.WithStore(st),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "daily", Limit: 100_000, Window: 24 * time.Hour, Algorithm: ratelimit.GCRA}))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	for range 3 {
		d := l.Allow(context.Background(), "ip:203.0.113.7", 1)
		if d.Err != nil {
			panic(d.Err)
		}
		res := d.Result
		fmt.Printf("allowed=%v policy=%s remaining=%d\n", res.Allowed, res.Policy, res.Remaining)
	}
	// Output:
	// allowed=true policy=default remaining=1
	// allowed=true policy=default remaining=0
	// allowed=false policy=default remaining=0
}

// A client flooding past its limit is answered from the refusal cache,
// without a round trip to Redis, until its request could fit; Stats
// counts those answers (and so does the Limiter's Stats). This example
// needs a Redis at REDIS_ADDR, so it is compiled but not run: without
// one, FailClosed would answer with errors.
func ExampleStore_Stats() {
	rdb := exampleClient()
	defer rdb.Close()
	st, err := redisstore.New(rdb, redisstore.WithPrefix(examplePrefix()))
	if err != nil {
		panic(err)
	}
	defer st.Close()

	set, err := ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: 3, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	for range 10 {
		if _, err := st.Take(context.Background(), "ip:203.0.113.7", set, 1); err != nil {
			panic(err)
		}
	}
	// 3 allowed; the first refusal asked Redis, the other 6 came from
	// the cache.
	fmt.Println("cached refusals:", st.Stats().CachedRefusals)
}
