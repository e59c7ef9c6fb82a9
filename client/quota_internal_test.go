package client

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answer returns the outcome of a request answered with figs.
func answer(probe bool, figs ...figure) outcome {
	r := &report{retryAfter: -1}
	r.n = copy(r.figs[:], figs)
	return outcome{probe: probe, answered: true, rep: r}
}

func TestServersBounded(t *testing.T) {
	var ss servers
	key := func(i int) serverKey { return serverKey{scheme: "https", host: "h" + strconv.Itoa(i)} }
	first := ss.get(key(0))
	second := ss.get(key(1))
	for i := 2; i < maxServers; i++ {
		ss.get(key(i))
	}
	require.Equal(t, maxServers, ss.len(), "servers kept when full")
	assert.Same(t, first, ss.get(key(0)), "server 0, used again")
	ss.get(key(maxServers)) // one more: the least recently used goes
	assert.Equal(t, maxServers, ss.len(), "servers kept past full")
	assert.Same(t, first, ss.get(key(0)), "server 0, used most recently")
	assert.NotSame(t, second, ss.get(key(1)), "server 1, the least recently used: forgotten and made anew")
}

func TestQuotasBounded(t *testing.T) {
	s := new(server)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range maxQuotas + 4 {
		s.inflight++
		s.settle(answer(false, ietf("p"+strconv.Itoa(i), 5, time.Minute)), t0.Add(time.Duration(i)*time.Second))
	}
	require.Len(t, s.quotas, maxQuotas, "quotas kept")
	for i := range 4 {
		assert.NotContains(t, s.quotas, quotaKey{name: "p" + strconv.Itoa(i)}, "quota %d, heard of least recently", i)
	}
	assert.Contains(t, s.quotas, quotaKey{name: "p" + strconv.Itoa(maxQuotas+3)}, "the newest quota")
}

// TestFiguresOnlyLower checks how a quota's figures change: answers come
// in any order, so until the reset only a lower figure counts; an equal one
// may push the reset later; after the reset, any figure replaces the old.
func TestFiguresOnlyLower(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := new(server)
	k := quotaKey{name: "a"}
	for i, step := range []struct {
		at        time.Duration
		fig       figure
		remaining int64
		reset     time.Duration // from t0
	}{
		{0, ietf("a", 5, 10*time.Second), 5, 10 * time.Second},
		{1 * time.Second, ietf("a", 3, 9*time.Second), 3, 10 * time.Second},
		{2 * time.Second, ietf("a", 4, 8*time.Second), 3, 10 * time.Second}, // an earlier answer, late
		{3 * time.Second, ietf("a", 3, 9*time.Second), 3, 12 * time.Second}, // the same count, a later reset
		{4 * time.Second, ietf("a", 3, 1*time.Second), 3, 12 * time.Second}, // the same count, an earlier reset
		{12 * time.Second, ietf("a", 9, 10*time.Second), 9, 22 * time.Second},
	} {
		s.inflight++
		s.settle(answer(false, step.fig), t0.Add(step.at))
		require.Contains(t, s.quotas, k, "step %d", i)
		assert.Equal(t, step.remaining, s.quotas[k].remaining, "step %d: remaining", i)
		assert.Equal(t, t0.Add(step.reset), s.quotas[k].reset, "step %d: reset", i)
	}
}

// TestUnnamedQuotaCharged checks what an answer that does not name a
// quota does to it.
func TestUnnamedQuotaCharged(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pk := func(f figure, pk string) figure { f.key.pk = pk; return f }
	for _, tt := range []struct {
		name string
		o    outcome
		want int64 // b's remaining, from 5
	}{
		{"another quota named", answer(false, ietf("a", 4, time.Minute)), 4},
		{"nothing named", answer(false), 4},
		{"no answer", outcome{}, 4},
		{"another partition's quota named", answer(false, pk(ietf("a", 4, time.Minute), "QUJD")), 5},
		{"refused, or answered by a cache", func() outcome { o := answer(false); o.free = true; return o }(), 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := new(server)
			s.inflight = 2
			s.settle(answer(false, ietf("a", 5, time.Minute), ietf("b", 5, time.Minute)), t0)
			s.settle(tt.o, t0)
			assert.Equal(t, tt.want, s.quotas[quotaKey{name: "b"}].remaining, "b's remaining")
		})
	}
}

// TestReserveInFlight walks requests through a quota of 2: the requests
// in flight hold what is left, a spent quota waits for its reset, one
// request then goes alone, and its answer lets the others go.
func TestReserveInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		s := new(server)
		s.inflight++
		s.settle(answer(false, ietf("a", 2, 10*time.Second)), start)

		for i := range 2 {
			probe, err := s.reserve(ctx)
			require.NoError(t, err, "request %d", i)
			assert.False(t, probe, "request %d: probe", i)
		}
		// A third, and a fourth, wait for what the two hold.
		type got struct {
			probe bool
			at    time.Duration
		}
		third, fourth := make(chan got, 1), make(chan got, 1)
		go func() { p, _ := s.reserve(ctx); third <- got{p, time.Since(start)} }()
		synctest.Wait()
		go func() { p, _ := s.reserve(ctx); fourth <- got{p, time.Since(start)} }()
		synctest.Wait()
		assert.Empty(t, third, "third request gone with two in flight")

		time.Sleep(time.Second) // fake time
		s.settle(answer(false, ietf("a", 1, 9*time.Second)), time.Now())
		synctest.Wait()
		assert.Empty(t, third, "third request gone with one in flight and one left")
		s.settle(answer(false, ietf("a", 0, 9*time.Second)), time.Now())
		synctest.Wait()
		assert.Empty(t, third, "third request gone with none left")

		// At the reset, one of them goes alone as a probe.
		time.Sleep(9 * time.Second)
		synctest.Wait()
		var p got
		select {
		case p = <-third:
		case p = <-fourth:
		default:
			t.Fatal("no request gone at the reset")
		}
		assert.Equal(t, got{true, 10 * time.Second}, p, "the first to go after the reset")
		assert.Zero(t, len(third)+len(fourth), "others gone with the probe in flight")

		time.Sleep(time.Second)
		s.settle(answer(true, ietf("a", 5, 10*time.Second)), time.Now())
		synctest.Wait()
		select {
		case p = <-third:
		case p = <-fourth:
		default:
			t.Fatal("no request gone after the probe's answer")
		}
		assert.Equal(t, got{false, 11 * time.Second}, p, "the other, after the probe's answer")
	})
}

// TestProbeForgets checks that a probe's answer that does not name a
// stale quota forgets it, and that a probe without an answer does not.
func TestProbeForgets(t *testing.T) {
	for _, tt := range []struct {
		name   string
		o      outcome
		forget bool
	}{
		{"answered, quota not named", answer(true), true},
		{"answered, quota named", answer(true, ietf("a", 3, time.Second)), false},
		{"not answered", outcome{probe: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := new(server)
				s.inflight++
				s.settle(answer(false, ietf("a", 0, time.Second)), time.Now())
				time.Sleep(time.Second)
				probe, err := s.reserve(context.Background())
				require.NoError(t, err)
				require.True(t, probe, "the request after the reset is a probe")
				s.settle(tt.o, time.Now())
				if tt.forget {
					assert.Empty(t, s.quotas, "quotas")
				} else {
					assert.Contains(t, s.quotas, quotaKey{name: "a"}, "quotas")
				}
				assert.False(t, s.probing, "probing after the probe's end")
			})
		})
	}
}

// TestHeldWaitEndsAtReset: a request held back by the request in flight
// that holds a quota's last request waits until the quota's reset, if no
// answer comes first, and then goes alone, as a probe.
func TestHeldWaitEndsAtReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		s := new(server)
		s.inflight++
		s.settle(answer(false, ietf("a", 1, 10*time.Second)), start)
		_, err := s.reserve(ctx) // holds the last request, its answer never comes
		require.NoError(t, err, "first request")
		type got struct {
			probe bool
			at    time.Duration
		}
		second := make(chan got, 1)
		go func() { p, _ := s.reserve(ctx); second <- got{p, time.Since(start)} }()
		synctest.Wait()
		require.Empty(t, second, "second request gone while the first holds the last request")

		time.Sleep(10 * time.Second) // fake time
		synctest.Wait()
		select {
		case g := <-second:
			assert.Equal(t, got{true, 10 * time.Second}, g, "second request")
		default:
			s.settle(outcome{}, time.Now()) // let it go, so that the bubble ends
			t.Fatal("second request not gone at the reset")
		}
	})
}

// TestRetryAfterAloneCharges: a 503 whose answer names no quota, only a
// Retry-After, is taken to have spent one request of every quota, of any
// partition key; only a 429 and a cache's answer spend nothing.
func TestRetryAfterAloneCharges(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k := quotaKey{name: "a", pk: "QUJD", src: srcIETF}
	s := new(server)
	s.inflight = 2
	s.settle(answer(false, figure{key: k, remaining: 5, reset: time.Minute}), t0)
	var rep report
	readReport(&rep, http.StatusServiceUnavailable, http.Header{hdrRetryAfter: {"1"}}, t0)
	require.Equal(t, time.Second, rep.retryAfter, "Retry-After read")
	s.settle(outcome{answered: true, rep: &rep}, t0)
	require.Contains(t, s.quotas, k)
	assert.Equal(t, int64(4), s.quotas[k].remaining, "remaining after the 503")
}

// TestProbeHoldsBackUntilItsAnswer: a probe in flight holds back the
// requests after a reset until its own answer, also when, meanwhile, an
// earlier request's answer renewed the quota and a request went on it,
// and the quota's new reset then passed.
func TestProbeHoldsBackUntilItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := new(server)
		s.inflight++
		s.settle(answer(false, ietf("a", 5, 10*time.Second)), time.Now())
		_, err := s.reserve(ctx) // an earlier request, answered after the reset
		require.NoError(t, err, "earlier request")

		time.Sleep(10 * time.Second) // fake time
		probe, err := s.reserve(ctx)
		require.NoError(t, err, "probe")
		require.True(t, probe, "the request after the reset is a probe")
		s.settle(answer(false, ietf("a", 5, 5*time.Second)), time.Now()) // the earlier request's answer
		probe, err = s.reserve(ctx)
		require.NoError(t, err, "request on the renewed quota")
		require.False(t, probe, "the request on the renewed quota: probe")

		time.Sleep(5 * time.Second) // the renewed quota's reset
		gone := make(chan bool, 1)
		go func() { p, _ := s.reserve(ctx); gone <- p }()
		synctest.Wait()
		assert.Empty(t, gone, "request gone after the reset with the probe in flight")
		s.settle(answer(true, ietf("a", 5, 10*time.Second)), time.Now()) // the probe's answer
		synctest.Wait()
		assert.Len(t, gone, 1, "request gone after the probe's answer")
	})
}
