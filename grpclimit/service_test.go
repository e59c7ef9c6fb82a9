package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/grpclimit"
)

// The test service is written by hand, with the well-known StringValue as
// its messages, so that the build needs no code generation: Say echoes a
// string, and Chat echoes every message of a bidirectional stream.
const (
	sayMethod  = "/grpclimit.test.Echo/Say"
	chatMethod = "/grpclimit.test.Echo/Chat"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "grpclimit.test.Echo",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Say", Handler: sayHandler}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Chat", Handler: chatHandler, ServerStreams: true, ClientStreams: true,
	}},
}

var chatDesc = &echoDesc.Streams[0]

// echoServer implements the test service. say, if set, answers Say
// instead of the echo; chat, if set, serves Chat instead of the echo
// loop.
type echoServer struct {
	say  func(ctx context.Context, in string) (string, error)
	chat func(grpc.ServerStream) error
}

func sayHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*echoServer)
	h := func(ctx context.Context, req any) (any, error) {
		v := req.(*wrapperspb.StringValue).GetValue()
		if s.say != nil {
			out, err := s.say(ctx, v)
			if err != nil {
				return nil, err
			}
			v = out
		}
		return wrapperspb.String(v), nil
	}
	if interceptor == nil {
		return h(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: sayMethod}, h)
}

func chatHandler(srv any, stream grpc.ServerStream) error {
	if s := srv.(*echoServer); s.chat != nil {
		return s.chat(stream)
	}
	return echoAll(stream)
}

// echoAll sends back every message it receives until the client closes.
func echoAll(stream grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := stream.SendMsg(in); err != nil {
			return err
		}
	}
}

// server is what a test serves: the limiter's interceptors, after an
// optional one of the test's, the echo service and the standard health
// service.
type server struct {
	l          *ratelimit.Limiter
	streamOpts []grpclimit.StreamOption
	before     grpc.UnaryServerInterceptor // runs before the limiter's
	echo       *echoServer
}

// serve serves s on lis until the test ends, and returns a client
// connection to it made with dialOpts.
func (s server) serve(t *testing.T, lis net.Listener, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	var unary []grpc.UnaryServerInterceptor
	if s.before != nil {
		unary = append(unary, s.before)
	}
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(append(unary, grpclimit.UnaryServerInterceptor(s.l))...),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(s.l, s.streamOpts...)),
	)
	echo := s.echo
	if echo == nil {
		echo = &echoServer{}
	}
	gs.RegisterService(&echoDesc, echo)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})

	target := "passthrough:///" + lis.Addr().String()
	dialOpts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...)
	if bl, ok := lis.(*bufconn.Listener); ok {
		target = "passthrough:///bufconn"
		dialOpts = append(dialOpts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return bl.DialContext(ctx)
		}))
	}
	cc, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// serveBufconn serves s in memory: for tests whose key is not the peer's
// address (a bufconn peer has none).
func (s server) serveBufconn(t *testing.T, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return s.serve(t, bufconn.Listen(1<<20), dialOpts...)
}

// serveTCP serves s on a loopback TCP port of network ("tcp4", "tcp6").
func (s server) serveTCP(t *testing.T, network string, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no loopback for %s: %v", network, err)
	}
	return s.serve(t, lis, dialOpts...)
}

// newLimiter returns a limiter closed when the test ends.
func newLimiter(t *testing.T, limit int, window time.Duration, key ratelimit.Keyer, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limit, window, key, opts...)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fakeClock is a clock for the memory store that moves only when told, so
// that waits are exact.
type fakeClock struct{ ns atomic.Int64 }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) now() time.Time           { return epoch.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) advance(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *fakeClock) option() ratelimit.Option { return ratelimit.WithClock(c.now) }

// frozen stops the memory store's clock, for tests that check the
// figures of answers (RateLimit's t) but not the passing of time.
var frozen = ratelimit.WithClock(func() time.Time { return epoch })

// say calls Say with in and returns the answer.
func say(ctx context.Context, cc *grpc.ClientConn, in string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, sayMethod, wrapperspb.String(in), out, opts...)
	return out.GetValue(), err
}
