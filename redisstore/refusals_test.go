package redisstore_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// scriptCalls counts the function calls a client sends, by FCALL or FCALL_RO,
// read-only or not.
func scriptCalls(rec *commands) int {
	return rec.count("fcall") + rec.count("fcall_ro")
}

// TestRefusalCacheFlood floods one key over its limit with 5,000
// requests from 8 goroutines, on the server's own clock: at most one
// script call per 100 refused requests reaches Redis, and the refusals
// answered from the cache show in Stats, the limiter's included.
func TestRefusalCacheFlood(t *testing.T) {
	c := sharedClient(t)
	rec := &commands{}
	c.AddHook(rec)
	st, _ := newStore(t, c)
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 10, Window: time.Hour})
	if got := len(hammer(t, []ratelimit.Store{st}, "flood", set, 1, 10)); got != 10 {
		t.Fatalf("%d of the first 10 allowed, want 10", got)
	}
	before := scriptCalls(rec)
	if got := len(hammer(t, []ratelimit.Store{st}, "flood", set, 8, 625)); got != 0 {
		t.Fatalf("%d of the flood allowed, want 0", got)
	}
	calls := scriptCalls(rec) - before
	t.Logf("5000 refused requests: %d script calls, %d answered from the cache", calls, st.Stats().CachedRefusals)
	if calls > 5000/100 {
		t.Errorf("%d script calls for 5000 refused requests, want at most 50", calls)
	}
	if got := st.Stats().CachedRefusals; got != uint64(5000-calls) {
		t.Errorf("Stats().CachedRefusals = %d, want %d (the refusals Redis did not answer)", got, 5000-calls)
	}
	l, err := ratelimit.New(1, time.Hour, ratelimit.KeyFunc(func(*http.Request) (string, error) { return "x", nil }), ratelimit.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Stats().CachedRefusals; got != st.Stats().CachedRefusals {
		t.Errorf("Limiter.Stats().CachedRefusals = %d, want the store's %d", got, st.Stats().CachedRefusals)
	}
}

// TestRefusalCacheOff: with WithRefusalCache(0) every refusal is a round
// trip.
func TestRefusalCacheOff(t *testing.T) {
	c := sharedClient(t)
	rec := &commands{}
	c.AddHook(rec)
	st, _ := newStore(t, c, redisstore.WithRefusalCache(0))
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 1, Window: time.Hour})
	for range 20 {
		takeOK(t, st, "k", set, 1)
	}
	if n := scriptCalls(rec); n != 20 {
		t.Errorf("%d script calls for 20 requests, want 20", n)
	}
	if n := st.Stats().CachedRefusals; n != 0 {
		t.Errorf("CachedRefusals = %d, want 0", n)
	}
}

// twin is this store and the memory store on one clock, so that every
// answer of this store, from Redis or from its cache, can be checked
// against a fresh decision of the memory store, which remembers nothing.
type twin struct {
	t     *testing.T
	clk   *storetest.Clock
	rs    *redisstore.Store
	ms    ratelimit.Store
	rec   *commands
	set   ratelimit.PolicySet
	calls int
}

func newTwin(t *testing.T, start time.Time, ps ...ratelimit.Policy) *twin {
	c := sharedClient(t)
	rec := &commands{}
	c.AddHook(rec)
	clk := &storetest.Clock{}
	clk.Set(start)
	rs, _ := clockedStore(t, c, clk)
	ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return &twin{t: t, clk: clk, rs: rs, ms: ms, rec: rec, set: policySet(t, ps...)}
}

// take takes cost at start+at from both stores, wants the same Result,
// and returns it and whether Redis was asked.
func (w *twin) take(start time.Time, at time.Duration, cost int) (ratelimit.Result, bool) {
	w.t.Helper()
	w.clk.Set(start.Add(at))
	got := takeOK(w.t, w.rs, "k", w.set, cost)
	want := takeOK(w.t, w.ms, "k", w.set, cost)
	if !sameResult(got, want) {
		w.t.Fatalf("at +%v, cost %d: %+v; a fresh decision says %+v", at, cost, got, want)
	}
	n := scriptCalls(w.rec)
	asked := n > w.calls
	w.calls = n
	return got, asked
}

// TestRefusalCacheValidity checks, on an injected clock, that a
// remembered refusal answers exactly as a fresh decision would, and stops
// answering when a fresh decision could differ: at the reported policy's
// Reset, when it comes before the set's wait for a request of cost 1
// (its Remaining grows then), and at that wait, when it comes first (a
// request could be counted then, by any process); and a second after it
// was decided at the latest, so that a Reset or Refund elsewhere is seen
// within a second.
func TestRefusalCacheValidity(t *testing.T) {
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sec := time.Second
	t.Run("until the reported policy's Reset", func(t *testing.T) {
		// a: 10 per 100s, GCRA (an interval of 10s); b: 3 per 20s. A
		// burst of 3 every 20s leaves a with 1 request to spare at
		// 125s, refusing 3 until 140s, as b does; a is reported (the
		// first of a tie) with its Reset at 130s, when its Remaining
		// grows to 2, and a request of 1 waits for b until 140s.
		w := newTwin(t, T, ratelimit.Policy{Name: "a", Limit: 10, Window: 100 * sec, Algorithm: gcra},
			ratelimit.Policy{Name: "b", Limit: 3, Window: 20 * sec})
		for at := time.Duration(0); at <= 120*sec; at += 20 * sec {
			if res, _ := w.take(T, at, 3); !res.Allowed {
				t.Fatalf("burst at +%v refused", at)
			}
		}
		res, asked := w.take(T, 125*sec, 3)
		if res.Allowed || res.Policy != "a" || res.Remaining != 1 || res.Reset != 5*sec || !asked {
			t.Fatalf("at +125s: %+v (Redis asked: %v), want refused by a, 1 remaining, Reset 5s, from Redis", res, asked)
		}
		for _, at := range []time.Duration{125 * sec, 125*sec + sec/2, 126*sec - time.Microsecond} {
			if _, asked := w.take(T, at, 3); asked {
				t.Errorf("at +%v: Redis asked, want the remembered refusal", at)
			}
		}
		// Learnt again at 126s, a second before its Reset, as it comes.
		for _, at := range []time.Duration{126 * sec, 129 * sec} {
			if _, asked := w.take(T, at, 3); !asked {
				t.Errorf("at +%v: the remembered refusal, want Redis asked (a second since it was learnt)", at)
			}
		}
		if _, asked := w.take(T, 130*sec-time.Microsecond, 3); asked {
			t.Errorf("at +130s-1µs: Redis asked, want the refusal remembered at 129s")
		}
		if res, asked := w.take(T, 130*sec, 3); !asked || res.Remaining != 2 {
			t.Errorf("at +130s: %+v (Redis asked: %v), want Redis asked, 2 remaining", res, asked)
		}
	})
	t.Run("until the wait for a request of 1", func(t *testing.T) {
		// 3 per minute at 0s, 10s and 20s: at 30s a request of 2 waits
		// until 70s, one of 1 until 60s. Another process (a store of
		// its own) takes 1 at 60s: this one must ask Redis again from
		// 60s on, and learn that 2 now wait until 80s, not 70s.
		w := newTwin(t, T, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Minute})
		for _, at := range []time.Duration{0, 10 * sec, 20 * sec} {
			w.take(T, at, 1)
		}
		if res, asked := w.take(T, 30*sec, 2); res.Allowed || res.RetryAfter != 40*sec || !asked {
			t.Fatalf("at +30s: %+v (Redis asked: %v), want refused for 40s, from Redis", res, asked)
		}
		if _, asked := w.take(T, 31*sec-time.Microsecond, 2); asked {
			t.Error("just before +31s: Redis asked, want the remembered refusal")
		}
		if _, asked := w.take(T, 59*sec+sec/2, 2); !asked {
			t.Error("at +59.5s: the refusal remembered at 30s, want Redis asked (more than a second since)")
		}
		if _, asked := w.take(T, 60*sec-time.Microsecond, 2); asked {
			t.Error("just before +60s: Redis asked, want the refusal remembered at 59.5s")
		}
		w.clk.Set(T.Add(60 * sec))
		other, err := redisstore.New(sharedClient(t), redisstore.WithPrefix(prefixOf(t, w.rs)), redisstore.WithScriptClock(w.clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		if res := takeOK(t, other, "k", w.set, 1); !res.Allowed {
			t.Fatalf("the other process at +60s: %+v, want allowed", res)
		}
		takeOK(t, w.ms, "k", w.set, 1)
		if res, asked := w.take(T, 60*sec, 2); !asked || res.RetryAfter != 20*sec {
			t.Errorf("at +60s: %+v (Redis asked: %v), want Redis asked, refused for 20s", res, asked)
		}
	})
	t.Run("a smaller cost", func(t *testing.T) {
		// Full at 3 of 3: a refusal of 3 is remembered, and answers
		// neither 2 nor 1, which Redis decides.
		w := newTwin(t, T, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Minute})
		w.take(T, 0, 2)
		w.take(T, 10*sec, 1)
		w.take(T, 20*sec, 3)
		for _, cost := range []int{3, 2, 1} {
			_, asked := w.take(T, 20*sec+sec/2, cost)
			if asked != (cost != 3) {
				t.Errorf("cost %d after a refusal of 3: Redis asked %v, want %v", cost, asked, cost != 3)
			}
		}
	})
	t.Run("not remembered while a request of 1 fits", func(t *testing.T) {
		w := newTwin(t, T, ratelimit.Policy{Name: "p", Limit: 5, Window: time.Hour})
		w.take(T, 0, 3)
		for i := range 3 {
			if res, asked := w.take(T, sec, 3); res.Allowed || !asked {
				t.Errorf("refusal %d of 3 with 2 remaining: %+v (Redis asked: %v), want refused by Redis", i, res, asked)
			}
		}
		if res, _ := w.take(T, sec, 2); !res.Allowed {
			t.Errorf("2 after refusals of 3: %+v, want allowed", res)
		}
	})
}

// TestRefusalCacheRoundTrip: across the network, a remembered refusal is
// valid from when its request was sent (the server decided after that),
// for a second at most, and its waits shrink from when the reply was
// received (so that they are never shorter than the truth). The hook
// moves the local clock by a round trip of 7ms while each function runs.
func TestRefusalCacheRoundTrip(t *testing.T) {
	c := sharedClient(t)
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	script, local := &storetest.Clock{}, &storetest.Clock{}
	script.Set(T)
	local.Set(T.Add(-time.Hour)) // another scale altogether
	const rtt = 7 * time.Millisecond
	c.AddHook(&onScript{fn: func() { local.Advance(rtt) }})
	rec := &commands{}
	c.AddHook(rec)
	st, _ := newStore(t, c, redisstore.WithScriptClock(script.Now), redisstore.WithLocalClock(local.Now))
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 1, Window: time.Minute})
	takeOK(t, st, "k", set, 1)
	sent := local.Now()
	first := takeOK(t, st, "k", set, 1) // refused for a minute, from Redis
	recv := local.Now()
	if first.Allowed || first.RetryAfter != time.Minute {
		t.Fatalf("second request: %+v, want refused for a minute", first)
	}
	calls := scriptCalls(rec)
	for _, d := range []time.Duration{0, time.Second / 2, time.Second - rtt - time.Nanosecond} {
		local.Set(recv.Add(d))
		res := takeOK(t, st, "k", set, 1)
		want := first
		want.RetryAfter -= d
		want.Reset -= d
		want.At = first.At.Add(d)
		if !res.At.Equal(want.At) || res.RetryAfter != want.RetryAfter || res.Reset != want.Reset || scriptCalls(rec) != calls {
			t.Errorf("%v after the reply: %+v, want %+v from the cache", d, res, want)
		}
	}
	local.Set(sent.Add(time.Second))
	takeOK(t, st, "k", set, 1)
	if scriptCalls(rec) != calls+1 {
		t.Errorf("a second after the request was sent: answered from the cache, want Redis asked")
	}
}

// onScript calls fn while each script call is on its way.
type onScript struct{ fn func() }

func (h *onScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *onScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); n == "fcall" || n == "fcall_ro" {
			h.fn()
		}
		return err
	}
}

func (h *onScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRefusalCacheForgets: a Refund or Reset through the store forgets
// the refusal it remembers for the key and set, so that the next request
// is decided by Redis.
func TestRefusalCacheForgets(t *testing.T) {
	c := sharedClient(t)
	ctx := context.Background()
	set := policySet(t, ratelimit.Policy{Name: "p", Limit: 2, Window: time.Hour})
	for _, tt := range []struct {
		name string
		undo func(st *redisstore.Store, at time.Time) error
	}{
		{"Refund", func(st *redisstore.Store, at time.Time) error { return st.Refund(ctx, "k", set, 1, at) }},
		{"Reset", func(st *redisstore.Store, _ time.Time) error { return st.Reset(ctx, "k", set) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := newStore(t, c)
			first := takeOK(t, st, "k", set, 1)
			takeOK(t, st, "k", set, 1)
			takeOK(t, st, "k", set, 1)
			if res := takeOK(t, st, "k", set, 1); res.Allowed || st.Stats().CachedRefusals != 1 {
				t.Fatalf("full: %+v with %d refusals from the cache, want refused from the cache", res, st.Stats().CachedRefusals)
			}
			if err := tt.undo(st, first.At); err != nil {
				t.Fatal(err)
			}
			if res := takeOK(t, st, "k", set, 1); !res.Allowed {
				t.Errorf("after %s: %+v, want allowed", tt.name, res)
			}
		})
	}
}

// BenchmarkRefused measures a refused request on a hot key, answered from
// the refusal cache (cache=on) and by Redis (cache=off), in one run.
func BenchmarkRefused(b *testing.B) {
	c := sharedClient(b)
	set := policySet(b, ratelimit.Policy{Name: "p", Limit: 1, Window: time.Hour})
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "cache=on", false: "cache=off"}[on]
		b.Run(name, func(b *testing.B) {
			opts := []redisstore.Option{redisstore.WithRefusalCache(0)}
			if on {
				opts = nil
			}
			st, _ := newStore(b, c, opts...)
			ctx := context.Background()
			st.Take(ctx, "hot", set, 1)
			b.ReportAllocs()
			for b.Loop() {
				if res, err := st.Take(ctx, "hot", set, 1); err != nil || res.Allowed {
					b.Fatalf("%+v, %v; want refused", res, err)
				}
			}
		})
	}
}
