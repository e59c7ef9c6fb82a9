package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/client"
)

// TestClientPacing has 32 goroutines share one client.Transport against
// the middleware on this store, 20 requests per 2 s, for 6 s of real
// time: they must spend at least 90% of the quota and meet no 429 once
// the server has answered once. Real time moves here, so the bounds are
// on counts only: the Transport's waits are conservative whatever the
// latency (a reset is counted from when its answer arrived), and a slow
// machine costs quota, not 429s.
func TestClientPacing(t *testing.T) {
	c := sharedClient(t)
	st, _ := newStore(t, c)
	const limit, window, span = 20, 2 * time.Second, 6 * time.Second
	l, err := ratelimit.New(limit, window, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 32}
	defer base.CloseIdleConnections()
	tr := &client.Transport{Base: base}
	hc := &http.Client{Transport: tr}

	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var answered atomic.Bool
	var mu sync.Mutex
	var served, refused, late int
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("X-API-Key", "k")
				sentLate := answered.Load()
				resp, err := hc.Do(req)
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("request: %v", err)
					}
					return
				}
				answered.Store(true)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusOK:
					served++
				case http.StatusTooManyRequests:
					refused++
					if sentLate {
						late++
					}
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	// The first request comes a moment after the start: the sliding log
	// admits a full window from then on, three times in the span.
	quota := limit * int(span/window)
	t.Logf("served %d of a quota of %d (%.1f%%); refused %d, %d after the first answer",
		served, quota, 100*float64(served)/float64(quota), refused, late)
	if served < quota*90/100 {
		t.Errorf("served %d requests, want at least 90%% of the quota of %d", served, quota)
	}
	if late > 0 {
		t.Errorf("%d 429s after the first answer, want none", late)
	}
}
