package ratelimit_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
)

// keysProxies are the ranges of the proxies in front of the server in
// these tests; keysTrusted is the IPConfig that trusts them.
var (
	keysProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	keysTrusted = ratelimit.IPConfig{TrustProxies: keysProxies}
)

// keysTrustedWith returns keysTrusted reading header.
func keysTrustedWith(header string) ratelimit.IPConfig {
	c := keysTrusted
	c.Header = header
	return c
}

// keysIPRequest returns a request from remote with the given header lines.
func keysIPRequest(remote string, hdr map[string][]string) *http.Request {
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
	none := []ratelimit.IPConfig(nil)
	one := func(c ratelimit.IPConfig) []ratelimit.IPConfig { return []ratelimit.IPConfig{c} }
	trusted := one(keysTrusted)
	forwarded := one(keysTrustedWith("Forwarded"))
	hops := func(n int) []ratelimit.IPConfig { return one(ratelimit.IPConfig{TrustedHops: n}) }

	tests := []struct {
		name   string
		config []ratelimit.IPConfig
		remote string
		hdr    map[string][]string
		want   string
	}{
		// No IPConfig: the peer, whatever the headers say.
		{"peer v4", none, "203.0.113.7:1234", nil, "ip:203.0.113.7"},
		{"default ignores X-Forwarded-For", none, "203.0.113.7:1234", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores Forwarded", none, "203.0.113.7:1234", fwd("for=198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores X-Real-IP", none, "203.0.113.7:1234", real("198.51.100.1"), "ip:203.0.113.7"},
		{"default ignores them from a private peer too", none, "10.0.0.1:1", xff("198.51.100.1"), "ip:10.0.0.1"},
		{"zero IPConfig is the default", one(ratelimit.IPConfig{}), "10.0.0.1:1", xff("198.51.100.1"), "ip:10.0.0.1"},
		{"empty TrustProxies trusts none", one(ratelimit.IPConfig{TrustProxies: []netip.Prefix{}}), "10.0.0.1:1", xff("198.51.100.1"), "ip:10.0.0.1"},
		{"peer v6 grouped by /64", none, "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1:2::/64"},
		{"peer v4-mapped counts as v4", none, "[::ffff:192.0.2.1]:80", nil, "ip:192.0.2.1"},
		{"peer zone dropped", none, "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"peer without port", none, "192.0.2.1", nil, "ip:192.0.2.1"},
		{"peer v6 without port", none, "2001:db8:1:2::1", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6Bits 128", one(ratelimit.IPConfig{IPv6Bits: 128}), "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1:2:3:4:5:6"},
		{"IPv6Bits 48", one(ratelimit.IPConfig{IPv6Bits: 48}), "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:2001:db8:1::/48"},
		{"IPv6Bits 1", one(ratelimit.IPConfig{IPv6Bits: 1}), "[2001:db8:1:2:3:4:5:6]:80", nil, "ip:::/1"},
		{"IPv6Bits leaves v4 apart", one(ratelimit.IPConfig{IPv6Bits: 48}), "192.0.2.77:80", nil, "ip:192.0.2.77"},
		{"IPv4Bits 24", one(ratelimit.IPConfig{IPv4Bits: 24}), "192.0.2.77:80", nil, "ip:192.0.2.0/24"},
		{"IPv4Bits 32", one(ratelimit.IPConfig{IPv4Bits: 32}), "192.0.2.77:80", nil, "ip:192.0.2.77"},
		{"IPv4Bits groups v4-mapped", one(ratelimit.IPConfig{IPv4Bits: 24}), "[::ffff:192.0.2.77]:80", nil, "ip:192.0.2.0/24"},
		{"IPv4Bits leaves v6 at /64", one(ratelimit.IPConfig{IPv4Bits: 24}), "[2001:db8::1]:80", nil, "ip:2001:db8::/64"},

		// Behind trusted proxies.
		{"trusted peer, no header", trusted, proxy, nil, "ip:10.0.0.1"},
		{"trusted peer, one client", trusted, proxy, xff("198.51.100.1"), "ip:198.51.100.1"},
		{"spoofed leftmost", trusted, proxy, xff("6.6.6.6, 198.51.100.1"), "ip:198.51.100.1"},
		{"proxies skipped", trusted, proxy, xff("6.6.6.6, 198.51.100.1, 10.1.1.1, 10.2.2.2"), "ip:198.51.100.1"},
		{"several lines, last holds the client", trusted, proxy, xff("6.6.6.6", "198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"several lines, client in an earlier one", trusted, proxy, xff("6.6.6.6, 198.51.100.1", "10.0.0.3", "10.0.0.2"), "ip:198.51.100.1"},
		{"peer not trusted", trusted, "203.0.113.7:1", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"garbage mid-chain stops the walk", trusted, proxy, xff("6.6.6.6, bogus, 10.0.0.2"), "ip:10.0.0.1"},
		{"garbage left of the client is never reached", trusted, proxy, xff("bogus, 198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"unknown stops the walk", trusted, proxy, xff("6.6.6.6, unknown"), "ip:10.0.0.1"},
		{"empty entry stops the walk", trusted, proxy, xff("6.6.6.6, , 10.0.0.2"), "ip:10.0.0.1"},
		{"empty header", trusted, proxy, xff(""), "ip:10.0.0.1"},
		{"only proxies", trusted, proxy, xff("10.0.0.3, 10.0.0.2"), "ip:10.0.0.1"},
		{"v4-mapped entry", trusted, proxy, xff("::ffff:198.51.100.1"), "ip:198.51.100.1"},
		{"v4-mapped trusted entry is skipped", trusted, proxy, xff("198.51.100.1, ::ffff:10.0.0.2"), "ip:198.51.100.1"},
		{"zone in entry", trusted, proxy, xff("fe80::1%eth0"), "ip:fe80::/64"},
		{"v6 entry grouped", trusted, proxy, xff("2001:db8:1:2::99"), "ip:2001:db8:1:2::/64"},
		{"v4 entry with port", trusted, proxy, xff("198.51.100.1:4711"), "ip:198.51.100.1"},
		{"v6 entry with port", trusted, proxy, xff("[2001:db8:1:2::99]:4711"), "ip:2001:db8:1:2::/64"},
		{"bracketed v4 is garbage", trusted, proxy, xff("[198.51.100.1]"), "ip:10.0.0.1"},
		{"bad port is garbage", trusted, proxy, xff("198.51.100.1:99999"), "ip:10.0.0.1"},
		{"unspecified is garbage", trusted, proxy, xff("0.0.0.0"), "ip:10.0.0.1"},
		{"oversized entry stops", trusted, proxy, xff("198.51.100.1, " + strings.Repeat(" ", 100) + "10.0.0.2"), "ip:10.0.0.1"},
		{"hostname is garbage", trusted, proxy, xff("example.com"), "ip:10.0.0.1"},
		{"tabs and spaces trimmed", trusted, proxy, xff("\t198.51.100.1 \t,10.0.0.2 "), "ip:198.51.100.1"},
		{"trusted v6 proxy peer", trusted, "[2001:db8:ffff::1]:443", xff("198.51.100.1"), "ip:198.51.100.1"},
		{"trusted v4-mapped proxy peer", trusted, "[::ffff:10.0.0.1]:443", xff("198.51.100.1"), "ip:198.51.100.1"},
		{"trusted v6 proxy entry skipped", trusted, proxy, xff("198.51.100.1, 2001:db8:ffff::7"), "ip:198.51.100.1"},
		{"mapped trusted prefix", one(ratelimit.IPConfig{TrustProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}), proxy, xff("198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"unmasked trusted prefix", one(ratelimit.IPConfig{TrustProxies: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}}), proxy, xff("198.51.100.1"), "ip:198.51.100.1"},
		{"single address trusted", one(ratelimit.IPConfig{TrustProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}), proxy, xff("198.51.100.1, 10.0.0.2"), "ip:10.0.0.2"},
		{"64 proxies: client beyond the cap", trusted, proxy, xff(append([]string{"198.51.100.1"}, sixtyFourProxies...)...), "ip:10.0.0.1"},
		{"63 proxies: client within the cap", trusted, proxy, xff(append([]string{"198.51.100.1"}, sixtyFourProxies[1:]...)...), "ip:198.51.100.1"},
		{"64 proxies on one line", trusted, proxy, xff("198.51.100.1," + strings.Join(sixtyFourProxies, ",")), "ip:10.0.0.1"},
		{"63 proxies on one line", trusted, proxy, xff("198.51.100.1," + strings.Join(sixtyFourProxies[1:], ",")), "ip:198.51.100.1"},
		{"victim named by the attacker", trusted, proxy, xff("198.51.100.9, 203.0.113.66"), "ip:203.0.113.66"},
		{"Forwarded ignored when reading X-Forwarded-For", trusted, proxy, fwd("for=198.51.100.1"), "ip:10.0.0.1"},
		{"IPv6Bits behind a proxy", one(ratelimit.IPConfig{TrustProxies: keysProxies, IPv6Bits: 56}), proxy, xff("2001:db8:1:2ff::1"), "ip:2001:db8:1:200::/56"},
		{"IPv4Bits behind a proxy", one(ratelimit.IPConfig{TrustProxies: keysProxies, IPv4Bits: 16}), proxy, xff("198.51.100.1"), "ip:198.51.0.0/16"},

		// RFC 7239 Forwarded.
		{"Forwarded", forwarded, proxy, fwd("for=6.6.6.6, for=198.51.100.1;proto=https;by=10.0.0.1"), "ip:198.51.100.1"},
		{"Forwarded RFC example", one(keysTrustedWith("forwarded")), proxy,
			fwd(`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`), "ip:2001:db8:cafe::/64"},
		{"Forwarded skips trusted", forwarded, proxy, fwd(`For="198.51.100.1:80"`, "for=10.0.0.5;proto=https"), "ip:198.51.100.1"},
		{"Forwarded unquoted v6", forwarded, proxy, fwd("for=[2001:db8:cafe::17]:4711"), "ip:2001:db8:cafe::/64"},
		{"Forwarded empty pairs", forwarded, proxy, fwd(";;for=198.51.100.1;"), "ip:198.51.100.1"},
		{"Forwarded long element", forwarded, proxy, fwd("for=198.51.100.1;host=" + strings.Repeat("h", 300) + ".example;proto=https"), "ip:198.51.100.1"},
		{"Forwarded oversized element stops", forwarded, proxy, fwd("for=198.51.100.1;host=" + strings.Repeat("h", 600)), "ip:10.0.0.1"},
		{"Forwarded unknown stops", forwarded, proxy, fwd("for=6.6.6.6, for=unknown"), "ip:10.0.0.1"},
		{"Forwarded obfuscated stops", forwarded, proxy, fwd("for=6.6.6.6, for=_hidden"), "ip:10.0.0.1"},
		// RFC 7239, section 6.3: a proxy may hide the client's port
		// and keep its address.
		{"Forwarded obfuscated port", forwarded, proxy, fwd(`for="198.51.100.1:_a1.b_c-d"`), "ip:198.51.100.1"},
		{"Forwarded v6 obfuscated port", forwarded, proxy, fwd(`for="[2001:db8:cafe::17]:_hidden"`), "ip:2001:db8:cafe::/64"},
		{"Forwarded trusted obfuscated port skipped", forwarded, proxy, fwd(`for=198.51.100.1, for="10.0.0.5:_p"`), "ip:198.51.100.1"},
		{"Forwarded obfuscated port, hops", one(ratelimit.IPConfig{TrustedHops: 1, Header: "Forwarded"}), "203.0.113.7:1", fwd(`for="198.51.100.1:_p"`), "ip:198.51.100.1"},
		{"Forwarded bare _ port is garbage", forwarded, proxy, fwd(`for="198.51.100.1:_"`), "ip:10.0.0.1"},
		{"Forwarded obfuscated port of a bad charset is garbage", forwarded, proxy, fwd(`for="198.51.100.1:_a+b"`), "ip:10.0.0.1"},
		{"Forwarded unbracketed v6 with obfuscated port is garbage", forwarded, proxy, fwd(`for="2001:db8::1:_p"`), "ip:10.0.0.1"},
		{"Forwarded obfuscated node with port stops", forwarded, proxy, fwd(`for=6.6.6.6, for="_hidden:_p"`), "ip:10.0.0.1"},
		{"X-Forwarded-For has no obfuscated ports", trusted, proxy, xff("198.51.100.1:_p"), "ip:10.0.0.1"},
		{"Forwarded element without for stops", forwarded, proxy, fwd("for=6.6.6.6, proto=https"), "ip:10.0.0.1"},
		{"Forwarded twice for= stops", forwarded, proxy, fwd("for=6.6.6.6;for=198.51.100.1"), "ip:10.0.0.1"},
		{"Forwarded quoted comma is garbage", forwarded, proxy, fwd(`for="6.6.6.6, for=198.51.100.1"`), "ip:10.0.0.1"},
		{"Forwarded escape in for is garbage", forwarded, proxy, fwd(`for="198.51.100.1\:80"`), "ip:10.0.0.1"},
		{"Forwarded space around = is garbage", forwarded, proxy, fwd("for = 198.51.100.1"), "ip:10.0.0.1"},
		{"Forwarded stray quote is garbage", forwarded, proxy, fwd(`for=198.51.100.1;proto=h"ttp`), "ip:10.0.0.1"},
		{"Forwarded 64 elements: beyond the cap", forwarded, proxy, fwd("for=198.51.100.1," + strings.Repeat("for=10.0.0.9,", 63) + "for=10.0.0.9"), "ip:10.0.0.1"},
		{"Forwarded 63 elements: within the cap", forwarded, proxy, fwd("for=198.51.100.1," + strings.Repeat("for=10.0.0.9,", 62) + "for=10.0.0.9"), "ip:198.51.100.1"},
		{"X-Forwarded-For ignored when reading Forwarded", forwarded, proxy, xff("198.51.100.1"), "ip:10.0.0.1"},

		// A single-address header set by the proxy.
		{"X-Real-IP", one(keysTrustedWith("X-Real-IP")), proxy, real("198.51.100.1"), "ip:198.51.100.1"},
		{"X-Real-IP last line", one(keysTrustedWith("x-real-ip")), proxy, real("6.6.6.6", "198.51.100.1"), "ip:198.51.100.1"},
		{"X-Real-IP list is garbage", one(keysTrustedWith("X-Real-IP")), proxy, real("6.6.6.6, 198.51.100.1"), "ip:10.0.0.1"},
		{"X-Real-IP with port", one(keysTrustedWith("X-Real-IP")), proxy, real("198.51.100.1:4711"), "ip:198.51.100.1"},
		{"X-Real-IP trusted address kept", one(keysTrustedWith("X-Real-IP")), proxy, real("10.9.9.9"), "ip:10.9.9.9"},
		{"X-Real-IP from untrusted peer", one(keysTrustedWith("X-Real-IP")), "203.0.113.7:1", real("198.51.100.1"), "ip:203.0.113.7"},
		{"X-Real-IP ignores X-Forwarded-For", one(keysTrustedWith("X-Real-IP")), proxy, xff("198.51.100.1"), "ip:10.0.0.1"},
		{"CF-Connecting-IP v6", one(keysTrustedWith("CF-Connecting-IP")), proxy,
			map[string][]string{"Cf-Connecting-Ip": {"2001:db8:1:2::5"}}, "ip:2001:db8:1:2::/64"},

		// A count of proxies.
		{"TrustedHops 1", hops(1), "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1"), "ip:198.51.100.1"},
		{"TrustedHops 2", hops(2), "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1, 192.0.2.200"), "ip:198.51.100.1"},
		{"TrustedHops 2 across lines", hops(2), "203.0.113.7:1", xff("6.6.6.6, 198.51.100.1", "192.0.2.200"), "ip:198.51.100.1"},
		{"TrustedHops 2, too few entries", hops(2), "203.0.113.7:1", xff("198.51.100.1"), "ip:203.0.113.7"},
		{"TrustedHops 1, garbage", hops(1), "203.0.113.7:1", xff("6.6.6.6, junk"), "ip:203.0.113.7"},
		{"TrustedHops 2, garbage to the right is not read", hops(2), "203.0.113.7:1", xff("198.51.100.1, junk"), "ip:198.51.100.1"},
		{"TrustedHops 1, no header", hops(1), "203.0.113.7:1", nil, "ip:203.0.113.7"},
		{"TrustedHops takes a private address", hops(1), "203.0.113.7:1", xff("10.0.0.2"), "ip:10.0.0.2"},
		{"TrustedHops 64", hops(64), "203.0.113.7:1", xff(append([]string{"198.51.100.1"}, sixtyFourProxies[1:]...)...), "ip:198.51.100.1"},
		{"TrustedHops with Forwarded", one(ratelimit.IPConfig{TrustedHops: 1, Header: "Forwarded"}), "203.0.113.7:1", fwd("for=6.6.6.6, for=198.51.100.1"), "ip:198.51.100.1"},
		{"TrustedHops 2 with Forwarded", one(ratelimit.IPConfig{TrustedHops: 2, Header: "Forwarded"}), "203.0.113.7:1", fwd("for=6.6.6.6, for=198.51.100.1;proto=https, for=_proxy1"), "ip:198.51.100.1"},
		// Proxies that echo the client's Host (a reg-name may hold ","
		// and "=") as a quoted host=: cut at its commas, a proxy's
		// element would shift the count onto the client's own words.
		{"TrustedHops with Forwarded, a quoted comma stops the walk", one(ratelimit.IPConfig{TrustedHops: 2, Header: "Forwarded"}), "203.0.113.7:1",
			fwd(`for=198.51.100.1;host="x,for=6.6.6.6,y", for=192.0.2.200;host="x,for=6.6.6.6,y"`), "ip:203.0.113.7"},
		{"TrustedHops with X-Real-IP", one(ratelimit.IPConfig{TrustedHops: 1, Header: "X-Real-IP"}), "203.0.113.7:1", real("198.51.100.1"), "ip:198.51.100.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ratelimit.KeyByIP(tt.config...).Key(keysIPRequest(tt.remote, tt.hdr))
			require.NoError(t, err, "want key %q", tt.want)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A RemoteAddr that is not an IP address, such as a Unix socket's, has no
// client address: 400, and KeyFirst moves on.
func TestKeyByIPNoAddress(t *testing.T) {
	for _, remote := range []string{"", "@", "/run/app.sock", "not-an-ip:80", "[::1", "192.0.2.1:http"} {
		for _, config := range [][]ratelimit.IPConfig{nil, {keysTrusted}} {
			key, err := ratelimit.KeyByIP(config...).Key(keysIPRequest(remote, map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}))
			assert.Empty(t, key, "RemoteAddr %q", remote)
			assert.Equal(t, http.StatusBadRequest, keysStatus(err), "RemoteAddr %q: error %v", remote, err)
			assert.ErrorIs(t, err, ratelimit.ErrNoKey, "RemoteAddr %q", remote)
		}
	}

	// Over a Unix socket, a chain falls back to the next extractor.
	k := ratelimit.KeyFirst(ratelimit.KeyByIP(), ratelimit.KeyByHeader("X-Api-Key"))
	r := keysIPRequest("@", map[string][]string{"X-Api-Key": {"abc"}})
	key, err := k.Key(r)
	require.NoError(t, err)
	assert.Equal(t, "apikey:abc", key)
}

// A Unix socket's client names its own end as it likes, an "ip:port"
// included, and net/http gives that name as RemoteAddr: a request that
// came over a Unix socket has no client address, whatever its name looks
// like, so that a local process cannot pick the address it is counted as,
// nor pass for a trusted proxy.
func TestKeyByIPOverAUnixSocket(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // the client binds a relative name, which RemoteAddr repeats
	ln, err := net.Listen("unix", filepath.Join(dir, "server.sock"))
	require.NoError(t, err)
	type answer struct {
		remote, key string
		err         error
	}
	answers := make(chan answer, 1)
	k := ratelimit.KeyByIP(keysTrusted)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := k.Key(r)
		answers <- answer{r.RemoteAddr, key, err}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for _, name := range []string{"203.0.113.9:1234", "10.0.0.1:80"} {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return net.DialUnix("unix", &net.UnixAddr{Name: name, Net: "unix"}, &net.UnixAddr{Name: "server.sock", Net: "unix"})
		}}}
		req, err := http.NewRequest(http.MethodGet, "http://limited/", nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		resp, err := c.Do(req)
		require.NoError(t, err, "client bound to %q", name)
		resp.Body.Close()
		c.CloseIdleConnections()
		got := <-answers
		require.Equal(t, name, got.remote, "RemoteAddr of the client bound to %q", name)
		assert.Empty(t, got.key, "client bound to %q", name)
		assert.Equal(t, http.StatusBadRequest, keysStatus(got.err), "client bound to %q: error %v", name, got.err)
		assert.ErrorIs(t, got.err, ratelimit.ErrNoKey, "client bound to %q", name)
	}
}

func TestKeyByIPInvalidConfig(t *testing.T) {
	const prefix = "ratelimit: KeyByIP: "
	tests := []struct {
		name   string
		config []ratelimit.IPConfig
		want   []string // the lines of New's error, after the prefix
	}{
		{"two IPConfigs", []ratelimit.IPConfig{{}, {}}, []string{"more than one IPConfig"}},
		{"IPv6Bits -1", []ratelimit.IPConfig{{IPv6Bits: -1}}, []string{"IPv6Bits -1, want 1 to 128"}},
		{"IPv6Bits 129", []ratelimit.IPConfig{{IPv6Bits: 129}}, []string{"IPv6Bits 129, want 1 to 128"}},
		{"IPv4Bits -1", []ratelimit.IPConfig{{IPv4Bits: -1}}, []string{"IPv4Bits -1, want 1 to 32"}},
		{"IPv4Bits 33", []ratelimit.IPConfig{{IPv4Bits: 33}}, []string{"IPv4Bits 33, want 1 to 32"}},
		{"invalid prefix", []ratelimit.IPConfig{{TrustProxies: []netip.Prefix{keysProxies[0], {}}}}, []string{`invalid trusted prefix "invalid Prefix"`}},
		{"header without trust", []ratelimit.IPConfig{{Header: "X-Real-IP"}}, []string{"a Header without TrustProxies or TrustedHops would never be read"}},
		{"invalid header name", []ratelimit.IPConfig{keysTrustedWith("X Real IP")}, []string{`invalid header name "X Real IP"`}},
		{"header name with a colon", []ratelimit.IPConfig{keysTrustedWith("X-Real-IP:")}, []string{`invalid header name "X-Real-IP:"`}},
		{"hops and prefixes", []ratelimit.IPConfig{{TrustProxies: keysProxies, TrustedHops: 1}}, []string{"TrustProxies and TrustedHops cannot be combined"}},
		{"TrustedHops -1", []ratelimit.IPConfig{{TrustedHops: -1}}, []string{"TrustedHops -1, want 1 to 64"}},
		{"TrustedHops 65", []ratelimit.IPConfig{{TrustedHops: 65}}, []string{"TrustedHops 65, want 1 to 64"}},
		{"all at once", []ratelimit.IPConfig{{TrustProxies: []netip.Prefix{{}}, TrustedHops: 65, Header: "X Real", IPv6Bits: 200, IPv4Bits: 40}}, []string{
			`invalid trusted prefix "invalid Prefix"`,
			"TrustedHops 65, want 1 to 64",
			"TrustProxies and TrustedHops cannot be combined",
			`invalid header name "X Real"`,
			"IPv6Bits 200, want 1 to 128",
			"IPv4Bits 40, want 1 to 32",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := ratelimit.KeyByIP(tt.config...)
			l, err := ratelimit.New(10, time.Minute, k)
			if !assert.Error(t, err, "New accepted the configuration") {
				l.Close()
				return
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = prefix + w
			}
			assert.Equal(t, want, strings.Split(err.Error(), "\n"), "New's error")

			// Asked anyway, it answers 500 and never yields a key.
			key, err := k.Key(keysIPRequest("192.0.2.1:1", nil))
			assert.Empty(t, key)
			assert.Equal(t, http.StatusInternalServerError, keysStatus(err), "misconfigured Keyer's error %v", err)
		})
	}
}

// The bounds of each field are valid.
func TestKeyByIPValidConfig(t *testing.T) {
	for _, c := range []ratelimit.IPConfig{
		{IPv6Bits: 1}, {IPv6Bits: 128}, {IPv4Bits: 1}, {IPv4Bits: 32},
		{TrustedHops: 1}, {TrustedHops: 64},
		{TrustProxies: []netip.Prefix{}},
		{TrustProxies: keysProxies, Header: "Forwarded"},
		{TrustedHops: 2, Header: "CF-Connecting-IP"},
	} {
		l, err := ratelimit.New(10, time.Minute, ratelimit.KeyByIP(c))
		if assert.NoError(t, err, "IPConfig %+v", c) {
			l.Close()
		}
	}
}

// The IPConfig is read when KeyByIP is called: a caller reusing its
// slice of prefixes afterwards changes nothing.
func TestKeyByIPCopiesTrustProxies(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	k := ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: prefixes})
	prefixes[0] = netip.MustParsePrefix("192.0.2.0/24")
	got, err := k.Key(keysIPRequest("10.0.0.1:443", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}))
	require.NoError(t, err)
	assert.Equal(t, "ip:198.51.100.1", got)
}

// An attacker behind the proxy who names a victim in X-Forwarded-For
// drains only its own quota.
func TestKeyByIPVictimLockout(t *testing.T) {
	l, err := ratelimit.New(3, time.Minute, ratelimit.KeyByIP(keysTrusted))
	require.NoError(t, err)
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve := func(xff string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, keysIPRequest("10.0.0.1:443", map[string][]string{"X-Forwarded-For": {xff}}))
		return w.Code
	}
	for i := range 10 {
		// The proxy appended the attacker's own address.
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		assert.Equal(t, want, serve("198.51.100.9, 203.0.113.66"), "attacker request %d", i+1)
	}
	assert.Equal(t, http.StatusOK, serve("198.51.100.9"), "victim's first request")
}

func TestKeyByIPAllocs(t *testing.T) {
	tests := []struct {
		name string
		k    ratelimit.Keyer
		r    *http.Request
	}{
		{"default v4", ratelimit.KeyByIP(), keysIPRequest("203.0.113.7:1234", nil)},
		{"default v6", ratelimit.KeyByIP(), keysIPRequest("[2001:db8::1]:1234", nil)},
		{"grouped v4", ratelimit.KeyByIP(ratelimit.IPConfig{IPv4Bits: 24}), keysIPRequest("203.0.113.7:1234", nil)},
		{"trusted XFF", ratelimit.KeyByIP(keysTrusted), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.2"}})},
		{"trusted Forwarded", ratelimit.KeyByIP(keysTrustedWith("Forwarded")), keysIPRequest("10.0.0.1:1", map[string][]string{"Forwarded": {`for="[2001:db8::1]:80";proto=https, for=10.0.0.2`}})},
		{"trusted X-Real-IP", ratelimit.KeyByIP(keysTrustedWith("X-Real-IP")), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Real-Ip": {"198.51.100.1"}})},
		{"trusted XFF with ports", ratelimit.KeyByIP(keysTrusted), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6:1, 198.51.100.1:4711, 10.0.0.2:443"}})},
		{"trusted XFF, garbage", ratelimit.KeyByIP(keysTrusted), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1, unknown, 10.0.0.2"}})},
		{"hops", ratelimit.KeyByIP(ratelimit.IPConfig{TrustedHops: 2}), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.2"}})},
		{"100,000 commas", ratelimit.KeyByIP(keysTrusted), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {strings.Repeat("10.0.0.2,", 100_000)}})},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			if _, err := tt.k.Key(tt.r); err != nil {
				t.Fatal(err)
			}
		})
		assert.LessOrEqual(t, got, 1.0, "%s: allocations, want at most 1 (the key)", tt.name)
	}
}

// A zone is dropped from the key, and must cost nothing to drop: netip
// interns every zone it parses, so a client naming a fresh one per entry
// would make each request allocate per entry and grow a table the whole
// program shares.
func TestKeyByIPZoneAllocs(t *testing.T) {
	k := ratelimit.KeyByIP(keysTrusted)
	const runs = 100
	var reqs []*http.Request
	for i := range runs + 1 { // AllocsPerRun makes one warm-up call
		var entries []string
		for j := range 8 {
			entries = append(entries, fmt.Sprintf("2001:db8:ffff::%d%%z%d", j+1, i*8+j))
		}
		xff := "198.51.100.1, " + strings.Join(entries, ", ")
		reqs = append(reqs, keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {xff}}))
	}
	i := 0
	got := testing.AllocsPerRun(runs, func() {
		key, err := k.Key(reqs[i])
		i++
		if err != nil || key != "ip:198.51.100.1" {
			t.Fatalf("key %q, %v, want ip:198.51.100.1", key, err)
		}
	})
	assert.LessOrEqual(t, got, 1.0, "allocations with 8 fresh zones a request, want at most 1 (the key)")
}

func BenchmarkKeyByIP(b *testing.B) {
	benches := []struct {
		name string
		k    ratelimit.Keyer
		r    *http.Request
	}{
		{"peer", ratelimit.KeyByIP(), keysIPRequest("203.0.113.7:1234", nil)},
		{"XFF3", ratelimit.KeyByIP(keysTrusted), keysIPRequest("10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.2"}})},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bb.k.Key(bb.r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
