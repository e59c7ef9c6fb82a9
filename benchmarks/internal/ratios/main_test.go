package main

import (
	"strings"
	"testing"
)

// table runs the tool's parse and write on go test output.
func table(t *testing.T, in, unit string) string {
	t.Helper()
	rows, order, failed := parse(strings.NewReader(in))
	var b strings.Builder
	if err := write(&b, rows, order, failed, unit); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// row returns the table's line for the workload starting with work.
func row(t *testing.T, tab, work string) string {
	t.Helper()
	for _, l := range strings.Split(tab, "\n") {
		if strings.HasPrefix(l, "| "+work) {
			return l
		}
	}
	t.Fatalf("no row %q in\n%s", work, tab)
	return ""
}

// Three passes; throttled, the fastest peer, failed in the second (a
// timed run: its name, then the FAIL) and ratelimit in the third.
const partial = `
BenchmarkMiddleware/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op	 200 cpu-ns/op	 3 allocs/op
BenchmarkMiddleware/work=HotKey/peer=ulule-2       	 1000	 120 ns/op	 240 cpu-ns/op	 11 allocs/op
BenchmarkMiddleware/work=HotKey/peer=throttled-2   	 1000	  90 ns/op	 180 cpu-ns/op	 8 allocs/op
BenchmarkMiddleware/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op	 200 cpu-ns/op	 3 allocs/op
BenchmarkMiddleware/work=HotKey/peer=ulule-2       	 1000	 120 ns/op	 240 cpu-ns/op	 11 allocs/op
BenchmarkMiddleware/work=HotKey/peer=throttled-2   	--- FAIL: BenchmarkMiddleware/work=HotKey/peer=throttled-2
    workloads_test.go:94: 3 of 1000 requests denied, want all allowed: the workload would measure the wrong path
BenchmarkMiddleware/work=HotKey/peer=ratelimit-2   	--- FAIL: BenchmarkMiddleware/work=HotKey/peer=ratelimit-2
BenchmarkMiddleware/work=HotKey/peer=ulule-2       	 1000	 120 ns/op	 240 cpu-ns/op	 11 allocs/op
BenchmarkMiddleware/work=HotKey/peer=throttled-2   	 1000	  90 ns/op	 180 cpu-ns/op	 8 allocs/op
`

func TestFailedRunsAreNamed(t *testing.T) {
	r := row(t, table(t, partial, "cpu-ns/op"), "Middleware/work=HotKey-2")
	for _, want := range []string{"(incomplete: ratelimit 2/3, throttled 2/3)", "throttled 180.0 ns", "**1.11x**"} {
		if !strings.Contains(r, want) {
			t.Errorf("row %q lacks %q", r, want)
		}
	}
}

// A peer library that failed its first run (b.N = 1) in every pass prints
// only a FAIL line without the GOMAXPROCS suffix: the comparison with the
// next fastest must say so.
func TestPeerFailedEveryRunIsNamed(t *testing.T) {
	in := `
BenchmarkMiddleware/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op	 3 allocs/op
BenchmarkMiddleware/work=HotKey/peer=ulule-2       	 1000	 120 ns/op	 11 allocs/op
--- FAIL: BenchmarkMiddleware/work=HotKey/peer=throttled
BenchmarkMiddleware/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op	 3 allocs/op
BenchmarkMiddleware/work=HotKey/peer=ulule-2       	 1000	 120 ns/op	 11 allocs/op
--- FAIL: BenchmarkMiddleware/work=HotKey/peer=throttled
`
	r := row(t, table(t, in, "sec/op"), "Middleware/work=HotKey-2")
	if !strings.Contains(r, "(incomplete: throttled 0/2)") || !strings.Contains(r, "ulule 120.0 ns") {
		t.Errorf("row %q: want ulule as fastest and throttled named as failed", r)
	}
}

// A complete run is not marked, and a library with no store (httprate in
// the Store workloads) is not missing.
func TestCompleteRowIsNotMarked(t *testing.T) {
	in := `
BenchmarkStore/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op
BenchmarkStore/work=HotKey/peer=sethvargo-2   	 1000	 110 ns/op
BenchmarkStore/work=HotKey/peer=ratelimit-2   	 1000	 100 ns/op
BenchmarkStore/work=HotKey/peer=sethvargo-2   	 1000	 110 ns/op
`
	r := row(t, table(t, in, "sec/op"), "Store/work=HotKey-2")
	if strings.Contains(r, "incomplete") || !strings.Contains(r, "**0.91x**") {
		t.Errorf("row %q", r)
	}
}

// go test writes no GOMAXPROCS suffix when GOMAXPROCS is 1: xrate-map
// must stay xrate-map, not peer "xrate" of workload "...-map".
func TestNoProcsSuffix(t *testing.T) {
	in := `
BenchmarkMiddleware/work=HotKey/peer=ratelimit   	 1000	 100 ns/op
BenchmarkMiddleware/work=HotKey/peer=ulule       	 1000	 120 ns/op
BenchmarkMiddleware/work=HotKey/peer=xrate-map   	 1000	  50 ns/op
`
	tab := table(t, in, "sec/op")
	r := row(t, tab, "Middleware/work=HotKey |")
	if !strings.Contains(r, "| 2.00x |") {
		t.Errorf("row %q: want xrate-map ratio 2.00x\n%s", r, tab)
	}
}
