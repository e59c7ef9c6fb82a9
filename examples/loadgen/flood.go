package main

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// The flood is one client, on one key, that sends as fast as the server
// answers: floodWorkers requests in flight, each worker sending its next
// request as soon as its last is answered. It starts halfway through the
// run, so that the polite clients' round trips can be compared without and
// with it. The limiter refuses almost all of it; what the comparison shows
// is what answering those refusals costs everyone else.
const floodWorkers = 16

// floodMaxRequests is -max-requests with -flood, unless given: on
// loopback the flood sends tens of thousands of requests a second, and
// the usual cap would end it within a second.
const floodMaxRequests = 300000

// floodProfile is the flood client's.
var floodProfile = profile{name: "flood", flood: true}

// floodDrive sends c's requests flat out from from until end, or until b
// runs out, then waits for the answers.
func (c *client) floodDrive(ctx context.Context, hc *http.Client, url string, start, from, end time.Time, b *budget) {
	if !waitUntil(ctx, from) {
		return
	}
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) && b.take() {
				c.do(ctx, hc, url, start)
			}
		})
	}
	wg.Wait()
}

// politeDemand returns how many requests the clients of ps schedule in d,
// so that the flood can be given only what they leave of -max-requests.
func politeDemand(ps []profile, d time.Duration) int {
	n := 0
	for _, p := range ps {
		if !p.flood {
			// drive sends at start, start+step, ... while before the end.
			step, each := p.schedule()
			n += int((d+step-1)/step) * each
		}
	}
	return n
}
