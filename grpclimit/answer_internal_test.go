package grpclimit

import (
	"math"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/slidelog/ratelimit"
)

func TestWaitMillis(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want int64
	}{
		{0, 1}, // never 0: a refusal always asks for some wait
		{1, 1},
		{time.Millisecond - 1, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{299*time.Millisecond + 1, 300},
		{time.Minute, 60000},
		{time.Minute - time.Nanosecond, 60000},
		// A custom store's "never": no wrap round to a negative wait, in
		// milliseconds or as a Duration of whole milliseconds.
		{math.MaxInt64, math.MaxInt64 / int64(time.Millisecond)},
		{math.MaxInt64 - time.Millisecond, math.MaxInt64 / int64(time.Millisecond)},
	}
	for _, tc := range tests {
		if got := waitMillis(tc.wait); got != tc.want {
			t.Errorf("waitMillis(%v) = %d ms, want %d", tc.wait, got, tc.want)
		}
	}
}

func TestKeyErrorMessage(t *testing.T) {
	tests := []struct {
		ke   ratelimit.KeyError
		want string
	}{
		{ratelimit.KeyError{Status: 401, Message: "401 Unauthorized: authentication required"}, "authentication required"},
		{ratelimit.KeyError{Status: 413, Message: "413 Content Too Large: too costly"}, "too costly"},
		{ratelimit.KeyError{Status: 400, Message: "no key here"}, "no key here"},
		{ratelimit.KeyError{Status: 400, Message: "400 Bad Request: "}, "400 Bad Request: "},
		{ratelimit.KeyError{Status: 400, Message: "4x0 odd: text"}, "4x0 odd: text"},
	}
	for _, tc := range tests {
		if got := keyErrorMessage(&tc.ke); got != tc.want {
			t.Errorf("keyErrorMessage(%q) = %q, want %q", tc.ke.Message, got, tc.want)
		}
	}
}

// TestRefusalLongWait checks that a refusal says one wait, whole
// milliseconds, in its RetryInfo, its message and its pushback, however
// long: a custom store's "never" included, which must not wrap round to
// a negative RetryInfo, a retry at once.
func TestRefusalLongWait(t *testing.T) {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, wait := range []time.Duration{time.Hour, 2 * 365 * 24 * time.Hour, math.MaxInt64 - time.Millisecond, math.MaxInt64} {
		st, md := refusal(l, ratelimit.Decision{Outcome: ratelimit.Refuse,
			Result: ratelimit.Result{Limit: 1, Window: time.Minute, RetryAfter: wait, Policy: "default"}})
		var delay time.Duration
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				delay = ri.GetRetryDelay().AsDuration()
			}
		}
		pushback := md.Get(pushbackKey)
		if delay < wait-time.Millisecond || delay%time.Millisecond != 0 {
			t.Errorf("wait %v: RetryInfo %v, want the wait in whole milliseconds", wait, delay)
		}
		if want := strconv.FormatInt(int64(delay/time.Millisecond), 10); len(pushback) != 1 || pushback[0] != want {
			t.Errorf("wait %v: pushback %q, want RetryInfo's %v as [%s]", wait, pushback, delay, want)
		}
		if want := "rate limit exceeded: retry in " + delay.String(); st.Message() != want {
			t.Errorf("wait %v: message %q, want %q", wait, st.Message(), want)
		}
	}
}
