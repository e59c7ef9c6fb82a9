// Command grpc serves HTTP and gRPC from one limiter, so that a client's
// HTTP requests and gRPC calls count against one quota: by its API key
// when it sends one (the X-API-Key header, the x-api-key metadata), by its
// address otherwise.
//
//	go -C examples run ./grpc
//	curl -i -H 'X-API-Key: demo-alice' http://127.0.0.1:8080/hello
//	grpcurl -plaintext -H 'x-api-key: demo-alice' 127.0.0.1:9090 grpc.health.v1.Health/Check
//
// The gRPC service is the standard health service, generated code that
// ships with grpc-go; the server registers reflection too, which the
// limiter exempts, so that grpcurl needs no .proto files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
	"github.com/slidelog/ratelimit/grpclimit"
)

// The quota every client shares across both protocols.
const (
	limit  = 5
	window = 10 * time.Second
)

func main() {
	httpAddr := flag.String("http", "127.0.0.1:8080", "HTTP listen address")
	grpcAddr := flag.String("grpc", "127.0.0.1:9090", "gRPC listen address")
	flag.Parse()
	if err := run(*httpAddr, *grpcAddr); err != nil {
		log.Fatal(err)
	}
}

// run binds both addresses, and only then says it listens, then serves
// until SIGINT or SIGTERM.
func run(httpAddr, grpcAddr string) error {
	l, err := newLimiter()
	if err != nil {
		return err
	}
	defer l.Close()
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		hl.Close()
		return err
	}
	log.Printf("listening on http://%s and grpc://%s (Ctrl-C to stop)", hl.Addr(), gl.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveBoth(ctx, l, hl, gl)
}

// newLimiter keys a client by its API key if it sends one, else by its
// address. KeyByHeader reads the X-API-Key header of an HTTP request and
// the x-api-key metadata of a gRPC call; KeyByIP reads either's peer. It
// does not check keys: in production, authenticate them first.
func newLimiter(opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
	opts = append([]ratelimit.Option{
		// A named policy, so that the RateLimit headers and a refusal's
		// QuotaFailure tell the client whose quota it is.
		ratelimit.WithName("api"),
		// grpcurl asks the reflection service before each call: not the
		// client's call, so not counted.
		ratelimit.WithSkip(func(r *http.Request) bool {
			return strings.HasPrefix(r.URL.Path, "/grpc.reflection.")
		}),
	}, opts...)
	return ratelimit.New(limit, window, ratelimit.KeyFirst(ratelimit.KeyByHeader("X-API-Key"), ratelimit.KeyByIP()), opts...)
}

// newMux serves the HTTP side.
func newMux(l *ratelimit.Limiter) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /hello", l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	return mux
}

// newGRPCServer serves the gRPC side: the limiter's interceptors in front
// of the health and reflection services.
func newGRPCServer(l *ratelimit.Limiter) *grpc.Server {
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(l)),
	)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	reflection.Register(gs)
	return gs
}

// shutdownGrace is how long serveBoth waits for the gRPC calls in flight
// when it shuts down, as serve.Serve waits for the HTTP requests.
var shutdownGrace = 5 * time.Second

// serveBoth serves HTTP on hl and gRPC on gl until ctx ends, then shuts
// both down gracefully, each waiting up to 5 s for what is in flight. If
// either stops with an error, it stops the other and returns that error.
func serveBoth(ctx context.Context, l *ratelimit.Limiter, hl, gl net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gs := newGRPCServer(l)
	errs := make(chan error, 2)
	go func() { errs <- serve.Serve(ctx, hl, newMux(l)) }()
	go func() {
		// Serve returns nil after GracefulStop, and ErrServerStopped when
		// the stop came first.
		if err := gs.Serve(gl); !errors.Is(err, grpc.ErrServerStopped) {
			errs <- err
			return
		}
		errs <- nil
	}()
	go func() {
		<-ctx.Done()
		stopGRPC(gs, shutdownGrace)
	}()
	first := <-errs
	cancel()
	return errors.Join(first, <-errs)
}

// stopGRPC stops gs gracefully, waiting up to grace for the calls in
// flight, then ends those still open: a stream such as Health/Watch never
// ends by itself, and GracefulStop alone would wait for it forever.
func stopGRPC(gs *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
}
