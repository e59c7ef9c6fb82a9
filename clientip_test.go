package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

var (
	proxyNet   = netip.MustParsePrefix("10.0.0.0/8")
	proxyNet6  = netip.MustParsePrefix("2001:db8:ffff::/48")
	trustProxy = ratelimit.TrustProxies(proxyNet, proxyNet6)
)

// ipRequest returns a request from remote with the given header lines.
func ipRequest(remote string, hdr map[string][]string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for k, vs := range hdr {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return r
}

func TestKeyByIP(t *testing.T) {
	const proxy = "10.0.0.1:443"
	xff := func(lines ...string) map[string][]string { return map[string][]string{"X-Forwarded-For": lines} }
	fwd := func(lines ...string) map[string][]string { return map[string][]string{"Forwarded": lines} }
	real := func(lines ...string) map[string][]string { return map[string][]string{"X-Real-Ip": lines} }
	var sixtyFourProxies []string
	for range 64 {
		sixtyFourProxies = append(sixtyFourProxies, "10.0.0.9")
	}

	tests := []struct {
		name   string
		opts   []ratelimit.IPOption
		remote string
		hdr    map[string][]string
		want   string
	}{
		// No options: the peer, whatever the headers say.
		{"peer v4", nil, "203.0.113.7:1234", nil, "ip:203.0.113.7"},
		{"default ignores X-Forwarded-For", nil, "203.0.113.7:1234", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores Forwarded", nil, "203.0.113.7:1234", fwd("for=198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores X-Real-IP", nil, "203.0.113.7:1234", real("198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores them from a private peer too", nil, "10.0.0.1:1", xff("198.51.100.1"), "ip:10.0.0.1"},
		{"peer v6 grouped by /64", nil, "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1:2::/64"},
		{"peer v4-mapped counts as v4", nil, "[::ffff:192.0.2.1]:80", nil, "ip:192.0.2.1"},
		{"peer zone dropped", nil, "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"peer without port", nil, "192.0.2.1", nil, "ip:192.0.2.1"},
		{"GroupIPv6(128)", []ratelimit.IPOption{ratelimit.GroupIPv6(128)}, "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1:2:3:4:5:6"},
		{"GroupIPv6(48)", []ratelimit.IPOption{ratelimit.GroupIPv6(48)}, "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1::/48"},
		{"GroupIPv4(24)", []ratelimit.IPOption{ratelimit.GroupIPv4(24)}, "192.0.2.77:80", nil, "ip:192.0.2.0/24"},
		{"GroupIPv4 leaves v6 at /64", []ratelimit.IPOption{ratelimit.GroupIPv4(24)}, "[2001:db8::1]:80", nil, "ip:2001:db8::/64"},

		// Behind trusted proxies.
		{"trusted peer, no header", []ratelimit.IPOption{trustProxy}, proxy, nil, "ip:10.0.0.1"},
		{"trusted peer, one client", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.1"), "ip:198.51.100.1"},
		{"spoofed leftmost", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6, 198.51.100.1"), "ip:198.51.100.1"},
		{"proxies skipped", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6, 198.51.100.1, 10.1.1.1, 10.2.2.2"), "ip:198.51.100.1"},
		{"several lines, last holds the client", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6", "198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"several lines, client in an earlier one", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6, 198.51.100.1", "10.0.0.3", "10.0.0.2"), "ip:198.51.100.1"},
		{"peer not trusted", []ratelimit.IPOption{trustProxy}, "203.0.113.7:1", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"garbage mid-chain stops the walk", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6, bogus, 10.0.0.2"), "ip:10.0.0.1"},
		{"garbage left of the client is never reached", []ratelimit.IPOption{trustProxy}, proxy, xff("bogus, 198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"empty entry stops the walk", []ratelimit.IPOption{trustProxy}, proxy, xff("6.6.6.6, , 10.0.0.2"), "ip:10.0.0.1"},
		{"empty header", []ratelimit.IPOption{trustProxy}, proxy, xff(""), "ip:10.0.0.1"},
		{"only proxies", []ratelimit.IPOption{trustProxy}, proxy, xff("10.0.0.3, 10.0.0.2"), "ip:10.0.0.1"},
		{"v4-mapped entry", []ratelimit.IPOption{trustProxy}, proxy, xff("::ffff:198.51.100.1"), "ip:198.51.100.1"},
		{"v4-mapped trusted entry is skipped", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.1, ::ffff:10.0.0.2"), "ip:198.51.100.1"},
		{"zone in entry", []ratelimit.IPOption{trustProxy}, proxy, xff("fe80::1%eth0"), "ip:fe80::/64"},
		{"v6 entry grouped", []ratelimit.IPOption{trustProxy}, proxy, xff("2001:db8:1:2::99"), "ip:2001:db8:1:2::/64"},
		{"v4 entry with port", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.1:4711"), "ip:198.51.100.1"},
		{"v6 entry with port", []ratelimit.IPOption{trustProxy}, proxy, xff("[2001:db8:1:2::99]:4711"), "ip:2001:db8:1:2::/64"},
		{"bracketed v4 is garbage", []ratelimit.IPOption{trustProxy}, proxy, xff("[198.51.100.1]"), "ip:10.0.0.1"},
		{"bad port is garbage", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.1:99999"), "ip:10.0.0.1"},
		{"unspecified is garbage", []ratelimit.IPOption{trustProxy}, proxy, xff("0.0.0.0"), "ip:10.0.0.1"},
		{"oversized entry stops", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.1, " + strings.Repeat(" ", 100) + "10.0.0.2"), "ip:10.0.0.1"},
		{"hostname is garbage", []ratelimit.IPOption{trustProxy}, proxy, xff("example.com"), "ip:10.0.0.1"},
		{"tabs and spaces trimmed", []ratelimit.IPOption{trustProxy}, proxy, xff("\t198.51.100.1 \t,10.0.0.2 "), "ip:198.51.100.1"},
		{"trusted v6 proxy peer", []ratelimit.IPOption{trustProxy}, "[2001:db8:ffff::1]:443", xff("198.51.100.1"), "ip:198.51.100.1"},
		{"trusted v4-mapped proxy peer", []ratelimit.IPOption{trustProxy}, "[::ffff:10.0.0.1]:443", xff("198.51.100.1"), "ip:198.51.100.1"},
		{"mapped trusted prefix", []ratelimit.IPOption{ratelimit.TrustProxies(netip.MustParsePrefix("::ffff:10.0.0.0/104"))}, proxy, xff("198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"unmasked trusted prefix", []ratelimit.IPOption{ratelimit.TrustProxies(netip.MustParsePrefix("10.1.2.3/8"))}, proxy, xff("198.51.100.1"), "ip:198.51.100.1"},
		{"64 proxies: client beyond the cap", []ratelimit.IPOption{trustProxy}, proxy, xff(append([]string{"198.51.100.1"}, sixtyFourProxies...)...), "ip:10.0.0.1"},
		{"63 proxies: client within the cap", []ratelimit.IPOption{trustProxy}, proxy, xff(append([]string{"198.51.100.1"}, sixtyFourProxies[1:]...)...), "ip:198.51.100.1"},
		{"victim named by the attacker", []ratelimit.IPOption{trustProxy}, proxy, xff("198.51.100.9, 203.0.113.66"), "ip:203.0.113.66"},
		{"Forwarded ignored when reading X-Forwarded-For", []ratelimit.IPOption{trustProxy}, proxy, fwd("for=198.51.100.1"), "ip:10.0.0.1"},

		// RFC 7239 Forwarded.
		{"Forwarded", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=6.6.6.6, for=198.51.100.1;proto=https;by=10.0.0.1"), "ip:198.51.100.1"},
		{"Forwarded RFC example", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("forwarded")}, proxy,
			fwd(`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`), "ip:2001:db8:cafe::/64"},
		{"Forwarded skips trusted", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd(`For="198.51.100.1:80"`, "for=10.0.0.5;proto=https"), "ip:198.51.100.1"},
		{"Forwarded long element", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=198.51.100.1;host=" + strings.Repeat("h", 300) + ".example;proto=https"), "ip:198.51.100.1"},
		{"Forwarded oversized element stops", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=198.51.100.1;host=" + strings.Repeat("h", 600)), "ip:10.0.0.1"},
		{"Forwarded unknown stops", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=6.6.6.6, for=unknown"), "ip:10.0.0.1"},
		{"Forwarded obfuscated stops", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=6.6.6.6, for=_hidden"), "ip:10.0.0.1"},
		{"Forwarded element without for stops", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=6.6.6.6, proto=https"), "ip:10.0.0.1"},
		{"Forwarded twice for= stops", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd("for=6.6.6.6;for=198.51.100.1"), "ip:10.0.0.1"},
		{"Forwarded quoted comma is garbage", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("Forwarded")}, proxy,
			fwd(`for="6.6.6.6, for=198.51.100.1"`), "ip:10.0.0.1"},

		// A single-address header set by the proxy.
		{"X-Real-IP", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("X-Real-IP")}, proxy, real("198.51.100.1"), "ip:198.51.100.1"},
		{"X-Real-IP last line", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("x-real-ip")}, proxy, real("6.6.6.6", "198.51.100.1"), "ip:198.51.100.1"},
		{"X-Real-IP list is garbage", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("X-Real-IP")}, proxy, real("6.6.6.6, 198.51.100.1"), "ip:10.0.0.1"},
		{"X-Real-IP from untrusted peer", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("X-Real-IP")}, "203.0.113.7:1", real("198.51.100.1"), "ip:203.0.113.7"},
		{"X-Real-IP ignores X-Forwarded-For", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("X-Real-IP")}, proxy, xff("198.51.100.1"), "ip:10.0.0.1"},
		{"CF-Connecting-IP v6", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("CF-Connecting-IP")}, proxy,
			map[string][]string{"Cf-Connecting-Ip": {"2001:db8:1:2::5"}}, "ip:2001:db8:1:2::/64"},

		// A count of proxies.
		{"TrustedHops(1)", []ratelimit.IPOption{ratelimit.TrustedHops(1)}, "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1"), "ip:198.51.100.1"},
		{"TrustedHops(2)", []ratelimit.IPOption{ratelimit.TrustedHops(2)}, "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1, 192.0.2.200"), "ip:198.51.100.1"},
		{"TrustedHops(2) across lines", []ratelimit.IPOption{ratelimit.TrustedHops(2)}, "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1", "192.0.2.200"), "ip:198.51.100.1"},
		{"TrustedHops(2), too few entries", []ratelimit.IPOption{ratelimit.TrustedHops(2)}, "203.0.113.7:1", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"TrustedHops(1), garbage", []ratelimit.IPOption{ratelimit.TrustedHops(1)}, "203.0.113.7:1", xff("6.6.6.6, junk"), "ip:203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ratelimit.KeyByIP(tt.opts...)(ipRequest(tt.remote, tt.hdr))
			if err != nil {
				t.Fatalf("KeyByIP: error %v, want key %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("KeyByIP: key %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyByIPNoAddress(t *testing.T) {
	for _, remote := range []string{"", "@", "not-an-ip:80", "[::1"} {
		_, err := ratelimit.KeyByIP()(ipRequest(remote, nil))
		var ke *ratelimit.KeyError
		if !errors.As(err, &ke) || ke.Status != http.StatusBadRequest {
			t.Errorf("RemoteAddr %q: error %v, want a 400 KeyError", remote, err)
		}
		if !errors.Is(err, ratelimit.ErrNoKey) {
			t.Errorf("RemoteAddr %q: error %v does not match ErrNoKey", remote, err)
		}
	}
}

func TestKeyByIPInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []ratelimit.IPOption
		want []string // substrings of New's error
	}{
		{"GroupIPv6(0)", []ratelimit.IPOption{ratelimit.GroupIPv6(0)}, []string{"GroupIPv6: 0 bits"}},
		{"GroupIPv6(129)", []ratelimit.IPOption{ratelimit.GroupIPv6(129)}, []string{"GroupIPv6: 129 bits"}},
		{"GroupIPv4(33)", []ratelimit.IPOption{ratelimit.GroupIPv4(33)}, []string{"GroupIPv4: 33 bits"}},
		{"invalid prefix", []ratelimit.IPOption{ratelimit.TrustProxies(netip.Prefix{})}, []string{"TrustProxies: invalid prefix"}},
		{"no prefixes", []ratelimit.IPOption{ratelimit.TrustProxies()}, []string{"TrustProxies: no prefixes"}},
		{"empty header", []ratelimit.IPOption{trustProxy, ratelimit.FromHeader("")}, []string{"FromHeader: invalid header name"}},
		{"header without trust", []ratelimit.IPOption{ratelimit.FromHeader("X-Real-IP")}, []string{"FromHeader without TrustProxies"}},
		{"hops and prefixes", []ratelimit.IPOption{trustProxy, ratelimit.TrustedHops(1)}, []string{"cannot be combined"}},
		{"TrustedHops(0)", []ratelimit.IPOption{ratelimit.TrustedHops(0)}, []string{"TrustedHops: 0"}},
		{"TrustedHops(65)", []ratelimit.IPOption{ratelimit.TrustedHops(65)}, []string{"TrustedHops: 65"}},
		{"nil option", []ratelimit.IPOption{nil}, []string{"nil IPOption"}},
		{"all at once", []ratelimit.IPOption{ratelimit.GroupIPv6(0), ratelimit.GroupIPv4(0)}, []string{"GroupIPv6", "GroupIPv4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := ratelimit.KeyByIP(tt.opts...)
			l, err := ratelimit.New(10, time.Minute, k)
			if err == nil {
				l.Close()
				t.Fatalf("New accepted KeyByIP(%s)", tt.name)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: error %q, want it to mention %q", err, w)
				}
			}
			// Called anyway, it answers 500 and never yields a key.
			key, err := k(ipRequest("192.0.2.1:1", nil))
			var ke *ratelimit.KeyError
			if key != "" || !errors.As(err, &ke) || ke.Status != http.StatusInternalServerError {
				t.Errorf("misconfigured KeyFunc: (%q, %v), want a 500 KeyError", key, err)
			}
		})
	}
}

// An attacker behind the proxy who names a victim in X-Forwarded-For
// drains only its own quota.
func TestKeyByIPVictimLockout(t *testing.T) {
	l, err := ratelimit.New(3, time.Minute, ratelimit.KeyByIP(trustProxy))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve := func(xff string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, ipRequest("10.0.0.1:443", map[string][]string{"X-Forwarded-For": {xff}}))
		return w.Code
	}
	for i := range 10 {
		// The proxy appended the attacker's own address.
		got := serve("198.51.100.9, 203.0.113.66")
		if want := map[bool]int{true: 200, false: 429}[i < 3]; got != want {
			t.Errorf("attacker request %d: status %d, want %d", i+1, got, want)
		}
	}
	if got := serve("198.51.100.9"); got != http.StatusOK {
		t.Errorf("victim's first request: status %d, want 200", got)
	}
}

func TestKeyByIPAllocs(t *testing.T) {
	tests := []struct {
		name string
		k    ratelimit.KeyFunc
		r    *http.Request
	}{
		{"default v4", ratelimit.KeyByIP(), ipRequest("203.0.113.7:1234", nil)},
		{"default v6", ratelimit.KeyByIP(), ipRequest("[2001:db8::1]:1234", nil)},
		{"trusted XFF", ratelimit.KeyByIP(trustProxy), ipRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.2"}})},
		{"trusted Forwarded", ratelimit.KeyByIP(trustProxy, ratelimit.FromHeader("Forwarded")), ipRequest("10.0.0.1:1", map[string][]string{"Forwarded": {`for="[2001:db8::1]:80";proto=https, for=10.0.0.2`}})},
		{"100,000 commas", ratelimit.KeyByIP(trustProxy), ipRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {strings.Repeat("10.0.0.2,", 100_000)}})},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			if _, err := tt.k(tt.r); err != nil {
				t.Fatal(err)
			}
		})
		if got > 1 {
			t.Errorf("%s: %.0f allocations, want at most 1 (the key)", tt.name, got)
		}
	}
}

func BenchmarkKeyByIP(b *testing.B) {
	benches := []struct {
		name string
		k    ratelimit.KeyFunc
		r    *http.Request
	}{
		{"peer", ratelimit.KeyByIP(), ipRequest("203.0.113.7:1234", nil)},
		{"XFF3", ratelimit.KeyByIP(trustProxy), ipRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.2"}})},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bb.k(bb.r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
