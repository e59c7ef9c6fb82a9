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

// A limiter whose counts live in Redis, three requests a minute per key,
// falling back to a per-process memory store when Redis is unreachable.
// The output is the same either way: with Redis at REDIS_ADDR (default
// 127.0.0.1:6379) the fleet shares the count; without it, this process
// counts alone.
func Example() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()

	st, err := redisstore.New(rdb,
		redisstore.WithFailurePolicy(redisstore.FailLocal),
		// A prefix of this run's own, so that running the example again
		// starts afresh; its keys expire with the window.
		redisstore.WithPrefix("example:"+strconv.FormatInt(time.Now().UnixNano(), 36)+":"),
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
		res, err := l.Allow(context.Background(), "203.0.113.7")
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d\n", res.Allowed, res.Remaining)
	}
	// Output:
	// allowed=true remaining=2
	// allowed=true remaining=1
	// allowed=true remaining=0
	// allowed=false remaining=0
}
