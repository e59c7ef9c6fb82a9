package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// The quota of every workload but the hot key's: 300 requests per 60 s
// per key, token buckets as a burst of 300 refilled at 300 per 60 s.
const (
	limit  = 300
	window = time.Minute
)

// The hot-key workloads measure the allowed path, so the one key must
// never be refused: at 300 per minute it would be after 300 requests. No
// quota is both realistic and never reached at millions of requests a
// second, so they use 100,000 per millisecond (10^8 a second, several
// times what any limiter here reaches on one key), the same for every
// peer. For the sliding log this is the honest steady state of a busy
// key: every request evicts about one instant and logs one, with the log
// holding a millisecond of traffic. The workloads fail if any request is
// refused.
const (
	hotLimit  = 100_000
	hotWindow = time.Millisecond
)

// hotQuota returns the quota p runs the hot-key workloads with.
func (p peer) hotQuota() (int, time.Duration) {
	if p.hotLimit > 0 {
		return p.hotLimit, p.hotWindow
	}
	return hotLimit, hotWindow
}

// blockSize is how many consecutive indices a goroutine claims from a
// shared counter at a time, so that the counter is not a point of
// contention in its own right.
const blockSize = 256

// BenchmarkMiddleware runs each peer's net/http middleware in front of an
// empty handler, all goroutines sharing one limiter.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("work=HotKey", func(b *testing.B) {
		for _, p := range peers {
			b.Run("peer="+p.name, func(b *testing.B) { middlewareHotKey(b, p) })
		}
	})
	b.Run("work=ManyKeys", func(b *testing.B) {
		for _, p := range peers {
			b.Run("peer="+p.name, func(b *testing.B) { middlewareManyKeys(b, p) })
		}
	})
	b.Run("work=Rejected", func(b *testing.B) {
		for _, p := range peers {
			if p.name == "baseline" {
				continue // refuses nothing
			}
			b.Run("peer="+p.name, func(b *testing.B) { middlewareRejected(b, p) })
		}
	})
	b.Run("work=NewKey", func(b *testing.B) {
		for _, p := range peers {
			b.Run("peer="+p.name, func(b *testing.B) { middlewareNewKey(b, p) })
		}
	})
}

// middlewareHotKey: every request from one key, all allowed.
func middlewareHotKey(b *testing.B, p peer) {
	hl, hw := p.hotQuota()
	mw, release := p.middleware(b, hl, hw)
	defer release()
	h := mw(okHandler)
	var denied deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		r, _ := newRequest("client-hot")
		for pb.Next() {
			w.reset()
			h.ServeHTTP(w, r)
		}
		denied.add(w)
	})
	m.stop()
	denied.report(b, false)
}

// middlewareManyKeys: requests spread round-robin over numKeys keys that
// all exist already, each far below its quota.
func middlewareManyKeys(b *testing.B, p peer) {
	mw, release := p.middleware(b, limit, window)
	defer release()
	h := mw(okHandler)
	ks := manyKeys()
	warm := newDiscardWriter()
	r, v := newRequest("")
	for _, k := range ks {
		v[0] = k
		warm.reset()
		h.ServeHTTP(warm, r)
	}
	var denied deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		r, v := newRequest("")
		i := rand.IntN(len(ks))
		for pb.Next() {
			if i++; i == len(ks) {
				i = 0
			}
			v[0] = ks[i]
			w.reset()
			h.ServeHTTP(w, r)
		}
		denied.add(w)
	})
	m.stop()
	denied.report(b, false)
}

// middlewareRejected: one key over its quota, every request refused with
// 429 by the peer's default denied response.
func middlewareRejected(b *testing.B, p peer) {
	mw, release := p.middleware(b, limit, window)
	defer release()
	h := mw(okHandler)
	w := newDiscardWriter()
	r, _ := newRequest("client-over")
	for i := 0; w.denied == 0; i++ {
		if i > 10*limit {
			b.Fatalf("still allowed after %d requests, want refused after %d", i, limit)
		}
		w.reset()
		h.ServeHTTP(w, r)
	}
	var denied deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		r, _ := newRequest("client-over")
		for pb.Next() {
			w.reset()
			h.ServeHTTP(w, r)
		}
		denied.add(w)
	})
	m.stop()
	denied.report(b, true)
}

// middlewareNewKey: every request is the first of its key, so each one
// creates the key's state.
func middlewareNewKey(b *testing.B, p peer) {
	mw, release := p.middleware(b, limit, window)
	defer release()
	h := mw(okHandler)
	// Each goroutine leaves at most one block partly used.
	ks := freshKeyPool(b.N + blockSize*runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var denied deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		r, v := newRequest("")
		var i, end int
		for pb.Next() {
			if i == end {
				end = int(next.Add(blockSize))
				i = end - blockSize
			}
			v[0] = ks[i]
			i++
			w.reset()
			h.ServeHTTP(w, r)
		}
		denied.add(w)
	})
	m.stop()
	denied.report(b, false)
}

// BenchmarkStore runs each peer's decision for a key without HTTP, for the
// peers that have one.
func BenchmarkStore(b *testing.B) {
	b.Run("work=HotKey", func(b *testing.B) {
		for _, p := range peers {
			if p.store != nil {
				b.Run("peer="+p.name, func(b *testing.B) { storeHotKey(b, p) })
			}
		}
	})
	b.Run("work=ManyKeys", func(b *testing.B) {
		for _, p := range peers {
			if p.store != nil {
				b.Run("peer="+p.name, func(b *testing.B) { storeManyKeys(b, p) })
			}
		}
	})
}

func storeHotKey(b *testing.B, p peer) {
	hl, hw := p.hotQuota()
	take, release := p.store(b, hl, hw)
	defer release()
	ctx := context.Background()
	var c deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		var w discardWriter
		for pb.Next() {
			w.count(take(ctx, "client-hot"))
		}
		c.add(&w)
	})
	m.stop()
	c.report(b, false)
}

func storeManyKeys(b *testing.B, p peer) {
	take, release := p.store(b, limit, window)
	defer release()
	ctx := context.Background()
	ks := manyKeys()
	for _, k := range ks {
		take(ctx, k)
	}
	var c deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		var w discardWriter
		i := rand.IntN(len(ks))
		for pb.Next() {
			if i++; i == len(ks) {
				i = 0
			}
			w.count(take(ctx, ks[i]))
		}
		c.add(&w)
	})
	m.stop()
	c.report(b, false)
}

// BenchmarkMemory measures the heap a peer keeps per key: each op is one
// new key sent requests requests through the middleware, and B/key is the
// live heap after a GC divided by the keys. Run it with
// -benchtime=100000x for the figure at 100,000 keys. Every request
// carries a freshly made key string, so a peer that keeps the caller's
// string pays for it just as one that copies it does.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{1, limit} {
		b.Run("requests="+strconv.Itoa(n), func(b *testing.B) {
			for _, p := range peers {
				if p.name == "baseline" {
					continue
				}
				b.Run("peer="+p.name, func(b *testing.B) { memoryPerKey(b, p, n) })
			}
		})
	}
}

func memoryPerKey(b *testing.B, p peer, requests int) {
	before := heapInUse()
	mw, release := p.middleware(b, limit, window)
	defer release()
	h := mw(okHandler)
	var next atomic.Int64
	var denied deniedCounter
	m := startMeasure(b)
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		r, v := newRequest("")
		var buf []byte
		for pb.Next() {
			id := next.Add(1)
			for range requests {
				buf = strconv.AppendInt(append(buf[:0], "client-"...), id, 10)
				v[0] = string(buf)
				w.reset()
				h.ServeHTTP(w, r)
			}
		}
		denied.add(w)
	})
	m.stop()
	after := heapInUse()
	runtime.KeepAlive(h)
	b.ReportMetric(float64(after-before)/float64(b.N), "B/key")
	denied.report(b, false)
}

// heapInUse returns the bytes of live heap objects after a full GC.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC() // a second cycle runs finalizers' leftovers
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// The request is reused and the writer allocates nothing beyond the header
// map net/http's server makes for every response: the harness itself must
// cost no more, or it would be counted against every peer. This test keeps
// it honest.
func TestHarnessAllocatesNothing(t *testing.T) {
	w := newDiscardWriter()
	r, v := newRequest("k")
	ks := manyKeys()
	i := 0
	got := testing.AllocsPerRun(1000, func() {
		i = (i + 1) % len(ks)
		v[0] = ks[i]
		w.reset()
		okHandler.ServeHTTP(w, r)
		w.Header()["X"] = v
	})
	want := testing.AllocsPerRun(1000, func() {
		netHTTPResponse(func(h http.Header) { h["X"] = v })
	})
	if got != want {
		t.Errorf("harness allocates %v times per request, want %v (net/http's header map)", got, want)
	}
}

// headerSink and sentSink keep the maps of netHTTPResponse on the heap, as
// net/http's server keeps a response's.
var headerSink, sentSink http.Header

// netHTTPResponse makes the header maps net/http's server makes for a
// response whose handler writes its headers with write: a new map, and its
// snapshot as the status is written.
func netHTTPResponse(write func(http.Header)) {
	headerSink = make(http.Header)
	write(headerSink)
	sentSink = headerSink.Clone()
}

// A peer pays, on every request, for the headers it writes as it does
// behind net/http's server, which gives each response a new header map
// and copies it as the status is written: past 8 headers (a small map's
// room) the map grows. A writer that kept its grown map would charge the
// growth to the first request alone.
func TestHarnessChargesHeaders(t *testing.T) {
	names := make([]string, 16)
	for i := range names {
		names[i] = fmt.Sprintf("X-Header-%d", i)
	}
	for _, n := range []int{0, 3, 8, 9, 16} {
		write := func(h http.Header) {
			for _, k := range names[:n] {
				h[k] = names
			}
		}
		w := newDiscardWriter()
		r, _ := newRequest("k")
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { write(w.Header()) })
		got := testing.AllocsPerRun(100, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		want := testing.AllocsPerRun(100, func() { netHTTPResponse(write) })
		if got != want {
			t.Errorf("%d headers: %v allocations per request through the harness, want %v as behind net/http", n, got, want)
		}
	}
}

var _ http.ResponseWriter = (*discardWriter)(nil)
