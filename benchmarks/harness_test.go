package benchmarks

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// keyHeader carries the client's key in every workload. Every limiter keys
// by it, so each does the same work to find the key: a map read on the
// request's header (see the README of this module for why not RemoteAddr).
const keyHeader = "X-Api-Key"

// headerKey is the key function given to every peer: the raw header value,
// without the allocation a prefix would cost. ratelimit is benchmarked with
// its own public KeyByHeader, as users would configure it.
func headerKey(r *http.Request) string {
	if v := r.Header[keyHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// discardWriter is a ResponseWriter that allocates nothing but what
// net/http's own allocates for a response: the harness must not be what is
// measured, but a peer must pay for the headers it writes as it does
// behind a server. So each request gets a new, empty header map, as each
// response of net/http's server does (a map reused across requests would
// keep the room its first response grew it to, and a peer writing more
// headers than a small map holds, 8, would never pay again for growing
// it), and the status written copies the headers if the handler asked
// for them, as net/http's snapshot of the headers sent does. It counts
// 429s and 5xx answers.
type discardWriter struct {
	h      http.Header
	sent   http.Header // the headers as the status was written
	called bool        // Header was called
	wrote  bool        // the status was written
	denied int64       // 429s
	errors int64       // 5xx
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header)} }

func (w *discardWriter) Header() http.Header {
	w.called = true
	return w.h
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

// WriteString makes the writer an io.StringWriter, as net/http's is, so
// that io.WriteString costs a peer here what it costs behind a server:
// no copy of the string into a slice.
func (w *discardWriter) WriteString(s string) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(s), nil
}

// WriteHeader writes the status once, as net/http does, and snapshots
// the headers as net/http's response does when the handler called Header.
func (w *discardWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.called {
		w.sent = w.h.Clone()
	}
	switch {
	case code == http.StatusTooManyRequests:
		w.denied++
	case code >= 500:
		w.errors++
	}
}

// count tallies a store decision as the middleware would answer it.
func (w *discardWriter) count(allowed bool, err error) {
	switch {
	case err != nil:
		w.errors++
	case !allowed:
		w.denied++
	}
}

// reset ends the previous response as net/http's server ends one (with
// a 200 if the handler wrote no status) and readies w for the next request
// with an empty header map, made as the server makes each response's.
func (w *discardWriter) reset() {
	w.WriteHeader(http.StatusOK)
	w.h, w.called, w.wrote = make(http.Header), false, false
}

// okHandler is the application behind the middleware: it does nothing, so
// that the middleware is all that is measured.
var okHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// newRequest returns a GET request that carries key in keyHeader, with a
// header slice the caller may rewrite to change the key between requests.
func newRequest(key string) (*http.Request, []string) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	v := []string{key}
	r.Header[keyHeader] = v
	return r, v
}

// numKeys is how many distinct clients the many-keys workloads spread
// their requests over.
const numKeys = 100_000

var (
	keysOnce sync.Once
	keys     []string
)

// manyKeys returns numKeys distinct client keys, made once.
func manyKeys() []string {
	keysOnce.Do(func() {
		keys = make([]string, numKeys)
		for i := range keys {
			keys[i] = fmt.Sprintf("client-%08d", i)
		}
	})
	return keys
}

var (
	freshMu   sync.Mutex
	freshKeys []string
	freshGen  int
)

// freshKeyPool returns n keys that no earlier call returned, so that each
// is new to any limiter. The pool is reused when it is large enough, with
// a new generation prefix, so that the harness does not allocate per op.
func freshKeyPool(n int) []string {
	freshMu.Lock()
	defer freshMu.Unlock()
	freshGen++
	if len(freshKeys) < n {
		freshKeys = make([]string, n)
	}
	for i := range n {
		freshKeys[i] = fmt.Sprintf("new-%04d-%09d", freshGen, i)
	}
	return freshKeys[:n]
}

// deniedCounter adds up the refusals (429) and errors (5xx) across the
// goroutines of a parallel benchmark.
type deniedCounter struct{ denied, errors atomic.Int64 }

func (c *deniedCounter) add(w *discardWriter) {
	c.denied.Add(w.denied)
	c.errors.Add(w.errors)
}

// report publishes denied/op and errors/op, and fails the benchmark if
// the refusals are not what the workload is meant to measure. Errors are
// reported, not failed: throttled answers 500 to about one request in
// ten thousand on a hot key, when its compare-and-swap loses ten times in
// a row, which is its behaviour under contention, not the quota's.
func (c *deniedCounter) report(b *testing.B, wantDenied bool) {
	b.Helper()
	n := c.denied.Load()
	b.ReportMetric(float64(n)/float64(b.N), "denied/op")
	b.ReportMetric(float64(c.errors.Load())/float64(b.N), "errors/op")
	checkDenied(b, n, wantDenied)
}

// checkDenied fails b unless n of its b.N requests being refused fits the
// workload: nearly all (wantDenied) or none.
func checkDenied(b *testing.B, n int64, wantDenied bool) {
	b.Helper()
	switch {
	case !wantDenied && n > 0:
		b.Errorf("%d of %d requests denied, want all allowed: the workload would measure the wrong path", n, b.N)
	case wantDenied && n < int64(b.N)*9/10:
		b.Errorf("%d of %d requests denied, want nearly all", n, b.N)
	}
}
