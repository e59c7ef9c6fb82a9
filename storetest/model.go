package storetest

import (
	"math"
	"math/big"
	"slices"

	"github.com/slidelog/ratelimit"
)

// A model is a deliberately plain reference for one algorithm under one
// policy, written from the algorithm's definition rather than from any
// store's code. Times are Unix nanoseconds.
type model interface {
	// fits reports whether cost more requests fit at now, without
	// recording them.
	fits(now, cost int64) bool
	// record counts cost requests at now; fits said they fit.
	record(now, cost int64)
	// remaining returns how many more requests fit at now.
	remaining(now int64) int64
	// setLimit makes limit the policy's limit from now on: the log and
	// the counter keep what they counted; the bucket keeps what it lacks
	// of full, the time it takes to refill.
	setLimit(limit, now int64)
}

func newModel(p ratelimit.Policy) model {
	limit, window := int64(p.Limit), int64(p.Window)
	switch p.Algorithm {
	case ratelimit.SlidingWindowCounter:
		return &counterModel{limit: limit, window: window, counts: map[int64]int64{}}
	case ratelimit.GCRA:
		t := (window + limit - 1) / limit
		return &bucketModel{limit: limit, t: t, level: limit * t, last: math.MinInt64}
	}
	return &logModel{limit: limit, window: window}
}

// logModel keeps every allowed instant in a plain slice.
type logModel struct {
	limit, window int64
	at            []int64
}

func (m *logModel) count(now int64) int64 {
	n := int64(0)
	for _, t := range m.at {
		if t > now-m.window {
			n++
		}
	}
	return n
}

func (m *logModel) fits(now, cost int64) bool { return m.count(now)+cost <= m.limit }

func (m *logModel) record(now, cost int64) {
	m.at = slices.DeleteFunc(m.at, func(t int64) bool { return t <= now-m.window })
	for range cost {
		m.at = append(m.at, now)
	}
}

func (m *logModel) remaining(now int64) int64 { return max(m.limit-m.count(now), 0) }

func (m *logModel) setLimit(limit, _ int64) { m.limit = limit }

// bucketModel is a token bucket in nanosecond units: GCRA by another
// route. It holds up to limit*t and refills one unit a nanosecond; a
// request takes t units, t being the window over the limit, rounded up.
type bucketModel struct {
	limit, t, level, last int64
}

func (m *bucketModel) levelAt(now int64) int64 {
	if m.last == math.MinInt64 {
		return m.level
	}
	return min(m.limit*m.t, m.level+now-m.last)
}

func (m *bucketModel) fits(now, cost int64) bool { return m.levelAt(now) >= cost*m.t }

func (m *bucketModel) record(now, cost int64) {
	m.level, m.last = m.levelAt(now)-cost*m.t, now
}

func (m *bucketModel) remaining(now int64) int64 { return max(m.levelAt(now), 0) / m.t }

func (m *bucketModel) setLimit(limit, now int64) {
	lack := m.limit*m.t - m.levelAt(now)
	window := m.limit * m.t // windows are multiples of every limit the models test gives
	m.limit, m.t = limit, window/limit
	m.level, m.last = limit*m.t-lack, now
}

// counterModel counts per fixed window (aligned to the Unix epoch) in a
// map and weighs the previous window by the share of it the rolling
// window still covers, rounding the weighted count up, as the sliding
// window counter is usually described.
type counterModel struct {
	limit, window int64
	counts        map[int64]int64
}

func (m *counterModel) estimate(now int64) int64 {
	w := floorDiv(now, m.window)
	elapsed := now - w*m.window
	// ceil(prev * (window-elapsed) / window), in exact arithmetic: a count
	// times a window in nanoseconds can overflow 64 bits.
	num := new(big.Int).Mul(big.NewInt(m.counts[w-1]), big.NewInt(m.window-elapsed))
	num.Add(num, big.NewInt(m.window-1))
	return m.counts[w] + num.Quo(num, big.NewInt(m.window)).Int64()
}

func (m *counterModel) fits(now, cost int64) bool { return m.estimate(now)+cost <= m.limit }

func (m *counterModel) record(now, cost int64) { m.counts[floorDiv(now, m.window)] += cost }

func (m *counterModel) remaining(now int64) int64 { return max(m.limit-m.estimate(now), 0) }

func (m *counterModel) setLimit(limit, _ int64) { m.limit = limit }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
