package benchmarks

import (
	"context"
	"hash/maphash"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkMemoryFloor measures what a key costs in layouts stripped to
// their bones, to show how much of BenchmarkMemory's figure any design of
// that shape must pay: a Go map from the key to a pointer, and the value
// it points at. Each op adds one key, as "client-N" or as
// "apikey:client-N", which is what ratelimit's KeyByHeader stores (the kind
// prefix keeps an API key from colliding with an address when extractors
// share a store). Run it with -benchtime=100000x.
//
//   - int64: throttled's layout, map[string]*int64 behind one lock.
//   - instant+log: the least an exact log can point at, an instant and a
//     pointer to the rest of the log, with no lock of its own.
//   - mutex+instant+log: that, with a lock per key, so that different
//     keys never wait on each other.
//   - ratelimit: the memory store's layout: a map per policy, keyed by
//     the key, to a 48-byte entry that holds a lock, the instants it was
//     last decided at and before which refunds are refused, and the log's
//     instant, ring pointer, length and head.
func BenchmarkMemoryFloor(b *testing.B) {
	// The fields are blank: only their sizes and pointers count.
	type instantLog struct {
		_ int64 // the instant
		_ *byte // the log
	}
	type mutexInstantLog struct {
		_ sync.Mutex
		_ int64
		_ *byte
	}
	type entry struct {
		_ sync.Mutex
		_ int64 // seen
		_ int64 // since
		_ int64 // the instant
		_ *byte // the ring
		_ int32 // length
		_ int32 // head
	}
	for _, prefix := range []string{"", "apikey:"} {
		b.Run("prefix="+prefix, func(b *testing.B) {
			b.Run("layout=int64", func(b *testing.B) { floor[int64](b, prefix) })
			b.Run("layout=instant+log", func(b *testing.B) { floor[instantLog](b, prefix) })
			b.Run("layout=mutex+instant+log", func(b *testing.B) { floor[mutexInstantLog](b, prefix) })
			b.Run("layout=ratelimit", func(b *testing.B) {
				fill(b, prefix, make([]map[string]*entry, shards), func(ms []map[string]*entry, h uint64, k string) {
					ms[h&(shards-1)][k] = new(entry)
				})
			})
		})
	}
}

// shards is how many maps a layout spreads its keys over, as the memory
// store's shards; the bytes per key are the same in one map.
const shards = 256

// floor fills maps from each key to a new V.
func floor[V any](b *testing.B, prefix string) {
	fill(b, prefix, make([]map[string]*V, shards), func(ms []map[string]*V, h uint64, k string) {
		ms[h&(shards-1)][k] = new(V)
	})
}

// fill makes each of ms a map, adds b.N keys with add, given each key's
// hash, and reports the live heap per key.
func fill[M ~map[K]V, K comparable, V any](b *testing.B, prefix string, ms []M, add func(ms []M, h uint64, k string)) {
	seed := maphash.MakeSeed()
	before := heapInUse()
	for i := range ms {
		ms[i] = make(M)
	}
	var buf []byte
	for i := range b.N {
		buf = strconv.AppendInt(append(append(buf[:0], prefix...), "client-"...), int64(i+1), 10)
		k := string(buf)
		add(ms, maphash.String(seed, k), k)
	}
	after := heapInUse()
	runtime.KeepAlive(ms)
	b.ReportMetric(float64(after-before)/float64(b.N), "B/key")
}

// BenchmarkStoreFloor runs BenchmarkStore's workloads on the least an
// exact sliding log can do per decision (logFloor), beside sethvargo's
// token bucket, the fastest peer there: how much of the gap between
// ratelimit and a token bucket any exact log pays. Compare it with
// BenchmarkStore's ratelimit rows from the same run.
func BenchmarkStoreFloor(b *testing.B) {
	floorPeer := peer{name: "log-floor", store: func(_ testing.TB, limit int, window time.Duration) (take, func()) {
		f := newLogFloor(limit, window)
		return func(_ context.Context, key string) (bool, error) { return f.take(key), nil }, nop
	}}
	for _, p := range []peer{floorPeer, peerNamed(b, "sethvargo")} {
		b.Run("work=HotKey/peer="+p.name, func(b *testing.B) { storeHotKey(b, p) })
		b.Run("work=ManyKeys/peer="+p.name, func(b *testing.B) { storeManyKeys(b, p) })
	}
}

func peerNamed(tb testing.TB, name string) peer {
	for _, p := range peers {
		if p.name == name {
			return p
		}
	}
	tb.Fatalf("no peer %q", name)
	return peer{}
}

// logFloor is an exact sliding log stripped to its bones: shards of a map
// behind a read-write lock, a lock per key, and the instants the key was
// allowed at in a slice, dropped from its front as they leave the window.
// No headers, policies, refunds, sweeping or bounds, and a slice that
// reallocates as it moves: a floor to measure against, not a limiter.
type logFloor struct {
	limit  int
	window time.Duration
	start  time.Time
	seed   maphash.Seed
	shards [shards]struct {
		mu sync.RWMutex
		m  map[string]*floorKey
	}
}

type floorKey struct {
	mu  sync.Mutex
	log []time.Duration // since logFloor.start, oldest first
}

func newLogFloor(limit int, window time.Duration) *logFloor {
	f := &logFloor{limit: limit, window: window, start: time.Now(), seed: maphash.MakeSeed()}
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorKey)
	}
	return f
}

func (f *logFloor) take(key string) bool {
	now := time.Since(f.start)
	sh := &f.shards[maphash.String(f.seed, key)&(shards-1)]
	sh.mu.RLock()
	k := sh.m[key]
	sh.mu.RUnlock()
	if k == nil {
		sh.mu.Lock()
		if k = sh.m[key]; k == nil {
			k = new(floorKey)
			sh.m[strings.Clone(key)] = k
		}
		sh.mu.Unlock()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	i := 0
	for i < len(k.log) && k.log[i] <= now-f.window {
		i++
	}
	if k.log = k.log[i:]; len(k.log) >= f.limit {
		return false
	}
	k.log = append(k.log, now)
	return true
}

// TestLogFloorCounts: the floor is a limiter all the same, or it would
// measure less than an exact log must do.
func TestLogFloorCounts(t *testing.T) {
	f := newLogFloor(3, time.Hour)
	for i, want := range []bool{true, true, true, false, false} {
		if got := f.take("a"); got != want {
			t.Fatalf("request %d of a: allowed %v, want %v", i+1, got, want)
		}
	}
	if !f.take("b") {
		t.Fatal("b refused: keys share a count")
	}
}
