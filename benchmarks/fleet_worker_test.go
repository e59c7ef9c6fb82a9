package benchmarks

// The worker processes of the fleet tests: the test binary, re-executed
// with -test.run=^TestFleetWorker$ and fleetWorkerEnv holding its spec.
// A worker makes its own client and store, prints fleetReady, waits for a
// line on stdin, runs until stdin closes (or its spec's cap), and writes
// what it saw to the spec's Out file as JSON.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

const (
	fleetWorkerEnv = "FLEET_WORKER_SPEC"
	fleetReady     = "fleet-worker-ready"
)

// policySpec is a ratelimit.Policy as JSON can carry it (Location stays
// nil: UTC).
type policySpec struct {
	Name      string
	Limit     int
	Window    time.Duration
	Algorithm ratelimit.Algorithm
}

func (p policySpec) policy() ratelimit.Policy {
	return ratelimit.Policy{Name: p.Name, Limit: p.Limit, Window: p.Window, Algorithm: p.Algorithm}
}

// workerSpec is what a worker does.
type workerSpec struct {
	Addr       string
	Prefix     string
	Key        string
	Policies   []policySpec
	Leases     bool
	FailLocal  bool // WithFailurePolicy(FailLocal), WithFleetSize(Fleet)
	Fleet      int
	Goroutines int
	Pace       time.Duration // each goroutine's gap between requests; 0: none
	Cap        time.Duration // the longest the worker runs
	Driver     string        // "": hammer the key; "notice": Reset and Refund rounds
	Rounds     int           // of the driver
	Out        string
}

// workerResult is what a worker saw.
type workerResult struct {
	Admitted []int64 // Result.At of every admission, µs
	Local    []int64 // those the FailLocal fallback decided
	Allowed  int64
	Refused  int64
	Errors   int64
	Failures uint64 // Store.Failures
	// FCALLs the go-redis hook saw, by the outcome of the Take that sent
	// them; Background are those of no Take (the lease janitor).
	CallsAllowed, CallsRefused, CallsErrored, CallsBackground int64
	// Recovered are the instants (Unix ns) of the first decision that
	// went through Redis after one or more the fallback decided.
	Recovered []int64
	// Notices are the driver's rounds: the instant (Unix µs) just before
	// it sent a Reset or a Refund, and which.
	Notices []notice
	// ErrorSample is the text of the first few errors Take returned.
	ErrorSample []string
	Err         string
}

type notice struct {
	Kind string
	At   int64
}

// fleetClientOptions are the client settings redisstore's README
// recommends, with redisstore.Dial, so that calls resume as soon as Redis
// answers.
func fleetClientOptions(addr string, pool int) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		Dialer:                redisstore.Dial,
		ContextTimeoutEnabled: true,
		DialTimeout:           redisstore.DefaultTimeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		PoolTimeout:           redisstore.DefaultTimeout,
		PoolSize:              pool,
	}
}

// TestFleetWorker is a worker process of TestFleet and TestFleetSmoke;
// run on its own it does nothing.
func TestFleetWorker(t *testing.T) {
	raw := os.Getenv(fleetWorkerEnv)
	if raw == "" {
		t.Skip("a worker process of TestFleet, started by it")
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	res := runWorker(spec)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec.Out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// takeNote is what the go-redis hook notes of one Take's calls.
type takeNote struct {
	calls, ok atomic.Int64
	local     atomic.Bool
}

type noteKey struct{}

// callHook counts FCALLs, each on the Take whose context sent it.
type callHook struct{ background *atomic.Int64 }

func (callHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (callHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h callHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() != "fcall" {
			return err
		}
		n, _ := ctx.Value(noteKey{}).(*takeNote)
		if n == nil {
			h.background.Add(1)
			return err
		}
		n.calls.Add(1)
		if err == nil {
			n.ok.Add(1)
		}
		return err
	}
}

// markLocal is the FailLocal fallback: a memory store that marks the
// Takes it decides.
type markLocal struct{ ratelimit.Store }

func (m markLocal) Take(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (ratelimit.Result, error) {
	if n, _ := ctx.Value(noteKey{}).(*takeNote); n != nil {
		n.local.Store(true)
	}
	return m.Store.Take(ctx, key, set, cost)
}

func runWorker(spec workerSpec) (res workerResult) {
	fail := func(err error) workerResult { res.Err = err.Error(); return res }
	var ps []ratelimit.Policy
	for _, p := range spec.Policies {
		ps = append(ps, p.policy())
	}
	set, err := ratelimit.NewPolicySet(ps...)
	if err != nil {
		return fail(err)
	}
	c := redis.NewClient(fleetClientOptions(spec.Addr, 2*spec.Goroutines))
	defer c.Close()
	var background atomic.Int64
	c.AddHook(callHook{&background})
	opts := []redisstore.Option{redisstore.WithPrefix(spec.Prefix), redisstore.WithLeases(spec.Leases)}
	var local ratelimit.Store
	if spec.FailLocal {
		ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{})
		if err != nil {
			return fail(err)
		}
		defer ms.Close()
		local = markLocal{ms}
		opts = append(opts, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFallback(local), redisstore.WithFleetSize(spec.Fleet))
	}
	st, err := redisstore.New(c, opts...)
	if err != nil {
		return fail(err)
	}

	// Warm up, so that a run measures the key and not a cold start: a
	// connection for every goroutine, and the library loaded (by one
	// Take of a key no run checks).
	var warm sync.WaitGroup
	for range spec.Goroutines {
		warm.Go(func() { c.Ping(context.Background()) })
	}
	warm.Wait()
	// Its calls are noted on a Take of their own, so that no count of the
	// run's includes them.
	if _, err := st.Take(context.WithValue(context.Background(), noteKey{}, new(takeNote)), "warm-up", set, 1); err != nil {
		return fail(fmt.Errorf("warm-up: %v", err))
	}

	// Ready; wait for the go, then run until stdin closes.
	ctx, cancel := context.WithTimeout(context.Background(), spec.Cap)
	defer cancel()
	fmt.Println(fleetReady)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fail(errors.New("no go"))
	}
	go func() {
		for in.Scan() {
		}
		cancel()
	}()

	began := time.Now()
	if spec.Driver == "notice" {
		res.Notices, err = noticeRounds(ctx, st, spec.Key, set, spec.Rounds)
		if err != nil {
			res.Err = err.Error()
		}
		cancel()
	}

	var (
		mu         sync.Mutex
		wg         sync.WaitGroup
		outage     atomic.Bool
		ca, cr, ce atomic.Int64
	)
	for range spec.Goroutines {
		if spec.Driver != "" {
			break
		}
		wg.Go(func() {
			var adm, loc []int64
			var allowed, refused, errs int64
			var tick <-chan time.Time
			if spec.Pace > 0 {
				tk := time.NewTicker(spec.Pace)
				defer tk.Stop()
				tick = tk.C
			}
			for ctx.Err() == nil {
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
					}
				}
				n := new(takeNote)
				r, err := st.Take(context.WithValue(ctx, noteKey{}, n), spec.Key, set, 1)
				calls := n.calls.Load()
				// An admission counts even if the run ended meanwhile; an
				// error after the end is the end's.
				switch {
				case err != nil && ctx.Err() != nil:
					continue
				case err != nil:
					errs++
					ce.Add(calls)
					if errs <= 2 {
						mu.Lock()
						if len(res.ErrorSample) < 4 {
							res.ErrorSample = append(res.ErrorSample, fmt.Sprintf("%v after the go: %v", time.Since(began).Round(time.Millisecond), err))
						}
						mu.Unlock()
					}
					continue
				case r.Allowed:
					allowed++
					ca.Add(calls)
					adm = append(adm, r.At.UnixMicro())
				default:
					refused++
					cr.Add(calls)
				}
				switch {
				case n.local.Load():
					outage.Store(true)
					if r.Allowed {
						loc = append(loc, r.At.UnixMicro())
					}
				case n.ok.Load() > 0 && outage.CompareAndSwap(true, false):
					mu.Lock()
					res.Recovered = append(res.Recovered, time.Now().UnixNano())
					mu.Unlock()
				}
			}
			mu.Lock()
			res.Admitted = append(res.Admitted, adm...)
			res.Local = append(res.Local, loc...)
			res.Allowed += allowed
			res.Refused += refused
			res.Errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	st.Close() // gives back what leases did not use, before the counts are read
	slices.Sort(res.Admitted)
	slices.Sort(res.Local)
	slices.Sort(res.Recovered)
	res.Failures = st.Failures()
	res.CallsAllowed, res.CallsRefused, res.CallsErrored = ca.Load(), cr.Load(), ce.Load()
	res.CallsBackground = background.Load()
	return res
}

// noticeRounds is the driver of "Reset seen elsewhere": another process
// floods key; in each round, once the key is used up and a while later
// (a random share of the refusal cache's second, so that the other
// process's entries are of every age), it resets key and takes one
// request itself, then, once the key is used up again, refunds that one.
func noticeRounds(ctx context.Context, st *redisstore.Store, key string, set ratelimit.PolicySet, rounds int) ([]notice, error) {
	var out []notice
	usedUp := func() error {
		for {
			r, err := st.Peek(ctx, key, set)
			if err == nil && !r.Allowed {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Polling another process's progress, not the clock.
			time.Sleep(5 * time.Millisecond)
		}
	}
	settle := func() {
		time.Sleep(time.Duration(100+rand.IntN(800)) * time.Millisecond)
	}
	for range rounds {
		if err := usedUp(); err != nil {
			return out, err
		}
		settle()
		out = append(out, notice{"Reset", time.Now().UnixMicro()})
		if err := st.Reset(ctx, key, set); err != nil {
			return out, err
		}
		r, err := st.Take(ctx, key, set, 1)
		if err != nil {
			return out, err
		}
		if !r.Allowed {
			continue // the flood took every slot first: no refund this round
		}
		if err := usedUp(); err != nil {
			return out, err
		}
		settle()
		out = append(out, notice{"Refund", time.Now().UnixMicro()})
		if err := st.Refund(ctx, key, set, 1, r.At); err != nil {
			return out, err
		}
	}
	return out, nil
}

// fleetProc is a running worker.
type fleetProc struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	write func(string) error
	out   *bytes.Buffer
	ready chan struct{}
	spec  workerSpec
}

// startWorkers starts a worker per spec and waits until all are ready.
func startWorkers(t *testing.T, specs []workerSpec) []*fleetProc {
	t.Helper()
	var procs []*fleetProc
	for i, spec := range specs {
		spec.Out = fmt.Sprintf("%s/worker-%d.json", t.TempDir(), i)
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestFleetWorker$", "-test.count=1")
		cmd.Env = append(os.Environ(), fleetWorkerEnv+"="+string(raw))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		p := &fleetProc{cmd: cmd, stdin: stdin, out: new(bytes.Buffer), ready: make(chan struct{}), spec: spec}
		p.write = func(s string) error { _, err := stdin.Write([]byte(s)); return err }
		cmd.Stderr = p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == fleetReady {
					once.Do(func() { close(p.ready) })
				}
			}
		}()
		procs = append(procs, p)
	}
	for i, p := range procs {
		select {
		case <-p.ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %d not ready:\n%s", i, p.out)
		}
	}
	return procs
}

// goWorkers releases the workers together.
func goWorkers(t *testing.T, procs []*fleetProc) {
	t.Helper()
	for i, p := range procs {
		if err := p.write("go\n"); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
}

// stopWorkers tells the workers to stop, and returns what each saw.
func stopWorkers(t *testing.T, procs []*fleetProc) []workerResult {
	t.Helper()
	for _, p := range procs {
		p.stdin.Close()
	}
	return waitWorkers(t, procs)
}

// waitWorkers waits for the workers to end and returns what each saw.
func waitWorkers(t *testing.T, procs []*fleetProc) []workerResult {
	t.Helper()
	out := make([]workerResult, len(procs))
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, p.out)
		}
		b, err := os.ReadFile(p.spec.Out)
		if err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, p.out)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if out[i].Err != "" {
			t.Errorf("worker %d: %s", i, out[i].Err)
		}
	}
	return out
}
