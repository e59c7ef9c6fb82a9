package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// TestOutOfMemory fills a server of its own past maxmemory under
// noeviction, as the README says to run Redis: the server then refuses to
// run any function that may write, so every Take fails, whether it would
// admit or refuse, and is handled by the failure policy; a refusal the
// store remembered from before is still answered from its cache, and Peek,
// which is read-only, still answers from Redis.
func TestOutOfMemory(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "noeviction")
	c := redis.NewClient(clientOptions(srv.addr))
	t.Cleanup(func() { c.Close() })
	st, _ := newStore(t, c)
	ctx := context.Background()
	set := policySet(t, ratelimit.Policy{Name: "min", Limit: 2, Window: time.Hour})
	for range 3 { // the third is refused, and remembered
		if _, err := st.Take(ctx, "full", set, 1); err != nil {
			t.Fatal(err)
		}
	}

	pipe := c.Pipeline()
	for i := range 20_000 {
		pipe.Set(ctx, "filler:"+strconv.Itoa(i), strings.Repeat("v", 100), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}

	_, err := st.Take(ctx, "fresh", set, 1)
	if !errors.Is(err, redisstore.ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("Take of a fresh key at maxmemory: %v, want ErrUnavailable for OOM", err)
	}
	res, err := st.Take(ctx, "full", set, 1)
	if err != nil || res.Allowed {
		t.Errorf("Take of a remembered refusal at maxmemory: %+v, %v; want a refusal from the cache", res, err)
	}
	if res, err := st.Peek(ctx, "fresh", set); err != nil || !res.Allowed || res.Remaining != 2 {
		t.Errorf("Peek at maxmemory: %+v, %v; want a full quota", res, err)
	}
}
