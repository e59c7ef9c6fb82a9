package grpclimit_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slidelog/ratelimit"
)

// attempt is one decision the server made, as its hooks saw it.
type attempt struct {
	at         time.Time
	allowed    bool
	retryAfter time.Duration
}

// TestClientRetryWaitsPushback calls through a real grpc-go client whose
// service config retries RESOURCE_EXHAUSTED with a 1 ms backoff: only the
// pushback trailer makes it wait long enough. Every call must succeed,
// each refused attempt must be followed by an allowed one (waiting the
// advised pushback is always enough), and the server must see each retry
// at least the pushback after the refusal.
//
// The client's own wait is real time; the window is short to keep the test
// short, and nothing asserts an upper bound on any wait, so a loaded
// machine only makes it slower.
func TestClientRetryWaitsPushback(t *testing.T) {
	var (
		mu       sync.Mutex
		attempts []attempt
	)
	record := func(allowed bool) func(*http.Request, ratelimit.Result) {
		return func(_ *http.Request, res ratelimit.Result) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, attempt{time.Now(), allowed, res.RetryAfter})
		}
	}
	l := newLimiter(t, 2, 300*time.Millisecond, ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.WithHooks(ratelimit.Hooks{OnAllow: record(true), OnLimit: record(false)}))
	cc := server{l: l}.serveBufconn(t, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpclimit.test.Echo"}],
		"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}`))
	ctx := withKey(context.Background(), "alice")

	refused := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range attempts {
			if !a.allowed {
				n++
			}
		}
		return n
	}
	calls := 0
	for ; calls < 30 && refused() < 3; calls++ {
		mu.Lock()
		first := len(attempts)
		mu.Unlock()
		start := time.Now()
		if _, err := say(ctx, cc, "hi"); err != nil {
			t.Fatalf("call %d: %v, want OK after the client's retries", calls+1, err)
		}
		took := time.Since(start)
		mu.Lock()
		var waits time.Duration
		for _, a := range attempts[first:] {
			if !a.allowed {
				waits += ceilMillis(a.retryAfter)
			}
		}
		mu.Unlock()
		if took < waits {
			t.Errorf("call %d: took %v, want at least the pushbacks it was given, %v", calls+1, took, waits)
		}
	}
	if refused() < 3 {
		t.Fatalf("%d calls made %d refusals, want at least 3 to test", calls, refused())
	}

	allowed := 0
	for i, a := range attempts {
		if a.allowed {
			allowed++
			continue
		}
		if i+1 == len(attempts) || !attempts[i+1].allowed {
			t.Errorf("attempt %d: refused, and the retry after the pushback was refused too", i+1)
			continue
		}
		pushback, gap := ceilMillis(a.retryAfter), attempts[i+1].at.Sub(a.at)
		if gap < pushback {
			t.Errorf("attempt %d: retried %v after the refusal, want at least the pushback %v", i+1, gap, pushback)
		}
	}
	if allowed != calls {
		t.Errorf("%d attempts allowed for %d calls, want one each", allowed, calls)
	}
}

// ceilMillis is d rounded up to the millisecond, as the pushback is.
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// TestClientDeadlineShorterThanPushback calls through the same retrying
// client with a deadline far shorter than the hour-long pushback: the
// client waits for the pushback, not its 1 ms maxBackoff, so the call ends
// with DeadlineExceeded, not RESOURCE_EXHAUSTED, and the server never sees
// a retry.
//
// The deadline must outlast the first refusal's round trip, which a
// loaded machine may slow down: a deadline that ended before the server
// refused anything proves nothing, so the test doubles it and tries again
// under a fresh key.
func TestClientDeadlineShorterThanPushback(t *testing.T) {
	var allowed, refused atomic.Int32
	l := newLimiter(t, 1, time.Hour, ratelimit.KeyByHeader("X-API-Key"), frozen,
		ratelimit.WithHooks(ratelimit.Hooks{
			OnAllow: func(*http.Request, ratelimit.Result) { allowed.Add(1) },
			OnLimit: func(*http.Request, ratelimit.Result) { refused.Add(1) },
		}))
	cc := server{l: l}.serveBufconn(t, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpclimit.test.Echo"}],
		"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}`))

	for deadline := 250 * time.Millisecond; ; deadline *= 2 {
		ctx := withKey(context.Background(), "key-"+deadline.String())
		if _, err := say(ctx, cc, "hi"); err != nil {
			t.Fatalf("first call: %v, want OK", err)
		}
		allowed.Store(0)
		refused.Store(0)
		ctx, cancel := context.WithTimeout(ctx, deadline)
		_, err := say(ctx, cc, "hi")
		cancel()
		if got := status.Code(err); got != codes.DeadlineExceeded {
			t.Fatalf("call with a %v deadline and a 1 h pushback: %v, want DeadlineExceeded", deadline, err)
		}
		if refused.Load() == 0 && deadline < 8*time.Second {
			continue // the deadline ended before the server decided
		}
		if a, r := allowed.Load(), refused.Load(); a != 0 || r != 1 {
			t.Errorf("with a %v deadline, the server allowed %d and refused %d attempts, want 0 and 1: no retry before the pushback", deadline, a, r)
		}
		return
	}
}
