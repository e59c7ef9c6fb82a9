package redisstore_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// TestLibraryLoadedOnce flushes the functions of a server of its own and
// then sends 64 concurrent Takes through one store: the first call that
// finds the library missing loads it and the others wait for that load,
// so the server sees one FUNCTION LOAD, not one per caller (each blocks
// it for about a millisecond).
func TestLibraryLoadedOnce(t *testing.T) {
	const callers = 64
	srv := startServer(t)
	opts := clientOptions(srv.addr)
	opts.PoolSize = callers
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	st, _ := newStore(t, c)
	ctx := context.Background()
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 1000, Window: time.Second})
	var wg sync.WaitGroup
	for range callers { // a connection per caller
		wg.Go(func() { c.Ping(ctx) })
	}
	wg.Wait()
	if _, err := st.Take(ctx, "warm", set, 1); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if err := c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		for i := range callers {
			wg.Go(func() {
				<-gate
				if _, err := st.Take(ctx, "k"+strconv.Itoa(i), set, 1); err != nil {
					t.Error(err)
				}
			})
		}
		close(gate)
		wg.Wait()
		info := c.Info(ctx, "commandstats").Val()
		m := regexp.MustCompile(`cmdstat_function\|load:calls=(\d+)`).FindStringSubmatch(info)
		if m == nil || m[1] != "1" {
			t.Errorf("round %d: FUNCTION LOAD calls %v for %d callers after a flush, want 1", round, m, callers)
		}
	}
}
