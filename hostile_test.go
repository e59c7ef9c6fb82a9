package ratelimit_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
)

// keysHostileCase is a request carrying one hostile header, served
// directly to the middleware so that it reaches the extractor intact
// (net/http's server would refuse some of them first; see
// TestHostileHeadersOverTheWire).
type keysHostileCase struct {
	name       string
	k          ratelimit.Keyer
	header     string
	values     []string
	wantStatus int
	wantKey    string // the key the request counted against, if allowed
	maxAllocs  float64
}

// keysHostileCases returns the hostile requests. What an extractor may
// allocate per request is fixed whatever the input: KeyByIP only its key
// (1, as documented); KeyByJWTSubject nothing for a token it refuses
// unparsed, and what the jwt package allocates to refuse a short one;
// KeyHashed over KeyFirst the too-long error of KeyByHeader, errors.As's
// target and the digest (3); KeyJoin over a part too long to keep a few
// small values more (8), and KeyHashed over it the pieces it reads the
// join through (12). The bytes they allocate are bounded too (see
// TestHostileHeaders): neither may grow with the input.
func keysHostileCases() []keysHostileCase {
	const mib = 1 << 20
	trusted := ratelimit.KeyByIP(keysTrusted)
	forwarded := ratelimit.KeyByIP(keysTrustedWith("Forwarded"))
	realIP := ratelimit.KeyByIP(keysTrustedWith("X-Real-IP"))
	jwtKey := ratelimit.KeyByJWTSubject(keysSecret)
	chain := ratelimit.KeyFirst(jwtKey, ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key")), trusted)
	lines := func(n int, v string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	return []keysHostileCase{
		{"XFF 100,000 commas", trusted, "X-Forwarded-For", []string{strings.Repeat(",", 100_000)}, 200, "ip:10.0.0.1", 1},
		{"XFF 100,000 commas then a client", trusted, "X-Forwarded-For", []string{strings.Repeat(",", 100_000) + "198.51.100.1"}, 200, "ip:198.51.100.1", 1},
		{"XFF 100,000 proxies", trusted, "X-Forwarded-For", []string{strings.Repeat("10.0.0.2,", 100_000) + "10.0.0.2"}, 200, "ip:10.0.0.1", 1},
		// Were the walk not capped at 64 entries, it would reach the
		// client on the left.
		{"XFF a client left of 100,000 proxies", trusted, "X-Forwarded-For", []string{"198.51.100.1," + strings.Repeat("10.0.0.2,", 100_000) + "10.0.0.2"}, 200, "ip:10.0.0.1", 1},
		{"XFF 100,000 proxies with ports", trusted, "X-Forwarded-For", []string{strings.Repeat("10.0.0.2:443,", 100_000) + "10.0.0.2:443"}, 200, "ip:10.0.0.1", 1},
		{"XFF NUL bytes", trusted, "X-Forwarded-For", []string{"198.51.100.1, 10.0.0.2\x00"}, 200, "ip:10.0.0.1", 1},
		{"XFF NUL inside an address", trusted, "X-Forwarded-For", []string{"198.51\x00.100.1"}, 200, "ip:10.0.0.1", 1},
		{"XFF all NUL", trusted, "X-Forwarded-For", []string{strings.Repeat("\x00", 4096)}, 200, "ip:10.0.0.1", 1},
		{"XFF invalid UTF-8", trusted, "X-Forwarded-For", []string{"198.51.100.1, \xff\xfe\xfd"}, 200, "ip:10.0.0.1", 1},
		{"XFF invalid UTF-8 left of the client", trusted, "X-Forwarded-For", []string{"\xff\xfe, 198.51.100.1"}, 200, "ip:198.51.100.1", 1},
		{"XFF 10,000 duplicated lines", trusted, "X-Forwarded-For", lines(10_000, "6.6.6.6"), 200, "ip:6.6.6.6", 1},
		{"XFF 10,000 duplicated proxy lines", trusted, "X-Forwarded-For", lines(10_000, "10.0.0.2"), 200, "ip:10.0.0.1", 1},
		{"XFF a client above 10,000 proxy lines", trusted, "X-Forwarded-For", append([]string{"198.51.100.1"}, lines(10_000, "10.0.0.2")...), 200, "ip:10.0.0.1", 1},
		{"XFF 1 MiB one entry", trusted, "X-Forwarded-For", []string{strings.Repeat("9", mib)}, 200, "ip:10.0.0.1", 1},
		{"XFF 1 MiB of spaces", trusted, "X-Forwarded-For", []string{strings.Repeat(" ", mib)}, 200, "ip:10.0.0.1", 1},
		{"XFF 1 MiB of colons", trusted, "X-Forwarded-For", []string{strings.Repeat(":", mib)}, 200, "ip:10.0.0.1", 1},
		{"XFF 1 MiB of brackets", trusted, "X-Forwarded-For", []string{strings.Repeat("[", mib)}, 200, "ip:10.0.0.1", 1},
		{"Forwarded 1 MiB of semicolons", forwarded, "Forwarded", []string{strings.Repeat(";", mib)}, 200, "ip:10.0.0.1", 1},
		{"Forwarded 1 MiB quoted", forwarded, "Forwarded", []string{`for="` + strings.Repeat("1", mib) + `"`}, 200, "ip:10.0.0.1", 1},
		{"Forwarded 100,000 elements", forwarded, "Forwarded", []string{strings.Repeat("for=10.0.0.2,", 100_000) + "for=10.0.0.2"}, 200, "ip:10.0.0.1", 1},
		{"Forwarded NUL", forwarded, "Forwarded", []string{"for=198.51.100.1\x00"}, 200, "ip:10.0.0.1", 1},
		{"X-Real-IP 1 MiB", realIP, "X-Real-Ip", []string{strings.Repeat("1", mib)}, 200, "ip:10.0.0.1", 1},
		{"X-Real-IP 1 MiB of spaces", realIP, "X-Real-Ip", []string{strings.Repeat(" ", mib)}, 200, "ip:10.0.0.1", 1},
		{"X-Real-IP 10,000 lines", realIP, "X-Real-Ip", lines(10_000, "198.51.100.1"), 200, "ip:198.51.100.1", 1},

		{"Bearer 1 MiB", jwtKey, "Authorization", []string{"Bearer " + strings.Repeat("A", mib)}, 401, "", 0},
		{"Bearer 1 MiB of dots", jwtKey, "Authorization", []string{"Bearer " + strings.Repeat(".", mib)}, 401, "", 0},
		{"Bearer 1 MiB of spaces", jwtKey, "Authorization", []string{"Bearer " + strings.Repeat(" ", mib) + "x"}, 401, "", 16},
		{"Bearer NUL", jwtKey, "Authorization", []string{"Bearer a.b\x00.c"}, 401, "", 16},
		{"Bearer invalid UTF-8", jwtKey, "Authorization", []string{"Bearer \xff.\xfe.\xfd"}, 401, "", 16},
		{"Authorization 10,000 lines", jwtKey, "Authorization", lines(10_000, "Bearer x"), 401, "", 0},
		{"API key 1 MiB, hashed", chain, "X-Api-Key", []string{strings.Repeat("k", mib)}, 200, keysHashOf("apikey:" + strings.Repeat("k", mib)), 3},
		// Too long to keep and not digested: nothing needs the join.
		{"API key 1 MiB, joined", ratelimit.KeyJoin(ratelimit.KeyByHeader("X-API-Key"), trusted), "X-Api-Key", []string{strings.Repeat("k", mib)}, 431, "", 8},
		// Digested, the join is read in pieces: never made whole.
		{"API key 1 MiB, joined and hashed", ratelimit.KeyHashed(ratelimit.KeyJoin(ratelimit.KeyByHeader("X-API-Key"), trusted)), "X-Api-Key", []string{strings.Repeat("k", mib)},
			200, keysHashOf("apikey:" + strings.Repeat("k", mib) + "|ip:10.0.0.1"), 12},
		{"API key NUL, hashed", chain, "X-Api-Key", []string{"abc\x00def"}, 200, keysHashOf("apikey:abc\x00def"), 3},
		{"API key invalid UTF-8, hashed", chain, "X-Api-Key", []string{"\xff\xfe"}, 200, keysHashOf("apikey:\xff\xfe"), 3},
		{"API key 10,000 lines", chain, "X-Api-Key", lines(10_000, "abc"), 200, keysHashOf("apikey:abc"), 3},
	}
}

// keysBytesPerRun returns the bytes f allocates per call, on average
// over runs calls after a first one, on one P as testing.AllocsPerRun
// measures allocations.
func keysBytesPerRun(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// Bounds on what serving one hostile request may allocate, in bytes:
// the extractor alone, and the whole middleware with an
// httptest.ResponseRecorder. Each is far below the 100 KB to 1 MiB of the
// large inputs, so that a copy or a split of the input breaks it, and far
// above what they allocate, so that nothing else can.
const (
	keysMaxKeyBytes   = 2 << 10
	keysMaxServeBytes = 32 << 10
)

// TestHostileHeaders serves hostile requests through the middleware. Each
// must get the documented answer, and no answer may echo the input. The
// extractors read a bounded part of any header (64 entries of a list, the
// last line of a single-address header, tokens up to MaxLength), so what
// they allocate per request is bounded whatever the input: that is
// checked in allocations and bytes, which a busy machine cannot change,
// where time would be. BenchmarkHostileHeaders measures the time.
func TestHostileHeaders(t *testing.T) {
	for _, tt := range keysHostileCases() {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(1<<20, time.Minute, tt.k)
			require.NoError(t, err)
			defer l.Close()
			var gotKey string
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotKey, _ = tt.k.Key(r)
			}))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:443"
			r.Header[tt.header] = tt.values

			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.wantStatus, w.Code, "status")
			if tt.wantKey != "" {
				assert.Equal(t, tt.wantKey, gotKey, "key")
			}
			body := w.Body.String()
			assert.True(t, strings.IndexByte(body, 0) < 0 && strings.IndexByte(body, 0xff) < 0 && len(body) < 200,
				"body %.80q: it must be short fixed text", body)

			allocs := testing.AllocsPerRun(20, func() { tt.k.Key(r) })
			assert.LessOrEqual(t, allocs, tt.maxAllocs, "allocations per key")
			keyBytes := keysBytesPerRun(20, func() { tt.k.Key(r) })
			assert.LessOrEqual(t, keyBytes, uint64(keysMaxKeyBytes), "bytes allocated per key")
			serveBytes := keysBytesPerRun(20, func() { h.ServeHTTP(httptest.NewRecorder(), r) })
			assert.LessOrEqual(t, serveBytes, uint64(keysMaxServeBytes), "bytes allocated per request served")
		})
	}
}

// BenchmarkHostileHeaders serves each hostile request through the
// middleware, for the time and allocations per request that
// TestHostileHeaders does not assert.
func BenchmarkHostileHeaders(b *testing.B) {
	for _, bb := range keysHostileCases() {
		b.Run(bb.name, func(b *testing.B) {
			l, err := ratelimit.New(1<<30, time.Minute, bb.k)
			require.NoError(b, err)
			defer l.Close()
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:443"
			r.Header[bb.header] = bb.values
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

// TestHostileHeadersOverTheWire sends what net/http's server itself
// refuses, over loopback: a header over its 1 MB limit and a NUL byte in
// a header value get a 4xx from the server before the limiter runs.
func TestHostileHeadersOverTheWire(t *testing.T) {
	l, err := ratelimit.New(10, time.Minute, ratelimit.KeyByIP(ratelimit.IPConfig{TrustedHops: 1}))
	require.NoError(t, err)
	defer l.Close()
	keys := make(chan string, 10)
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := ratelimit.KeyByIP(ratelimit.IPConfig{TrustedHops: 1}).Key(r)
		keys <- k
	})))
	defer srv.Close()

	tests := []struct {
		name    string
		xff     string
		want    string // status line prefix
		wantKey string // when the handler runs
	}{
		{"100,000 commas", strings.Repeat(",", 100_000) + "198.51.100.1", "HTTP/1.1 200", "ip:198.51.100.1"},
		{"1.5 MiB", strings.Repeat("1", 3<<19), "HTTP/1.1 431", ""},
		{"NUL", "198.51.100.1\x00", "HTTP/1.1 400", ""},
		{"invalid UTF-8", "\xff\xfe, 198.51.100.2", "HTTP/1.1 200", "ip:198.51.100.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			// Not a bound on latency: a server that never answers fails
			// here rather than at go test's timeout.
			c.SetDeadline(time.Now().Add(2 * time.Minute))
			go func() {
				// The server may answer and close before reading it all.
				c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: " + tt.xff + "\r\nConnection: close\r\n\r\n"))
			}()
			status, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err, "reading the status line")
			assert.True(t, strings.HasPrefix(status, tt.want), "status line %q, want %q", status, tt.want)
			if tt.wantKey != "" {
				assert.Equal(t, tt.wantKey, <-keys, "key")
			}
			assert.Empty(t, keys, "the handler ran for a refused request")
		})
	}
}
