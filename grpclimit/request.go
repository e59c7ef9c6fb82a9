package grpclimit

import (
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// request describes a call to the limiter as the HTTP/2 request that
// carries it, so that the limiter's Keyer, policies, cost, skip and hooks
// read a gRPC call as they read an HTTP request:
//
//   - RemoteAddr is the peer's address ("192.0.2.7:53211", "[2001:db8::1]:443"),
//     as net/http sets it, and empty for a Unix socket's peer;
//   - Header holds the incoming metadata, keys canonicalised as net/http
//     does ("x-api-key" becomes "X-Api-Key"), binary ("-bin") values
//     decoded; pseudo-headers are left out and :authority is Host;
//   - the method is POST and the URL's path, RequestURI and Pattern are
//     the full method ("/grpc.health.v1.Health/Check");
//   - the context is the call's, with whatever earlier interceptors put in
//     it (an authenticated identity, the peer, deadlines).
func request(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx) // a copy: its slices are ours
	h := make(http.Header, len(md))
	var host string
	for k, v := range md {
		switch {
		case k == ":authority" || k == "host":
			if len(v) > 0 && host == "" {
				host = v[0]
			}
		case strings.HasPrefix(k, ":"):
		default:
			h[textproto.CanonicalMIMEHeaderKey(k)] = v
		}
	}
	var remote string
	// A Unix socket's client names its own end as it likes, an IP address
	// and port included: that name is no address to key by or to trust.
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil && !strings.HasPrefix(p.Addr.Network(), "unix") {
		remote = p.Addr.String()
	}
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Path: fullMethod},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     h,
		Body:       http.NoBody,
		Host:       host,
		RemoteAddr: remote,
		RequestURI: fullMethod,
		Pattern:    fullMethod,
	}
	return r.WithContext(ctx)
}
