package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/client"
)

// inMemory is a Base that serves each request with a handler in memory,
// so that a test inside a synctest bubble never touches the network (a
// goroutine blocked on network I/O is not durably blocked, and fake time
// would not move).
type inMemory struct {
	h http.Handler
	// latency, if set, is how long (in the bubble's fake time) a request
	// takes to reach the handler: it keeps many requests in flight at
	// once, as a network does, where an instant answer would let each
	// goroutine in turn see the figures of the one before.
	latency time.Duration
}

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	if m.latency > 0 {
		time.Sleep(m.latency) // fake time: the trip, not a wait for the clock
	}
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// counting wraps a handler and counts the statuses it answers.
type counting struct {
	h        http.Handler
	mu       sync.Mutex
	statuses map[int]int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	c.mu.Lock()
	if c.statuses == nil {
		c.statuses = make(map[int]int)
	}
	c.statuses[rec.Code]++
	c.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (c *counting) count(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statuses[status]
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.statuses {
		n += v
	}
	return n
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

// load is what a run of many goroutines through one Transport saw.
type load struct {
	served      int // 2xx answers
	refused     int // 429 (or 403) answers, in all
	lateRefused int // of them, to requests sent after the first answer came
	errs        int // requests that ended with an error other than the deadline's
}

// run has n goroutines send requests through rt until ctx's deadline, and
// counts what they got. A refusal counts as late when its request was
// sent after any request of the run had been answered: from then on the
// Transport knew the server's figures.
func run(ctx context.Context, t *testing.T, rt http.RoundTripper, url string, n int) load {
	t.Helper()
	c := &http.Client{Transport: rt}
	var answered atomic.Bool
	var mu sync.Mutex
	var got load
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("X-API-Key", "k")
				late := answered.Load()
				resp, err := c.Do(req)
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						mu.Lock()
						got.errs++
						mu.Unlock()
						t.Errorf("request: %v", err)
					}
					return
				}
				answered.Store(true)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch {
				case resp.StatusCode < 300:
					got.served++
				case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden:
					got.refused++
					if late {
						got.lateRefused++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// TestPacingMiddleware has 32 goroutines share one Transport against this
// library's middleware (50 requests per 10 s, memory store) for 30 s of
// fake time, with each header set the middleware can send, each
// algorithm, and a second policy: they must spend at least 95% of the
// quota, and meet no 429 once the server has answered once.
func TestPacingMiddleware(t *testing.T) {
	const limit, window, span = 50, 10 * time.Second, 30 * time.Second
	windows := limit * int(span/window) // a window's quota, every window
	for _, tt := range []struct {
		name  string
		opts  []ratelimit.Option
		quota int // the most the server can serve in the span
	}{
		{"IETF and legacy", nil, windows},
		{"IETF only", []ratelimit.Option{ratelimit.WithHeaders(ratelimit.HeadersIETF)}, windows},
		{"legacy, reset in seconds", []ratelimit.Option{ratelimit.WithHeaders(ratelimit.HeadersLegacy)}, windows},
		{"legacy, reset as a Unix time", []ratelimit.Option{ratelimit.WithHeaders(ratelimit.HeadersLegacy | ratelimit.HeadersUnixReset)}, windows},
		// The server reports only the policy that binds tightest, which
		// changes as the quotas are spent.
		{"burst policy of 10 a second too", []ratelimit.Option{ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 10, Window: time.Second})}, windows},
		{"sliding window counter", []ratelimit.Option{ratelimit.WithAlgorithm(ratelimit.SlidingWindowCounter)}, windows},
		// A burst of the limit, then the refill: one every window/limit.
		{"GCRA", []ratelimit.Option{ratelimit.WithAlgorithm(ratelimit.GCRA)}, limit + int(span/(window/limit))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := ratelimit.New(limit, window, ratelimit.KeyByHeader("X-API-Key"), tt.opts...)
				require.NoError(t, err)
				defer l.Close()
				srv := &counting{h: l.Handler(ok)}
				ctx, cancel := context.WithTimeout(context.Background(), span)
				defer cancel()

				got := run(ctx, t, &client.Transport{Base: inMemory{h: srv, latency: 20 * time.Millisecond}}, "http://api.test/v1", 32)

				t.Logf("served %d of a quota of %d (%.1f%%); refused %d, %d after the first answer",
					got.served, tt.quota, 100*float64(got.served)/float64(tt.quota), got.refused, got.lateRefused)
				assert.GreaterOrEqual(t, got.served, tt.quota*95/100, "requests served, want at least 95%% of the quota")
				assert.LessOrEqual(t, got.served, tt.quota, "requests served, want at most the quota")
				assert.Zero(t, got.lateRefused, "429s after the first answer")
				assert.Equal(t, got.served, srv.count(http.StatusOK), "the server's count of requests served")
				assert.Zero(t, got.errs, "requests failed")
			})
		})
	}
}

// githubLike answers as GitHub's REST API does: a fixed window whose
// X-RateLimit-Reset is its end as a Unix time, a Date header, and, once
// the window is spent, a refusal with Retry-After.
type githubLike struct {
	limit  int
	window int64 // seconds
	status int   // of a refusal: 403 or 429
	// spentHeaders says whether a refusal carries X-RateLimit-* too;
	// GitHub's secondary limits send Retry-After alone.
	spentHeaders bool

	mu    sync.Mutex
	epoch int64 // window the count is of
	used  int
}

func (g *githubLike) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	g.mu.Lock()
	if e := now.Unix() / g.window; e != g.epoch {
		g.epoch, g.used = e, 0
	}
	reset := (g.epoch + 1) * g.window
	allowed := g.used < g.limit
	if allowed {
		g.used++
	}
	remaining := g.limit - g.used
	g.mu.Unlock()
	h := w.Header()
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	if allowed || g.spentHeaders {
		h.Set("X-RateLimit-Limit", strconv.Itoa(g.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		h.Set("X-RateLimit-Resource", "core")
	}
	if !allowed {
		h.Set("Retry-After", strconv.FormatInt(reset-now.Unix(), 10))
		w.WriteHeader(g.status)
		return
	}
	io.WriteString(w, "{}\n")
}

// TestPacingGitHubHeaders paces 32 goroutines against a server that sends
// only GitHub's headers: X-RateLimit-Reset as a Unix time, Retry-After on
// its refusals.
func TestPacingGitHubHeaders(t *testing.T) {
	for _, tt := range []struct {
		name         string
		status       int
		spentHeaders bool
	}{
		{"403 with X-RateLimit-*", http.StatusForbidden, true},
		{"429 with X-RateLimit-*", http.StatusTooManyRequests, true},
		{"429 with Retry-After only", http.StatusTooManyRequests, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const limit, span = 50, 30 * time.Second
				gh := &githubLike{limit: limit, window: 10, status: tt.status, spentHeaders: tt.spentHeaders}
				srv := &counting{h: gh}
				ctx, cancel := context.WithTimeout(context.Background(), span)
				defer cancel()

				got := run(ctx, t, &client.Transport{Base: inMemory{h: srv, latency: 20 * time.Millisecond}}, "https://api.github.test/repos", 32)

				quota := limit * 3
				t.Logf("served %d of a quota of %d (%.1f%%); refused %d, %d after the first answer",
					got.served, quota, 100*float64(got.served)/float64(quota), got.refused, got.lateRefused)
				assert.GreaterOrEqual(t, got.served, quota*95/100, "requests served, want at least 95%% of the quota")
				assert.Zero(t, got.lateRefused, "refusals after the first answer")
				assert.Zero(t, srv.count(tt.status), "refusals the server sent")
			})
		})
	}
}

// spend sends one request through tr and checks it was served.
func spend(t *testing.T, tr http.RoundTripper, url string) {
	t.Helper()
	req := newRequest(t, context.Background(), http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "status of the request that spends the quota")
}

func newRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "k")
	return req
}

// TestWaitAndDeadline spends a quota of 1 a minute, then sends a request
// whose context has a deadline: before the reset, it must return at once
// with the deadline's error and not reach the server; after it, it must
// wait until the reset and be served.
func TestWaitAndDeadline(t *testing.T) {
	for _, tt := range []struct {
		name     string
		timeout  time.Duration
		wantErr  error
		wantWait time.Duration // how long RoundTrip takes, in fake time
	}{
		{"deadline before the reset", 5 * time.Second, context.DeadlineExceeded, 0},
		{"deadline at the reset", time.Minute, context.DeadlineExceeded, 0},
		{"deadline after the reset", 90 * time.Second, nil, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
				require.NoError(t, err)
				defer l.Close()
				srv := &counting{h: l.Handler(ok)}
				tr := &client.Transport{Base: inMemory{h: srv}}
				spend(t, tr, "http://api.test/")

				ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
				defer cancel()
				body := &trackedBody{Reader: strings.NewReader("x")}
				req := newRequest(t, ctx, http.MethodPut, "http://api.test/", body)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				took := time.Since(start)

				assert.Equal(t, tt.wantWait, took, "time RoundTrip took")
				if tt.wantErr != nil {
					assert.ErrorIs(t, err, tt.wantErr)
					assert.Nil(t, resp, "response")
					assert.Equal(t, 1, srv.total(), "requests the server saw")
					assert.EqualValues(t, 1, body.closes.Load(), "times the request's body was closed, as RoundTrip must")
					return
				}
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, "status")
				assert.Zero(t, srv.count(http.StatusTooManyRequests), "429s the server sent")
			})
		})
	}
}

// TestWaitForAnswerEndsAtDeadline has a request wait for the answer of
// one in flight, which holds the last request of the quota: a wait of no
// known end, so it must go on until the request's deadline and end there
// with the context's error, not when the answer comes.
func TestWaitForAnswerEndsAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
		require.NoError(t, err)
		defer l.Close()
		srv := &counting{h: l.Handler(ok)}
		tr := &client.Transport{Base: inMemory{h: srv, latency: 10 * time.Second}}
		spend(t, tr, "http://api.test/") // answered at 10 s: 1 left
		inFlight := make(chan struct{})
		go func() {
			defer close(inFlight)
			spend(t, tr, "http://api.test/") // answered at 20 s
		}()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 5*time.Second, time.Since(start), "time RoundTrip took")
		<-inFlight
		assert.Equal(t, 2, srv.total(), "requests the server saw")
	})
}

// TestWaitCanceled cancels the context of a request waiting for a reset:
// it must return then, with the context's error.
func TestWaitCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
		require.NoError(t, err)
		defer l.Close()
		tr := &client.Transport{Base: inMemory{h: l.Handler(ok)}}
		spend(t, tr, "http://api.test/")

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(7*time.Second, cancel)
		start := time.Now()
		_, err = tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 7*time.Second, time.Since(start), "time RoundTrip took")
	})
}

// TestPartitions spends one partition's quota: the other's requests must
// not wait for it, and the same partition's must.
func TestPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
		require.NoError(t, err)
		defer l.Close()
		tr := &client.Transport{
			Base:      inMemory{h: l.Handler(ok)},
			Partition: func(r *http.Request) string { return r.Header.Get("X-API-Key") },
		}
		send := func(key string) (time.Duration, int) {
			req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-API-Key", key)
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			return time.Since(start), resp.StatusCode
		}
		for i, step := range []struct {
			key    string
			took   time.Duration
			status int
		}{
			{"alice", 0, http.StatusOK},
			{"bob", 0, http.StatusOK},
			{"alice", time.Minute, http.StatusOK},
			{"bob", 0, http.StatusOK}, // bob's reset came while alice waited
		} {
			took, status := send(step.key)
			assert.Equal(t, step.took, took, "request %d (%s): time it took", i, step.key)
			assert.Equal(t, step.status, status, "request %d (%s): status", i, step.key)
		}
	})
}

// refusing answers its first `refusals` requests with status and
// Retry-After (and Date, at a fixed instant, when retryAt is an HTTP
// date), and the others with 200.
type refusing struct {
	refusals   int
	status     int
	retryAfter func(now time.Time) string
	extra      http.Header // more headers of a refusal

	mu   sync.Mutex
	seen []time.Time // when each request came
}

func (s *refusing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	now := time.Now()
	s.mu.Lock()
	s.seen = append(s.seen, now)
	n := len(s.seen)
	s.mu.Unlock()
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	if n <= s.refusals {
		for k, v := range s.extra {
			w.Header()[k] = v
		}
		w.Header().Set("Retry-After", s.retryAfter(now))
		w.WriteHeader(s.status)
		io.WriteString(w, "come back later\n")
		return
	}
	io.WriteString(w, "ok\n")
}

func (s *refusing) arrivals(start time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for _, t := range s.seen {
		d = append(d, t.Sub(start))
	}
	return d
}

func delaySeconds(s int) func(time.Time) string {
	return func(time.Time) string { return strconv.Itoa(s) }
}

func httpDate(d time.Duration) func(time.Time) string {
	return func(now time.Time) string { return now.Add(d).UTC().Format(http.TimeFormat) }
}

// TestRetryAfter checks that a Retry-After, in either form, holds back
// the requests after a refusal until it has passed, and that a refused
// request is retried then when MaxRetries allows and it can be replayed.
func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		status     int
		refusals   int
		retryAfter func(time.Time) string
		extra      http.Header
		maxRetries int
		method     string
		body       func() io.Reader // nil for none
		getBody    bool             // NewRequest sets GetBody (a strings.Reader)
		// want: the first RoundTrip's status, and when the server saw
		// each request (a second RoundTrip follows when no retry does).
		status1  int
		arrivals []time.Duration
	}{
		{name: "delay seconds, no retry", status: 429, refusals: 1, retryAfter: delaySeconds(30), method: "GET",
			status1: 429, arrivals: []time.Duration{0, 30 * time.Second}},
		{name: "HTTP date, no retry", status: 429, refusals: 1, retryAfter: httpDate(30 * time.Second), method: "GET",
			status1: 429, arrivals: []time.Duration{0, 30 * time.Second}},
		{name: "HTTP date, GET retried", status: 429, refusals: 1, retryAfter: httpDate(30 * time.Second), maxRetries: 1, method: "GET",
			status1: 200, arrivals: []time.Duration{0, 30 * time.Second}},
		{name: "503, DELETE retried", status: 503, refusals: 1, retryAfter: delaySeconds(5), maxRetries: 1, method: "DELETE",
			status1: 200, arrivals: []time.Duration{0, 5 * time.Second}},
		{name: "PUT with GetBody retried twice", status: 429, refusals: 2, retryAfter: delaySeconds(2), maxRetries: 3, method: "PUT",
			body: func() io.Reader { return strings.NewReader("v") }, getBody: true,
			status1: 200, arrivals: []time.Duration{0, 2 * time.Second, 4 * time.Second}},
		{name: "retries run out", status: 429, refusals: 3, retryAfter: delaySeconds(2), maxRetries: 1, method: "GET",
			status1: 429, arrivals: []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}},
		{name: "POST with GetBody retried", status: 429, refusals: 1, retryAfter: delaySeconds(3), maxRetries: 1, method: "POST",
			body: func() io.Reader { return strings.NewReader("v") }, getBody: true,
			status1: 200, arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "POST without GetBody not retried", status: 429, refusals: 1, retryAfter: delaySeconds(3), maxRetries: 1, method: "POST",
			body:    func() io.Reader { return io.MultiReader(strings.NewReader("v")) },
			status1: 429, arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "POST without a body not retried", status: 429, refusals: 1, retryAfter: delaySeconds(3), maxRetries: 1, method: "POST",
			status1: 429, arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "GET with a body without GetBody not retried", status: 429, refusals: 1, retryAfter: delaySeconds(3), maxRetries: 1, method: "GET",
			body:    func() io.Reader { return io.MultiReader(strings.NewReader("v")) },
			status1: 429, arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "503 with a Retry-After of 0, retried at once", status: 503, refusals: 1, retryAfter: delaySeconds(0), maxRetries: 1, method: "GET",
			status1: 200, arrivals: []time.Duration{0, 0}},
		{name: "GET with http.NoBody retried", status: 429, refusals: 1, retryAfter: delaySeconds(3), maxRetries: 1, method: "GET",
			body:    func() io.Reader { return http.NoBody },
			status1: 200, arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "503 without Retry-After not retried", status: 503, refusals: 1, retryAfter: func(time.Time) string { return "" }, maxRetries: 1, method: "GET",
			status1: 503, arrivals: []time.Duration{0, 0}},
		{name: "503 without Retry-After, with a spent quota, not retried", status: 503, refusals: 1, retryAfter: func(time.Time) string { return "" },
			extra: http.Header{"Ratelimit": {`"default";r=0;t=4`}}, maxRetries: 1, method: "GET",
			status1: 503, arrivals: []time.Duration{0, 4 * time.Second}},
		{name: "429 without Retry-After, with a quota not spent, not retried", status: 429, refusals: 1, retryAfter: func(time.Time) string { return "" },
			extra: http.Header{"Ratelimit": {`"default";r=1;t=4`}}, maxRetries: 1, method: "GET",
			status1: 429, arrivals: []time.Duration{0, 0}},
		{name: "429 without Retry-After, with a spent quota, retried at its reset", status: 429, refusals: 1, retryAfter: func(time.Time) string { return "" },
			extra: http.Header{"Ratelimit": {`"default";r=0;t=4`}}, maxRetries: 1, method: "GET",
			status1: 200, arrivals: []time.Duration{0, 4 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &refusing{refusals: tt.refusals, status: tt.status, retryAfter: tt.retryAfter, extra: tt.extra}
				tr := &client.Transport{Base: inMemory{h: srv}, MaxRetries: tt.maxRetries}
				start := time.Now()
				var body io.Reader
				if tt.body != nil {
					body = tt.body()
				}
				req := newRequest(t, context.Background(), tt.method, "http://api.test/", body)
				require.Equal(t, tt.getBody, req.GetBody != nil, "the request has GetBody")
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tt.status1, resp.StatusCode, "status of the first RoundTrip")
				if resp.StatusCode != http.StatusOK {
					// The next request waits for the Retry-After.
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					resp.Body.Close()
				}
				assert.Equal(t, tt.arrivals, srv.arrivals(start), "when the server saw each request")
			})
		})
	}
}

// TestRetryNotPastDeadline refuses a request with a Retry-After beyond its
// context's deadline: it must not be retried, and the refusal must come
// back at once, its body unread.
func TestRetryNotPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &refusing{refusals: 1, status: 429, retryAfter: delaySeconds(60)}
		tr := &client.Transport{Base: inMemory{h: srv}, MaxRetries: 3}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "status")
		assert.Zero(t, time.Since(start), "time RoundTrip took")
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "come back later\n", string(b), "the refusal's body")
		assert.Len(t, srv.arrivals(start), 1, "requests the server saw")
	})
}

// trackedBody counts the times it is closed.
type trackedBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return nil
}

// bodies is a Base that answers like next, noting the response bodies it
// hands out.
type bodies struct {
	next http.RoundTripper
	mu   sync.Mutex
	all  []*trackedBody
}

func (b *bodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{Reader: resp.Body}
	resp.Body = tb
	b.mu.Lock()
	b.all = append(b.all, tb)
	b.mu.Unlock()
	return resp, nil
}

// TestRetryClosesRefusals checks that the bodies of the refusals a retry
// replaces are closed, and the one returned is not.
func TestRetryClosesRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &refusing{refusals: 2, status: 429, retryAfter: delaySeconds(1)}
		base := &bodies{next: inMemory{h: srv}}
		tr := &client.Transport{Base: base, MaxRetries: 2}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "status")
		require.Len(t, base.all, 3, "responses")
		for i, b := range base.all[:2] {
			assert.EqualValues(t, 1, b.closes.Load(), "times refusal %d's body was closed", i)
		}
		assert.Zero(t, base.all[2].closes.Load(), "times the returned response's body was closed")
		resp.Body.Close()
	})
}

// TestRetryFailingClosesTheRefusalOnce has the retry of a refusal fail in
// Base: the refusal's body, closed when the retry went, must not be
// closed again (io.Closer leaves a second Close undefined).
func TestRetryFailingClosesTheRefusalOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &refusing{refusals: 1, status: 429, retryAfter: delaySeconds(1)}
		base := &bodies{next: &failing{next: inMemory{h: srv}, errs: []error{nil, errors.New("connection reset")}}}
		tr := &client.Transport{Base: base, MaxRetries: 1}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.Error(t, err, "the retry's error")
		assert.Nil(t, resp, "the response")
		require.Len(t, base.all, 1, "responses")
		assert.EqualValues(t, 1, base.all[0].closes.Load(), "times the refusal's body was closed")
	})
}

// scripted answers its requests with the statuses and headers of answers,
// in order, noting when each came; past the end, with 200 and no headers.
type scripted struct {
	answers []scriptedAnswer
	mu      sync.Mutex
	seen    []time.Time
}

type scriptedAnswer struct {
	status int
	h      http.Header
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, time.Now())
	s.mu.Unlock()
	if i >= len(s.answers) {
		return
	}
	for k, v := range s.answers[i].h {
		w.Header()[k] = v
	}
	w.WriteHeader(s.answers[i].status)
}

func (s *scripted) arrivals(start time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for _, t := range s.seen {
		d = append(d, t.Sub(start))
	}
	return d
}

// TestAnswersWithoutFigures sends requests one after another to a server
// that names a quota on some answers only, and checks when each request
// went: an answer that names nothing spent one request of the quota,
// unless it is a 429 or a cache's, which spent none.
func TestAnswersWithoutFigures(t *testing.T) {
	const sec = time.Second
	oneLeft := http.Header{"Ratelimit": {`"default";r=1;t=60`}}
	for _, tt := range []struct {
		name     string
		answers  []scriptedAnswer
		arrivals []time.Duration
	}{
		{"a 200 without figures spends the last request",
			[]scriptedAnswer{{200, oneLeft}, {200, nil}, {200, nil}},
			[]time.Duration{0, 0, 60 * sec}},
		{"a 429 without figures spends nothing",
			[]scriptedAnswer{{200, oneLeft}, {429, nil}, {200, nil}},
			[]time.Duration{0, 0, 0}},
		{"a 500 without figures spends the last request",
			[]scriptedAnswer{{200, oneLeft}, {500, nil}, {200, nil}},
			[]time.Duration{0, 0, 60 * sec}},
		{"a cache's answer spends nothing, and its figures say nothing",
			[]scriptedAnswer{{200, oneLeft}, {200, http.Header{"Age": {"30"}, "Ratelimit": {`"default";r=0;t=600`}}}, {200, nil}},
			[]time.Duration{0, 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{answers: tt.answers}
				tr := &client.Transport{Base: inMemory{h: srv}}
				start := time.Now()
				for range tt.arrivals {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					resp.Body.Close()
				}
				assert.Equal(t, tt.arrivals, srv.arrivals(start), "when the server saw each request")
			})
		})
	}
}

// twoRefusals answers the request tagged "A" after 1 ms with a 429 and
// Retry-After: 30, the one tagged "B" after 2 ms with a 429 and
// Retry-After: 1, and anything else with 200.
type twoRefusals struct{}

func (twoRefusals) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}
	switch r.Header.Get("X-Which") {
	case "A":
		time.Sleep(time.Millisecond)
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "30")
	case "B":
		time.Sleep(2 * time.Millisecond)
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "1")
	}
	return resp, nil
}

// A refusal whose own wait fits the request's deadline, but whose retry
// would wait for what another answer said of the server's quota, past
// the deadline, is returned as it came, not traded for an error.
func TestRetryWaitsForTheServersQuotaWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &client.Transport{Base: twoRefusals{}, MaxRetries: 1}
		var wg sync.WaitGroup
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-Which", "A")
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		})
		var resp *http.Response
		var err error
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-Which", "B")
			resp, err = tr.RoundTrip(req)
		})
		wg.Wait()
		require.NoError(t, err, "B: want its refusal returned")
		defer resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "B's answer")
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), "B's own refusal")
	})
}

// nilBody refuses its first request with a response without a Body, as
// http.Client allows a RoundTripper to, and serves the others.
type nilBody struct{ n atomic.Int32 }

func (b *nilBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.n.Add(1) == 1 {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Request: r}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// A refusal without a Body is retried like any other.
func TestRetryOfARefusalWithoutABody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &http.Client{Transport: &client.Transport{Base: &nilBody{}, MaxRetries: 1}}
		resp, err := c.Get("http://api.test/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "after the retry")
	})
}

// slowBody is a refusal's body that takes a while (in the bubble's fake
// time) to read, as one still on its way over the network does.
type slowBody struct {
	delay time.Duration
	r     io.Reader
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.delay > 0 {
		time.Sleep(b.delay)
		b.delay = 0
	}
	return b.r.Read(p)
}

func (b *slowBody) Close() error { return nil }

// lateRefusal answers the request tagged "A" after 5 ms with a 429 and
// Retry-After: 30; the first tagged "B" after 1 ms with a 429,
// Retry-After: 1 and a body that takes bodyDelay to read; anything else
// with 200.
type lateRefusal struct {
	bodyDelay time.Duration
	b         atomic.Int32
}

func (l *lateRefusal) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}
	switch r.Header.Get("X-Which") {
	case "A":
		time.Sleep(5 * time.Millisecond)
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "30")
	case "B":
		if l.b.Add(1) > 1 {
			break
		}
		time.Sleep(time.Millisecond)
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "1")
		resp.Body = &slowBody{delay: l.bodyDelay, r: strings.NewReader("come back later\n")}
	}
	return resp, nil
}

// A refusal whose retry is found, once decided on, to have to wait past
// the request's deadline (another answer pushed the server's quota back
// in the meantime: while the refusal's body was read, or while the retry
// waited for its own Retry-After) is returned as it came, body included,
// not traded for an error.
func TestRetryPushedPastTheDeadlineReturnsTheRefusal(t *testing.T) {
	for _, tt := range []struct {
		name      string
		bodyDelay time.Duration
	}{
		{"A answers while B's refusal is read", 10 * time.Millisecond},
		{"A answers while B's retry waits", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &client.Transport{Base: &lateRefusal{bodyDelay: tt.bodyDelay}, MaxRetries: 1}
				var wg sync.WaitGroup
				wg.Go(func() {
					req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
					req.Header.Set("X-Which", "A")
					if resp, err := tr.RoundTrip(req); err == nil {
						resp.Body.Close()
					}
				})
				var resp *http.Response
				var err error
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					req := newRequest(t, ctx, http.MethodGet, "http://api.test/", nil)
					req.Header.Set("X-Which", "B")
					resp, err = tr.RoundTrip(req)
				})
				wg.Wait()
				require.NoError(t, err, "B: want its refusal returned")
				defer resp.Body.Close()
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "B's answer")
				assert.Equal(t, "1", resp.Header.Get("Retry-After"), "B's own refusal")
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, "come back later\n", string(b), "the refusal's body")
			})
		})
	}
}

// burstRefusal answers the request tagged "slow" after a minute with 200;
// the first tagged "B" after 1 ms with a 429 from a burst policy,
// Retry-After: 1, and figures that leave one request of the main quota,
// which the slow request in flight holds; anything else with 200.
type burstRefusal struct {
	mu sync.Mutex
	b  int
}

func (s *burstRefusal) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}
	switch r.Header.Get("X-Which") {
	case "slow":
		time.Sleep(time.Minute)
	case "B":
		s.mu.Lock()
		s.b++
		first := s.b == 1
		s.mu.Unlock()
		if !first {
			break
		}
		time.Sleep(time.Millisecond)
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "1")
		resp.Header.Set("RateLimit", `"burst";r=0;t=1, "default";r=1;t=60`)
		resp.Body = io.NopCloser(strings.NewReader("come back later\n"))
	}
	return resp, nil
}

// A refusal whose retry, once its Retry-After has passed, waits for the
// answer of a request in flight that holds the last request of a quota,
// and so cannot be sent before the deadline, is returned as it came, as
// MaxRetries promises ("It is not retried when the wait would end at or
// after its context's deadline: the refusal is returned then"), not
// traded for the deadline's error.
func TestRetryHeldPastTheDeadlineReturnsTheRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &client.Transport{Base: &burstRefusal{}, MaxRetries: 1}
		var wg sync.WaitGroup
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-Which", "slow")
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		})
		var resp *http.Response
		var err error
		var took time.Duration
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-Which", "B")
			start := time.Now()
			resp, err = tr.RoundTrip(req)
			took = time.Since(start)
		})
		wg.Wait()
		t.Logf("B took %v", took)
		require.NoError(t, err, "B: want its refusal returned")
		defer resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "B's answer")
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "come back later\n", string(b), "the refusal's body")
	})
}

// A quota learnt from an origin's answers holds back the requests to that
// origin however its URL spells it: https://api.test and
// https://api.test:443 are one origin (RFC 6454: the default port is
// implied), the same server and the same quota.
func TestOriginWithItsDefaultPort(t *testing.T) {
	for _, tt := range []struct{ first, second string }{
		{"https://api.test/", "https://api.test:443/"},
		{"http://api.test:80/", "http://API.test/"},
	} {
		t.Run(tt.second, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{answers: []scriptedAnswer{
					{200, http.Header{"Ratelimit": {`"default";r=0;t=60`}}},
				}}
				tr := &client.Transport{Base: inMemory{h: srv}}
				start := time.Now()
				for _, u := range []string{tt.first, tt.second} {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, u, nil))
					require.NoError(t, err)
					resp.Body.Close()
				}
				assert.Equal(t, []time.Duration{0, time.Minute}, srv.arrivals(start), "when the server saw each request")
			})
		})
	}
}

// failing is a Base that fails the requests errs has an error for, in
// the order they come, and sends the others through next.
type failing struct {
	next http.RoundTripper
	errs []error // nil: sent through next
	mu   sync.Mutex
	n    int
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	i := f.n
	f.n++
	f.mu.Unlock()
	if i < len(f.errs) && f.errs[i] != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, f.errs[i]
	}
	return f.next.RoundTrip(r)
}

// refusedAddr returns the address of a local port nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// sendError returns the error rt gives a GET of url.
func sendError(t *testing.T, rt http.RoundTripper, url string) error {
	t.Helper()
	resp, err := rt.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
	if resp != nil {
		resp.Body.Close()
	}
	require.Error(t, err, "the error of a GET of %s", url)
	return err
}

// TestFailedRequests has the request after one that left a quota with one
// request fail in Base, and checks when the next one goes: a request that
// never reached the server (its dial failed) spent nothing, one that may
// have reached it before it failed spent the last request.
func TestFailedRequests(t *testing.T) {
	const sec = time.Second
	// The errors net/http gives when nothing listens where it dials.
	addr := refusedAddr(t)
	dialErr := sendError(t, &http.Transport{}, "http://"+addr+"/")
	proxyErr := sendError(t, &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}, "https://api.test/")
	// And when the TLS handshake fails: a certificate the client does not
	// trust, a server that does not speak TLS, and one that refuses the
	// handshake with an alert.
	tlsServer := func(c *tls.Config) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors
		srv.TLS = c
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	certErr := sendError(t, &http.Transport{}, tlsServer(nil).URL)
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	recordErr := sendError(t, &http.Transport{}, "https://"+plain.Listener.Addr().String()+"/")
	// In TLS 1.2 the server's alert ends the handshake; in 1.3 it would
	// come after the client wrote the request, which then spends.
	picky := tlsServer(&tls.Config{ClientAuth: tls.RequireAnyClientCert, MaxVersion: tls.VersionTLS12})
	alertErr := sendError(t, picky.Client().Transport, picky.URL)
	for _, tt := range []struct {
		name     string
		err      error
		arrivals []time.Duration
	}{
		{"a refused dial spends nothing", dialErr, []time.Duration{0, 0}},
		{"a refused dial of the proxy spends nothing", proxyErr, []time.Duration{0, 0}},
		{"a failed DNS lookup spends nothing",
			&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "api.test", IsNotFound: true}},
			[]time.Duration{0, 0}},
		{"a certificate not trusted spends nothing", certErr, []time.Duration{0, 0}},
		{"a server that does not speak TLS spends nothing", recordErr, []time.Duration{0, 0}},
		{"a handshake refused with an alert spends nothing", alertErr, []time.Duration{0, 0}},
		{"a connection lost after the request went spends the last request",
			&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
			[]time.Duration{0, 60 * sec}},
		{"an answer cut short spends the last request", io.ErrUnexpectedEOF, []time.Duration{0, 60 * sec}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{answers: []scriptedAnswer{{200, http.Header{"Ratelimit": {`"default";r=1;t=60`}}}}}
				tr := &client.Transport{Base: &failing{next: inMemory{h: srv}, errs: []error{nil, tt.err}}}
				start := time.Now()
				spend(t, tr, "http://api.test/")
				_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				require.ErrorIs(t, err, tt.err, "the failed request's error")
				spend(t, tr, "http://api.test/")
				assert.Equal(t, tt.arrivals, srv.arrivals(start), "when the server saw each request it was sent")
			})
		})
	}
}

// TestSentThenRedialFailed: net/http sends a GET again on a new
// connection when the one it reused closes before the answer, so a
// failed dial may follow a request the server saw. The server here counts
// the second request, then closes its connection and stops listening:
// the request spent the quota's last request, and the third waits for the
// reset (returning at once, as its deadline comes first).
func TestSentThenRedialFailed(t *testing.T) {
	var seen atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			w.Header().Set("Ratelimit", `"default";r=1;t=60`)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		srv.Listener.Close() // before the client sees the connection end
		conn.Close()
	}))
	defer srv.Close()
	tr := &client.Transport{Base: &http.Transport{}}
	spend(t, tr, srv.URL)
	_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	var op *net.OpError
	require.ErrorAs(t, err, &op, "the second request's error")
	require.Equal(t, "dial", op.Op, "the second request's error: %v", err)
	require.Equal(t, int32(2), seen.Load(), "requests the server saw")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL, nil))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the third request, due after the reset in 60 s")
}

// faulty is a Base whose second request panics, or comes back with
// neither a response nor an error (a bug of the Base either way), and
// which sends the others through next.
type faulty struct {
	next  http.RoundTripper
	panic bool
	n     atomic.Int32
}

func (f *faulty) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.n.Add(1) != 2 {
		return f.next.RoundTrip(r)
	}
	if f.panic {
		panic("faulty Base")
	}
	return nil, nil
}

// TestFaultyBase has the probe after a quota's reset fail in a Base that
// panics or breaks the RoundTripper contract: the request after it must
// go at once, not wait for an answer that never comes until its deadline
// (and, without one, forever).
func TestFaultyBase(t *testing.T) {
	for _, tt := range []struct {
		name  string
		panic bool
	}{
		{"Base panics", true},
		{"Base returns no response and no error", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{answers: []scriptedAnswer{{200, http.Header{"Ratelimit": {`"default";r=0;t=1`}}}}}
				tr := &client.Transport{Base: &faulty{next: inMemory{h: srv}, panic: tt.panic}}
				spend(t, tr, "http://api.test/")
				time.Sleep(time.Second) // fake time: the reset, after which a probe goes
				func() {
					defer func() {
						assert.Equal(t, tt.panic, recover() != nil, "the probe's RoundTrip panicked")
					}()
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					assert.Nil(t, resp, "the probe's response")
					assert.Error(t, err, "the probe's error")
				}()

				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err, "the request after the faulty one")
				resp.Body.Close()
				assert.Zero(t, time.Since(start), "time the request after the faulty one took")
				assert.Equal(t, http.StatusOK, resp.StatusCode, "status of the request after the faulty one")
			})
		})
	}
}
