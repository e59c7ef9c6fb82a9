package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// childPrefix, set in the environment, makes TestCrossProcess act as one
// of the processes its parent starts, under that key prefix.
const childPrefix = "REDISSTORE_TEST_CHILD_PREFIX"

const (
	crossProcs    = 4
	crossRoutines = 16
	crossCalls    = 25 // per goroutine: 1,600 attempts in all
	crossLimit    = 300
)

var crossPolicy = []ratelimit.Policy{{Name: "default", Limit: crossLimit, Window: time.Hour}}

// TestCrossProcess runs 4 processes (this test binary, re-executed) of 16
// goroutines each against one key with a limit of 300: exactly 300 are
// allowed in all, and the log holds exactly 300 instants.
func TestCrossProcess(t *testing.T) {
	if p := os.Getenv(childPrefix); p != "" {
		crossChild(t, p)
		return
	}
	c := sharedClient(t)
	p := testPrefix(t, c)
	ctx := context.Background()
	cmds := make([]*exec.Cmd, crossProcs)
	outs := make([]*bytes.Buffer, crossProcs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestCrossProcess$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childPrefix+"="+p, "REDIS_ADDR="+redisAddr())
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Release the children together, once all are ready, so that they
	// overlap.
	waitFor(t, 30*time.Second, "children ready", func() bool {
		n, _ := c.Get(ctx, p+"ready").Int()
		return n == crossProcs
	})
	for range crossProcs {
		c.RPush(ctx, p+"go", 1)
	}
	total := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		n := -1
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "allowed "); ok {
				n, _ = strconv.Atoi(s)
			}
		}
		if n < 0 {
			t.Fatalf("child %d reported no count:\n%s", i, outs[i])
		}
		t.Logf("process %d: %d allowed", i, n)
		total += n
	}
	if total != crossLimit {
		t.Errorf("allowed %d in all, want %d", total, crossLimit)
	}
	if n := c.LLen(ctx, logKey(p, "hot", "default", "3600s")).Val(); n != crossLimit {
		t.Errorf("LLEN = %d, want %d", n, crossLimit)
	}
}

// crossChild is one process of TestCrossProcess.
func crossChild(t *testing.T, prefix string) {
	c := sharedClient(t)
	ctx := context.Background()
	// Generous: this is about counting, and 64 goroutines in 4 race-
	// enabled processes share two cores.
	st, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.Incr(ctx, prefix+"ready")
	if err := c.BLPop(ctx, 30*time.Second, prefix+"go").Err(); err != nil {
		t.Fatalf("waiting for the go: %v", err)
	}
	n := hammer(t, []ratelimit.Store{st}, "hot", crossPolicy, crossRoutines, crossCalls)
	fmt.Printf("allowed %d\n", n)
}

// TestScriptFlush flushes the script cache again and again while requests
// run: the store re-sends the script and no caller sees an error.
func TestScriptFlush(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c, redisstore.WithTimeout(5*time.Second))
	ctx := context.Background()
	pol := []ratelimit.Policy{{Name: "default", Limit: 200, Window: time.Minute}}
	done := make(chan struct{})
	var flushes int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Error(err)
				return
			}
			flushes++
			time.Sleep(time.Millisecond) // pacing the flushes, not waiting for the clock
		}
	})
	allowed := hammer(t, []ratelimit.Store{st}, "k", pol, 8, 50)
	close(done)
	wg.Wait()
	t.Logf("%d flushes", flushes)
	if allowed != 200 {
		t.Errorf("allowed %d, want 200", allowed)
	}
	if n := c.LLen(ctx, logKey(p, "k", "default", "60s")).Val(); n != 200 {
		t.Errorf("LLEN = %d, want 200", n)
	}
	if st.Failures() != 0 {
		t.Errorf("Failures() = %d, want 0", st.Failures())
	}
}

// TestEveryKeyHasTTL runs a mixed load (several keys, two policies, one
// with a short window that drains, weighted costs) and then checks every
// key the store wrote: each has a TTL no longer than its window.
func TestEveryKeyHasTTL(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c, redisstore.WithTimeout(5*time.Second))
	pol := []ratelimit.Policy{
		{Name: "default", Limit: 40, Window: time.Minute},
		{Name: "burst", Limit: 5, Window: 20 * time.Millisecond},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 150 {
				key := "k" + strconv.Itoa(r.IntN(50))
				if _, err := st.Take(context.Background(), key, pol, 1+r.IntN(3)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkTTLs(t, c, p)
}

// checkTTLs checks that every key under prefix has a TTL no longer than the
// window its name ends with.
func checkTTLs(t *testing.T, c redis.UniversalClient, prefix string) {
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
		w, err := time.ParseDuration(k[strings.LastIndexByte(k, ':')+1:])
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		// PTTL is -1 for a key without a TTL, 0 for one expiring within
		// the millisecond.
		if ttl < 0 || ttl > w {
			t.Errorf("PTTL %s = %v, want in [0, %v]", k, ttl, w)
		}
	}
	t.Logf("%d keys, all with a TTL", len(keys))
}
