package ratelimit_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// hostileRuns is how many times each hostile request is served to take
// its p99.
const hostileRuns = 200

// maxHostileP99 bounds the p99 time of serving a hostile request. The
// extractors read a bounded part of any header (64 entries, capped
// tokens), so the real figures are microseconds; the bound only catches
// work that grows with the input, with room for a slow, shared CI machine
// and the race detector.
const maxHostileP99 = 50 * time.Millisecond

// TestHostileHeaders serves hostile requests through the middleware
// directly, so that they reach the extractors intact (net/http's server
// would refuse some of them first; see TestHostileHeadersOverTheWire).
// Each must get the documented answer without a panic and in bounded
// time, and no answer may echo the input.
func TestHostileHeaders(t *testing.T) {
	const mib = 1 << 20
	trusted := ratelimit.KeyByIP(trustProxy)
	forwarded := ratelimit.KeyByIP(trustProxy, ratelimit.FromHeader("Forwarded"))
	realIP := ratelimit.KeyByIP(trustProxy, ratelimit.FromHeader("X-Real-IP"))
	jwtKey := ratelimit.KeyByJWTSubject(keys().hmac)
	chain := ratelimit.KeyFirst(jwtKey, ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key")), trusted)

	lines := func(n int, v string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	tests := []struct {
		name       string
		k          ratelimit.KeyFunc
		header     string
		values     []string
		wantStatus int
		wantKey    string // the key the request counted against, if allowed
	}{
		{"XFF 100,000 commas", trusted, "X-Forwarded-For", []string{strings.Repeat(",", 100_000)}, 200, "ip:10.0.0.1"},
		{"XFF 100,000 commas then a client", trusted, "X-Forwarded-For", []string{strings.Repeat(",", 100_000) + "198.51.100.1"}, 200, "ip:198.51.100.1"},
		{"XFF 100,000 proxies", trusted, "X-Forwarded-For", []string{strings.Repeat("10.0.0.2,", 100_000) + "10.0.0.2"}, 200, "ip:10.0.0.1"},
		{"XFF NUL bytes", trusted, "X-Forwarded-For", []string{"198.51.100.1, 10.0.0.2\x00"}, 200, "ip:10.0.0.1"},
		{"XFF NUL inside an address", trusted, "X-Forwarded-For", []string{"198.51\x00.100.1"}, 200, "ip:10.0.0.1"},
		{"XFF all NUL", trusted, "X-Forwarded-For", []string{strings.Repeat("\x00", 4096)}, 200, "ip:10.0.0.1"},
		{"XFF invalid UTF-8", trusted, "X-Forwarded-For", []string{"198.51.100.1, \xff\xfe\xfd"}, 200, "ip:10.0.0.1"},
		{"XFF invalid UTF-8 left of the client", trusted, "X-Forwarded-For", []string{"\xff\xfe, 198.51.100.1"}, 200, "ip:198.51.100.1"},
		{"XFF 10,000 duplicated lines", trusted, "X-Forwarded-For", lines(10_000, "6.6.6.6"), 200, "ip:6.6.6.6"},
		{"XFF 10,000 duplicated proxy lines", trusted, "X-Forwarded-For", lines(10_000, "10.0.0.2"), 200, "ip:10.0.0.1"},
		{"XFF 1 MiB one entry", trusted, "X-Forwarded-For", []string{strings.Repeat("9", mib)}, 200, "ip:10.0.0.1"},
		{"XFF 1 MiB of spaces", trusted, "X-Forwarded-For", []string{strings.Repeat(" ", mib)}, 200, "ip:10.0.0.1"},
		{"XFF 1 MiB of colons", trusted, "X-Forwarded-For", []string{strings.Repeat(":", mib)}, 200, "ip:10.0.0.1"},
		{"XFF 1 MiB of brackets", trusted, "X-Forwarded-For", []string{strings.Repeat("[", mib)}, 200, "ip:10.0.0.1"},
		{"Forwarded 1 MiB of semicolons", forwarded, "Forwarded", []string{strings.Repeat(";", mib)}, 200, "ip:10.0.0.1"},
		{"Forwarded 1 MiB quoted", forwarded, "Forwarded", []string{`for="` + strings.Repeat("1", mib) + `"`}, 200, "ip:10.0.0.1"},
		{"Forwarded 100,000 elements", forwarded, "Forwarded", []string{strings.Repeat("for=10.0.0.2,", 100_000) + "for=10.0.0.2"}, 200, "ip:10.0.0.1"},
		{"Forwarded NUL", forwarded, "Forwarded", []string{"for=198.51.100.1\x00"}, 200, "ip:10.0.0.1"},
		{"X-Real-IP 1 MiB", realIP, "X-Real-Ip", []string{strings.Repeat("1", mib)}, 200, "ip:10.0.0.1"},
		{"X-Real-IP 10,000 lines", realIP, "X-Real-Ip", lines(10_000, "198.51.100.1"), 200, "ip:198.51.100.1"},

		{"Bearer 1 MiB", jwtKey, "Authorization", []string{"Bearer " + strings.Repeat("A", mib)}, 401, ""},
		{"Bearer 1 MiB of dots", jwtKey, "Authorization", []string{"Bearer " + strings.Repeat(".", mib)}, 401, ""},
		{"Bearer NUL", jwtKey, "Authorization", []string{"Bearer a.b\x00.c"}, 401, ""},
		{"Bearer invalid UTF-8", jwtKey, "Authorization", []string{"Bearer \xff.\xfe.\xfd"}, 401, ""},
		{"Authorization 10,000 lines", jwtKey, "Authorization", lines(10_000, "Bearer x"), 401, ""},
		{"API key 1 MiB, hashed", chain, "X-Api-Key", []string{strings.Repeat("k", mib)}, 200, hashOf("apikey:" + strings.Repeat("k", mib))},
		{"API key NUL, hashed", chain, "X-Api-Key", []string{"abc\x00def"}, 200, hashOf("apikey:abc\x00def")},
		{"API key invalid UTF-8, hashed", chain, "X-Api-Key", []string{"\xff\xfe"}, 200, hashOf("apikey:\xff\xfe")},
		{"API key 10,000 lines", chain, "X-Api-Key", lines(10_000, "abc"), 200, hashOf("apikey:abc")},
	}
	var report []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(1<<20, time.Minute, tt.k)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var gotKey string
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotKey, _ = tt.k(r)
			}))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:443"
			r.Header[tt.header] = tt.values

			times := make([]time.Duration, hostileRuns)
			for i := range times {
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, r)
				times[i] = time.Since(start)
				if i > 0 {
					continue
				}
				if w.Code != tt.wantStatus {
					t.Errorf("status %d, want %d", w.Code, tt.wantStatus)
				}
				if tt.wantKey != "" && gotKey != tt.wantKey {
					t.Errorf("key %.60q, want %.60q", gotKey, tt.wantKey)
				}
				if body := w.Body.String(); strings.IndexByte(body, 0) >= 0 || strings.IndexByte(body, 0xff) >= 0 || len(body) > 200 {
					t.Errorf("body %.80q: it must be short fixed text", body)
				}
			}
			slices.Sort(times)
			p99 := times[len(times)*99/100]
			report = append(report, tt.name+": p99 "+p99.String())
			if p99 > maxHostileP99 {
				t.Errorf("p99 %v over %d requests, want under %v", p99, hostileRuns, maxHostileP99)
			}
		})
	}
	t.Logf("p99 per request, %d requests each:\n%s", hostileRuns, strings.Join(report, "\n"))
}

// TestHostileHeadersOverTheWire sends what net/http's server itself
// refuses, over loopback: a header over its 1 MB limit and a NUL byte in
// a header value get a 4xx from the server before the limiter runs.
func TestHostileHeadersOverTheWire(t *testing.T) {
	l, err := ratelimit.New(10, time.Minute, ratelimit.KeyByIP(ratelimit.TrustedHops(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()

	tests := []struct {
		name string
		xff  string
		want string // status line prefix
	}{
		{"100,000 commas", strings.Repeat(",", 100_000) + "198.51.100.1", "HTTP/1.1 200"},
		{"1.5 MiB", strings.Repeat("1", 3<<19), "HTTP/1.1 431"},
		{"NUL", "198.51.100.1\x00", "HTTP/1.1 400"},
		{"invalid UTF-8", "\xff\xfe, 198.51.100.1", "HTTP/1.1 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				// The server may answer and close before reading it all.
				c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: " + tt.xff + "\r\nConnection: close\r\n\r\n"))
			}()
			status, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the status line: %v", err)
			}
			if !strings.HasPrefix(status, tt.want) {
				t.Errorf("status line %q, want %q", status, tt.want)
			}
		})
	}
}
