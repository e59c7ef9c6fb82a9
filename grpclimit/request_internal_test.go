package grpclimit

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

func TestRequest(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "user-7")
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}})
	ctx = metadata.NewIncomingContext(ctx, metadata.MD{
		":authority":      {"api.example:443"},
		":path":           {"/ignored"},
		"x-api-key":       {"k1"},
		"x-forwarded-for": {"192.0.2.1", "198.51.100.2"},
		"trace-bin":       {"\x00\x01"},
	})
	r := request(ctx, "/pkg.Svc/Method")

	want := http.Header{
		"X-Api-Key":       {"k1"},
		"X-Forwarded-For": {"192.0.2.1", "198.51.100.2"},
		"Trace-Bin":       {"\x00\x01"},
	}
	if !reflect.DeepEqual(r.Header, want) {
		t.Errorf("Header = %v, want %v", r.Header, want)
	}
	for _, c := range []struct{ field, got, want string }{
		{"RemoteAddr", r.RemoteAddr, "[2001:db8::1]:443"},
		{"Host", r.Host, "api.example:443"},
		{"Method", r.Method, http.MethodPost},
		{"URL.Path", r.URL.Path, "/pkg.Svc/Method"},
		{"Pattern", r.Pattern, "/pkg.Svc/Method"},
		{"RequestURI", r.RequestURI, "/pkg.Svc/Method"},
		{"Proto", r.Proto, "HTTP/2.0"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if got := r.Context().Value(ctxKey{}); got != "user-7" {
		t.Errorf("context value %v, want the call's context", got)
	}
}

func TestRequestWithoutPeerOrMetadata(t *testing.T) {
	r := request(context.Background(), "/pkg.Svc/Method")
	if r.RemoteAddr != "" || len(r.Header) != 0 || r.Host != "" {
		t.Errorf("RemoteAddr %q, Header %v, Host %q; want all empty", r.RemoteAddr, r.Header, r.Host)
	}
}
