package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// The memory store's tests of the Store contract are in storetest, run by
// TestMemoryStoreConformance; these test what only the memory store does.

func newTestStore(t *testing.T, opts ...Option) *MemoryStore {
	t.Helper()
	s, err := NewMemoryStore(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// take is s.Take, failing t on an error.
func take(t *testing.T, s Store, key string, set PolicySet) Result {
	t.Helper()
	res, err := s.Take(context.Background(), key, set, 1)
	if err != nil {
		t.Fatalf("Take(%q): %v", key, err)
	}
	return res
}

func TestSlidingLogGrowsAndShrinks(t *testing.T) {
	clk := fakeclock.New()
	s := newTestStore(t, WithClock(clk.Now))
	huge := mustSet(t, Policy{Name: "huge", Limit: 1_000_000_000, Window: time.Hour})
	for range 100 {
		if !take(t, s, "k", huge).Allowed {
			t.Fatal("request refused under a limit of a billion")
		}
	}
	e, _ := findEntry(s, "k", huge)
	if c := e.first.size(); c > 128 {
		t.Errorf("100 requests under a limit of a billion: ring capacity %d, want <= 128 (grown on demand)", c)
	}
	clk.Advance(time.Hour)
	take(t, s, "k", huge)
	if c := e.first.size(); c > minLogCap {
		t.Errorf("after the window drained: ring capacity %d, want <= %d", c, minLogCap)
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
		p := mustSet(t, Policy{Name: "p", Limit: 10, Window: time.Second})
		const wave = 50_000
		for i := range wave {
			take(t, s, fmt.Sprint("flood-", i), p)
		}
		if got := s.Stats().Keys; got != wave {
			t.Fatalf("after one wave within a window: %d keys, want %d", got, wave)
		}
		// The first wave is idle now; a second wave sweeps it as it comes.
		time.Sleep(2 * time.Second)
		for i := range wave {
			take(t, s, fmt.Sprint("second-", i), p)
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
		p     Policy
		quiet time.Duration
	}{
		{Policy{Name: "p", Limit: 10, Window: time.Second}, time.Second},
		{Policy{Name: "p", Limit: 10, Window: time.Second, Algorithm: SlidingWindowCounter}, 2 * time.Second},
		{Policy{Name: "p", Limit: 1_000_000, Window: time.Second, Algorithm: GCRA}, time.Microsecond},
	} {
		t.Run(tt.p.Algorithm.String(), func(t *testing.T) {
			clk := fakeclock.New()
			s := newTestStore(t, WithClock(clk.Now))
			set := mustSet(t, tt.p)
			const wave = 20_000
			fill := func(prefix string) {
				for i := range wave {
					take(t, s, prefix+strconv.Itoa(i), set)
				}
			}
			fill("first-")
			clk.Advance(tt.quiet - 1)
			fill("second-")
			if got := s.Stats().Keys; got != 2*wave {
				t.Fatalf("a nanosecond before the first wave is idle: %d keys, want %d", got, 2*wave)
			}
			clk.Advance(1)
			fill("third-")
			if got := s.Stats().Keys; got > 2*wave+wave/10 {
				t.Errorf("after a third wave: %d keys, want <= %d (the first wave swept by new keys)", got, 2*wave+wave/10)
			}
			// The next wave finds every key idle and empties the shards;
			// the keys it adds then set when the shards are next worth
			// sweeping.
			clk.Advance(tt.quiet)
			fill("fourth-")
			clk.Advance(tt.quiet)
			fill("fifth-")
			if got := s.Stats().Keys; got > wave+wave/10 {
				t.Errorf("after a fifth wave: %d keys, want <= %d (the fourth wave swept by new keys)", got, wave+wave/10)
			}
		})
	}
}

// A key goes idle by its own set's windows, not by the longest window any
// set of the store has: a daily plan beside a per-second default does not
// keep a flood of per-second keys for a day, nor lock new clients out of
// a store bounded by WithMaxKeys.
func TestKeysGoIdleByTheirOwnWindows(t *testing.T) {
	plans := WithPlans(func(r *http.Request, key string) string { return r.Header.Get("X-Plan") },
		map[string][]Policy{"daily": {{Name: "daily", Limit: 1000, Window: 24 * time.Hour}}})
	get := func(l *Limiter, client, plan string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = client + ":1"
		r.Header.Set("X-Plan", plan)
		w := httptest.NewRecorder()
		l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		return w.Code
	}
	t.Run("bounded", func(t *testing.T) {
		clk := fakeclock.New()
		// A bound of 1024 in 64 shards of 16: the 100 new clients would
		// have to crowd 16 into one shard to fill it, once the flood is
		// swept, a chance of about one in 10^11.
		l, err := New(10, time.Second, KeyByIP(), plans, WithMaxKeys(1024, RejectNewKeys), WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if code := get(l, "10.0.0.1", "daily"); code != http.StatusOK {
			t.Fatalf("the daily client: %d, want 200", code)
		}
		for i := range 2000 {
			get(l, fmt.Sprintf("10.1.%d.%d", i/256, i%256), "")
		}
		clk.Advance(10 * time.Second)
		refused := 0
		for i := range 100 {
			if code := get(l, fmt.Sprintf("10.2.0.%d", i), ""); code != http.StatusOK {
				refused++
			}
		}
		if refused != 0 {
			t.Errorf("10s after a flood of 1s-window keys: %d of 100 new clients refused, want 0 (the flood is idle)", refused)
		}
	})
	t.Run("unbounded", func(t *testing.T) {
		clk := fakeclock.New()
		l, err := New(10, time.Second, KeyByIP(), plans, WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		get(l, "10.0.0.1", "daily")
		for i := range 1000 {
			get(l, fmt.Sprintf("10.1.%d.%d", i/256, i%256), "")
		}
		clk.Advance(2 * time.Second)
		l.store.(*MemoryStore).sweepAll()
		if got := l.Stats().Keys; got != 1 {
			t.Errorf("2s after a flood of 1s-window keys: %d keys kept, want 1 (the daily client's)", got)
		}
		if code := get(l, "10.0.0.1", "daily"); code != http.StatusOK {
			t.Errorf("the daily client after the sweep: %d, want 200", code)
		}
	})
}

// Sets of different windows first used at once never make the store
// forget a count early: what a key's state may be dropped by comes from
// its own set, fixed when the set is made, so there is nothing to race on.
func TestFirstUsesOfWindowsAtOnce(t *testing.T) {
	long := mustSet(t, Policy{Name: "p", Limit: 1, Window: time.Hour})
	shorts := make([]PolicySet, 8)
	for i := range shorts {
		shorts[i] = mustSet(t, Policy{Name: "p", Limit: 1, Window: time.Duration(i+1) * time.Millisecond})
	}
	for round := range 200 {
		clk := fakeclock.New()
		s := newTestStore(t, WithClock(clk.Now))
		var wg sync.WaitGroup
		wg.Go(func() { take(t, s, "long", long) })
		for i := range shorts {
			wg.Go(func() { take(t, s, "short", shorts[i]) })
		}
		wg.Wait()
		clk.Advance(time.Second)
		s.sweepAll()
		if take(t, s, "long", long).Allowed {
			t.Fatalf("round %d: the hour-long count was forgotten after a second", round)
		}
	}
}

func TestMaxKeys(t *testing.T) {
	p := mustSet(t, Policy{Name: "p", Limit: 5, Window: time.Minute})
	t.Run("reject new keys", func(t *testing.T) {
		s := newTestStore(t, WithMaxKeys(64, RejectNewKeys))
		take(t, s, "legit", p)
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
		if res := take(t, s, "legit", p); res.Remaining != 3 {
			t.Errorf("legit key after the flood: %+v; want its count kept (remaining 3)", res)
		}
	})
	t.Run("evict least recent", func(t *testing.T) {
		s := newTestStore(t, WithMaxKeys(64, EvictLeastRecent))
		for i := range 1000 {
			take(t, s, fmt.Sprint("k", i), p)
		}
		if st := s.Stats(); st.Keys > 64 || st.Evicted == 0 {
			t.Errorf("stats %+v: want <= 64 keys and evictions", st)
		}
	})
	// Small bounds make a store of one shard, bounded exactly; they once
	// panicked with a negative shift.
	for n := 1; n <= 17; n++ {
		t.Run(fmt.Sprint("bound ", n), func(t *testing.T) {
			l, err := New(5, time.Minute, KeyByIP(), WithMaxKeys(n, RejectNewKeys))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			s := newTestStore(t, WithMaxKeys(n, RejectNewKeys))
			full := 0
			for i := range 2 * n {
				if _, err := s.Take(context.Background(), fmt.Sprint("k", i), p, 1); err == ErrStoreFull {
					full++
				}
			}
			if got := s.Stats().Keys; got > n || full != 2*n-got {
				t.Errorf("%d keys tracked and %d refused of %d, want at most %d tracked and the rest refused", got, full, 2*n, n)
			}
		})
	}
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
	clk := fakeclock.New()
	s := newTestStore(t, WithClock(clk.Now))
	p := mustSet(t, Policy{Name: "p", Limit: 2, Window: time.Minute})
	take(t, s, "k", p)
	clk.Advance(30 * time.Second)
	take(t, s, "k", p)
	clk.Advance(-20 * time.Second) // back to 10s: read as 30s
	if res := take(t, s, "k", p); res.Allowed || res.RetryAfter != 30*time.Second {
		t.Errorf("after the clock stepped back: got %+v, want refused with RetryAfter 30s (measured from 30s)", res)
	}
	clk.Advance(50 * time.Second) // 60s
	if res := take(t, s, "k", p); !res.Allowed || res.Reset != 30*time.Second {
		t.Errorf("at 60s: got %+v, want allowed with Reset 30s (the instant at 30s is oldest)", res)
	}
}

// A key cut from a larger string is copied before the store keeps it, so
// that it does not pin the larger one.
func TestStoreKeepsNoLargerString(t *testing.T) {
	big := strings.Repeat("k", 1<<16)
	s := newTestStore(t)
	p := mustSet(t, Policy{Name: "p", Limit: 2, Window: time.Minute})
	take(t, s, big[:10], p)
	e, _ := findEntry(s, big[:10], p)
	if e == nil {
		t.Fatal("the key is not in the store")
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(big)))
	if k := uintptr(unsafe.Pointer(unsafe.StringData(e.key))); k >= start && k < start+uintptr(len(big)) {
		t.Error("the store keeps a slice of the string the key was cut from")
	}
}

// An entry holds one key under one set: its states, made with it, one per
// policy of the set, the first inline and the others beside it, gone with
// it when it is swept.
func TestEntriesOfSeveralSets(t *testing.T) {
	clk := fakeclock.New()
	s := newTestStore(t, WithClock(clk.Now))
	one := mustSet(t, Policy{Name: "a", Limit: 1, Window: time.Minute})
	two := mustSet(t, Policy{Name: "a", Limit: 1, Window: time.Minute}, Policy{Name: "b", Limit: 5, Window: time.Hour})
	for _, ps := range []PolicySet{one, two, one, two} {
		take(t, s, "k", ps)
	}
	rest := 0
	for i := range s.shards {
		rest += len(s.shards[i].rest)
	}
	if keys := s.Stats().Keys; keys != 2 || rest != 1 {
		t.Errorf("one key under two sets: %d entries, %d with states beside them; want 2 and 1", keys, rest)
	}
	clk.Advance(time.Hour)
	s.sweepAll()
	rest = 0
	for i := range s.shards {
		rest += len(s.shards[i].rest)
	}
	if keys := s.Stats().Keys; keys != 0 || rest != 0 {
		t.Errorf("after the sweep: %d entries, %d with states beside them; want 0 and 0", keys, rest)
	}
	if size := unsafe.Sizeof(entry{}); size != 64 {
		t.Errorf("an entry is %d bytes, want 64 (a size class of its own)", size)
	}
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Errorf("a shard is %d bytes, want 64 (a cache line)", size)
	}
}

// An entry whose hash another entry already holds in its shard's map is
// kept beside it and counted exactly, on its own, until both are swept.
// Real collisions of the seeded 64-bit hash are out of reach, so the test
// plants an impostor under the hash of "k".
func TestEntriesSharingAHash(t *testing.T) {
	clk := fakeclock.New()
	s := newTestStore(t, WithClock(clk.Now))
	p := mustSet(t, Policy{Name: "p", Limit: 3, Window: time.Minute})
	h := s.hash("k", p.p)
	sh := &s.shards[h&s.shardMask]
	impostor := &entry{key: "impostor", set: p.p}
	sh.add(h, impostor)

	for i := range 5 {
		if res := take(t, s, "k", p); res.Allowed != (i < 3) {
			t.Fatalf("take %d: allowed %v, want %v", i, res.Allowed, i < 3)
		}
	}
	e, _ := findEntry(s, "k", p)
	if e == nil || e == impostor || sh.m[h] != impostor || sh.other[identity{"k", p.ID()}] != e {
		t.Fatal(`"k" is not kept beside the entry that holds its hash`)
	}
	if n := impostor.first.n; n != 0 {
		t.Errorf("the impostor logged %d requests of another key", n)
	}
	if got := s.Stats().Keys; got != 2 {
		t.Errorf("Stats: %d keys, want 2", got)
	}

	// Dropping the entry in the map leaves the one beside it findable.
	s.drop(sh, h, impostor)
	if got, _ := findEntry(s, "k", p); got != e {
		t.Fatal(`"k" lost once the entry holding its hash was dropped`)
	}
	clk.Advance(time.Minute)
	s.sweepAll()
	if got := s.Stats().Keys; got != 0 || len(sh.other) != 0 {
		t.Errorf("after the sweep: %d keys, %d beside the map, want 0 and 0", got, len(sh.other))
	}
}

// A full store that rejects new keys drops an idle key for a new one
// whenever it holds one, even where a sample of its keys would miss it.
func TestMaxKeysFindsTheIdleKey(t *testing.T) {
	short := mustSet(t, Policy{Name: "p", Limit: 5, Window: time.Second})
	long := mustSet(t, Policy{Name: "p", Limit: 5, Window: time.Hour})
	for round := range 40 {
		clk := fakeclock.New()
		s := newTestStore(t, WithMaxKeys(16, RejectNewKeys), WithClock(clk.Now))
		take(t, s, "idle soon", short)
		clk.Advance(2 * time.Second)
		for i := range 15 {
			take(t, s, fmt.Sprint("live-", i), long)
		}
		if _, err := s.Take(context.Background(), "new", long, 1); err != nil {
			t.Fatalf("round %d: a new key beside 15 live ones and an idle one: %v, want it served", round, err)
		}
	}
}

// A request reads the clock before it waits for its entry's lock, so a
// request that read the clock earlier may get the lock after one that read
// it later. It is then decided at the later instant, within its own span,
// so that the entry's instants stay in order.
func TestReadingsBeforeTheLockStayInOrder(t *testing.T) {
	var (
		mu     sync.Mutex
		now    = fakeclock.Start
		called = make(chan struct{}, 1)
		signal bool
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if signal {
			signal = false
			called <- struct{}{}
		}
		return now
	}
	s := newTestStore(t, WithClock(clock))
	p := mustSet(t, Policy{Name: "p", Limit: 10, Window: time.Minute})
	take(t, s, "k", p)

	h := s.hash("k", p.p)
	e, st := s.lockedEntry(&s.shards[h&s.shardMask], h, "k", p.p)
	mu.Lock()
	now, signal = fakeclock.Start.Add(time.Second), true
	mu.Unlock()
	type taken struct {
		res Result
		err error
	}
	done := make(chan taken)
	go func() {
		res, err := s.Take(context.Background(), "k", p, 1)
		done <- taken{res, err}
	}()
	<-called // it has read 1s and waits for the lock
	// Meanwhile a request that read 2s got the lock first.
	later := fakeclock.Start.Add(2 * time.Second)
	if v, _, _ := decide(p.p, st, e.at(later.UnixNano()), 1); !v.ok {
		t.Fatalf("the request holding the lock: refused, want allowed")
	}
	e.mu.Unlock()

	got := <-done
	if got.err != nil || !got.res.Allowed || !got.res.At.Equal(later) {
		t.Fatalf("the request that read 1s: %+v, %v; want allowed at 2s", got.res, got.err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var log []time.Duration
	for i := range int64(st.first.n) {
		log = append(log, time.Duration(st.first.at(i)-fakeclock.Start.UnixNano()))
	}
	if want := []time.Duration{0, 2 * time.Second, 2 * time.Second}; !slices.Equal(log, want) {
		t.Errorf("instants logged at %v after the start, want %v", log, want)
	}
}
