package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/slidelog/ratelimit"
)

// The replay: one quota, two clients, every algorithm.
const (
	limit   = 10
	window  = 10 * time.Second
	horizon = 40 * time.Second
)

// scenario is one client's arrival pattern: the instants it sends at,
// since the start.
type scenario struct {
	name     string
	arrivals []time.Duration
}

// scenarios are the two clients drawn.
func scenarios() []scenario {
	return []scenario{
		{
			// A full quota just before a fixed-window boundary and another
			// just after, twice.
			name: fmt.Sprintf("Bursty client: %d requests just before and %d just after the boundaries at 10 s and 30 s", limit, limit),
			arrivals: slices.Concat(
				every(9*time.Second, 100*time.Millisecond, 2*limit),
				every(29*time.Second, 100*time.Millisecond, 2*limit),
			),
		},
		{
			// Twice the allowed rate, starting mid-window.
			name:     "Steady client: 2 requests a second (twice the limit's rate) from 3 s on",
			arrivals: every(3*time.Second, 500*time.Millisecond, int((horizon-3*time.Second)/(500*time.Millisecond))),
		},
	}
}

// every returns n instants from start, step apart.
func every(start, step time.Duration, n int) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = start + time.Duration(i)*step
	}
	return ts
}

// An admitter decides, for arrivals in time order, which are admitted.
type admitter interface {
	admit(t time.Duration) (bool, error)
}

// fixedWindow is the reference the pictures compare against: a counter
// per window aligned on multiples of the window, as simple fixed-window
// limiters keep.
type fixedWindow struct {
	limit  int
	window time.Duration
	cur    time.Duration // start of the current window
	n      int
}

func (f *fixedWindow) admit(t time.Duration) (bool, error) {
	if start := t - t%f.window; start != f.cur {
		f.cur, f.n = start, 0
	}
	if f.n >= f.limit {
		return false, nil
	}
	f.n++
	return true, nil
}

// limiterAdmitter replays arrivals through a real ratelimit.Limiter whose
// memory store reads a clock the replay sets.
type limiterAdmitter struct {
	l   *ratelimit.Limiter
	now atomic.Int64 // the replay's instant, in nanoseconds since base
}

// base is the replay's time zero. The memory store reads its clock when
// it is made and aligns the sliding window counter's fixed windows there,
// so those line up with fixedWindow's.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiterAdmitter(alg ratelimit.Algorithm, limit int, window time.Duration) (*limiterAdmitter, error) {
	a := &limiterAdmitter{}
	clock := func() time.Time { return base.Add(time.Duration(a.now.Load())) }
	l, err := ratelimit.New(limit, window, ratelimit.KeyByHeader("X-Client"),
		ratelimit.WithAlgorithm(alg), ratelimit.WithClock(clock))
	if err != nil {
		return nil, err
	}
	a.l = l
	return a, nil
}

func (a *limiterAdmitter) admit(t time.Duration) (bool, error) {
	a.now.Store(int64(t))
	d := a.l.Allow(context.Background(), "client", 1)
	return d.Result.Allowed, d.Err
}

func (a *limiterAdmitter) Close() error { return a.l.Close() }

// replay returns the arrivals that ad admits.
func replay(ad admitter, arrivals []time.Duration) ([]time.Duration, error) {
	var admitted []time.Duration
	for _, t := range arrivals {
		ok, err := ad.admit(t)
		if err != nil {
			return nil, err
		}
		if ok {
			admitted = append(admitted, t)
		}
	}
	return admitted, nil
}

// step is one change of the trailing count: from instant t on, count
// requests were admitted in (t-w, t].
type step struct {
	t     time.Duration
	count int
}

// trailing returns the count of admitted requests in the trailing window
// (t-w, t] as a step function: it starts at 0 at time 0, rises at each
// admission and falls a window later (an instant exactly one window old no
// longer counts). Simultaneous changes make one step.
func trailing(admitted []time.Duration, w time.Duration) []step {
	type change struct {
		t time.Duration
		d int
	}
	var cs []change
	for _, t := range admitted {
		cs = append(cs, change{t, +1}, change{t + w, -1})
	}
	slices.SortStableFunc(cs, func(a, b change) int { return int(a.t - b.t) })
	steps := []step{{0, 0}}
	n := 0
	for _, c := range cs {
		n += c.d
		if last := &steps[len(steps)-1]; last.t == c.t {
			last.count = n
		} else {
			steps = append(steps, step{c.t, n})
		}
	}
	return steps
}

// maxTrailing returns the most admitted requests in any window of length w.
func maxTrailing(admitted []time.Duration, w time.Duration) int {
	m := 0
	for _, s := range trailing(admitted, w) {
		m = max(m, s.count)
	}
	return m
}

// series is one algorithm's replay of one scenario.
type series struct {
	name     string
	admitted []time.Duration
	max      int // most admitted in any window
}

// algorithms are the limiter's algorithms drawn, with the fixed window
// reference first.
var algorithms = []struct {
	name string
	alg  ratelimit.Algorithm
}{
	{"sliding log (ratelimit's default)", ratelimit.SlidingLog},
	{"sliding window counter", ratelimit.SlidingWindowCounter},
	{"GCRA", ratelimit.GCRA},
}

// simulate replays sc through the fixed-window reference and every
// algorithm.
func simulate(sc scenario) ([]series, error) {
	fixed, err := replay(&fixedWindow{limit: limit, window: window}, sc.arrivals)
	if err != nil {
		return nil, err
	}
	out := []series{{name: "fixed window (reference)", admitted: fixed, max: maxTrailing(fixed, window)}}
	for _, a := range algorithms {
		ad, err := newLimiterAdmitter(a.alg, limit, window)
		if err != nil {
			return nil, err
		}
		admitted, err := replay(ad, sc.arrivals)
		ad.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		out = append(out, series{name: a.name, admitted: admitted, max: maxTrailing(admitted, window)})
	}
	return out, nil
}
