package grpclimit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/slidelog/ratelimit"
)

// UnaryServerInterceptor returns an interceptor that decides each unary
// call with l before the handler runs, as l.Handler decides an HTTP
// request: with l's Keyer, policies, cost, skip, hooks, dry run and
// failure mode, against l's store, so that HTTP and gRPC calls of one
// client can share one count. The call is described to l as described in
// the package documentation.
//
// A call l serves goes to the handler, and the rate-limit headers l would
// send over HTTP go back as metadata: in the response's header metadata
// when the handler answers with a message, in its trailer when the
// handler returns an error, so that the error stays a trailers-only
// response that clients may retry. A call l does not serve ends with the
// status the package documentation lists, without reaching the handler.
//
// A nil l panics here, rather than on the first call.
func UnaryServerInterceptor(l *ratelimit.Limiter) grpc.UnaryServerInterceptor {
	if l == nil {
		panic("grpclimit: UnaryServerInterceptor: nil Limiter")
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		d := l.Decide(request(ctx, info.FullMethod))
		if d.Outcome != ratelimit.Serve {
			st, md := answer(l, d)
			if md != nil {
				grpc.SetTrailer(ctx, md)
			}
			return nil, st.Err()
		}
		resp, err := handler(ctx, req)
		// The headers are set after the handler, not before: set headers
		// are sent in a frame of their own, and grpc-go clients retry only
		// responses made of a trailer alone.
		if md := quotaMetadata(l, d); md != nil {
			if err != nil || grpc.SetHeader(ctx, md) != nil {
				grpc.SetTrailer(ctx, md)
			}
		}
		return resp, err
	}
}

// A StreamOption configures StreamServerInterceptor. A nil StreamOption
// panics in StreamServerInterceptor.
type StreamOption func(*streamConfig)

type streamConfig struct {
	perMessage bool
}

// CountMessages makes StreamServerInterceptor decide each message the
// client sends, as it is received, instead of each stream once when it
// opens: for streams whose every message is a request of its own. A stream
// is then not counted when it opens, and a refused message ends it.
func CountMessages() StreamOption {
	return func(c *streamConfig) { c.perMessage = true }
}

// StreamServerInterceptor returns an interceptor that decides each stream
// with l, as UnaryServerInterceptor decides a unary call: once when the
// stream opens, before the handler runs, by default; or, with
// CountMessages, each message the client sends, once it is received.
//
// The rate-limit headers of the latest decision go out in the response's
// header metadata when the handler first sends (a message, or its
// headers), and in its trailer when they change afterwards or the handler
// sends nothing. A stream refused when it opens never reaches the handler;
// under CountMessages, a refused message is never delivered: RecvMsg
// clears it (a message with a Reset method, as every protobuf message
// has), returns the refusal's RESOURCE_EXHAUSTED status, every later RecvMsg
// and SendMsg return it too, and the stream ends with it whatever the
// handler returns.
//
// A nil l or StreamOption panics here, rather than on the first call.
func StreamServerInterceptor(l *ratelimit.Limiter, opts ...StreamOption) grpc.StreamServerInterceptor {
	if l == nil {
		panic("grpclimit: StreamServerInterceptor: nil Limiter")
	}
	var c streamConfig
	for _, o := range opts {
		if o == nil {
			panic("grpclimit: StreamServerInterceptor: nil StreamOption")
		}
		o(&c)
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		r := request(ss.Context(), info.FullMethod)
		if c.perMessage {
			s := &serverStream{ServerStream: ss, l: l, r: r}
			return s.finish(handler(srv, s))
		}
		d := l.Decide(r)
		if d.Outcome != ratelimit.Serve {
			st, md := answer(l, d)
			if md != nil {
				ss.SetTrailer(md)
			}
			return st.Err()
		}
		md := quotaMetadata(l, d)
		if md == nil {
			return handler(srv, ss)
		}
		s := &serverStream{ServerStream: ss, pending: md}
		return s.finish(handler(srv, s))
	}
}
