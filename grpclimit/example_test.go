package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/grpclimit"
)

// Two calls a minute per API key, sent as x-api-key metadata: the third is
// refused with RESOURCE_EXHAUSTED, the wait in RetryInfo and in the
// grpc-retry-pushback-ms trailer, and the violated policy in QuotaFailure.
func ExampleUnaryServerInterceptor() {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(l)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice")

	for range 3 {
		var header, trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		st := status.Convert(err)
		if err == nil {
			fmt.Println(st.Code(), "remaining", header.Get("x-ratelimit-remaining"), "of", header.Get("ratelimit-policy"))
			continue
		}
		fmt.Println(st.Code(), "remaining", trailer.Get("x-ratelimit-remaining"), "of", trailer.Get("ratelimit-policy"))
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				wait := d.GetRetryDelay().AsDuration()
				fmt.Println("  retry within a minute:", wait > 0 && wait <= time.Minute,
					"pushback agrees:", trailer.Get("grpc-retry-pushback-ms")[0] == fmt.Sprint(wait.Milliseconds()))
			case *errdetails.QuotaFailure:
				v := d.GetViolations()[0]
				fmt.Printf("  policy %s: %s\n", v.GetSubject(), v.GetDescription())
			}
		}
	}
	// Output:
	// OK remaining [1] of ["default";q=2;w=60]
	// OK remaining [0] of ["default";q=2;w=60]
	// ResourceExhausted remaining [0] of ["default";q=2;w=60]
	//   retry within a minute: true pushback agrees: true
	//   policy default: 2 per 60 s
}
