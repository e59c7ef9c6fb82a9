// Package routetest checks rate-limited routes through a real HTTP server,
// for the framework examples' tests: the same table of requests and
// expected responses runs against every framework.
package routetest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// Step is one request and what its response must show.
type Step struct {
	Method string            // GET if empty
	Path   string            // appended to the server's URL
	Header map[string]string // request headers
	Status int               // expected status
	// Want lists response headers that must have exactly these values;
	// an empty value means the header must be absent.
	Want map[string]string
	// Body, if set, must occur in the response body.
	Body string
}

// Run sends steps, in order, to the server at base and reports every
// response that differs from its step.
func Run(t *testing.T, base string, steps []Step) {
	t.Helper()
	for i, s := range steps {
		method := s.Method
		if method == "" {
			method = http.MethodGet
		}
		req, err := http.NewRequestWithContext(t.Context(), method, base+s.Path, nil)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		for k, v := range s.Header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("step %d: %s %s: %v", i+1, method, s.Path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("step %d: reading body: %v", i+1, err)
		}
		if resp.StatusCode != s.Status {
			t.Errorf("step %d: %s %s: status %d, want %d (body %q)", i+1, method, s.Path, resp.StatusCode, s.Status, body)
		}
		for k, want := range s.Want {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("step %d: %s %s: header %s = %q, want %q", i+1, method, s.Path, k, got, want)
			}
		}
		if s.Body != "" && !strings.Contains(string(body), s.Body) {
			t.Errorf("step %d: %s %s: body %q, want it to contain %q", i+1, method, s.Path, body, s.Body)
		}
	}
}

// FrozenClock is a limiter option that stops time, so that the headers'
// seconds are exact whatever the test's speed: every request is decided
// at the same instant.
func FrozenClock() ratelimit.Option {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return ratelimit.WithClock(func() time.Time { return t })
}

// NewLimiter returns a limiter that the test closes when it ends, with
// the frozen clock and the decision in the request's context, as the
// examples' handlers read it.
func NewLimiter(t *testing.T, limit int, window time.Duration, key ratelimit.Keyer, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limit, window, key, append(opts, FrozenClock(), ratelimit.WithResultInContext())...)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Allowed is the headers of an allowed response under a limit-per-minute
// policy named policy ("default" unless the limiter was given WithName)
// at a frozen instant, with remaining left.
func Allowed(policy string, limit, remaining int) map[string]string {
	return map[string]string{
		"X-Ratelimit-Limit":     strconv.Itoa(limit),
		"X-Ratelimit-Remaining": strconv.Itoa(remaining),
		"X-Ratelimit-Reset":     "60",
		"Ratelimit-Policy":      strconv.Quote(policy) + ";q=" + strconv.Itoa(limit) + ";w=60",
		"Ratelimit":             strconv.Quote(policy) + ";r=" + strconv.Itoa(remaining) + ";t=60",
		"Retry-After":           "",
	}
}

// Limited is the headers of a 429 under a limit-per-minute policy at a
// frozen instant: the first request leaves the window in 60 s.
func Limited(policy string, limit int) map[string]string {
	h := Allowed(policy, limit, 0)
	h["Retry-After"] = "60"
	return h
}
