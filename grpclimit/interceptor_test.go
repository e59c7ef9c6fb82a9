package grpclimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slidelog/ratelimit"
)

// withKey returns ctx carrying the API key in the outgoing metadata.
func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
}

// refusalDetails returns the RetryInfo and QuotaFailure of a status.
func refusalDetails(st *status.Status) (ri *errdetails.RetryInfo, qf *errdetails.QuotaFailure) {
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	return ri, qf
}

// TestUnaryAllowsThenRefuses sends calls at instants of a fake clock, so
// that every figure of every answer is exact: three allowed with their
// standing in the header metadata, then refusals that say how long to
// wait, rounded up to the millisecond, until the oldest call leaves the
// window.
func TestUnaryAllowsThenRefuses(t *testing.T) {
	var clock fakeClock
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), clock.option())
	cc := server{l: l}.serveBufconn(t)
	ctx := withKey(context.Background(), "alice")

	steps := []struct {
		advance  time.Duration // before the call
		code     codes.Code
		header   map[string]string // want, in the header metadata of an allowed call
		trailer  map[string]string // want, in the trailer of a refused call
		wait     time.Duration     // want, in RetryInfo
		pushback string
	}{
		{code: codes.OK, header: map[string]string{
			"ratelimit":             `"default";r=2;t=60`,
			"ratelimit-policy":      `"default";q=3;w=60`,
			"x-ratelimit-limit":     "3",
			"x-ratelimit-remaining": "2",
			"x-ratelimit-reset":     "60",
		}},
		{advance: 10 * time.Second, code: codes.OK, header: map[string]string{"ratelimit": `"default";r=1;t=50`}},
		{advance: 10 * time.Second, code: codes.OK, header: map[string]string{"ratelimit": `"default";r=0;t=40`}},
		// The first call leaves the window 20 s and 1 ns from now: the
		// wait is rounded up, to the next millisecond.
		{advance: 20*time.Second - 1, code: codes.ResourceExhausted, wait: 20001 * time.Millisecond, pushback: "20001", trailer: map[string]string{
			"ratelimit":        `"default";r=0;t=21`,
			"ratelimit-policy": `"default";q=3;w=60`,
			"retry-after":      "21",
		}},
		// Half a millisecond before it leaves: a wait of 1 ms, never 0.
		{advance: 20*time.Second + 1 - 500*time.Microsecond, code: codes.ResourceExhausted, wait: time.Millisecond, pushback: "1"},
		// It has left: one call fits again.
		{advance: 500 * time.Microsecond, code: codes.OK, header: map[string]string{"ratelimit": `"default";r=0;t=10`}},
	}
	for i, s := range steps {
		clock.advance(s.advance)
		var header, trailer metadata.MD
		_, err := say(ctx, cc, "hi", grpc.Header(&header), grpc.Trailer(&trailer))
		st := status.Convert(err)
		if st.Code() != s.code {
			t.Fatalf("call %d: %v, want %v", i+1, st.Code(), s.code)
		}
		for k, want := range s.header {
			if got := header.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("call %d: header %s = %q, want %q", i+1, k, got, want)
			}
		}
		for k, want := range s.trailer {
			if got := trailer.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("call %d: trailer %s = %q, want %q", i+1, k, got, want)
			}
		}
		if s.code == codes.OK {
			if got := trailer.Get("grpc-retry-pushback-ms"); got != nil {
				t.Errorf("call %d: allowed, with pushback %q, want none", i+1, got)
			}
			continue
		}
		if header.Get("ratelimit") != nil {
			t.Errorf("call %d: refused with header metadata %v, want a trailers-only response", i+1, header)
		}
		if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != s.pushback {
			t.Errorf("call %d: trailer grpc-retry-pushback-ms = %q, want [%s]", i+1, got, s.pushback)
		}
		ri, qf := refusalDetails(st)
		if ri == nil || ri.GetRetryDelay().AsDuration() != s.wait {
			t.Errorf("call %d: RetryInfo %v, want a retry delay of %v", i+1, ri, s.wait)
		}
		if qf == nil || len(qf.GetViolations()) != 1 {
			t.Fatalf("call %d: QuotaFailure %v, want one violation", i+1, qf)
		}
		v := qf.GetViolations()[0]
		if v.GetSubject() != "default" || v.GetQuotaId() != "default" || v.GetQuotaValue() != 3 || v.GetDescription() != "3 per 60 s" {
			t.Errorf("call %d: violation %v, want subject and quota_id default, quota_value 3, description of 3 in 60 s", i+1, v)
		}
		if want := "rate limit exceeded: retry in " + s.wait.String(); st.Message() != want {
			t.Errorf("call %d: message %q, want %q", i+1, st.Message(), want)
		}
	}
}

// TestSharedWithHTTP serves HTTP and gRPC from one limiter: an API key
// has one quota, whichever protocol spends it.
func TestSharedWithHTTP(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	cc := server{l: l}.serveBufconn(t)
	web := httptest.NewServer(l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer web.Close()
	get := func(key string) int {
		req, _ := http.NewRequest("GET", web.URL, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	if got := get("alice"); got != http.StatusOK {
		t.Fatalf("alice over HTTP: %d, want 200", got)
	}
	if _, err := say(withKey(context.Background(), "alice"), cc, "hi"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("alice over gRPC after HTTP: %v, want ResourceExhausted", err)
	}
	if _, err := say(withKey(context.Background(), "bob"), cc, "hi"); err != nil {
		t.Fatalf("bob over gRPC: %v, want OK", err)
	}
	if got := get("bob"); got != http.StatusTooManyRequests {
		t.Errorf("bob over HTTP after gRPC: %d, want 429", got)
	}
}

// TestRejections checks how calls without a usable key or cost end: the
// code each KeyError status maps to, and messages that repeat nothing the
// client sent and nothing of the server's internals.
func TestRejections(t *testing.T) {
	const secret = "s3cr3t-internal-detail"
	keyErr := func(code int, msg string) ratelimit.Keyer {
		return ratelimit.KeyFunc(func(*http.Request) (string, error) { return "", &ratelimit.KeyError{Status: code, Message: msg} })
	}
	noID := func(context.Context) (string, bool) { return "", false }
	tests := []struct {
		name    string
		key     ratelimit.Keyer
		opts    []ratelimit.Option
		md      []string // outgoing metadata pairs
		code    codes.Code
		msg     string
		trailer map[string]string
	}{
		{name: "missing API key", key: ratelimit.KeyByHeader("X-API-Key"),
			code: codes.InvalidArgument, msg: "missing X-API-Key header"},
		{name: "API key too long", key: ratelimit.KeyByHeader("X-API-Key"), md: []string{"x-api-key", secret + strings.Repeat("k", 256)},
			code: codes.InvalidArgument, msg: "X-API-Key is too long"},
		{name: "no identity in the context", key: ratelimit.KeyByContext(noID),
			code: codes.Unauthenticated, msg: "authentication required"},
		{name: "refused bearer token", key: ratelimit.KeyByJWTSubject([]byte(strings.Repeat("k", 32))), md: []string{"authorization", "Bearer " + secret},
			code: codes.Unauthenticated, msg: "invalid or expired bearer token", trailer: map[string]string{"www-authenticate": `Bearer error="invalid_token"`}},
		{name: "forbidden", key: keyErr(http.StatusForbidden, "403 Forbidden: banned"),
			code: codes.PermissionDenied, msg: "banned"},
		{name: "misconfigured key", key: keyErr(http.StatusInternalServerError, "500 Internal Server Error: rate-limit key misconfigured"),
			code: codes.Internal, msg: "rate-limit key misconfigured"},
		// A 429 is the limiter's refusal alone: a Keyer's is a misconfigured
		// Keyer, as over HTTP, and not a RESOURCE_EXHAUSTED without a wait.
		{name: "KeyError of 429", key: keyErr(http.StatusTooManyRequests, "429 Too Many Requests: "+secret),
			code: codes.Internal, msg: "rate-limit key misconfigured"},
		// A Keyer whose own backend is down: a retry may succeed, as the
		// client of HTTP's 503 knows.
		{name: "key service unavailable", key: keyErr(http.StatusServiceUnavailable, "503 Service Unavailable: try again later"),
			code: codes.Unavailable, msg: "try again later"},
		{name: "key service timed out", key: keyErr(http.StatusGatewayTimeout, "504 Gateway Timeout: try again later"),
			code: codes.Unavailable, msg: "try again later"},
		{name: "key service failed", key: keyErr(http.StatusBadGateway, "502 Bad Gateway: try again later"),
			code: codes.Unavailable, msg: "try again later"},
		{name: "other 5xx", key: keyErr(http.StatusNotImplemented, "501 Not Implemented: no keys here"),
			code: codes.Internal, msg: "no keys here"},
		{name: "no client address (bufconn)", key: ratelimit.KeyByIP(),
			code: codes.InvalidArgument, msg: "no client address"},
		{name: "error that is not a KeyError", key: ratelimit.KeyFunc(func(*http.Request) (string, error) { return "", errors.New(secret) }),
			code: codes.InvalidArgument, msg: "the request carries no rate-limit key"},
		{name: "cost above the limit", key: ratelimit.KeyByHeader("X-API-Key"), md: []string{"x-api-key", "alice"},
			opts: []ratelimit.Option{ratelimit.WithCost(func(*http.Request) int { return 4 })},
			code: codes.InvalidArgument, msg: "the request costs more than the rate limit allows in a window"},
		{name: "cost below 1", key: ratelimit.KeyByHeader("X-API-Key"), md: []string{"x-api-key", "alice"},
			opts: []ratelimit.Option{ratelimit.WithCost(func(*http.Request) int { return 0 })},
			code: codes.InvalidArgument, msg: "invalid request cost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var called atomic.Bool
			l := newLimiter(t, 3, time.Minute, tc.key, tc.opts...)
			cc := server{l: l, echo: &echoServer{
				say: func(_ context.Context, in string) (string, error) {
					called.Store(true)
					return in, nil
				},
				chat: func(grpc.ServerStream) error {
					called.Store(true)
					return nil
				},
			}}.serveBufconn(t)
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			// A unary call and a stream, refused as it opens, end alike.
			for _, kind := range []string{"unary", "stream"} {
				var err error
				var trailer metadata.MD
				if kind == "unary" {
					_, err = say(ctx, cc, "hi", grpc.Trailer(&trailer))
				} else {
					cs, serr := cc.NewStream(ctx, chatDesc, chatMethod)
					if serr != nil {
						t.Fatalf("NewStream: %v", serr)
					}
					_, err = exchange(cs, "hi")
					trailer = cs.Trailer()
				}
				st := status.Convert(err)
				if st.Code() != tc.code || st.Message() != tc.msg {
					t.Errorf("%s: status %v %q, want %v %q", kind, st.Code(), st.Message(), tc.code, tc.msg)
				}
				if strings.Contains(st.Message(), secret) || strings.Contains(st.Message(), "kkk") {
					t.Errorf("%s: message %q repeats the client's input or an internal error", kind, st.Message())
				}
				for k, want := range tc.trailer {
					if got := trailer.Get(k); len(got) != 1 || got[0] != want {
						t.Errorf("%s: trailer %s = %q, want %q", kind, k, got, want)
					}
				}
			}
			if called.Load() {
				t.Errorf("the handler ran for a rejected call")
			}
		})
	}
}

// failingStore fails every decision with an error that must not reach
// clients.
type failingStore struct{ ratelimit.Store } // only Take is called

func (failingStore) Take(context.Context, string, ratelimit.PolicySet, int) (ratelimit.Result, error) {
	return ratelimit.Result{}, errors.New("redis: dial 10.0.0.7:6379: s3cr3t")
}

func TestStoreFailure(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithStore(failingStore{}))
		cc := server{l: l}.serveBufconn(t)
		var trailer metadata.MD
		_, err := say(withKey(context.Background(), "alice"), cc, "hi", grpc.Trailer(&trailer))
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || st.Message() != "rate limiter unavailable" {
			t.Errorf("status %v %q, want Unavailable %q", st.Code(), st.Message(), "rate limiter unavailable")
		}
		if ri, _ := refusalDetails(st); ri.GetRetryDelay().AsDuration() != time.Second {
			t.Errorf("RetryInfo %v, want 1s", ri)
		}
		if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "1000" {
			t.Errorf("pushback %q, want [1000]", got)
		}
	})
	t.Run("open", func(t *testing.T) {
		l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithStore(failingStore{}), ratelimit.WithFailOpen())
		cc := server{l: l}.serveBufconn(t)
		var header, trailer metadata.MD
		if _, err := say(withKey(context.Background(), "alice"), cc, "hi", grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
			t.Fatalf("fail-open call: %v, want OK", err)
		}
		if header.Get("ratelimit") != nil || trailer.Get("ratelimit") != nil {
			t.Errorf("fail-open call carries a standing (header %v, trailer %v), want none: nothing was counted", header, trailer)
		}
	})
}

// TestDryRun serves a call over the limit, and says where it stands.
func TestDryRun(t *testing.T) {
	var limited atomic.Int32
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen, ratelimit.WithDryRun(),
		ratelimit.WithHooks(ratelimit.Hooks{OnLimit: func(*http.Request, ratelimit.Result) { limited.Add(1) }}))
	cc := server{l: l}.serveBufconn(t)
	ctx := withKey(context.Background(), "alice")
	for i, want := range []string{`"default";r=0;t=60`, `"default";r=0;t=60`} {
		var header, trailer metadata.MD
		if _, err := say(ctx, cc, "hi", grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
			t.Fatalf("call %d in dry run: %v, want OK", i+1, err)
		}
		if got := header.Get("ratelimit"); len(got) != 1 || got[0] != want {
			t.Errorf("call %d: ratelimit %q, want %q", i+1, got, want)
		}
		if got := trailer.Get("grpc-retry-pushback-ms"); got != nil {
			t.Errorf("call %d: pushback %q on a served call", i+1, got)
		}
	}
	if n := limited.Load(); n != 1 {
		t.Errorf("OnLimit called %d times, want 1 (the second call)", n)
	}
}

// TestDryRunServesOnlyWhatItWouldRefuse: dry run puts the limit on trial,
// not the key, the cost's floor or the store. A call without a usable key
// or whose store failed ends as it would without it; a call costing more
// than the limit is served, uncounted, so without the metadata.
func TestDryRunServesOnlyWhatItWouldRefuse(t *testing.T) {
	cost := ratelimit.WithCost(func(r *http.Request) int {
		if len(r.Header.Values("X-Cost")) > 0 {
			return 4
		}
		return 1
	})
	tests := []struct {
		name string
		opts []ratelimit.Option
		md   []string
		code codes.Code
	}{
		{name: "no key", code: codes.InvalidArgument},
		{name: "store failed", opts: []ratelimit.Option{ratelimit.WithStore(failingStore{})}, md: []string{"x-api-key", "alice"}, code: codes.Unavailable},
		{name: "store failed, fail open", opts: []ratelimit.Option{ratelimit.WithStore(failingStore{}), ratelimit.WithFailOpen()}, md: []string{"x-api-key", "alice"}, code: codes.OK},
		{name: "cost above the limit", md: []string{"x-api-key", "alice", "x-cost", "4"}, code: codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), append([]ratelimit.Option{ratelimit.WithDryRun(), cost}, tc.opts...)...)
			cc := server{l: l}.serveBufconn(t)
			var header, trailer metadata.MD
			_, err := say(metadata.AppendToOutgoingContext(context.Background(), tc.md...), cc, "hi", grpc.Header(&header), grpc.Trailer(&trailer))
			if got := status.Code(err); got != tc.code {
				t.Fatalf("%v, want %v", err, tc.code)
			}
			if header.Get("ratelimit") != nil || trailer.Get("ratelimit") != nil {
				t.Errorf("metadata (header %v, trailer %v), want none: nothing was counted", header, trailer)
			}
		})
	}
}

// TestSkipAndMethod exempts the health service by its full method, which
// the limiter sees as the request's path, and keys the rest by method.
func TestSkipAndMethod(t *testing.T) {
	var keys []string
	route := ratelimit.KeyByRoute()
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		k, err := route.Key(r)
		keys = append(keys, k) // one call at a time
		return k, err
	}), ratelimit.WithSkip(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/grpc.health.v1.Health/") }))
	cc := server{l: l}.serveBufconn(t)

	hc := healthpb.NewHealthClient(cc)
	for i := range 3 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check %d: %v, want OK (exempt)", i+1, err)
		}
	}
	if _, err := say(context.Background(), cc, "hi"); err != nil {
		t.Fatalf("first Say: %v", err)
	}
	if _, err := say(context.Background(), cc, "hi"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second Say: %v, want ResourceExhausted", err)
	}
	if want := []string{"route:" + sayMethod, "route:" + sayMethod}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %q, want %q", keys, want)
	}
}

// TestHandlerErrorStaysRetryable checks that the limiter's metadata does
// not turn a handler's error into a response the client may not retry:
// grpc-go retries only trailers-only responses, so the metadata of a
// failed call rides in its trailer.
func TestHandlerErrorStaysRetryable(t *testing.T) {
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen)
	var attempts atomic.Int32
	cc := server{l: l, echo: &echoServer{say: func(_ context.Context, in string) (string, error) {
		if attempts.Add(1) == 1 {
			return "", status.Error(codes.Unavailable, "try again")
		}
		return in, nil
	}}}.serveBufconn(t, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpclimit.test.Echo"}],
		"retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`))

	var header metadata.MD
	if _, err := say(withKey(context.Background(), "alice"), cc, "hi", grpc.Header(&header)); err != nil {
		t.Fatalf("call: %v, want OK after the client's retry", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	if got := header.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=8;t=60` {
		t.Errorf("ratelimit %q, want the second attempt's standing", got)
	}
}

// TestHeadersOption sends what WithHeaders selects, and nothing when it
// selects nothing.
func TestHeadersOption(t *testing.T) {
	tests := []struct {
		set  ratelimit.HeaderSet
		want []string
	}{
		{ratelimit.HeadersLegacy | ratelimit.HeadersIETF, []string{"ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"}},
		{ratelimit.HeadersIETF, []string{"ratelimit", "ratelimit-policy"}},
		{ratelimit.HeadersLegacy, []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"}},
		{0, nil},
	}
	all := []string{"ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"}
	for _, tc := range tests {
		l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithHeaders(tc.set))
		cc := server{l: l}.serveBufconn(t)
		var header metadata.MD
		if _, err := say(withKey(context.Background(), "alice"), cc, "hi", grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		for _, k := range all {
			want := false
			for _, w := range tc.want {
				want = want || w == k
			}
			if got := header.Get(k) != nil; got != want {
				t.Errorf("WithHeaders(%d): %s present %v, want %v", tc.set, k, got, want)
			}
		}
	}
}

// TestLimitsByMethod gives a method its own limit: the key names the
// method (the request's route is the call's full method), and the lookup
// gives the key of that method its policy.
func TestLimitsByMethod(t *testing.T) {
	lookup := func(_ context.Context, key string) ([]ratelimit.Policy, error) {
		if strings.HasSuffix(key, "|route:"+sayMethod) {
			return []ratelimit.Policy{{Name: "say", Limit: 1, Window: time.Second}}, nil
		}
		return nil, nil
	}
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyJoin(ratelimit.KeyByHeader("X-API-Key"), ratelimit.KeyByRoute()), frozen,
		ratelimit.WithLimits(lookup, time.Minute))
	cc := server{l: l}.serveBufconn(t)
	ctx := withKey(context.Background(), "alice")

	var header metadata.MD
	if _, err := say(ctx, cc, "hi", grpc.Header(&header)); err != nil {
		t.Fatalf("first Say: %v", err)
	}
	if got := header.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"say";q=1;w=1` {
		t.Errorf("Say's ratelimit-policy %q, want the say policy", got)
	}
	_, err := say(ctx, cc, "hi")
	if _, qf := refusalDetails(status.Convert(err)); qf == nil || qf.GetViolations()[0].GetDescription() != "1 per 1 s" {
		t.Errorf("second Say: %v with QuotaFailure %v, want refused by the say policy", err, qf)
	}
	hc := healthpb.NewHealthClient(cc)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check on the default policy: %v, want OK", err)
	}
}
