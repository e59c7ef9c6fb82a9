package grpclimit

import (
	"math"
	"testing"
	"time"

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
		// A custom store's "never": no wrap round to a negative wait.
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1},
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
