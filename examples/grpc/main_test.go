package main

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/maintest"
)

// start serves the example on loopback ports until the test ends, with a
// frozen clock so that every figure is exact, and returns the HTTP base
// URL and a gRPC health client.
func start(t *testing.T) (string, healthpb.HealthClient) {
	base, cc := startConn(t)
	return base, healthpb.NewHealthClient(cc)
}

// startConn is start, returning the gRPC connection itself.
func startConn(t *testing.T) (string, *grpc.ClientConn) {
	t.Helper()
	l, err := newLimiter(ratelimit.WithClock(func() time.Time { return time.Unix(1e9, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveBoth(ctx, l, hl, gl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serveBoth after shutdown: %v, want nil", err)
		}
	})
	cc, err := grpc.NewClient("passthrough:///"+gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return "http://" + hl.Addr().String(), cc
}

// TestReflectionIsNotCounted asks the reflection service, as grpcurl
// does before each call, more times than the quota: none of it counts,
// and the client's first call still has the whole quota.
func TestReflectionIsNotCounted(t *testing.T) {
	_, cc := startConn(t)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "demo-alice")
	refl := reflectionpb.NewServerReflectionClient(cc)
	for i := range 2 * limit {
		stream, err := refl.ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatalf("reflection %d: %v", i+1, err)
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
		}); err != nil {
			t.Fatalf("reflection %d: send: %v", i+1, err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("reflection %d: %v, want it exempt from the limit", i+1, err)
		}
		stream.CloseSend()
	}
	var header metadata.MD
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header)); err != nil {
		t.Fatalf("health check after reflection: %v", err)
	}
	if got := header.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != "4" {
		t.Errorf("health check after %d reflection calls: remaining %q, want 4", 2*limit, got)
	}
}

// TestOneQuotaForBothProtocols sends one client's requests over HTTP and
// gRPC alternately: they spend one quota of 5, first by API key, then,
// without one, by address.
func TestOneQuotaForBothProtocols(t *testing.T) {
	base, health := start(t)
	type step struct {
		grpc      bool
		key       string
		wantOK    bool
		remaining string
	}
	steps := []step{
		{grpc: false, key: "demo-alice", wantOK: true, remaining: "4"},
		{grpc: true, key: "demo-alice", wantOK: true, remaining: "3"},
		{grpc: false, key: "demo-alice", wantOK: true, remaining: "2"},
		{grpc: true, key: "demo-alice", wantOK: true, remaining: "1"},
		{grpc: true, key: "demo-alice", wantOK: true, remaining: "0"},
		{grpc: false, key: "demo-alice", wantOK: false, remaining: "0"},
		{grpc: true, key: "demo-alice", wantOK: false, remaining: "0"},
		// Another key has a quota of its own; no key counts by address.
		{grpc: true, key: "demo-bob", wantOK: true, remaining: "4"},
		{grpc: true, wantOK: true, remaining: "4"},
		{grpc: false, wantOK: true, remaining: "3"},
	}
	for i, s := range steps {
		var ok bool
		var remaining string
		if s.grpc {
			ctx := context.Background()
			if s.key != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", s.key)
			}
			var header, trailer metadata.MD
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
			ok = err == nil
			if !ok && status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("step %d: gRPC %v, want OK or ResourceExhausted", i+1, err)
			}
			md := header
			if !ok {
				md = trailer
			}
			if v := md.Get("x-ratelimit-remaining"); len(v) == 1 {
				remaining = v[0]
			}
		} else {
			req, _ := http.NewRequest("GET", base+"/hello", nil)
			if s.key != "" {
				req.Header.Set("X-API-Key", s.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
			if !ok && resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("step %d: HTTP %d, want 200 or 429", i+1, resp.StatusCode)
			}
			remaining = resp.Header.Get("X-Ratelimit-Remaining")
		}
		proto := map[bool]string{false: "HTTP", true: "gRPC"}[s.grpc]
		if ok != s.wantOK || remaining != s.remaining {
			t.Errorf("step %d, %s, key %q: allowed %v with %s remaining, want %v with %s", i+1, proto, s.key, ok, remaining, s.wantOK, s.remaining)
		}
	}
}

// TestMainFailsOnTakenPort runs the example as a person would, with either
// port already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	t.Run("http", func(t *testing.T) { maintest.FailsOnTakenPort(t, main, "-http", "-grpc", "127.0.0.1:0") })
	t.Run("grpc", func(t *testing.T) { maintest.FailsOnTakenPort(t, main, "-grpc", "-http", "127.0.0.1:0") })
}

// TestShutdownEndsOpenStreams shuts the servers down while a client
// watches the health service, a stream that never ends by itself: the
// shutdown waits for it no longer than its grace, then ends it.
func TestShutdownEndsOpenStreams(t *testing.T) {
	grace := shutdownGrace
	shutdownGrace = 10 * time.Millisecond
	t.Cleanup(func() { shutdownGrace = grace })
	l, err := newLimiter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serveBoth(ctx, l, hl, gl) }()
	cc, err := grpc.NewClient("passthrough:///"+gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	watch, err := healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("watch: %v", err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serveBoth after shutdown: %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serveBoth still serving a minute after shutdown, waiting for a Watch stream")
	}
	if _, err := watch.Recv(); err == nil {
		t.Error("watch after shutdown: a message, want the stream ended")
	}
}
