package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

const ms = time.Millisecond

func TestTrailing(t *testing.T) {
	const w = time.Second
	tests := []struct {
		name     string
		admitted []time.Duration
		want     []step
	}{
		{name: "none", want: []step{{0, 0}}},
		{name: "one", admitted: []time.Duration{200 * ms}, want: []step{{0, 0}, {200 * ms, 1}, {1200 * ms, 0}}},
		{
			name:     "at time zero",
			admitted: []time.Duration{0, 0},
			want:     []step{{0, 2}, {w, 0}},
		},
		{
			// The first leaves exactly when the second arrives: an instant
			// exactly one window old no longer counts.
			name:     "a window apart",
			admitted: []time.Duration{100 * ms, 1100 * ms},
			want:     []step{{0, 0}, {100 * ms, 1}, {1100 * ms, 1}, {2100 * ms, 0}},
		},
		{
			name:     "overlapping",
			admitted: []time.Duration{100 * ms, 300 * ms, 900 * ms},
			want:     []step{{0, 0}, {100 * ms, 1}, {300 * ms, 2}, {900 * ms, 3}, {1100 * ms, 2}, {1300 * ms, 1}, {1900 * ms, 0}},
		},
	}
	for _, tc := range tests {
		if got := trailing(tc.admitted, w); !slices.Equal(got, tc.want) {
			t.Errorf("%s: trailing = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFixedWindowAdmitsTwiceTheLimitAcrossABoundary(t *testing.T) {
	// limit just before the boundary at one window, limit just after.
	arrivals := every(window-limit*ms, ms, 2*limit)
	admitted, err := replay(&fixedWindow{limit: limit, window: window}, arrivals)
	if err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 2*limit {
		t.Errorf("fixed window admitted %d of %d, want all", len(admitted), len(arrivals))
	}
	if got := maxTrailing(admitted, window); got != 2*limit {
		t.Errorf("fixed window: most in one window %d, want %d", got, 2*limit)
	}
	// Within one fixed window it holds the limit.
	admitted, _ = replay(&fixedWindow{limit: limit, window: window}, every(0, ms, 2*limit))
	if len(admitted) != limit {
		t.Errorf("fixed window, one window: admitted %d, want %d", len(admitted), limit)
	}
}

// slidingLogModel is the sliding log by its definition: admit if fewer
// than limit admitted requests are in (t-w, t].
func slidingLogModel(arrivals []time.Duration, limit int, w time.Duration) []time.Duration {
	var admitted []time.Duration
	for _, t := range arrivals {
		n := 0
		for _, a := range admitted {
			if a > t-w {
				n++
			}
		}
		if n < limit {
			admitted = append(admitted, t)
		}
	}
	return admitted
}

func TestSlidingLogMatchesItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 50 {
		// Random arrivals, with ties and gaps of exactly one window.
		var arrivals []time.Duration
		var at time.Duration
		for range 200 {
			switch rng.IntN(4) {
			case 0: // same instant
			case 1:
				at += window
			default:
				at += time.Duration(rng.Int64N(int64(window / 4)))
			}
			arrivals = append(arrivals, at)
		}
		lim := 1 + rng.IntN(12)
		ad, err := newLimiterAdmitter(ratelimit.SlidingLog, lim, window)
		if err != nil {
			t.Fatal(err)
		}
		got, err := replay(ad, arrivals)
		ad.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := slidingLogModel(arrivals, lim, window)
		if !slices.Equal(got, want) {
			t.Fatalf("run %d, limit %d: limiter admitted %v, the definition %v", run, lim, got, want)
		}
		if m := maxTrailing(got, window); m > lim {
			t.Fatalf("run %d: %d in one window, limit %d", run, m, lim)
		}
	}
}

func TestScenarios(t *testing.T) {
	scs := scenarios()
	if len(scs) != 2 {
		t.Fatalf("%d scenarios, want 2", len(scs))
	}
	for _, sc := range scs {
		ss, err := simulate(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		if len(ss) != 1+len(algorithms) {
			t.Fatalf("%s: %d series, want the reference and %d algorithms", sc.name, len(ss), len(algorithms))
		}
		byName := map[string]series{}
		for _, s := range ss {
			byName[s.name] = s
			// Every algorithm here admits at most twice the limit in a
			// window: the fixed window and GCRA reach that bound.
			if s.max > 2*limit {
				t.Errorf("%s: %s: %d in one window, want at most %d", sc.name, s.name, s.max, 2*limit)
			}
		}
		if got := byName[algorithms[0].name].max; got != limit {
			t.Errorf("%s: sliding log: at most %d in one window, want exactly the limit %d", sc.name, got, limit)
		}
		if got := byName["fixed window (reference)"].max; got <= limit {
			t.Errorf("%s: fixed window: at most %d in one window, want more than the limit %d (the picture's point)", sc.name, got, limit)
		}
	}
	// The burst is the fixed window's worst case.
	ss, _ := simulate(scs[0])
	if ss[0].max != 2*limit {
		t.Errorf("burst: fixed window at most %d, want %d", ss[0].max, 2*limit)
	}
}

func TestRunWritesPictures(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	if err := run(dir, &out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"algorithms.svg", "algorithms.png"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < 10_000 {
			t.Errorf("%s: %d bytes, want a full picture", name, fi.Size())
		}
	}
	if !strings.Contains(out.String(), "sliding log") {
		t.Errorf("summary lacks the sliding log:\n%s", out.String())
	}
}

// TestCounterBurstThenGreedy replays what the README says of the sliding
// window counter: the top scenario's burst keeps it at the limit, but a
// client that goes on sending after such a burst is admitted more than the
// limit in one rolling window, while the estimate sheds the burst's weight.
func TestCounterBurstThenGreedy(t *testing.T) {
	burst := every(9*time.Second, 100*time.Millisecond, limit)
	greedy := slices.Concat(burst, every(window, 10*time.Millisecond, 1000))
	for _, tc := range []struct {
		name     string
		arrivals []time.Duration
		over     bool
	}{
		{"burst, then a burst after the boundary", slices.Concat(burst, every(window, 100*time.Millisecond, limit)), false},
		{"burst, then greedy", greedy, true},
	} {
		ad, err := newLimiterAdmitter(ratelimit.SlidingWindowCounter, limit, window)
		if err != nil {
			t.Fatal(err)
		}
		admitted, err := replay(ad, tc.arrivals)
		ad.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := maxTrailing(admitted, window)
		t.Logf("%s: at most %d in one window", tc.name, m)
		if (m > limit) != tc.over {
			t.Errorf("%s: at most %d in one window, want over the limit %d: %v", tc.name, m, limit, tc.over)
		}
	}
}
