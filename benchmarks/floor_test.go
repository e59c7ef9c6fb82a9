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
//   - ratelimit: the memory store's entry, 32 bytes: a lock, the log's
//     pointer and instant, and its head and length.
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
		_ *byte // ring
		_ int64 // instant, or the ring's base
		_ int32 // head
		_ int32 // length
	}
	for _, prefix := range []string{"", "apikey:"} {
		b.Run("prefix="+prefix, func(b *testing.B) {
			b.Run("layout=int64", func(b *testing.B) { floor[int64](b, prefix) })
			b.Run("layout=instant+log", func(b *testing.B) { floor[instantLog](b, prefix) })
			b.Run("layout=mutex+instant+log", func(b *testing.B) { floor[mutexInstantLog](b, prefix) })
			b.Run("layout=ratelimit", func(b *testing.B) { floor[entry](b, prefix) })
		})
	}
}

// floor fills 256 maps (as the memory store's shards; the bytes per key
// are the same in one map) with b.N keys pointing at a new V each, and
// reports the live heap per key.
func floor[V any](b *testing.B, prefix string) {
	const shards = 256
	seed := maphash.MakeSeed()
	before := heapInUse()
	ms := make([]map[string]*V, shards)
	for i := range ms {
		ms[i] = make(map[string]*V)
	}
	var buf []byte
	for i := range b.N {
		buf = strconv.AppendInt(append(append(buf[:0], prefix...), "client-"...), int64(i+1), 10)
		k := string(buf)
		ms[maphash.String(seed, k)&uint64(shards-1)][k] = new(V)
	}
	after := heapInUse()
	runtime.KeepAlive(ms)
	b.ReportMetric(float64(after-before)/float64(b.N), "B/key")
}
