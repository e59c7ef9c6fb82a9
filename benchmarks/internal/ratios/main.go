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
	rows, order := parse(os.Stdin)
	if err := write(os.Stdout, rows, order, *unit); err != nil {
		log.Fatal(err)
	}
}

// parse returns the samples by workload and peer, and the workloads in the
// order first seen.
func parse(r io.Reader) (map[string]map[string]sample, []string) {
	rows := map[string]map[string]sample{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		i := strings.Index(name, "/peer=")
		if i < 0 {
			continue
		}
		work, peer := strings.TrimPrefix(name[:i], "Benchmark"), name[i+len("/peer="):]
		if j := strings.LastIndexByte(peer, '-'); j >= 0 { // GOMAXPROCS suffix
			work += peer[j:]
			peer = peer[:j]
		}
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
	return rows, order
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

func write(w io.Writer, rows map[string]map[string]sample, order []string, unit string) error {
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
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", work, format(ov, unit), bestCol, ratioCol,
			format(median(our["allocs/op"]), "allocs/op"), peerAllocs, ratio("xrate-map"), base)
	}
	return bw.Flush()
}
