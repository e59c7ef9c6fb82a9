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
// key the store wrote: each has a TTL, at most maxTTL of its window.
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

// maxTTL is the longest TTL the store gives a log of window w: the expiry
// is set in steps of a quantum, a quarter of the window, to the end of the
// newest instant's quantum plus the window, rounded up to the millisecond;
// PTTL, read later, may be a millisecond past that. See takeScript.
func maxTTL(w time.Duration) time.Duration {
	quantum := max(w/4/time.Microsecond*time.Microsecond, time.Microsecond)
	return (w + quantum + time.Millisecond - 1).Truncate(time.Millisecond) + time.Millisecond
}

// checkTTLs checks that every key under prefix has a TTL, at most maxTTL of
// the window its name ends with.
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
		if ttl < 0 || ttl > maxTTL(w) {
			t.Errorf("PTTL %s = %v, want in [0, %v]", k, ttl, maxTTL(w))
		}
	}
	t.Logf("%d keys, all with a TTL", len(keys))
}

// TestExpiryAcrossQuanta takes from a key on real server time, with gaps
// below, across and beyond the expiry's quantum (a quarter window) and
// beyond the window, for two policies of 200 ms and 1 s, so that some
// writes set the expiry and others rely on the one already set. After each
// write, read atomically with the server's clock, each log holds exactly
// the instants of its window (none lost to an early expiry), has a TTL,
// and its expiry covers its newest instant's window and lasts at most
// maxTTL. Then, until the newest instant leaves the shorter window, the
// key is still there. It is the one test where time passes for real: the
// expiry is Redis's own clock at work.
func TestExpiryAcrossQuanta(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c, redisstore.WithTimeout(5*time.Second))
	ctx := context.Background()
	pol := []ratelimit.Policy{
		{Name: "short", Limit: 10_000, Window: 200 * time.Millisecond},
		{Name: "long", Limit: 10_000, Window: time.Second},
	}
	ks := []string{logKey(p, "client", "short", "200ms"), logKey(p, "client", "long", "1s")}
	var stamps []int64 // every instant written, oldest first
	// Gaps in milliseconds: within a 50 ms quantum of the short window,
	// across one or several, and one past its whole window.
	gaps := []int{0, 5, 10, 40, 15, 60, 5, 110, 30, 250, 20, 70, 10, 45}
	for i, gap := range gaps {
		time.Sleep(time.Duration(gap) * time.Millisecond) // real time, see above
		before := serverTime(t, c)
		res, err := st.Take(ctx, "client", pol, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("take %d: %+v, %v", i, res, err)
		}
		var now *redis.TimeCmd
		pttl := make([]*redis.DurationCmd, len(ks))
		logs := make([]*redis.StringSliceCmd, len(ks))
		if _, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			now = pipe.Time(ctx)
			for j, k := range ks {
				pttl[j] = pipe.PTTL(ctx, k)
				logs[j] = pipe.LRange(ctx, k, 0, -1)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// A log may rightly be gone if this goroutine stalled for a whole
		// window after the write (its instant is at or after before).
		stalled := func(w time.Duration) bool { return now.Val().UnixMicro() >= before+w.Microseconds() }
		long := logs[1].Val()
		if len(long) == 0 {
			if stalled(pol[1].Window) {
				t.Skipf("take %d: stalled for %v; the model of the logs is lost", i, pol[1].Window)
			}
			t.Fatalf("take %d: long log empty", i)
		}
		newest, err := strconv.ParseInt(long[len(long)-1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if newest < before || newest > now.Val().UnixMicro() {
			t.Fatalf("take %d: instant %d outside the server's clock [%d, %d]", i, newest, before, now.Val().UnixMicro())
		}
		stamps = append(stamps, newest)
		nowMs := now.Val().UnixMilli()
		for j := range ks {
			w := pol[j].Window
			if stalled(w) {
				t.Logf("take %d, %s: stalled for a window, not checked", i, pol[j].Name)
				continue
			}
			var want []string
			for _, s := range stamps {
				if s > newest-w.Microseconds() {
					want = append(want, strconv.FormatInt(s, 10))
				}
			}
			if got := logs[j].Val(); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("take %d, %s: log %v, want %v", i, pol[j].Name, got, want)
			}
			ttl := pttl[j].Val()
			if ttl <= 0 || ttl > maxTTL(w) {
				t.Errorf("take %d, %s: PTTL %v, want in (0, %v]", i, pol[j].Name, ttl, maxTTL(w))
			}
			// The key lives through the millisecond its expiry names;
			// PTTL counts from a clock read at or after TIME.
			if expiry := nowMs + ttl.Milliseconds(); (expiry+1)*1000 < newest+w.Microseconds() {
				t.Errorf("take %d, %s: expires at %d ms, before the newest instant %d µs leaves the window", i, pol[j].Name, expiry, newest)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	// Probe until the newest instant leaves the short window: the key
	// must be there whenever the server's clock says it still counts.
	newest := stamps[len(stamps)-1]
	w := pol[0].Window.Microseconds()
	probes := 0
	for {
		var now *redis.TimeCmd
		var n *redis.IntCmd
		if _, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			now = pipe.Time(ctx)
			n = pipe.LLen(ctx, ks[0])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if now.Val().UnixMicro() >= newest+w {
			break
		}
		probes++
		if n.Val() == 0 {
			t.Fatalf("short log gone at %d µs, its newest instant %d µs still in the window", now.Val().UnixMicro(), newest)
		}
		time.Sleep(20 * time.Millisecond) // real time, see above
	}
	if probes == 0 {
		t.Log("no probe landed inside the window (a slow machine); the per-write checks stand")
	}
}
