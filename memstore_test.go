package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestStore(t *testing.T, opts ...Option) *MemoryStore {
	t.Helper()
	s, err := NewMemoryStore(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// step is one request at an offset from the start of a test.
type step struct {
	at        time.Duration
	cost      int
	allowed   bool
	remaining int
	retry     time.Duration
	reset     time.Duration
}

func TestSlidingLogEdges(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		steps  []step
	}{
		{"first request ever", 3, time.Minute, []step{
			{at: 0, allowed: true, remaining: 2, reset: time.Minute},
		}},
		{"exactly at the limit", 3, time.Minute, []step{
			{at: 0, allowed: true, remaining: 2, reset: time.Minute},
			{at: 10 * time.Second, allowed: true, remaining: 1, reset: 50 * time.Second},
			{at: 20 * time.Second, allowed: true, remaining: 0, reset: 40 * time.Second},
			{at: 30 * time.Second, allowed: false, remaining: 0, retry: 30 * time.Second, reset: 30 * time.Second},
		}},
		{"an instant exactly one window old no longer counts", 2, time.Minute, []step{
			{at: 0, allowed: true, remaining: 1, reset: time.Minute},
			{at: 0, allowed: true, remaining: 0, reset: time.Minute},
			{at: time.Minute, allowed: true, remaining: 1, reset: time.Minute},
		}},
		{"1ms before a slot frees", 1, time.Minute, []step{
			{at: 0, allowed: true, remaining: 0, reset: time.Minute},
			{at: time.Minute - ms, allowed: false, remaining: 0, retry: ms, reset: ms},
			{at: time.Minute, allowed: true, remaining: 0, reset: time.Minute},
		}},
		{"rejected requests are not logged, so a hammering client recovers", 2, 10 * time.Second, []step{
			{at: 0, allowed: true, remaining: 1, reset: 10 * time.Second},
			{at: 1 * time.Second, allowed: true, remaining: 0, reset: 9 * time.Second},
			{at: 2 * time.Second, allowed: false, retry: 8 * time.Second, reset: 8 * time.Second},
			{at: 5 * time.Second, allowed: false, retry: 5 * time.Second, reset: 5 * time.Second},
			{at: 9 * time.Second, allowed: false, retry: 1 * time.Second, reset: 1 * time.Second},
			{at: 10 * time.Second, allowed: true, remaining: 0, reset: 1 * time.Second},
		}},
		{"retry waits for the oldest logged request, not the window", 3, time.Minute, []step{
			{at: 0, allowed: true, remaining: 2, reset: time.Minute},
			{at: 50 * time.Second, allowed: true, remaining: 1, reset: 10 * time.Second},
			{at: 55 * time.Second, allowed: true, remaining: 0, reset: 5 * time.Second},
			{at: 56 * time.Second, allowed: false, retry: 4 * time.Second, reset: 4 * time.Second},
			{at: 61 * time.Second, allowed: true, remaining: 0, reset: 49 * time.Second},
		}},
		{"a cost waits for enough instants to leave", 5, time.Minute, []step{
			{at: 0, cost: 2, allowed: true, remaining: 3, reset: time.Minute},
			{at: 10 * time.Second, cost: 2, allowed: true, remaining: 1, reset: 50 * time.Second},
			{at: 20 * time.Second, cost: 4, allowed: false, remaining: 1, retry: 50 * time.Second, reset: 40 * time.Second},
			{at: 20 * time.Second, cost: 1, allowed: true, remaining: 0, reset: 40 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			s := newTestStore(t, WithClock(clk.Now))
			policies := []Policy{{Name: "p", Limit: tt.limit, Window: tt.window}}
			for i, st := range tt.steps {
				clk.Advance(start.Add(st.at).Sub(clk.Now()))
				cost := max(st.cost, 1)
				got, err := s.Take(context.Background(), "k", policies, cost)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				want := Result{Allowed: st.allowed, Limit: tt.limit, Remaining: st.remaining, RetryAfter: st.retry, Reset: st.reset, Policy: "p"}
				if got != want {
					t.Errorf("request %d at %v: got %+v, want %+v", i, st.at, got, want)
				}
			}
		})
	}
}

func TestSlidingLogGrowsAndShrinks(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	huge := []Policy{{Name: "huge", Limit: 1_000_000_000, Window: time.Hour}}
	for range 100 {
		if res, _ := s.Take(context.Background(), "k", huge, 1); !res.Allowed {
			t.Fatal("request refused under a limit of a billion")
		}
	}
	e, _ := findEntry(s, "k")
	if c := e.first.size(); c > 128 {
		t.Errorf("100 requests under a limit of a billion: ring capacity %d, want <= 128 (grown on demand)", c)
	}
	clk.Advance(time.Hour)
	if _, err := s.Take(context.Background(), "k", huge, 1); err != nil {
		t.Fatal(err)
	}
	if c := e.first.size(); c > minLogCap {
		t.Errorf("after the window drained: ring capacity %d, want <= %d", c, minLogCap)
	}
}

func TestMemoryStoreKeysAreIndependent(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	p := []Policy{{Name: "p", Limit: 2, Window: time.Minute}}
	for _, k := range []string{"a", "a", "b", "a", "b", "b", "c"} {
		s.Take(context.Background(), k, p, 1)
	}
	for k, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if res, _ := s.Take(context.Background(), k, p, 1); res.Allowed != want {
			t.Errorf("key %q: allowed %v, want %v", k, res.Allowed, want)
		}
	}
}

// Exactly limit requests are allowed when many goroutines hit one key at
// once: evict, check and record are one step.
func TestMemoryStoreExactUnderConcurrency(t *testing.T) {
	const limit, goroutines, each = 500, 64, 20
	s := newTestStore(t)
	p := []Policy{{Name: "p", Limit: limit, Window: time.Hour}}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				res, err := s.Take(context.Background(), "hot", p, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Errorf("%d goroutines x %d requests: %d allowed, want exactly %d", goroutines, each, got, limit)
	}
}

func TestMultiplePoliciesRecordAllOrNone(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	policies := []Policy{
		{Name: "burst", Limit: 2, Window: time.Second},
		{Name: "hourly", Limit: 3, Window: time.Hour},
	}
	take := func() Result {
		t.Helper()
		res, err := s.Take(context.Background(), "k", policies, 1)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Two fit both; the third breaks the burst policy and must not be
	// logged in the hourly one.
	for i := range 2 {
		if res := take(); !res.Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	if res := take(); res.Allowed || res.Policy != "burst" || res.RetryAfter != time.Second {
		t.Fatalf("third request: got %+v, want refused by burst with RetryAfter 1s", res)
	}
	clk.Advance(time.Second)
	res := take()
	if !res.Allowed || res.Policy != "hourly" || res.Remaining != 0 {
		t.Fatalf("after the burst window: got %+v, want allowed with hourly at 0 remaining (the refused request was not logged)", res)
	}
	clk.Advance(time.Second)
	res = take()
	if res.Allowed || res.Policy != "hourly" || res.RetryAfter != time.Hour-2*time.Second {
		t.Fatalf("fourth request: got %+v, want refused by hourly, retry %v", res, time.Hour-2*time.Second)
	}
}

func TestTakeRejectsBadArguments(t *testing.T) {
	s := newTestStore(t)
	p := []Policy{{Name: "p", Limit: 2, Window: time.Minute}}
	if _, err := s.Take(context.Background(), "k", p, 3); err != ErrCostExceedsLimit {
		t.Errorf("cost 3 over limit 2: err %v, want ErrCostExceedsLimit", err)
	}
	if _, err := s.Take(context.Background(), "k", p, 0); err == nil {
		t.Error("cost 0: no error")
	}
	if _, err := s.Take(context.Background(), "k", nil, 1); err == nil {
		t.Error("no policies: no error")
	}
}

// A flood of distinct keys that then go idle does not keep its memory: new
// keys sweep idle ones as they arrive, and the background sweep clears the
// rest and shrinks the maps.
func TestIdleKeysAreSweptUnderAFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p := []Policy{{Name: "p", Limit: 10, Window: time.Second}}
		const wave = 50_000
		for i := range wave {
			s.Take(context.Background(), fmt.Sprint("flood-", i), p, 1)
		}
		if got := s.Stats().Keys; got != wave {
			t.Fatalf("after one wave within a window: %d keys, want %d", got, wave)
		}
		// The first wave is idle now; a second wave sweeps it as it comes.
		time.Sleep(2 * time.Second)
		for i := range wave {
			s.Take(context.Background(), fmt.Sprint("second-", i), p, 1)
		}
		if got := s.Stats().Keys; got > wave+wave/2 {
			t.Errorf("after a second wave: %d keys, want <= %d (idle keys swept by new ones)", got, wave+wave/2)
		}
		// With no traffic at all, the background sweep drops everything.
		time.Sleep(sweepInterval + time.Second)
		synctest.Wait()
		if got := s.Stats().Keys; got != 0 {
			t.Errorf("after a quiet sweep interval: %d keys, want 0", got)
		}
		peak := int32(0)
		for i := range s.shards {
			peak = max(peak, s.shards[i].peak)
		}
		if peak != 0 {
			t.Errorf("after the sweep: a shard keeps a map sized for %d keys, want fresh maps", peak)
		}
	})
}

// New keys sweep the idle keys of their shard, for every algorithm, as
// soon as those can be idle: for GCRA that is after one emission interval,
// however long the window.
func TestNewKeysSweepIdleOnes(t *testing.T) {
	for _, tt := range []struct {
		algo  Algorithm
		p     Policy
		quiet time.Duration
	}{
		{SlidingLog, Policy{Name: "p", Limit: 10, Window: time.Second}, time.Second},
		{SlidingWindowCounter, Policy{Name: "p", Limit: 10, Window: time.Second}, 2 * time.Second},
		{GCRA, Policy{Name: "p", Limit: 1_000_000, Window: time.Second}, time.Microsecond},
	} {
		t.Run(tt.algo.String(), func(t *testing.T) {
			clk := newFakeClock()
			s := newTestStore(t, WithClock(clk.Now), WithAlgorithm(tt.algo))
			const wave = 20_000
			take := func(prefix string) {
				for i := range wave {
					if _, err := s.Take(context.Background(), prefix+strconv.Itoa(i), []Policy{tt.p}, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			take("first-")
			clk.Advance(tt.quiet - 1)
			take("second-")
			if got := s.Stats().Keys; got != 2*wave {
				t.Fatalf("a nanosecond before the first wave is idle: %d keys, want %d", got, 2*wave)
			}
			clk.Advance(1)
			take("third-")
			if got := s.Stats().Keys; got > 2*wave+wave/10 {
				t.Errorf("after a third wave: %d keys, want <= %d (the first wave swept by new keys)", got, 2*wave+wave/10)
			}
			// The next wave finds every key idle and empties the shards;
			// the keys it adds then set when the shards are next worth
			// sweeping.
			clk.Advance(tt.quiet)
			take("fourth-")
			clk.Advance(tt.quiet)
			take("fifth-")
			if got := s.Stats().Keys; got > wave+wave/10 {
				t.Errorf("after a fifth wave: %d keys, want <= %d (the fourth wave swept by new keys)", got, wave+wave/10)
			}
		})
	}
}

func TestMaxKeys(t *testing.T) {
	p := []Policy{{Name: "p", Limit: 5, Window: time.Minute}}
	t.Run("reject new keys", func(t *testing.T) {
		s := newTestStore(t, WithMaxKeys(64, RejectNewKeys))
		s.Take(context.Background(), "legit", p, 1)
		refused := 0
		for i := range 1000 {
			if _, err := s.Take(context.Background(), fmt.Sprint("k", i), p, 1); err == ErrStoreFull {
				refused++
			}
		}
		st := s.Stats()
		if st.Keys > 64 {
			t.Errorf("%d keys tracked, want <= 64", st.Keys)
		}
		if refused == 0 || uint64(refused) != st.Rejected {
			t.Errorf("%d refused, Stats.Rejected %d: want equal and > 0", refused, st.Rejected)
		}
		res, err := s.Take(context.Background(), "legit", p, 1)
		if err != nil || res.Remaining != 3 {
			t.Errorf("legit key after the flood: %+v, %v; want its count kept (remaining 3)", res, err)
		}
	})
	t.Run("evict least recent", func(t *testing.T) {
		s := newTestStore(t, WithMaxKeys(64, EvictLeastRecent))
		for i := range 1000 {
			if _, err := s.Take(context.Background(), fmt.Sprint("k", i), p, 1); err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		st := s.Stats()
		if st.Keys > 64 || st.Evicted == 0 {
			t.Errorf("stats %+v: want <= 64 keys and evictions", st)
		}
	})
}

func TestCloseStopsTheSweepAndIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		// synctest.Test fails if the sweep goroutine outlives the bubble.
	})
}

// An injected clock that steps back is held at its latest reading, so no
// window is measured backwards and logs stay in order.
func TestInjectedClockNeverStepsBack(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	p := []Policy{{Name: "p", Limit: 2, Window: time.Minute}}
	s.Take(context.Background(), "k", p, 1)
	clk.Advance(30 * time.Second)
	s.Take(context.Background(), "k", p, 1)
	clk.Advance(-20 * time.Second) // back to 10s: read as 30s
	res, _ := s.Take(context.Background(), "k", p, 1)
	if res.Allowed || res.RetryAfter != 30*time.Second {
		t.Errorf("after the clock stepped back: got %+v, want refused with RetryAfter 30s (measured from 30s)", res)
	}
	clk.Advance(50 * time.Second) // 60s
	if res, _ := s.Take(context.Background(), "k", p, 1); !res.Allowed || res.Reset != 30*time.Second {
		t.Errorf("at 60s: got %+v, want allowed with Reset 30s (the instant at 30s is oldest)", res)
	}
}

// A key cut from a larger string is copied before the store keeps it, so
// that it does not pin the larger one.
func TestStoreKeepsNoLargerString(t *testing.T) {
	big := strings.Repeat("k", 1<<16)
	cut := KeyFunc(func(r *http.Request) (string, error) {
		return big[:10+len(r.Header.Get("X-Api-Key"))], nil
	})
	l, err := New(10, time.Minute, cut)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", "abc")
	l.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
	found := 0
	for i := range l.store.(*MemoryStore).shards {
		for _, e := range l.store.(*MemoryStore).shards[i].m {
			k := e.key
			found++
			if p := uintptr(unsafe.Pointer(unsafe.StringData(k))); p >= uintptr(unsafe.Pointer(unsafe.StringData(big))) && p < uintptr(unsafe.Pointer(unsafe.StringData(big)))+uintptr(len(big)) {
				t.Error("the store keeps a slice of the string the key was cut from")
			}
		}
	}
	if found != 1 {
		t.Fatalf("%d keys in the store, want 1", found)
	}

}

// A key keeps one state per policy of the Take that made it; a Take with
// a different number of policies starts the key over, and the states of
// policies after the first, kept beside the key, go with it, as they do
// when the key is swept.
func TestKeyWithOtherPoliciesStartsOver(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	one := []Policy{{Name: "one", Limit: 1, Window: time.Minute}}
	two := []Policy{{Name: "a", Limit: 1, Window: time.Minute}, {Name: "b", Limit: 5, Window: time.Hour}}
	take := func(p []Policy) Result {
		t.Helper()
		res, err := s.Take(context.Background(), "k", p, 1)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	rest := func() int {
		n := 0
		for i := range s.shards {
			n += len(s.shards[i].rest)
		}
		return n
	}
	for i, c := range []struct {
		p       []Policy
		allowed bool
		rest    int
	}{
		{one, true, 0},
		{one, false, 0},
		{two, true, 1}, // started over: policy a is empty
		{two, false, 1},
		{one, true, 0}, // started over again; b's state is gone
		{two, true, 1},
	} {
		if res := take(c.p); res.Allowed != c.allowed {
			t.Fatalf("take %d with %d policies: allowed %v, want %v", i, len(c.p), res.Allowed, c.allowed)
		}
		if got := rest(); got != c.rest {
			t.Fatalf("take %d: %d keys with states beside them, want %d", i, got, c.rest)
		}
	}
	clk.Advance(time.Hour)
	s.sweepAll()
	if got, keys := rest(), s.Stats().Keys; got != 0 || keys != 0 {
		t.Errorf("after the sweep: %d keys, %d with states beside them, want 0 and 0", keys, got)
	}
	if size := unsafe.Sizeof(entry{}); size != 48 {
		t.Errorf("an entry is %d bytes, want 48 (a size class of its own)", size)
	}
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Errorf("a shard is %d bytes, want 64 (a cache line)", size)
	}
}

// Keys whose callers disagree on their policies, taken from many
// goroutines at once, stay consistent: every Take answers, and under
// -race no state is touched without its key's lock.
func TestKeysChangingPoliciesUnderConcurrency(t *testing.T) {
	s := newTestStore(t)
	sets := [][]Policy{
		{{Name: "a", Limit: 1000, Window: time.Hour}},
		{{Name: "a", Limit: 1000, Window: time.Hour}, {Name: "b", Limit: 1000, Window: time.Minute}},
		{{Name: "a", Limit: 1000, Window: time.Hour}, {Name: "b", Limit: 1000, Window: time.Minute}, {Name: "c", Limit: 1000, Window: time.Second}},
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 500 {
				p := sets[(g+i)%len(sets)]
				res, err := s.Take(context.Background(), "k"+strconv.Itoa(i%4), p, 1)
				if err != nil || !res.Allowed || res.Limit != 1000 {
					t.Errorf("take: %+v, %v; want allowed under a limit of 1000", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range s.shards {
		sh := &s.shards[i]
		for e := range sh.rest {
			if !slices.Contains(slices.Collect(maps.Values(sh.m)), e) {
				t.Errorf("shard %d keeps states beside an entry it no longer holds", i)
			}
		}
	}
}

// A key whose hash another key already holds in its shard's map is kept
// beside it and counted exactly, on its own, until both are swept. Real
// collisions of the seeded 64-bit hash are out of reach, so the test
// plants an impostor under the hash of "k".
func TestKeysSharingAHash(t *testing.T) {
	clk := newFakeClock()
	s := newTestStore(t, WithClock(clk.Now))
	h := maphash.String(s.seed, "k")
	sh := &s.shards[h&s.shardMask]
	impostor := &entry{key: "impostor"}
	sh.add(h, impostor)

	p := []Policy{{Name: "p", Limit: 3, Window: time.Minute}}
	for i := range 5 {
		res, err := s.Take(context.Background(), "k", p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 3; res.Allowed != want {
			t.Fatalf("take %d: allowed %v, want %v", i, res.Allowed, want)
		}
	}
	e, _ := findEntry(s, "k")
	if e == nil || e == impostor || sh.m[h] != impostor || sh.other["k"] != e {
		t.Fatal(`"k" is not kept beside the key that holds its hash`)
	}
	if n := impostor.first.n; n != 0 {
		t.Errorf("the impostor logged %d requests of another key", n)
	}
	if got := s.Stats().Keys; got != 2 {
		t.Errorf("Stats: %d keys, want 2", got)
	}

	// Dropping the key in the map leaves the one beside it findable, and
	// a key added then takes the free place in the map.
	s.drop(sh, h, impostor)
	if got, _ := findEntry(s, "k"); got != e {
		t.Fatal(`"k" lost once the key holding its hash was dropped`)
	}
	clk.Advance(time.Minute)
	s.sweepAll()
	if got := s.Stats().Keys; got != 0 || len(sh.other) != 0 {
		t.Errorf("after the sweep: %d keys, %d beside the map, want 0 and 0", got, len(sh.other))
	}
}
