// Command ratios reads `go test -bench` output of the benchmarks module and
// prints, per workload, a markdown table of medians and of ratelimit's
// ratio to the fastest peer library in the same run.
//
// Benchmark names are expected as Benchmark<Group>/<key=value>.../peer=<name>.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// libraries are the published peers ratelimit is compared against; the
// hand-rolled map and the baseline are shown as reference points.
var libraries = []string{"httprate", "ulule", "sethvargo", "throttled"}

const ours = "ratelimit"

type sample map[string][]float64 // unit -> values

func main() {
	unit := flag.String("unit", "sec/op", "unit to rank peers by (lower is better)")
	libs := flag.String("libs", strings.Join(libraries, ","), "comma-separated peer libraries to compare against")
	flag.Parse()
	libraries = strings.Split(*libs, ",")
	rows, order, failed := parse(os.Stdin)
	if err := write(os.Stdout, rows, order, failed, *unit); err != nil {
		log.Fatal(err)
	}
}

// parse returns the samples by workload and peer, the workloads in the
// order first seen, and the runs that failed, by workload without its
// GOMAXPROCS suffix and peer ("Middleware/work=HotKey/throttled"). A
// failed benchmark prints no result, only a "--- FAIL:" line, so a peer
// that failed in some runs has fewer samples than the others.
func parse(r io.Reader) (map[string]map[string]sample, []string, map[string]int) {
	rows := map[string]map[string]sample{}
	failed := map[string]int{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "--- FAIL: Benchmark"); i >= 0 {
			// After a name when a timed run failed, alone when the
			// first run (b.N = 1) did.
			f := strings.Fields(line[i+len("--- FAIL: "):])
			if work, peer, _, ok := split(f[0]); ok {
				failed[work+"/"+peer]++
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		base, peer, procs, ok := split(f[0])
		if !ok {
			continue
		}
		work := base + procs
		if rows[work] == nil {
			rows[work] = map[string]sample{}
			order = append(order, work)
		}
		if rows[work][peer] == nil {
			rows[work][peer] = sample{}
		}
		for k := 2; k+1 < len(f); k += 2 {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil {
				continue
			}
			rows[work][peer][f[k+1]] = append(rows[work][peer][f[k+1]], v)
		}
	}
	return rows, order, failed
}

// split splits a benchmark's name into its workload (without "Benchmark"),
// peer and GOMAXPROCS suffix ("-2"). go test writes no suffix when
// GOMAXPROCS is 1, and a peer's name may hold a '-' (xrate-map), so only
// a '-' followed by digits alone is a suffix.
func split(name string) (work, peer, procs string, ok bool) {
	i := strings.Index(name, "/peer=")
	if i < 0 {
		return "", "", "", false
	}
	peer, procs = cutProcs(name[i+len("/peer="):])
	return strings.TrimPrefix(name[:i], "Benchmark"), peer, procs, true
}

// cutProcs cuts a GOMAXPROCS suffix, a '-' and digits, off s.
func cutProcs(s string) (string, string) {
	j := strings.LastIndexByte(s, '-')
	if j < 0 || j+1 == len(s) || strings.Trim(s[j+1:], "0123456789") != "" {
		return s, ""
	}
	return s[:j], s[j:]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func format(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case unit == "sec/op":
		return strconv.FormatFloat(v*1e9, 'f', 1, 64) + " ns"
	case unit == "ns/op" || unit == "cpu-ns/op":
		return strconv.FormatFloat(v, 'f', 1, 64) + " ns"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func write(w io.Writer, rows map[string]map[string]sample, order []string, failed map[string]int, unit string) error {
	if unit == "sec/op" {
		unit = "ns/op" // go test's raw unit
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "| workload | ratelimit | fastest peer library | ratio | ratelimit allocs | peer allocs | xrate-map ratio | baseline |\n")
	fmt.Fprintf(bw, "|---|---:|---|---:|---:|---:|---:|---:|\n")
	for _, work := range order {
		ps := rows[work]
		our, ok := ps[ours]
		if !ok {
			continue
		}
		best, bestV := "", math.Inf(1)
		for _, name := range libraries {
			if s, ok := ps[name]; ok {
				if v := median(s[unit]); v < bestV {
					best, bestV = name, v
				}
			}
		}
		ov := median(our[unit])
		ratio := func(name string) string {
			s, ok := ps[name]
			if !ok {
				return "–"
			}
			return fmt.Sprintf("%.2fx", ov/median(s[unit]))
		}
		bestCol, ratioCol, peerAllocs := "–", "–", "–"
		if best != "" {
			bestCol = fmt.Sprintf("%s %s", best, format(bestV, unit))
			ratioCol = "**" + ratio(best) + "**"
			peerAllocs = format(median(ps[best]["allocs/op"]), "allocs/op")
		}
		base := "–"
		if s, ok := ps["baseline"]; ok {
			base = format(median(s[unit]), unit)
		}
		if m := missing(work, ps, failed, unit); m != "" {
			work += " (incomplete: " + m + ")"
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", work, format(ov, unit), bestCol, ratioCol,
			format(median(our["allocs/op"]), "allocs/op"), peerAllocs, ratio("xrate-map"), base)
	}
	return bw.Flush()
}

// missing names ratelimit and the peer libraries whose medians in the row
// rest on fewer runs than the row's most, failed runs included, as "throttled
// 5/6": a run that failed, often a slow one on a busy machine, would
// otherwise quietly leave the median, and a peer that failed in every run
// would leave the comparison. A library that did not run at all (no store
// call) is not named.
func missing(work string, ps map[string]sample, failed map[string]int, unit string) string {
	base, _ := cutProcs(work)
	most := 0
	for _, s := range ps {
		most = max(most, len(s[unit]))
	}
	var out []string
	for _, name := range append([]string{ours}, libraries...) {
		s, ran := ps[name]
		n, f := len(s[unit]), failed[base+"/"+name]
		if (ran || f > 0) && (n < most || f > 0) {
			out = append(out, fmt.Sprintf("%s %d/%d", name, n, max(most, n+f)))
		}
	}
	return strings.Join(out, ", ")
}
