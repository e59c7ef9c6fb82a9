package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slidelog/ratelimit"
)

// recorder wraps a KeyFunc and records the keys it returns.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (rec *recorder) wrap(k ratelimit.Keyer) ratelimit.Keyer {
	return ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		key, err := k.Key(r)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.keys = append(rec.keys, key)
		return key, err
	})
}

func (rec *recorder) last() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.keys) == 0 {
		return ""
	}
	return rec.keys[len(rec.keys)-1]
}

// TestPeerKeys calls over real loopback TCP, IPv4 and IPv6, and checks the
// key KeyByIP takes from the peer and the forwarding metadata: the same
// rules as over HTTP, so spoofed x-forwarded-for is ignored unless the
// peer is a trusted proxy.
func TestPeerKeys(t *testing.T) {
	loopback4 := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	tests := []struct {
		name    string
		network string
		key     ratelimit.Keyer
		md      []string
		want    string
	}{
		{name: "peer", network: "tcp4", key: ratelimit.KeyByIP(), want: "ip:127.0.0.1"},
		{name: "spoofed x-forwarded-for, no trusted proxy", network: "tcp4", key: ratelimit.KeyByIP(),
			md: []string{"x-forwarded-for", "203.0.113.9"}, want: "ip:127.0.0.1"},
		{name: "spoofed x-real-ip and forwarded, no trusted proxy", network: "tcp4", key: ratelimit.KeyByIP(),
			md: []string{"x-real-ip", "203.0.113.9", "forwarded", "for=203.0.113.9"}, want: "ip:127.0.0.1"},
		{name: "trusted proxy", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: loopback4}),
			md: []string{"x-forwarded-for", "203.0.113.9"}, want: "ip:203.0.113.9"},
		{name: "trusted proxy, client's own entry on the left ignored", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: loopback4}),
			md: []string{"x-forwarded-for", "192.0.2.66", "x-forwarded-for", "203.0.113.9"}, want: "ip:203.0.113.9"},
		{name: "trusted proxy, IPv6 client grouped by /64", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: loopback4}),
			md: []string{"x-forwarded-for", "2001:db8:1:2::7"}, want: "ip:2001:db8:1:2::/64"},
		{name: "trusted proxy, X-Real-IP", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: loopback4, Header: "X-Real-IP"}),
			md: []string{"x-real-ip", "203.0.113.10", "x-forwarded-for", "192.0.2.1"}, want: "ip:203.0.113.10"},
		{name: "trusted hops", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustedHops: 1}),
			md: []string{"x-forwarded-for", "203.0.113.5"}, want: "ip:203.0.113.5"},
		{name: "trusted proxy, no header", network: "tcp4", key: ratelimit.KeyByIP(ratelimit.IPConfig{TrustProxies: loopback4}), want: "ip:127.0.0.1"},
		{name: "IPv6 peer grouped by /64", network: "tcp6", key: ratelimit.KeyByIP(),
			md: []string{"x-forwarded-for", "203.0.113.9"}, want: "ip:::/64"},
		{name: "IPv6 peer alone", network: "tcp6", key: ratelimit.KeyByIP(ratelimit.IPConfig{IPv6Bits: 128}), want: "ip:::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			l := newLimiter(t, 5, time.Minute, rec.wrap(tc.key))
			cc := server{l: l}.serveTCP(t, tc.network)
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			if _, err := say(ctx, cc, "hi"); err != nil {
				t.Fatalf("call: %v", err)
			}
			if got := rec.last(); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSpoofedForwardingSharesTheCount sends calls that each claim another
// client address: without a trusted proxy they all count as the peer.
func TestSpoofedForwardingSharesTheCount(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByIP())
	cc := server{l: l}.serveTCP(t, "tcp4")
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}).String())
		if _, err := say(ctx, cc, "hi"); status.Code(err) != want {
			t.Errorf("call %d: %v, want %v", i+1, err, want)
		}
	}
}

// TestContextIdentity keys calls by the identity an authentication
// interceptor put in the context before the limiter's runs.
func TestContextIdentity(t *testing.T) {
	type userKey struct{}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if v := metadata.ValueFromIncomingContext(ctx, "user"); len(v) == 1 {
			ctx = context.WithValue(ctx, userKey{}, v[0])
		}
		return handler(ctx, req)
	}
	var rec recorder
	l := newLimiter(t, 1, time.Minute, rec.wrap(ratelimit.KeyByContext(func(ctx context.Context) (string, bool) {
		u, ok := ctx.Value(userKey{}).(string)
		return u, ok
	})))
	cc := server{l: l, before: auth}.serveBufconn(t)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "user", "u-42")
	if _, err := say(ctx, cc, "hi"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := rec.last(); got != "id:u-42" {
		t.Errorf("key %q, want id:u-42", got)
	}
	if _, err := say(ctx, cc, "hi"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second call: %v, want ResourceExhausted", err)
	}
	if _, err := say(context.Background(), cc, "hi"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("anonymous call: %v, want Unauthenticated", err)
	}
}

// TestUnixPeerHasNoKey serves on a Unix socket, whose clients choose the
// name they bind their end to: one that reads as an IP address is still
// no IP address, so KeyByIP finds no key, and a client cannot pose as any
// address it likes, nor as a trusted proxy whose forwarding is believed.
func TestUnixPeerHasNoKey(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // the client's name is relative, as the server reads it back
	trusted := ratelimit.IPConfig{TrustProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for i, name := range []string{"203.0.113.9:1234", "10.0.0.1"} {
		var rec recorder
		l := newLimiter(t, 5, time.Minute, rec.wrap(ratelimit.KeyByIP(trusted)))
		sock := filepath.Join(dir, fmt.Sprintf("server%d.sock", i))
		lis, err := net.Listen("unix", sock)
		if err != nil {
			t.Skipf("no Unix sockets: %v", err)
		}
		cc := server{l: l}.serve(t, lis, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.UnixAddr{Name: name, Net: "unix"}}
			return d.DialContext(ctx, "unix", sock)
		}))
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "198.51.100.7")
		_, err = say(ctx, cc, "hi")
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "no client address" {
			t.Errorf("client bound to %q: %v with key %q, want InvalidArgument %q", name, err, rec.last(), "no client address")
		}
	}
}
