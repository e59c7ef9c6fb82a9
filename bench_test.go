package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// These benchmarks measure ratelimit alone; benchmarks/ compares it with
// other libraries on the same workloads (see scripts/bench.sh).

// The hot key must never be refused, or the allowed path would not be
// what is measured: 100,000 per millisecond is beyond what one key reaches
// here, and keeps a millisecond of traffic in its log, as a busy key's
// steady state does.
//
// The 100,000-key benchmarks keep the real quota, 300 a minute, and fail
// if a key is refused: keep -benchtime at 1s or less (at -benchtime 3s
// the fastest ones send a key its 301st request).
const (
	hotLimit  = 100_000
	hotWindow = time.Millisecond
	benchKeys = 100_000
)

// benchWriter is a ResponseWriter that allocates nothing: it reuses one
// header map, cleared before each request, and counts non-200 answers.
type benchWriter struct {
	h      http.Header
	denied int64
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int) {
	if code != http.StatusOK {
		w.denied++
	}
}

func benchRequest(key string) (*http.Request, []string) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	v := []string{key}
	r.Header["X-Api-Key"] = v
	return r, v
}

func benchKeyList(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s-%08d", prefix, i)
	}
	return ks
}

func newBenchLimiter(b testing.TB, limit int, window time.Duration) *ratelimit.Limiter {
	l, err := ratelimit.New(limit, window, ratelimit.KeyByHeader("X-Api-Key"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// serveParallel runs h from every goroutine; key picks each request's key
// from a per-goroutine counter. It fails b unless every request was
// denied (wantDenied) or none was.
func serveParallel(b *testing.B, h http.Handler, key func(i int) string, wantDenied bool) {
	var denied atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &benchWriter{h: make(http.Header, 8)}
		r, v := benchRequest(key(0))
		i := rand.IntN(benchKeys)
		for pb.Next() {
			i++
			v[0] = key(i)
			clear(w.h)
			h.ServeHTTP(w, r)
		}
		denied.Add(w.denied)
	})
	b.StopTimer()
	if n := denied.Load(); wantDenied && n != int64(b.N) || !wantDenied && n != 0 {
		b.Fatalf("%d of %d requests denied, want %v", n, b.N, map[bool]string{true: "all", false: "none"}[wantDenied])
	}
}

var benchOK = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// BenchmarkHandler is the middleware with the default header set in front
// of an empty handler.
func BenchmarkHandler(b *testing.B) {
	b.Run("HotKey", func(b *testing.B) {
		h := newBenchLimiter(b, hotLimit, hotWindow).Handler(benchOK)
		serveParallel(b, h, func(int) string { return "hot" }, false)
	})
	b.Run("100000Keys", func(b *testing.B) {
		l := newBenchLimiter(b, 300, time.Minute)
		ks := benchKeyList("client", benchKeys)
		for _, k := range ks {
			if _, err := l.Allow(context.Background(), "apikey:"+k); err != nil {
				b.Fatal(err)
			}
		}
		serveParallel(b, l.Handler(benchOK), func(i int) string { return ks[i%benchKeys] }, false)
	})
	b.Run("Rejected", func(b *testing.B) {
		l := newBenchLimiter(b, 300, time.Minute)
		for range 300 {
			l.Allow(context.Background(), "apikey:over")
		}
		serveParallel(b, l.Handler(benchOK), func(int) string { return "over" }, true)
	})
}

// BenchmarkAllow is the store's decision without HTTP, on keys that exist.
func BenchmarkAllow(b *testing.B) {
	run := func(b *testing.B, l *ratelimit.Limiter, key func(i int) string) {
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(benchKeys)
			for pb.Next() {
				i++
				if res, err := l.Allow(ctx, key(i)); err != nil || !res.Allowed {
					b.Errorf("Allow = %+v, %v; want allowed", res, err)
					return
				}
			}
		})
	}
	b.Run("HotKey", func(b *testing.B) {
		run(b, newBenchLimiter(b, hotLimit, hotWindow), func(int) string { return "hot" })
	})
	b.Run("100000Keys", func(b *testing.B) {
		l := newBenchLimiter(b, 300, time.Minute)
		ks := benchKeyList("client", benchKeys)
		for _, k := range ks {
			l.Allow(context.Background(), k)
		}
		run(b, l, func(i int) string { return ks[i%benchKeys] })
	})
}

// BenchmarkNewKey is the first request of a key: the store creates its
// state. The keys are made before the timer starts.
func BenchmarkNewKey(b *testing.B) {
	const block = 256
	l := newBenchLimiter(b, 300, time.Minute)
	ks := benchKeyList("new", b.N+block*runtime.GOMAXPROCS(0))
	var next atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i, end int
		for pb.Next() {
			if i == end {
				end = int(next.Add(block))
				i = end - block
			}
			if _, err := l.Allow(ctx, ks[i]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// heapBytes returns the live heap after a full GC.
func heapBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// memoryPerKey returns the live heap a limiter holds per key after keys
// keys made requests requests each. Each request carries a freshly made
// key string, so the copy the store keeps is counted.
func memoryPerKey(t testing.TB, keys, requests int) float64 {
	before := heapBytes()
	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyByHeader("X-Api-Key"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var buf []byte
	for k := range keys {
		for range requests {
			buf = strconv.AppendInt(append(buf[:0], "client-"...), int64(k), 10)
			if res, err := l.Allow(ctx, string(buf)); err != nil || !res.Allowed {
				t.Fatalf("Allow = %+v, %v; want allowed", res, err)
			}
		}
	}
	after := heapBytes()
	runtime.KeepAlive(l)
	return float64(after-before) / float64(keys)
}

// TestMemoryPerKey holds the memory store to its documented cost: a key
// with one request in its window under 150 bytes (its key of 13 bytes
// included) plus its ring, and 8 bytes per further logged instant, give or
// take the rounding of the ring's allocation to a size class of Go's
// allocator (at most 12.5%: a ring of 300 instants is 2,400 bytes and
// takes 2,688).
func TestMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 keys")
	}
	one := memoryPerKey(t, 100_000, 1)
	full := memoryPerKey(t, 10_000, 300)
	perInstant := (full - one) / 299
	t.Logf("bytes per key: %.0f with 1 request, %.0f with 300 (%.2f per further instant)", one, full, perInstant)
	if one > 150+8*4 { // the ring starts at 4 instants
		t.Errorf("a key with 1 request costs %.0f bytes, want <= %d", one, 150+8*4)
	}
	if perInstant > 9 {
		t.Errorf("each logged instant costs %.2f bytes, want <= 9", perInstant)
	}
}
