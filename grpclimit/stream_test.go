package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/grpclimit"
)

// chat opens a Chat stream as the API key's client.
func chat(t *testing.T, cc *grpc.ClientConn, key string) grpc.ClientStream {
	t.Helper()
	cs, err := cc.NewStream(withKey(t.Context(), key), chatDesc, chatMethod)
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	return cs
}

// exchange sends msg on cs and receives the answer.
func exchange(cs grpc.ClientStream, msg string) (string, error) {
	if err := cs.SendMsg(wrapperspb.String(msg)); err != nil && err != io.EOF {
		return "", err
	}
	// On io.EOF from SendMsg the stream has ended: RecvMsg says how.
	out := new(wrapperspb.StringValue)
	err := cs.RecvMsg(out)
	return out.GetValue(), err
}

// checkRefused checks that err is the limiter's refusal, with its details
// and the pushback in trailer.
func checkRefused(t *testing.T, what string, err error, trailer metadata.MD) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want ResourceExhausted", what, err)
	}
	ri, qf := refusalDetails(st)
	if ri == nil || qf == nil || qf.GetViolations()[0].GetSubject() != "default" {
		t.Errorf("%s: details RetryInfo %v, QuotaFailure %v, want both, for policy default", what, ri, qf)
	}
	if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 {
		t.Errorf("%s: trailer grpc-retry-pushback-ms %q, want one value", what, got)
	}
	if got := trailer.Get("ratelimit"); len(got) != 1 {
		t.Errorf("%s: trailer ratelimit %q, want one value", what, got)
	}
}

// TestStreamCountsOnce counts streams, not messages: two streams of five
// messages each fit a limit of 2; the third stream is refused when it
// opens, before the handler runs, in a trailers-only response.
func TestStreamCountsOnce(t *testing.T) {
	l := newLimiter(t, 2, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen)
	var handled atomic.Int32
	cc := server{l: l, echo: &echoServer{chat: func(s grpc.ServerStream) error {
		handled.Add(1)
		return echoAll(s)
	}}}.serveBufconn(t)

	for i, want := range []string{`"default";r=1;t=60`, `"default";r=0;t=60`} {
		cs := chat(t, cc, "alice")
		for j := range 5 {
			if got, err := exchange(cs, "m"); err != nil || got != "m" {
				t.Fatalf("stream %d, message %d: %q, %v; want the echo", i+1, j+1, got, err)
			}
		}
		header, _ := cs.Header()
		if got := header.Get("ratelimit"); len(got) != 1 || got[0] != want {
			t.Errorf("stream %d: header ratelimit %q, want %q", i+1, got, want)
		}
		cs.CloseSend()
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
			t.Errorf("stream %d: end %v, want io.EOF", i+1, err)
		}
	}

	cs := chat(t, cc, "alice")
	_, err := exchange(cs, "m")
	checkRefused(t, "stream 3", err, cs.Trailer())
	if header, _ := cs.Header(); header.Get("ratelimit") != nil {
		t.Errorf("stream 3: header %v, want a trailers-only response", header)
	}
	if n := handled.Load(); n != 2 {
		t.Errorf("handler ran for %d streams, want 2", n)
	}
}

// TestStreamCountsMessages counts each message under CountMessages: the
// fourth message of a limit of 3 ends the stream with the refusal, and so
// does the first message of the next stream; another key is untouched.
func TestStreamCountsMessages(t *testing.T) {
	l := newLimiter(t, 3, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen)
	cc := server{l: l, streamOpts: []grpclimit.StreamOption{grpclimit.CountMessages()}}.serveBufconn(t)

	cs := chat(t, cc, "alice")
	for j := range 3 {
		if got, err := exchange(cs, "m"); err != nil || got != "m" {
			t.Fatalf("message %d: %q, %v; want the echo", j+1, got, err)
		}
	}
	// The headers went out with the first echo, after the first message's
	// decision.
	header, _ := cs.Header()
	if got := header.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=2;t=60` {
		t.Errorf("header ratelimit %q, want the first message's standing", got)
	}
	_, err := exchange(cs, "m")
	checkRefused(t, "message 4", err, cs.Trailer())
	if got := cs.Trailer().Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=0;t=60` {
		t.Errorf("trailer ratelimit %q, want the refusal's standing", got)
	}

	cs = chat(t, cc, "alice")
	_, err = exchange(cs, "m")
	checkRefused(t, "next stream, message 1", err, cs.Trailer())

	cs = chat(t, cc, "bob")
	if got, err := exchange(cs, "m"); err != nil || got != "m" {
		t.Errorf("bob's first message: %q, %v; want the echo", got, err)
	}
}

// TestStreamRefusalWhateverTheHandler ends a stream whose message was
// refused with the refusal, even when the handler ignores RecvMsg's error,
// tries to send, and returns nil.
func TestStreamRefusalWhateverTheHandler(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	sendErr := make(chan error, 1)
	cc := server{l: l, streamOpts: []grpclimit.StreamOption{grpclimit.CountMessages()}, echo: &echoServer{
		chat: func(s grpc.ServerStream) error {
			for range 2 {
				s.RecvMsg(new(wrapperspb.StringValue)) // errors ignored
			}
			sendErr <- s.SendMsg(wrapperspb.String("after the refusal"))
			return nil
		},
	}}.serveBufconn(t)

	cs := chat(t, cc, "alice")
	for range 2 {
		if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatalf("SendMsg: %v", err)
		}
	}
	err := cs.RecvMsg(new(wrapperspb.StringValue))
	checkRefused(t, "stream", err, cs.Trailer())
	if err := <-sendErr; status.Code(err) != codes.ResourceExhausted {
		t.Errorf("handler's SendMsg after the refusal: %v, want the refusal", err)
	}
}

// TestStreamHandlerErrorStaysTrailersOnly checks that a stream the
// handler fails without sending carries the limiter's metadata in its
// trailer, leaving the response trailers-only and so retryable.
func TestStreamHandlerErrorStaysTrailersOnly(t *testing.T) {
	for _, opts := range [][]grpclimit.StreamOption{nil, {grpclimit.CountMessages()}} {
		l := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen)
		cc := server{l: l, streamOpts: opts, echo: &echoServer{chat: func(s grpc.ServerStream) error {
			if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "try again")
		}}}.serveBufconn(t)

		cs := chat(t, cc, "alice")
		if _, err := exchange(cs, "m"); status.Code(err) != codes.Unavailable {
			t.Fatalf("%d options: %v, want the handler's Unavailable", len(opts), err)
		}
		if header, _ := cs.Header(); header.Get("ratelimit") != nil {
			t.Errorf("%d options: header %v, want a trailers-only response", len(opts), header)
		}
		if got := cs.Trailer().Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=4;t=60` {
			t.Errorf("%d options: trailer ratelimit %q, want the standing", len(opts), got)
		}
	}
}

// TestStreamDecidesEachMessageWithTheCall checks that under CountMessages
// each message is decided with the call's metadata and method, and that
// the stream's opening is not counted.
func TestStreamDecidesEachMessageWithTheCall(t *testing.T) {
	var paths []string
	key := ratelimit.KeyByHeader("X-API-Key")
	l := newLimiter(t, 10, time.Minute, ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		paths = append(paths, r.URL.Path) // one message at a time
		return key.Key(r)
	}), frozen)
	cc := server{l: l, streamOpts: []grpclimit.StreamOption{grpclimit.CountMessages()}}.serveBufconn(t)
	cs := chat(t, cc, "alice")
	for range 2 {
		if _, err := exchange(cs, "m"); err != nil {
			t.Fatal(err)
		}
	}
	cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
	if len(paths) != 2 || paths[0] != chatMethod || paths[1] != chatMethod {
		t.Errorf("decided %q, want the two messages of %s", paths, chatMethod)
	}
	if got := cs.Trailer().Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=8;t=60` {
		t.Errorf("trailer ratelimit %q, want the last message's standing", got)
	}
}

func TestStreamServerInterceptorNilOption(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	for name, f := range map[string]func(){
		"nil option":          func() { grpclimit.StreamServerInterceptor(l, nil) },
		"nil limiter, stream": func() { grpclimit.StreamServerInterceptor(nil) },
		"nil limiter, unary":  func() { grpclimit.UnaryServerInterceptor(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic, want one at construction", name)
				}
			}()
			f()
		}()
	}
}

// TestStreamRefusedMessageNotDelivered: under CountMessages the message
// that was refused never reaches the handler, not even one that ignores
// RecvMsg's error and reads the message it passed.
func TestStreamRefusedMessageNotDelivered(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByHeader("X-API-Key"), frozen)
	got := make(chan string, 2)
	cc := server{l: l, streamOpts: []grpclimit.StreamOption{grpclimit.CountMessages()}, echo: &echoServer{
		chat: func(s grpc.ServerStream) error {
			for range 2 {
				in := new(wrapperspb.StringValue)
				s.RecvMsg(in) // errors ignored
				got <- in.GetValue()
			}
			return nil
		},
	}}.serveBufconn(t)

	cs := chat(t, cc, "alice")
	for _, m := range []string{"first", "over the limit"} {
		if err := cs.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatalf("SendMsg: %v", err)
		}
	}
	err := cs.RecvMsg(new(wrapperspb.StringValue))
	checkRefused(t, "stream", err, cs.Trailer())
	if m := <-got; m != "first" {
		t.Errorf("first message %q, want %q", m, "first")
	}
	if m := <-got; m != "" {
		t.Errorf("the handler was handed the refused message %q, want nothing", m)
	}
}

// flakyStore decides through its memory store the first ok calls, and
// fails every one after them.
type flakyStore struct {
	ratelimit.Store
	ok    int
	calls atomic.Int32
}

func (s *flakyStore) Take(ctx context.Context, key string, set ratelimit.PolicySet, cost int) (ratelimit.Result, error) {
	if int(s.calls.Add(1)) > s.ok {
		return ratelimit.Result{}, errors.New("store down")
	}
	return s.Store.Take(ctx, key, set, cost)
}

// TestStreamTrailerHasNoStaleStanding: under CountMessages, a message
// served without a standing (the store failed and the limiter fails
// open) leaves none in the trailer, not the previous message's, which the
// client would take for its standing after the last message.
func TestStreamTrailerHasNoStaleStanding(t *testing.T) {
	mem, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	l := newLimiter(t, 5, time.Minute, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithStore(&flakyStore{Store: mem, ok: 1}), ratelimit.WithFailOpen())
	cc := server{l: l, streamOpts: []grpclimit.StreamOption{grpclimit.CountMessages()}, echo: &echoServer{
		chat: func(s grpc.ServerStream) error {
			for range 2 { // the first decided by the store, the second failed open
				if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					return err
				}
			}
			return nil // without sending: what is pending goes in the trailer
		},
	}}.serveBufconn(t)

	cs := chat(t, cc, "alice")
	for range 2 {
		if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatalf("SendMsg: %v", err)
		}
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
	if got := cs.Trailer().Get("ratelimit"); got != nil {
		t.Errorf("trailer ratelimit %q after a message served open, want none", got)
	}
}
