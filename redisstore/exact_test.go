package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// childPrefix and childMode, set in the environment, make a test act as
// one of the processes its parent starts, under that key prefix.
const (
	childPrefix = "REDISSTORE_TEST_CHILD_PREFIX"
	childMode   = "REDISSTORE_TEST_CHILD_MODE"
)

const crossProcs = 4

// runChildren runs crossProcs processes of this test binary that run
// test in mode under prefix, releases them together once all are ready,
// and returns the lines each printed.
func runChildren(t *testing.T, c *redis.Client, test, mode, prefix string) [][]string {
	t.Helper()
	ctx := context.Background()
	cmds := make([]*exec.Cmd, crossProcs)
	outs := make([]*bytes.Buffer, crossProcs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childPrefix+"="+prefix, childMode+"="+mode, "REDIS_ADDR="+redisAddr())
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Release the children together, once all are ready, so that they
	// overlap.
	waitFor(t, 30*time.Second, "children ready", func() bool {
		n, _ := c.Get(ctx, prefix+"ready").Int()
		return n == crossProcs
	})
	for range crossProcs {
		c.RPush(ctx, prefix+"go", 1)
	}
	lines := make([][]string, crossProcs)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			lines[i] = append(lines[i], sc.Text())
		}
	}
	return lines
}

// childReady tells the parent this child is ready and waits for the go.
func childReady(t *testing.T, c *redis.Client, prefix string) {
	ctx := context.Background()
	c.Incr(ctx, prefix+"ready")
	if err := c.BLPop(ctx, 30*time.Second, prefix+"go").Err(); err != nil {
		t.Fatalf("waiting for the go: %v", err)
	}
}

// childStore is the store of a child process: the refusal cache on, as
// by default, and a generous timeout: this is about counting, and the
// goroutines of 4 race-enabled processes share two cores.
func childStore(t *testing.T, c *redis.Client, prefix string) *redisstore.Store {
	st, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var crossSet, _ = ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: 300, Window: time.Hour})

// TestCrossProcess runs 4 processes (this test binary, re-executed) of 16
// goroutines each, 25 requests each, against one key with a limit of
// 300: exactly 300 are allowed in all, and the log holds exactly 300
// instants, refusal caches and all.
func TestCrossProcess(t *testing.T) {
	if p := os.Getenv(childPrefix); p != "" {
		c := sharedClient(t)
		st := childStore(t, c, p)
		childReady(t, c, p)
		fmt.Printf("allowed %d\n", len(hammer(t, []ratelimit.Store{st}, "hot", crossSet, 16, 25)))
		return
	}
	c := sharedClient(t)
	p := testPrefix(t, c)
	total := 0
	for i, lines := range runChildren(t, c, "TestCrossProcess", "exact", p) {
		n := -1
		for _, l := range lines {
			if s, ok := strings.CutPrefix(l, "allowed "); ok {
				n, _ = strconv.Atoi(s)
			}
		}
		if n < 0 {
			t.Fatalf("child %d reported no count:\n%s", i, strings.Join(lines, "\n"))
		}
		t.Logf("process %d: %d allowed", i, n)
		total += n
	}
	if total != 300 {
		t.Errorf("allowed %d in all, want 300", total)
	}
	if n := c.LLen(context.Background(), stateKey(p, "hot", crossSet, "default")).Val(); n != 300 {
		t.Errorf("LLEN = %d, want 300", n)
	}
}

// TestCrossProcessRefunds counts by outcome across processes: 4
// processes of 8 goroutines take requests on one key under a limit of
// 300 and refund every third they are allowed, as WithCountIf does for
// responses that should not count. No more than the limit is ever kept
// counted: the log holds exactly what was allowed and not refunded, and,
// once the parent fills the key up, exactly the limit.
func TestCrossProcessRefunds(t *testing.T) {
	if p := os.Getenv(childPrefix); p != "" {
		c := sharedClient(t)
		st := childStore(t, c, p)
		childReady(t, c, p)
		var mu sync.Mutex
		var allowed, refunded int
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 30 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					res, err := st.Take(ctx, "hot", crossSet, 1)
					if err == nil && res.Allowed && (g+i)%3 == 0 {
						err = st.Refund(ctx, "hot", crossSet, 1, res.At)
						if err == nil {
							mu.Lock()
							refunded++
							mu.Unlock()
						}
					}
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("allowed %d refunded %d\n", allowed, refunded)
		return
	}
	c := sharedClient(t)
	p := testPrefix(t, c)
	var allowed, refunded int
	for i, lines := range runChildren(t, c, "TestCrossProcessRefunds", "refunds", p) {
		var a, r int
		found := false
		for _, l := range lines {
			if _, err := fmt.Sscanf(l, "allowed %d refunded %d", &a, &r); err == nil {
				found = true
			}
		}
		if !found {
			t.Fatalf("child %d reported no counts:\n%s", i, strings.Join(lines, "\n"))
		}
		t.Logf("process %d: %d allowed, %d refunded", i, a, r)
		allowed, refunded = allowed+a, refunded+r
	}
	key := stateKey(p, "hot", crossSet, "default")
	if n := int(c.LLen(context.Background(), key).Val()); n != allowed-refunded || n > 300 {
		t.Errorf("%d allowed, %d refunded: the log holds %d, want %d and at most 300", allowed, refunded, n, allowed-refunded)
	}
	st := childStore(t, c, p)
	for i := 0; takeOK(t, st, "hot", crossSet, 1).Allowed; i++ {
		if i > 300 {
			t.Fatal("never refused")
		}
	}
	if n := c.LLen(context.Background(), key).Val(); n != 300 {
		t.Errorf("filled up: the log holds %d, want 300", n)
	}
}

// crossPlans are the plans: 10 a second, exactly, beside a daily
// quota kept in O(1), by GCRA or by the window counter.
var crossPlans = map[string]ratelimit.PolicySet{}

func init() {
	for name, a := range map[string]ratelimit.Algorithm{"gcra": ratelimit.GCRA, "counter": ratelimit.SlidingWindowCounter} {
		s, err := ratelimit.NewPolicySet(
			ratelimit.Policy{Name: "second", Limit: 10, Window: time.Second},
			ratelimit.Policy{Name: "daily", Limit: 100_000, Window: 24 * time.Hour, Algorithm: a},
		)
		if err != nil {
			panic(err)
		}
		crossPlans[name] = s
	}
}

// crossPlanRun is how long each child floods the plans.
const crossPlanRun = 2500 * time.Millisecond

// TestCrossProcessPlans runs 4 processes of 2 goroutines per plan, each
// flooding one key under {10 per second, sliding log} beside {100,000 a
// day, GCRA} (and the window counter in its place) for 2.5s of real time,
// refusal caches on. From the instants the processes were told (Result.At
// is the server's clock reading of the decision, an admission's instant
// in the log): no one-second window holds more than 10 admissions, and
// every refusal sampled had 10 admissions in the second before it, so
// the log policy is exact both ways; and the daily policy's state in
// Redis counts exactly the admissions the processes saw.
func TestCrossProcessPlans(t *testing.T) {
	if p := os.Getenv(childPrefix); p != "" {
		crossPlanChild(t, p)
		return
	}
	c := sharedClient(t)
	p := testPrefix(t, c)
	admitted := map[string][]int64{}
	refused := map[string][]int64{}
	for i, lines := range runChildren(t, c, "TestCrossProcessPlans", "plans", p) {
		n := 0
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 || (f[0] != "a" && f[0] != "r") {
				continue
			}
			at, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("child %d: %q: %v", i, l, err)
			}
			if f[0] == "a" {
				admitted[f[1]] = append(admitted[f[1]], at)
			} else {
				refused[f[1]] = append(refused[f[1]], at)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("child %d reported nothing:\n%s", i, strings.Join(lines, "\n"))
		}
	}
	ctx := context.Background()
	for name, set := range crossPlans {
		ats := admitted[name]
		slices.Sort(ats)
		t.Logf("%s: %d admitted over %v, %d refusals sampled", name, len(ats), time.Duration(ats[len(ats)-1]-ats[0])*time.Microsecond, len(refused[name]))
		if len(ats) < 20 {
			t.Errorf("%s: %d admitted, want at least 20 (two windows' worth)", name, len(ats))
		}
		for i := 0; i+10 < len(ats); i++ {
			if ats[i+10]-ats[i] < 1_000_000 {
				t.Fatalf("%s: 11 admissions within one second, from %d to %d µs", name, ats[i], ats[i+10])
			}
		}
		for _, r := range refused[name] {
			lo, _ := slices.BinarySearch(ats, r-1_000_000+1)
			hi, _ := slices.BinarySearch(ats, r+1)
			if hi-lo < 10 {
				t.Errorf("%s: refused at %d µs with %d admissions in the second before, want 10", name, r, hi-lo)
				break
			}
		}
		state := c.Get(ctx, stateKey(p, "plan-"+name, set, "daily")).Val()
		switch name {
		case "gcra":
			// Each admission moves the arrival time on by 864ms, and
			// 10 a second keep it ahead of the clock: it is the first
			// admission plus all of them.
			if want := strconv.FormatInt(ats[0]+int64(len(ats))*864_000, 10); state != want {
				t.Errorf("gcra: the daily state is %s, want %s: the first admission + %d x 864ms", state, want, len(ats))
			}
		case "counter":
			var idx, cur, prev int
			if _, err := fmt.Sscanf(state, "%d:%d:%d", &idx, &cur, &prev); err != nil || cur+prev != len(ats) {
				t.Errorf("counter: the daily state is %q, want counts adding up to the %d admissions", state, len(ats))
			}
		}
	}
}

// crossPlanChild is one process of TestCrossProcessPlans: it prints "a
// <plan> <At>" for each admission, and "r <plan> <At>" for a sample of the
// refusals.
func crossPlanChild(t *testing.T, prefix string) {
	c := sharedClient(t)
	st := childStore(t, c, prefix)
	childReady(t, c, prefix)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	end := time.Now().Add(crossPlanRun)
	var wg sync.WaitGroup
	for name, set := range crossPlans {
		for g := range 2 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), uint64(os.Getpid())))
				for time.Now().Before(end) {
					res, err := st.Take(context.Background(), "plan-"+name, set, 1)
					if err != nil {
						t.Error(err)
						return
					}
					// Refusals come by the million from the cache: keep
					// one in 2,000.
					if res.Allowed || rng.IntN(2000) == 0 {
						mu.Lock()
						fmt.Fprintf(out, "%s %s %d\n", map[bool]string{true: "a", false: "r"}[res.Allowed], name, res.At.UnixMicro())
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
}

// TestScriptFlush flushes the functions (and the script cache) of a
// server of its own again and again while requests run: the store loads
// its library again and no caller sees an error.
func TestScriptFlush(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st, p := newStore(t, c, redisstore.WithRefusalCache(0))
	ctx := context.Background()
	set := policySet(t, ratelimit.Policy{Name: "default", Limit: 200, Window: time.Minute})
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
			if err := c.FunctionFlush(ctx).Err(); err != nil {
				t.Error(err)
				return
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Error(err)
				return
			}
			flushes++
			time.Sleep(5 * time.Millisecond) // pacing the flushes, not waiting for the clock
		}
	})
	allowed := hammer(t, []ratelimit.Store{st}, "k", set, 8, 50)
	close(done)
	wg.Wait()
	t.Logf("%d flushes", flushes)
	if len(allowed) != 200 {
		t.Errorf("allowed %d, want 200", len(allowed))
	}
	if n := c.LLen(ctx, stateKey(p, "k", set, "default")).Val(); n != 200 {
		t.Errorf("LLEN = %d, want 200", n)
	}
	if st.Failures() != 0 {
		t.Errorf("Failures() = %d, want 0", st.Failures())
	}
}

// TestEveryKeyHasTTL runs a mixed load (several keys, policies of every
// algorithm, one with a short window that drains, weighted costs) on the
// server's clock, and then checks every key the store wrote: each has a
// TTL, at most maxTTL of its policy.
func TestEveryKeyHasTTL(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t,
		ratelimit.Policy{Name: "default", Limit: 40, Window: time.Minute},
		ratelimit.Policy{Name: "burst", Limit: 5, Window: 20 * time.Millisecond},
		ratelimit.Policy{Name: "gcra", Limit: 20, Window: 10 * time.Second, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 30, Window: 50 * time.Millisecond, Algorithm: counter},
	)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 150 {
				key := "k" + strconv.Itoa(r.IntN(50))
				if _, err := st.Take(context.Background(), key, set, 1+r.IntN(3)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkTTLs(t, c, p, func(k string) ratelimit.Policy {
		for i := range set.Len() {
			if strings.HasSuffix(k, ":"+set.At(i).Name) {
				return set.At(i)
			}
		}
		t.Fatalf("key %q of no policy", k)
		return ratelimit.Policy{}
	})
}

// TestExpiryCoversState takes from GCRA and counter keys on real server
// time, with costs that move the arrival time and counts by varying
// amounts, and reads each key's value, PTTL and the server's clock in one
// transaction after every write: the key lives at least until its state
// stops mattering (a GCRA key until its arrival time, a counter until two
// windows after its window starts), and no longer than maxTTL.
func TestExpiryCoversState(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	ctx := context.Background()
	set := policySet(t,
		ratelimit.Policy{Name: "gcra", Limit: 50, Window: 700 * time.Millisecond, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 50, Window: 300 * time.Millisecond, Algorithm: counter},
	)
	gcraPolicy, counterPolicy := set.At(1), set.At(0) // in the order of their names
	ks := []string{stateKey(p, "k", set, "gcra"), stateKey(p, "k", set, "counter")}
	for i, cost := range []int{1, 5, 1, 9, 2, 1, 7, 3, 1, 1} {
		if _, err := st.Take(ctx, "k", set, cost); err != nil {
			t.Fatal(err)
		}
		var now *redis.TimeCmd
		vals := make([]*redis.StringCmd, len(ks))
		pttl := make([]*redis.DurationCmd, len(ks))
		expireAt := make([]*redis.DurationCmd, len(ks))
		if _, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			now = pipe.Time(ctx)
			for j, k := range ks {
				vals[j] = pipe.Get(ctx, k)
				pttl[j] = pipe.PTTL(ctx, k)
				expireAt[j] = pipe.PExpireTime(ctx, k)
			}
			return nil
		}); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		for j, k := range ks {
			var until int64 // µs: when the state stops mattering
			v := vals[j].Val()
			if j == 0 {
				until, _ = strconv.ParseInt(v, 10, 64)
			} else {
				var idx, cur, prev int64
				fmt.Sscanf(v, "%d:%d:%d", &idx, &cur, &prev)
				w := counterPolicy.Window.Microseconds()
				until = idx*w + 2*w
			}
			if v == "" {
				if now.Val().UnixMicro() < until {
					t.Fatalf("take %d: %s gone", i, k)
				}
				continue
			}
			ttl := pttl[j].Val()
			// The key lives through the millisecond its expiry names
			// (PEXPIRETIME: the absolute expiry, not a sum of two
			// truncated readings).
			if expiry := expireAt[j].Val().Milliseconds(); ttl <= 0 || (expiry+1)*1000 < until {
				t.Errorf("take %d: %s = %q expires at %d ms (PTTL %v), before its state stops mattering at %d µs", i, k, v, expiry, ttl, until)
			}
			if pol := []ratelimit.Policy{gcraPolicy, counterPolicy}[j]; ttl > maxTTL(pol) {
				t.Errorf("take %d: %s: PTTL %v, want at most %v", i, k, ttl, maxTTL(pol))
			}
		}
		time.Sleep(time.Duration(i*17%60) * time.Millisecond) // real time: the expiry is Redis's clock at work
	}
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
	st, p := newStore(t, c)
	ctx := context.Background()
	pol := []ratelimit.Policy{
		{Name: "short", Limit: 10_000, Window: 200 * time.Millisecond},
		{Name: "long", Limit: 10_000, Window: time.Second},
	}
	set := policySet(t, pol...)
	ks := []string{stateKey(p, "client", set, "short"), stateKey(p, "client", set, "long")}
	var stamps []int64 // every instant written, oldest first
	// Gaps in milliseconds: within a 50 ms quantum of the short window,
	// across one or several, and one past its whole window.
	gaps := []int{0, 5, 10, 40, 15, 60, 5, 110, 30, 250, 20, 70, 10, 45}
	for i, gap := range gaps {
		time.Sleep(time.Duration(gap) * time.Millisecond) // real time, see above
		before := serverTime(t, c).UnixMicro()
		res, err := st.Take(ctx, "client", set, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("take %d: %+v, %v", i, res, err)
		}
		var now *redis.TimeCmd
		pttl := make([]*redis.DurationCmd, len(ks))
		expireAt := make([]*redis.DurationCmd, len(ks))
		logs := make([]*redis.StringSliceCmd, len(ks))
		if _, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			now = pipe.Time(ctx)
			for j, k := range ks {
				pttl[j] = pipe.PTTL(ctx, k)
				expireAt[j] = pipe.PExpireTime(ctx, k)
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
			if ttl <= 0 || ttl > maxTTL(pol[j]) {
				t.Errorf("take %d, %s: PTTL %v, want in (0, %v]", i, pol[j].Name, ttl, maxTTL(pol[j]))
			}
			// The key lives through the millisecond its expiry names.
			if expiry := expireAt[j].Val().Milliseconds(); (expiry+1)*1000 < newest+w.Microseconds() {
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
