package grpclimit

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slidelog/ratelimit"
)

// pushbackKey is the trailer through which a refusal tells grpc-go
// clients, and any client following gRFC A6, how many milliseconds to
// wait before retrying.
const pushbackKey = "grpc-retry-pushback-ms"

// quotaMetadata returns the rate-limit headers the limiter sends over HTTP
// for d, as metadata under the same names in lower case ("ratelimit",
// "ratelimit-policy", "x-ratelimit-limit", ...), or nil when there are
// none (the store did not decide, or WithHeaders(0)).
func quotaMetadata(l *ratelimit.Limiter, d ratelimit.Decision) metadata.MD {
	h := make(http.Header, 6)
	l.SetHeaders(h, d)
	if len(h) == 0 {
		return nil
	}
	md := make(metadata.MD, len(h)+1)
	for k, v := range h {
		md[strings.ToLower(k)] = v
	}
	return md
}

// answer returns the status and trailer that end a call the limiter did
// not serve. Messages are fixed text, or the KeyError's own, which by
// contract repeats nothing the client sent; internals (the store's error)
// never reach the client.
func answer(l *ratelimit.Limiter, d ratelimit.Decision) (*status.Status, metadata.MD) {
	switch d.Outcome {
	case ratelimit.Refuse:
		return refusal(l, d)
	case ratelimit.Reject:
		return rejection(d.Err)
	}
	// Fail, as the HTTP middleware's default 503 with Retry-After: 1: a
	// second's pause spares a failing store a stampede of retries.
	st := withDetails(status.New(codes.Unavailable, "rate limiter unavailable"),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	return st, metadata.Pairs(pushbackKey, "1000")
}

// refusal answers a call over its limit: RESOURCE_EXHAUSTED with the
// exact wait, rounded up to the millisecond, both as RetryInfo and as the
// pushback trailer, and the violated policy as a QuotaFailure.
func refusal(l *ratelimit.Limiter, d ratelimit.Decision) (*status.Status, metadata.MD) {
	res := d.Result
	wait := waitMillis(res.RetryAfter)
	md := quotaMetadata(l, d)
	if md == nil {
		md = metadata.MD{}
	}
	md[pushbackKey] = []string{strconv.FormatInt(wait, 10)}

	// Whole seconds rounded up, as RateLimit-Policy's w. "Per", not "at
	// most in any window": only the sliding log holds every rolling
	// window to the limit (see ratelimit.Algorithm), and a calendar
	// period's length is this period's.
	w := (res.Window + time.Second - 1) / time.Second
	desc := strconv.Itoa(res.Limit) + " per " + strconv.FormatInt(int64(w), 10) + " s"
	delay := time.Duration(wait) * time.Millisecond
	st := withDetails(status.New(codes.ResourceExhausted, "rate limit exceeded: retry in "+delay.String()),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     res.Policy,
			Description: desc,
			QuotaId:     res.Policy,
			QuotaValue:  int64(res.Limit),
		}}})
	return st, md
}

// waitMillis rounds a wait up to whole milliseconds, and to at least one.
//
// Milliseconds are the pushback trailer's unit, so RetryInfo says the same
// figure and a client that reads either waits alike. Rounding up means a
// client that waits what it is told never comes back before the oldest
// counted call has left the window, at a cost of under a millisecond;
// Retry-After's whole seconds would cost up to a second, longer than the
// sub-second windows gRPC services often use.
//
// A wait within a millisecond of the longest Duration (a custom store's
// "never") is rounded down instead: RetryInfo and the message say the
// milliseconds as a Duration, which must not wrap round to a negative
// wait, a retry at once.
func waitMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond) // divided first: d+1ms-1 may wrap round
	if d%time.Millisecond != 0 && ms < math.MaxInt64/int64(time.Millisecond) {
		ms++
	}
	return max(1, ms)
}

// rejection answers a call the limiter cannot count as sent: it carries
// no usable key, or its cost is invalid. The KeyError's HTTP status picks
// the code:
//
//   - 401 is UNAUTHENTICATED, its challenge sent as www-authenticate;
//   - 403 is PERMISSION_DENIED;
//   - 413, a cost above a policy's limit, is INVALID_ARGUMENT and not
//     RESOURCE_EXHAUSTED: no wait can make it fit, and clients retry
//     RESOURCE_EXHAUSTED;
//   - any other 4xx (400, 431) is INVALID_ARGUMENT;
//   - 502, 503 and 504, a Keyer whose own backend failed, are UNAVAILABLE,
//     as gRPC maps them: a retry may succeed, as HTTP's client knows;
//   - 500, a misconfigured Keyer, and any other 5xx are INTERNAL.
func rejection(err error) (*status.Status, metadata.MD) {
	var ke *ratelimit.KeyError
	if !errors.As(err, &ke) {
		return status.New(codes.InvalidArgument, "the call carries no rate-limit key"), nil
	}
	msg := keyErrorMessage(ke)
	switch {
	case ke.Status == http.StatusUnauthorized:
		var md metadata.MD
		if ke.Challenge != "" {
			md = metadata.Pairs("www-authenticate", ke.Challenge)
		}
		return status.New(codes.Unauthenticated, msg), md
	case ke.Status == http.StatusForbidden:
		return status.New(codes.PermissionDenied, msg), nil
	case ke.Status >= 400 && ke.Status < 500:
		return status.New(codes.InvalidArgument, msg), nil
	case ke.Status == http.StatusBadGateway || ke.Status == http.StatusServiceUnavailable || ke.Status == http.StatusGatewayTimeout:
		return status.New(codes.Unavailable, msg), nil
	}
	return status.New(codes.Internal, msg), nil
}

// keyErrorMessage returns a KeyError's message without the HTTP status
// line it starts with ("401 Unauthorized: "), which means nothing to a
// gRPC client.
func keyErrorMessage(ke *ratelimit.KeyError) string {
	m := ke.Message
	if len(m) > 4 && m[3] == ' ' && isDigits(m[:3]) {
		if _, rest, ok := strings.Cut(m, ": "); ok && rest != "" {
			return rest
		}
	}
	return m
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// withDetails returns st with details attached. Attaching fails only for
// a message that cannot be marshalled, which these well-known ones always
// can; st alone is the answer if it ever did.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) *status.Status {
	if s, err := st.WithDetails(details...); err == nil {
		return s
	}
	return st
}
