package benchmarks

// The fleet proof: redisstore shared by 4 processes of 16
// goroutines each, on a private redis-server, checked for exactness from
// every admission's server instant (Result.At), through disruptions, a
// monthly quota, a Reset or Refund seen by another process, FailLocal's
// shares, and its server cost beside redis_rate's. See fleet_check_test.go
// for what each algorithm promises and is held to.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

const (
	fleetProcs      = 4
	fleetGoroutines = 16
)

// floodPace is each goroutine's gap between requests in the scenarios
// past the first: 64,000 requests a second offered in all, far over
// every limit, without the spin of cached refusals starving Redis of the
// machine's 2 cores (which would time calls out for no reason but the
// harness).
const floodPace = time.Millisecond

var fleetRuns atomic.Int64

// fleetPrefix is a key prefix for one run, so runs share no counts.
func fleetPrefix() string { return "fleet:" + strconv.FormatInt(fleetRuns.Add(1), 10) + ":" }

// fleetRun is one run's outcome, every process's together.
type fleetRun struct {
	workers  []workerResult
	admitted []int64 // sorted
	local    []int64 // sorted: those the fallbacks decided
	allowed  int64
	refused  int64
	errors   int64
	calls    [4]int64           // attributed FCALLs: allowed, refused, errored, background
	fcall    cmdStat            // the server's
	stats    map[string]cmdStat // INFO commandstats at the end
	loads    int64              // FUNCTION LOAD calls the server saw
	elapsed  time.Duration
}

// runFleet runs procs workers of spec on srv for d, with disrupt (if any)
// run meanwhile from the start, and gathers what they saw. INFO
// commandstats is read from a reset at the start, unless the server
// restarted meanwhile.
func runFleet(t *testing.T, srv *fleetServer, spec workerSpec, procs int, d time.Duration, disrupt func()) fleetRun {
	t.Helper()
	spec.Addr = srv.addr
	spec.Prefix = fleetPrefix()
	spec.Goroutines = cmp.Or(spec.Goroutines, fleetGoroutines)
	spec.Cap = d + 30*time.Second
	specs := make([]workerSpec, procs)
	for i := range specs {
		specs[i] = spec
	}
	ps := startWorkers(t, specs)
	c := srv.client(t)
	resetStats(t, c)
	start := time.Now()
	goWorkers(t, ps)
	if disrupt != nil {
		disrupt()
	}
	if rest := d - time.Since(start); rest > 0 {
		time.Sleep(rest) // the load's duration
	}
	res := stopWorkers(t, ps)
	run := fleetRun{workers: res, elapsed: time.Since(start)}
	stats := commandStats(t, c)
	run.stats = stats
	run.fcall = stats["fcall"]
	run.loads = stats["function|load"].calls
	for _, w := range res {
		run.admitted = append(run.admitted, w.Admitted...)
		run.local = append(run.local, w.Local...)
		run.allowed += w.Allowed
		run.refused += w.Refused
		run.errors += w.Errors
		for i, n := range [...]int64{w.CallsAllowed, w.CallsRefused, w.CallsErrored, w.CallsBackground} {
			run.calls[i] += n
		}
	}
	slices.Sort(run.admitted)
	slices.Sort(run.local)
	return run
}

// checkRun checks every policy of spec over instants and returns a cell
// per policy: the most in a rolling window over the limit, and the
// breaches of what its algorithm promises; assert makes a breach an
// error.
func checkRun(t *testing.T, what string, spec workerSpec, instants []int64, assert bool) (most, bad string) {
	t.Helper()
	var m, b []string
	for _, ps := range spec.Policies {
		p := ps.policy()
		c := checkPolicy(instants, p)
		cell := fmt.Sprintf("%s %d/%d (%.2f)", p.Name, c.most, p.Limit, float64(c.most)/float64(p.Limit))
		if p.Algorithm == ratelimit.SlidingWindowCounter {
			cell += fmt.Sprintf(", fixed %d", c.fixed)
		}
		m = append(m, cell)
		b = append(b, fmt.Sprintf("%s %d", p.Name, c.bad))
		if assert && c.bad > 0 {
			t.Errorf("%s: policy %s (%v, %d per %v): %d breaches of its bound, want 0 (most in a window %d)",
				what, p.Name, p.Algorithm, p.Limit, p.Window, c.bad, c.most)
		}
	}
	return joinCells(m), joinCells(b)
}

// errorSample is a few of the errors the workers saw.
func errorSample(run fleetRun) []string {
	var out []string
	for _, w := range run.workers {
		out = append(out, w.ErrorSample...)
	}
	return out[:min(len(out), 3)]
}

func joinCells(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

func per(n, d int64) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4f", float64(n)/float64(d))
}

// TestFleet is the fleet proof. It runs for a couple of
// minutes, so only when FLEET=1.
func TestFleet(t *testing.T) {
	if os.Getenv("FLEET") != "1" {
		t.Skip("the fleet proof runs for minutes: FLEET=1 FLEET_OUT=/tmp/fleet.md go test -run '^TestFleet$' -v -count=1 -timeout 15m .")
	}
	srv := startFleetServer(t)
	rep := &fleetReport{}
	rep.para("# The fleet proof")
	rep.para("redisstore shared by %d processes (this test binary, re-executed) of %d goroutines each, "+
		"calling `Store.Take(ctx, key, set, 1)` on one private redis-server. Every admission's server instant "+
		"(`Result.At`) is logged; the parent checks them all together. Generated by `FLEET=1 FLEET_OUT=... go test "+
		"-run '^TestFleet$' -v -count=1 -timeout 15m .` in `benchmarks/`.", fleetProcs, fleetGoroutines)
	rep.machine(srv.client(t))
	rep.para("Bounds checked (see `fleet_check_test.go`): **log**, no rolling window (t-w, t] holds more than the limit; " +
		"**counter**, its estimate (this fixed window's admissions plus the previous one's weighted by overlap, rounded up) " +
		"never exceeds the limit at an admission, so no fixed window does; a rolling window may, and is reported, not asserted; " +
		"**GCRA**, n admissions between instants a and b number at most limit + (b-a)/T, T = window/limit, so a rolling " +
		"window may hold about twice the limit (reported); **calendar**, no period over its limit. A request a lease " +
		"admits reports the lease's grant as At, the instant Redis counted it.")
	defer rep.write(t)

	t.Run("HotKey", func(t *testing.T) { fleetHotKey(t, srv, rep) })
	t.Run("Disruption", func(t *testing.T) { fleetDisruption(t, srv, rep) })
	t.Run("Monthly", func(t *testing.T) { fleetMonthly(t, srv, rep) })
	t.Run("Notice", func(t *testing.T) { fleetNotice(t, srv, rep) })
	t.Run("FailLocal", func(t *testing.T) { fleetFailLocal(t, srv, rep) })
	t.Run("ServerCost", func(t *testing.T) { fleetServerCost(t, srv, rep) })
}

// TestFleetSmoke is the fleet proof in small, always on: 2 processes for
// a second on one key with leases, no rolling window over the limit.
func TestFleetSmoke(t *testing.T) {
	srv := startFleetServer(t)
	spec := workerSpec{Key: "smoke", Leases: true, Policies: []policySpec{{Name: "q", Limit: 100, Window: 250 * time.Millisecond}}}
	run := runFleet(t, srv, spec, 2, time.Second, nil)
	if run.allowed == 0 {
		t.Fatalf("nothing admitted (%d refused, %d errors)", run.refused, run.errors)
	}
	most, bad := checkRun(t, "smoke", spec, run.admitted, true)
	t.Logf("%d allowed, %d refused, %d errors %q; most in a window: %s; breaches: %s; %d FCALLs",
		run.allowed, run.refused, run.errors, errorSample(run), most, bad, run.fcall.calls)
}

var (
	hotLog     = policySpec{Name: "hot", Limit: 20_000, Window: 10 * time.Second}
	hotCounter = policySpec{Name: "hot", Limit: 20_000, Window: 10 * time.Second, Algorithm: ratelimit.SlidingWindowCounter}
	hotGCRA    = policySpec{Name: "hot", Limit: 20_000, Window: 10 * time.Second, Algorithm: ratelimit.GCRA}
)

// fleetHotKey: one hot key hammered at full rate by 4 processes, per
// algorithm and a mixed set, leases off and on.
func fleetHotKey(t *testing.T, srv *fleetServer, rep *fleetReport) {
	sets := []struct {
		name     string
		policies []policySpec
	}{
		{"SlidingLog 20,000/10s", []policySpec{hotLog}},
		{"SlidingWindowCounter 20,000/10s", []policySpec{hotCounter}},
		{"GCRA 20,000/10s", []policySpec{hotGCRA}},
		{"mixed: log 5,000/1s + counter 20,000/10s", []policySpec{
			{Name: "second", Limit: 5_000, Window: time.Second},
			{Name: "ten", Limit: 20_000, Window: 10 * time.Second, Algorithm: ratelimit.SlidingWindowCounter}}},
	}
	const d = 3 * time.Second
	// hotPace offers 4,000 requests a second in all: under every limit
	// of the sets for the run's 3 s, so that all are allowed, and 50 a
	// process per lease period, so that leases have something to save.
	const hotPace = 16 * time.Millisecond
	var rows [][]string
	for _, s := range sets {
		for _, pace := range []time.Duration{0, hotPace} {
			for _, leases := range []bool{false, true} {
				spec := workerSpec{Key: "hot", Leases: leases, Policies: s.policies, Pace: pace}
				run := runFleet(t, srv, spec, fleetProcs, d, nil)
				load := "unpaced"
				if pace > 0 {
					load = fmt.Sprintf("%.0f/s", float64(fleetProcs*fleetGoroutines)/pace.Seconds())
				}
				what := fmt.Sprintf("%s, %s, leases %v", s.name, load, leases)
				most, bad := checkRun(t, what, spec, run.admitted, true)
				if run.allowed == 0 {
					t.Errorf("%s: nothing admitted", what)
				}
				perAllowed := float64(scriptCalls(run.stats)) / float64(max(run.allowed, 1))
				if pace > 0 && leases {
					if err := leaseCallsCheck(what, run.stats, run.allowed); err != nil {
						t.Error(err)
					}
				}
				rows = append(rows, []string{s.name, load, onOff(leases), fmt.Sprint(run.allowed), fmt.Sprint(run.refused), fmt.Sprint(run.errors),
					most, bad, fmt.Sprint(run.fcall.calls), fmt.Sprintf("%.4f", perAllowed),
					per(run.calls[0], run.allowed), per(run.calls[1], run.refused), fmt.Sprint(run.calls[3]),
					fmt.Sprintf("%.0f", float64(run.allowed+run.refused)/run.elapsed.Seconds())})
			}
		}
	}
	rep.para("## 1. A hot key, leases off and on")
	rep.para("%d processes x %d goroutines, one key, %v a run, at two loads: *unpaced* (each goroutine calls again "+
		"at once: the limit binds, and the refusal cache answers most refusals) and *4000/s* (each goroutine every %v: "+
		"every request fits, the hot key of the target). *Most in a window*: the most admissions any "+
		"rolling window of the policy's length held, over the limit (for the counter also the most in a fixed window). "+
		"*Breaches*: admissions that break the algorithm's bound (asserted 0 in every row). *FCALL*: the server's "+
		"`cmdstat_fcall` calls from a `CONFIG RESETSTAT` at the start; *FCALL per allowed* divides every script call "+
		"(`fcall`, `fcall_ro`, `function|load`, `eval*`) by the allowed requests (asserted <= 0.05 with leases at 4000/s). The client columns attribute each FCALL to "+
		"the Take that sent it (a go-redis hook): per allowed and per refused request, and the lease janitor's (no Take). "+
		"Unpaced GCRA refills a slot every 500 µs after its burst, so its refusals are remembered for at most that long "+
		"and its admissions after the burst have no room for a lease: a call each, as the lease design says near the limit.",
		fleetProcs, fleetGoroutines, d, hotPace)
	rep.table([]string{"set", "load", "leases", "allowed", "refused", "errors", "most in a window / limit", "breaches", "FCALL", "FCALL per allowed",
		"client: per allowed", "client: per refused", "janitor calls", "decisions/s"}, rows)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fleetDisruption: leases on, the server disrupted mid-run; FailClosed,
// so requests fail while it is out, but no window may go over.
func fleetDisruption(t *testing.T, srv *fleetServer, rep *fleetReport) {
	policies := []policySpec{
		{Name: "second", Limit: 1_000, Window: time.Second},
		{Name: "burst", Limit: 3_000, Window: 3 * time.Second, Algorithm: ratelimit.GCRA},
	}
	aof := startFleetServer(t, "--appendonly", "yes", "--appendfsync", "always")
	admin := srv.client(t)
	after := func(d time.Duration) { time.Sleep(d) } // the timeline of the run
	restart := func(s *fleetServer) func() {
		return func() {
			after(1500 * time.Millisecond)
			if err := s.shutdown(); err != nil {
				t.Error(err)
			}
			if err := s.start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name    string
		srv     *fleetServer
		d       time.Duration
		assert  bool
		disrupt func()
	}{
		{"FUNCTION FLUSH at 1 s, 2 s and 3 s", srv, 4 * time.Second, true, func() {
			for range 3 {
				after(time.Second)
				if err := admin.FunctionFlush(context.Background()).Err(); err != nil {
					t.Error(err)
				}
			}
		}},
		{"SHUTDOWN NOSAVE at 1.5 s and start again, `appendonly yes`, `appendfsync always`", aof, 4 * time.Second, true, restart(aof)},
		{"SIGSTOP at 1 s, SIGCONT at 3 s", srv, 4500 * time.Millisecond, true, func() {
			after(time.Second)
			if err := srv.pause(); err != nil {
				t.Error(err)
			}
			after(2 * time.Second)
			if err := srv.resume(); err != nil {
				t.Error(err)
			}
		}},
		{"SHUTDOWN NOSAVE at 1.5 s and start again, no persistence (documented loss: reported, not asserted)", srv, 4 * time.Second, false, restart(srv)},
	}
	var rows [][]string
	for _, tt := range cases {
		spec := workerSpec{Key: "disrupted", Leases: true, Policies: policies, Pace: floodPace}
		run := runFleet(t, tt.srv, spec, fleetProcs, tt.d, tt.disrupt)
		most, bad := checkRun(t, tt.name, spec, run.admitted, tt.assert)
		if run.allowed == 0 {
			t.Errorf("%s: nothing admitted", tt.name)
		}
		var failures uint64
		for _, w := range run.workers {
			failures += w.Failures
		}
		loads := fmt.Sprint(run.loads)
		if tt.srv != srv || strings.HasPrefix(tt.name, "SHUTDOWN") {
			loads = "-" // the restart reset the server's counts
		}
		rows = append(rows, []string{tt.name, map[bool]string{true: "yes", false: "no"}[tt.assert], fmt.Sprint(run.allowed), fmt.Sprint(run.refused),
			fmt.Sprint(run.errors), fmt.Sprint(failures), loads, most, bad})
	}
	rep.para("## 2. Exactness under disruption (leases on, FailClosed)")
	rep.para("%d processes x %d goroutines, each a request a millisecond, one key, set {log 1,000/1s, GCRA 3,000/3s}. Errors are the requests "+
		"that failed while Redis was out (FailClosed); *failures* is `Store.Failures()` over the processes (lease "+
		"give-backs included); *FUNCTION LOAD*, the loads of the library the server saw after the flushes (each process's callers that find it gone load it). Without persistence a restart forgets every count, as redisstore's README says "+
		"(Durability): that row shows the loss and is not asserted.", fleetProcs, fleetGoroutines)
	rep.table([]string{"disruption", "asserted", "allowed", "refused", "errors", "failures", "FUNCTION LOAD", "most in a window / limit", "breaches"}, rows)
}

// fleetMonthly: a monthly quota beside a per-second limit, in one set.
func fleetMonthly(t *testing.T, srv *fleetServer, rep *fleetReport) {
	policies := []policySpec{
		{Name: "second", Limit: 50, Window: time.Second},
		{Name: "month", Limit: 120, Algorithm: ratelimit.Monthly},
	}
	var rows [][]string
	for _, leases := range []bool{false, true} {
		spec := workerSpec{Key: "monthly", Leases: leases, Policies: policies, Pace: floodPace}
		run := runFleet(t, srv, spec, fleetProcs, 3500*time.Millisecond, nil)
		what := fmt.Sprintf("monthly, leases %v", leases)
		most, bad := checkRun(t, what, spec, run.admitted, true)
		var failures uint64
		for _, w := range run.workers {
			failures += w.Failures
		}
		total := len(run.admitted)
		if run.errors > 0 {
			t.Logf("%s: %d errors, such as %q", what, run.errors, errorSample(run))
		}
		// Without a failed call, every slot of the month is admitted:
		// the flood outlasts it, and a lease's unused slots go back
		// while it still floods (near the end, with fewer than 16
		// left, no lease is granted at all).
		if failures == 0 && total != 120 {
			t.Errorf("%s: %d admitted in the month, want exactly 120 (no call failed)", what, total)
		}
		rows = append(rows, []string{onOff(leases), fmt.Sprint(run.allowed), fmt.Sprint(run.refused), fmt.Sprint(run.errors), fmt.Sprint(failures),
			most, bad, fmt.Sprintf("%d/120", total)})
	}
	rep.para("## 3. A monthly quota and a per-second limit in one set")
	rep.para("%d processes x %d goroutines, each a request a millisecond, 3.5 s, set {log 50/1s, `ratelimit.Monthly` 120}: the month is used up "+
		"after about 2.4 s. Asserted: no one-second window over 50, no month over 120, and, when no call failed, "+
		"exactly 120 admitted.", fleetProcs, fleetGoroutines)
	rep.table([]string{"leases", "allowed", "refused", "errors", "failures", "most in a window / limit", "breaches", "month total"}, rows)
}

// fleetNotice: process A floods a key until its refusal cache holds it;
// process B resets the key (or refunds a request), and A must admit again
// within the refusal cache's second.
func fleetNotice(t *testing.T, srv *fleetServer, rep *fleetReport) {
	// The documented bound is the refusal cache's second; At is the
	// server's instant of A's next decision, which the store's timeout
	// bounds after A sends it.
	const bound = time.Second + redisstore.DefaultTimeout
	var rows [][]string
	for _, w := range []time.Duration{5 * time.Second, 24 * time.Hour} {
		policies := []policySpec{{Name: "q", Limit: 50, Window: w}}
		flood := workerSpec{Key: "notice", Policies: policies, Pace: 2 * time.Millisecond}
		driver := workerSpec{Key: "notice", Policies: policies, Driver: "notice", Rounds: 3, Goroutines: 1}
		prefix := fleetPrefix()
		for _, s := range []*workerSpec{&flood, &driver} {
			s.Addr, s.Prefix, s.Cap = srv.addr, prefix, time.Minute
			s.Goroutines = cmp.Or(s.Goroutines, fleetGoroutines)
		}
		ps := startWorkers(t, []workerSpec{flood, driver})
		goWorkers(t, ps)
		b := waitWorkers(t, ps[1:])[0]
		// A goes on long enough to see B's last notice.
		time.Sleep(bound + 500*time.Millisecond)
		a := stopWorkers(t, ps[:1])[0]
		delays := map[string][]time.Duration{}
		for _, n := range b.Notices {
			i, _ := slices.BinarySearch(a.Admitted, n.At)
			if i == len(a.Admitted) {
				t.Errorf("window %v: the %s at %v was never seen: no admission after it", w, n.Kind, time.UnixMicro(n.At))
				continue
			}
			delays[n.Kind] = append(delays[n.Kind], time.Duration(a.Admitted[i]-n.At)*time.Microsecond)
		}
		for _, kind := range []string{"Reset", "Refund"} {
			ds := delays[kind]
			if len(ds) == 0 {
				t.Errorf("window %v: no %s round", w, kind)
				continue
			}
			worst := slices.Max(ds)
			if m := median(ds); m > time.Second {
				t.Errorf("window %v: a %s in B seen by A after %v (median of %v), want <= 1s", w, kind, m, ds)
			}
			if worst > bound {
				t.Errorf("window %v: a %s in B seen by A after %v (worst of %v), want <= %v", w, kind, worst, ds, bound)
			}
			rows = append(rows, []string{w.String(), kind, fmt.Sprint(len(ds)), msList(ds), ms(median(ds)), ms(worst)})
		}
	}
	rep.para("## 4. A Reset or Refund seen by another process")
	rep.para("Process A floods one key (%d goroutines, one request each 2 ms, limit 50 per window) until refused, "+
		"its refusal cache answering; process B waits until the key is used up, then 100-900 ms more (at random, so that "+
		"A's cache entries are of every age), and resets the key, takes one request, and once the key is used up again "+
		"refunds it. Delay: from just before B sent the Reset or Refund to the server instant of A's next admission. "+
		"Asserted: median <= 1 s (the refusal cache remembers at most 1 s) and worst <= %v (1 s plus the store's "+
		"timeout, which bounds A's next call).", fleetGoroutines, bound)
	rep.table([]string{"window", "notice", "rounds", "delays (ms)", "median (ms)", "worst (ms)"}, rows)
}

// fleetFailLocal: FailLocal with WithFleetSize(4); Redis shut down three
// times for 1.5 s, the processes deciding locally meanwhile.
func fleetFailLocal(t *testing.T, srv *fleetServer, rep *fleetReport) {
	const outages = 3
	policy := policySpec{Name: "second", Limit: 200, Window: time.Second}
	spec := workerSpec{Key: "local", FailLocal: true, Fleet: fleetProcs, Policies: []policySpec{policy}, Pace: floodPace}
	var stops, starts, answers []time.Time
	var loads []int64 // FUNCTION LOAD calls in the second after each restart
	admin := srv.client(t)
	run := runFleet(t, srv, spec, fleetProcs, 0, func() {
		for k := range outages {
			time.Sleep(time.Second) // Redis up
			if k > 0 {
				loads = append(loads, commandStats(t, admin)["function|load"].calls)
			}
			stops = append(stops, time.Now())
			if err := srv.shutdown(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // Redis down
			starts = append(starts, time.Now())
			// start polls PING every 5 ms and returns at the first answer.
			if err := srv.start(); err != nil {
				t.Fatal(err)
			}
			answers = append(answers, time.Now())
		}
		time.Sleep(time.Second)
		loads = append(loads, commandStats(t, admin)["function|load"].calls)
	})
	if len(run.local) == 0 {
		t.Errorf("no request decided locally")
	}
	localMost, localOver := maxInWindow(run.local, policy.Window.Microseconds(), policy.Limit)
	if localOver > 0 {
		t.Errorf("FailLocal: %d windows of the fallbacks' admissions over %d (most %d), want 0", localOver, policy.Limit, localMost)
	}
	allMost, allOver := maxInWindow(run.admitted, policy.Window.Microseconds(), policy.Limit)

	var rows [][]string
	recs := recoveries(run.workers, stops, starts, answers)
	for k, rs := range recs {
		var ds []string
		var got []time.Duration
		for _, r := range rs {
			if !r.missing {
				got = append(got, r.delay)
				ds = append(ds, ms(r.delay))
			}
		}
		slowest := "-"
		if len(got) > 0 {
			slowest = ms(slices.Max(got))
		}
		rows = append(rows, []string{fmt.Sprint(k + 1), joinCells(ds), slowest, fmt.Sprint(loads[k])})
	}
	for _, err := range recoveryErrors(recs, 100*time.Millisecond) {
		t.Error(err)
	}
	var failures uint64
	for _, w := range run.workers {
		failures += w.Failures
	}
	rep.para("## 5. FailLocal with WithFleetSize(4)")
	rep.para("%d processes x %d goroutines, each a request a millisecond, one key, log 200/1s, `WithFailurePolicy(FailLocal)`, `WithFleetSize(4)` "+
		"(so each fallback allows 50/1s), the README's client settings with `Dialer: redisstore.Dial`. Redis is shut down "+
		"(SHUTDOWN NOSAVE) %d times for 1.5 s and started again on the same port.", fleetProcs, fleetGoroutines, outages)
	rep.table([]string{"", ""}, [][]string{
		{"allowed / refused / errors", fmt.Sprintf("%d / %d / %d", run.allowed, run.refused, run.errors)},
		{"decided and admitted by the fallbacks", fmt.Sprint(len(run.local))},
		{"most the fallbacks admitted in a rolling 1 s (asserted <= 200)", fmt.Sprintf("%d/200, %d windows over", localMost, localOver)},
		{"most admitted in a rolling 1 s, Redis and fallbacks together (not asserted)", fmt.Sprintf("%d/200, %d windows over", allMost, allOver)},
		{"Store.Failures, all processes", fmt.Sprint(failures)},
	})
	rep.para("The windows over the limit in the second line straddle an outage's start or end: what Redis counted before " +
		"it is not known to the fallbacks, and what they admitted is not counted in Redis afterwards (a restart " +
		"without persistence forgets the rest), as the README's FailLocal section says.")
	rep.para("Recovery: from the parent's first PING answered after the restart (polled every 5 ms) to the decision " +
		"after which each process decided every request through Redis (a successful FCALL, not the fallback) until the " +
		"next outage: its last return from the fallback to Redis. " +
		"Asserted: <= 100 ms for every process after every outage. A negative figure is a process " +
		"that got through before the parent's poll did.")
	rep.table([]string{"outage", "per process (ms)", "slowest (ms)", "FUNCTION LOAD after the restart"}, rows)
}

// fleetServerCost: one process, 16 goroutines, many keys all allowed:
// server µs per decision and client throughput, redisstore beside
// redis_rate.
func fleetServerCost(t *testing.T, srv *fleetServer, rep *fleetReport) {
	const (
		d     = 2 * time.Second
		keys  = 10_000
		limit = 1_000 // a minute: every request allowed
	)
	c := redisNewFleetClient(t, srv)
	admin := srv.client(t)
	type cost struct {
		name, cmd string
		usec      float64
		cpu       float64 // server CPU µs per call, from INFO cpu
		calls     int64
		errors    int64
		rate      float64
		p50       time.Duration
	}
	measure := func(name, cmd string, op func(ctx context.Context, key string) (bool, error)) cost {
		resetStats(t, admin)
		cpu0 := serverCPU(t, admin)
		var seq, denied, errs atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		stop := start.Add(d)
		for range fleetGoroutines {
			wg.Go(func() {
				mine := make([]time.Duration, 0, 4096)
				for time.Now().Before(stop) {
					key := "k" + strconv.FormatInt(seq.Add(1)%keys, 10)
					t0 := time.Now()
					ok, err := op(context.Background(), key)
					mine = append(mine, time.Since(t0))
					if err != nil {
						errs.Add(1)
					} else if !ok {
						denied.Add(1)
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		el := time.Since(start)
		// A refusal is a count gone wrong; an error is a call that
		// outlived the store's timeout on a busy machine: reported.
		if denied.Load() > 0 {
			t.Errorf("%s: %d refused, want every request allowed", name, denied.Load())
		}
		cpu := serverCPU(t, admin) - cpu0
		st := commandStats(t, admin)[cmd]
		slices.Sort(lat)
		return cost{name: name, cmd: cmd, usec: st.usecPerCall, cpu: cpu * 1e6 / float64(max(st.calls, 1)), calls: st.calls, errors: errs.Load(), rate: float64(len(lat)) / el.Seconds(), p50: lat[len(lat)/2]}
	}
	rr := redis_rate.NewLimiter(c)
	measureRR := func() cost {
		return measure("redis_rate (GCRA)", "evalsha", func(ctx context.Context, key string) (bool, error) {
			r, err := rr.Allow(ctx, "rr:"+key, redis_rate.PerMinute(limit))
			return err == nil && r.Allowed > 0, err
		})
	}
	// Each round runs redis_rate just before each algorithm, which is
	// compared with that run: a busy machine's load drifts over the
	// seconds this takes. A row is the median over the rounds of each
	// figure and of each ratio.
	algorithms := []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingLog, ratelimit.SlidingWindowCounter}
	ours, theirs := make([][]cost, len(algorithms)), make([][]cost, len(algorithms))
	for range serverCostRounds {
		for i, a := range algorithms {
			theirs[i] = append(theirs[i], measureRR())
			st, err := redisstore.New(c, redisstore.WithPrefix(fleetPrefix()))
			if err != nil {
				t.Fatal(err)
			}
			set, err := ratelimit.NewPolicySet(ratelimit.Policy{Name: "m", Limit: limit, Window: time.Minute, Algorithm: a})
			if err != nil {
				t.Fatal(err)
			}
			ours[i] = append(ours[i], measure("redisstore "+a.String(), "fcall", func(ctx context.Context, key string) (bool, error) {
				r, err := st.Take(ctx, key, set, 1)
				return r.Allowed, err
			}))
			st.Close()
		}
	}
	med := func(cs []cost, f func(cost) float64) float64 {
		v := make([]float64, len(cs))
		for i, c := range cs {
			v[i] = f(c)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	row := func(name string, cs []cost, ratios []string) []string {
		return append([]string{name, fmt.Sprintf("%.2f", med(cs, func(c cost) float64 { return c.usec })),
			fmt.Sprintf("%.2f", med(cs, func(c cost) float64 { return c.cpu })),
			fmt.Sprintf("%.0f", med(cs, func(c cost) float64 { return float64(c.calls) })),
			fmt.Sprintf("%.0f", med(cs, func(c cost) float64 { return float64(c.errors) })),
			fmt.Sprintf("%.0f", med(cs, func(c cost) float64 { return c.rate })),
			fmt.Sprintf("%.0f", med(cs, func(c cost) float64 { return float64(c.p50.Microseconds()) }))}, ratios...)
	}
	var rows [][]string
	for i, a := range algorithms {
		// The ratio of each round, the median of them.
		r := func(f func(cost) float64) string {
			v := make([]float64, serverCostRounds)
			for k := range v {
				v[k] = f(ours[i][k]) / f(theirs[i][k])
			}
			slices.Sort(v)
			return fmt.Sprintf("%.3f", v[len(v)/2])
		}
		rows = append(rows, row("redisstore "+a.String(), ours[i], []string{r(func(c cost) float64 { return c.usec }), r(func(c cost) float64 { return c.cpu }),
			r(func(c cost) float64 { return c.rate }), r(func(c cost) float64 { return float64(c.p50) })}))
	}
	for i, a := range algorithms {
		rows = append(rows, row("redis_rate (GCRA), `cmdstat_evalsha`, beside "+a.String(), theirs[i], []string{"1", "1", "1", "1"}))
	}
	rep.para("## 6. Server cost beside redis_rate")
	rep.para("One process, %d goroutines, %v each, %d keys in turn, %d per minute so that every request is allowed; "+
		"redisstore without leases (its default), `Store.Take` per decision, `cmdstat_fcall`; redis_rate v10 "+
		"`Allow` with the same quota, `cmdstat_evalsha`, run just before each algorithm; the same client (README settings), "+
		"the same server. %d rounds, each of the six runs in turn; each figure is the median over the rounds, and each ratio the median of "+
		"the rounds' ratios of redisstore's figure over that of the redis_rate run just before it: below 1 is cheaper or faster for µs and p50, above 1 faster for "+
		"decisions/s. *Server µs per call* is the command's `usec_per_call`, wall time, which grows while the server "+
		"waits for a CPU a busy client holds (client and server share 2 cores here); *server CPU µs per call* is the "+
		"server process's CPU (`INFO cpu`) over the calls, which does not, and includes reading and answering each "+
		"call. redisstore's keys are about 50 bytes (see the redisstore README's key layout), redis_rate's about 15. "+
		"Reported, not asserted; asserted: no request refused.", fleetGoroutines, d, keys, limit, serverCostRounds)
	rep.table([]string{"implementation", "server µs per call", "server CPU µs per call", "calls", "errors (timeouts)", "decisions/s", "p50 µs", "µs ratio", "CPU ratio", "decisions/s ratio", "p50 ratio"}, rows)
}

// leaseCallsCheck is the hot key's assertion on script calls with
// leases: stats are the server's INFO commandstats over the run.
func leaseCallsCheck(what string, stats map[string]cmdStat, allowed int64) error {
	perAllowed := float64(scriptCalls(stats)) / float64(max(allowed, 1))
	if perAllowed > leaseCallsBound {
		return fmt.Errorf("%s: %.4f script calls per allowed request, want <= %v with leases", what, perAllowed, leaseCallsBound)
	}
	return nil
}

// leaseCallsBound is the most script calls per allowed request the hot
// key may cost with leases: the target.
const leaseCallsBound = 0.05

// scriptCalls counts every call of the server's scripting in stats (INFO
// commandstats): functions, read-only ones, loads of the library, and
// scripts.
func scriptCalls(stats map[string]cmdStat) int64 {
	var n int64
	for _, c := range []string{"fcall", "fcall_ro", "function|load", "eval", "evalsha", "eval_ro", "evalsha_ro"} {
		n += stats[c].calls
	}
	return n
}

// recovery is one process's return to Redis after an outage: the delay
// from the parent's first answered PING, or missing if it never did.
type recovery struct {
	delay   time.Duration
	missing bool
}

// recoveries returns, per outage k, each process's recovery: its last
// return from the fallback to Redis before the next outage (the worker
// notes each), after which every decision went through Redis; not its
// first, which a process that goes on deciding locally also has.
func recoveries(workers []workerResult, stops, starts, answers []time.Time) [][]recovery {
	out := make([][]recovery, len(stops))
	for k := range stops {
		for _, wr := range workers {
			// Nothing goes through Redis between the shutdown and the
			// start; a call that straddles the shutdown may, before it.
			i, _ := slices.BinarySearch(wr.Recovered, starts[k].UnixNano())
			j := len(wr.Recovered)
			if k+1 < len(stops) {
				j, _ = slices.BinarySearch(wr.Recovered, stops[k+1].UnixNano())
			}
			if i >= j {
				out[k] = append(out[k], recovery{missing: true})
				continue
			}
			out[k] = append(out[k], recovery{delay: time.Duration(wr.Recovered[j-1] - answers[k].UnixNano())})
		}
	}
	return out
}

// recoveryErrors is FailLocal's assertion on recs (from recoveries):
// every process back within bound after every outage.
func recoveryErrors(recs [][]recovery, bound time.Duration) []error {
	var errs []error
	for k, rs := range recs {
		for p, r := range rs {
			switch {
			case r.missing:
				errs = append(errs, fmt.Errorf("outage %d: process %d never decided through Redis again", k+1, p))
			case r.delay > bound:
				errs = append(errs, fmt.Errorf("FailLocal recovery: outage %d: process %d decided locally until %v after Redis answered, want <= %v", k+1, p, r.delay, bound))
			}
		}
	}
	return errs
}

// serverCostRounds is how many rounds fleetServerCost takes the median of.
const serverCostRounds = 5

// redisNewFleetClient is a client of srv with the README's settings and
// redisstore.Dial, closed when t ends.
func redisNewFleetClient(t *testing.T, srv *fleetServer) *redis.Client {
	c := redis.NewClient(fleetClientOptions(srv.addr, 2*fleetGoroutines))
	t.Cleanup(func() { c.Close() })
	return c
}
