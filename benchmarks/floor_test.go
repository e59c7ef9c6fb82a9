package benchmarks

import (
	"hash/maphash"
	"runtime"
	"strconv"
	"sync"
	"testing"
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
