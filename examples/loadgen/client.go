package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// profile is how a simulated client sends: a steady rate, a burst of
// requests at once every period, or, for the flood, as fast as it can.
type profile struct {
	name  string
	rate  float64       // requests per second, for a steady client
	burst int           // requests sent at once, for a bursty client
	every time.Duration // between bursts
	flood bool          // floodWorkers requests in flight, each sent when the last is answered
}

func (p profile) String() string {
	if p.flood {
		return fmt.Sprintf("flat out, %d in flight", floodWorkers)
	}
	if p.burst > 0 {
		return fmt.Sprintf("%d at once every %v", p.burst, p.every)
	}
	return fmt.Sprintf("steady %g/s", p.rate)
}

// profiles are the demo's clients, against its API-key route (50 per 10 s
// and 10 per 1 s): one under both limits, one over the 10 s one, one far
// over both, and one that bursts.
var profiles = []profile{
	{name: "calm", rate: 3},
	{name: "steady", rate: 8},
	{name: "eager", rate: 30},
	{name: "bursty", burst: 25, every: 4 * time.Second},
}

// schedule returns how often p sends, and how many requests each time.
func (p profile) schedule() (step time.Duration, n int) {
	if p.burst > 0 {
		return p.every, p.burst
	}
	return time.Duration(float64(time.Second) / max(p.rate, 1e-9)), 1
}

// counts are the responses received in one second.
type counts struct{ ok, limited, other int }

// client is one simulated client and what it has seen.
type client struct {
	profile
	key string

	mu       sync.Mutex
	ok       []span
	rejected []limited
	errs     int // transport errors and statuses other than 200 and 429
	seconds  []counts
	policies string // the first RateLimit-Policy value seen
}

// budget caps the requests of a run across all clients.
type budget struct{ left atomic.Int64 }

func (b *budget) take() bool { return b.left.Add(-1) >= 0 }

// maxInFlight bounds a client's concurrent requests; a client that hits it
// falls behind its schedule instead of piling up goroutines.
const maxInFlight = 64

// drive sends c's requests from start until end, then waits for the
// answers.
func (c *client) drive(ctx context.Context, hc *http.Client, url string, start, end time.Time, b *budget) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxInFlight)
	send := func() bool {
		if !b.take() {
			return false
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c.do(ctx, hc, url, start)
		})
		return true
	}

	step, n := c.schedule()
	for at := start; at.Before(end); at = at.Add(step) {
		if !waitUntil(ctx, at) {
			return
		}
		for range n {
			if !send() {
				return
			}
		}
	}
}

// waitUntil waits for t, reporting false if ctx ends first.
func waitUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// do sends one request and records its round trip. The receive time is
// read as soon as the status line and headers are in: the server decided
// before it wrote them.
func (c *client) do(ctx context.Context, hc *http.Client, url string, start time.Time) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		c.fail(0)
		return
	}
	req.Header.Set("X-API-Key", c.key)
	sent := time.Since(start)
	resp, err := hc.Do(req)
	recv := time.Since(start)
	if err != nil {
		c.fail(recv)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	c.mu.Lock()
	defer c.mu.Unlock()
	cnt := c.second(recv)
	s := span{sent, recv}
	switch resp.StatusCode {
	case http.StatusOK:
		c.ok = append(c.ok, s)
		cnt.ok++
	case http.StatusTooManyRequests:
		c.rejected = append(c.rejected, limited{s, policyName(resp.Header.Get("Ratelimit"))})
		cnt.limited++
	default:
		c.errs++
		cnt.other++
	}
	if c.policies == "" {
		c.policies = resp.Header.Get("Ratelimit-Policy")
	}
}

func (c *client) fail(at time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs++
	c.second(at).other++
}

// second returns the counts of the second that holds d. The caller holds
// c.mu.
func (c *client) second(d time.Duration) *counts {
	i := int(d / time.Second)
	for len(c.seconds) <= i {
		c.seconds = append(c.seconds, counts{})
	}
	return &c.seconds[i]
}

// snapshot returns the counts of second i and the totals so far.
func (c *client) snapshot(i int) (sec, total counts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= 0 && i < len(c.seconds) {
		sec = c.seconds[i]
	}
	return sec, counts{len(c.ok), len(c.rejected), c.errs}
}
