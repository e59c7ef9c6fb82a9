package benchmarks

// What the fleet tests check of the admitted instants (Result.At, in µs,
// the server's clock, from every process), one check per algorithm, each
// what the algorithm promises:
//
//   - SlidingLog: no rolling window (t-w, t] holds more than the limit.
//   - SlidingWindowCounter: an approximation of a rolling window. What it
//     promises is its estimate: at every admission, the admissions of its
//     fixed window so far plus the previous fixed window's, weighted by
//     the share of it the rolling window still covers (rounded up), are
//     at most the limit. So no fixed window holds more than the limit,
//     and a rolling one may (reported, not asserted).
//   - GCRA: a burst of the limit, then one every T = ceil(w/limit): any n
//     admissions between instants a <= b satisfy n <= limit + (b-a)/T, so
//     a rolling window may hold about twice the limit (reported).
//   - Calendar periods: no period holds more than the limit.
//
// A request a lease admits reports the lease's grant as its At, the
// instant Redis counted it at, so these hold in At's coordinates too.

import (
	"slices"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// maxInWindow returns the most instants of sorted that any rolling window
// (t-w, t] holds, and how many windows ending at an instant hold more
// than limit.
func maxInWindow(sorted []int64, w int64, limit int) (most, over int) {
	i := 0
	for j, x := range sorted {
		for x-sorted[i] >= w {
			i++
		}
		n := j - i + 1
		most = max(most, n)
		if n > limit {
			over++
		}
	}
	return most, over
}

// counterViolations returns how many distinct instants of sorted break
// the counter's estimate for a limit per window w (see above), and the
// most any fixed window holds.
func counterViolations(sorted []int64, w int64, limit int) (bad, mostFixed int) {
	counts := map[int64]int64{}
	for _, x := range sorted {
		counts[floorDiv(x, w)]++
	}
	for _, n := range counts {
		mostFixed = max(mostFixed, int(n))
	}
	var idx, sofar int64 = -1 << 62, 0
	for j, x := range sorted {
		f := floorDiv(x, w)
		if f != idx {
			idx, sofar = f, 0
		}
		sofar++
		if j+1 < len(sorted) && sorted[j+1] == x {
			continue // judge an instant with every admission at it
		}
		elapsed := x - f*w
		prev := counts[f-1]
		est := sofar + (prev*(w-elapsed)+w-1)/w
		if est > int64(limit) {
			bad++
		}
	}
	return bad, mostFixed
}

// gcraViolations returns how many admissions of sorted end a run that
// breaks n <= limit + (b-a)/T for a limit per window w (µs).
func gcraViolations(sorted []int64, w int64, limit int) (bad int) {
	L := int64(limit)
	t := (w + L - 1) / L
	// (j-i+1-L)*T <= x_j - x_i  <=>  (j+1)*T - x_j - (i*T - x_i) <= L*T.
	minB := int64(1 << 62)
	for j, x := range sorted {
		minB = min(minB, int64(j)*t-x)
		if int64(j+1)*t-x-minB > L*t {
			bad++
		}
	}
	return bad
}

// periodTotals returns the admissions of sorted per calendar period of p.
func periodTotals(sorted []int64, p ratelimit.Policy) map[time.Time]int {
	out := map[time.Time]int{}
	for _, x := range sorted {
		start, _ := p.Period(time.UnixMicro(x))
		out[start]++
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// windowCheck is the check of one policy over the admitted instants.
type windowCheck struct {
	policy ratelimit.Policy
	most   int // the most in any rolling window (any period)
	over   int // rolling windows over the limit
	bad    int // breaches of what the algorithm promises
	fixed  int // the counter: the most in a fixed window
}

// checkPolicy checks sorted against what p's algorithm promises.
func checkPolicy(sorted []int64, p ratelimit.Policy) windowCheck {
	c := windowCheck{policy: p}
	w := p.Window.Microseconds()
	switch p.Algorithm {
	case ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly:
		for _, n := range periodTotals(sorted, p) {
			c.most = max(c.most, n)
			if n > p.Limit {
				c.over++
				c.bad++
			}
		}
		return c
	}
	c.most, c.over = maxInWindow(sorted, w, p.Limit)
	switch p.Algorithm {
	case ratelimit.SlidingWindowCounter:
		c.bad, c.fixed = counterViolations(sorted, w, p.Limit)
	case ratelimit.GCRA:
		c.bad = gcraViolations(sorted, w, p.Limit)
	default:
		c.bad = c.over
	}
	return c
}

// TestFleetChecks proves each check can fail: a table of instants that
// keep or break what each algorithm promises.
func TestFleetChecks(t *testing.T) {
	sec := int64(time.Second / time.Microsecond)
	log := ratelimit.Policy{Name: "l", Limit: 3, Window: time.Second}
	counter := ratelimit.Policy{Name: "c", Limit: 4, Window: time.Second, Algorithm: ratelimit.SlidingWindowCounter}
	gcra := ratelimit.Policy{Name: "g", Limit: 2, Window: time.Second, Algorithm: ratelimit.GCRA}
	month := ratelimit.Policy{Name: "m", Limit: 2, Algorithm: ratelimit.Monthly}
	jan := time.Date(2030, 1, 31, 23, 0, 0, 0, time.UTC).UnixMicro()
	for _, tt := range []struct {
		name string
		p    ratelimit.Policy
		at   []int64
		bad  int
	}{
		{"log: 3 in a window", log, []int64{0, 1, 2, sec, sec + 1, sec + 2}, 0},
		{"log: a 4th before the first leaves", log, []int64{0, 1, 2, sec - 1}, 1},
		{"log: the edge is out of the window", log, []int64{0, 1, 2, sec}, 0},
		{"counter: 4 in a fixed window", counter, []int64{0, 1, 2, 3}, 0},
		{"counter: 5 in a fixed window", counter, []int64{0, 1, 2, 3, 4}, 1},
		// 4 in window 0; at 3/4 into window 1 they weigh 1: 3 more fit.
		{"counter: the previous window weighs", counter, []int64{0, 1, 2, 3, sec + 3*sec/4, sec + 3*sec/4, sec + 3*sec/4}, 0},
		{"counter: too soon after a full window", counter, []int64{0, 1, 2, 3, sec + sec/4, sec + sec/4}, 1},
		{"gcra: a burst, then one every T", gcra, []int64{0, 0, sec / 2, sec}, 0},
		{"gcra: a third in the burst", gcra, []int64{0, 0, 0}, 1},
		{"gcra: one too early after the burst", gcra, []int64{0, 0, sec/2 - 1}, 1},
		{"month: 2 in January, 2 in February", month, []int64{jan, jan + 1, jan + 2*3600*sec, jan + 2*3600*sec + 1}, 0},
		{"month: 3 in January", month, []int64{jan, jan + 1, jan + 2}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at := slices.Clone(tt.at)
			slices.Sort(at)
			if got := checkPolicy(at, tt.p).bad; got != tt.bad {
				t.Errorf("breaches %d, want %d", got, tt.bad)
			}
		})
	}
}
