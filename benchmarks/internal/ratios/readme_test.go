package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The README's Performance section quotes the CPU-time table of
// RESULTS.md, "the published run": its rows must be that table's middleware
// rows, figure for figure (rounded to whole nanoseconds), or the README
// describes a run nobody can look up. Whoever reruns scripts/bench.sh
// updates the README with it.
func TestReadmeQuotesResults(t *testing.T) {
	results := readText(t, "../../RESULTS.md")
	readme := readText(t, "../../../README.md")
	cpu := between(t, results, "CPU time per request", "Wall time per request")
	perf := between(t, readme, "## Performance", "\n## ")
	for _, c := range []struct{ work, label string }{
		{"Middleware/work=HotKey", "one hot key, allowed"},
		{"Middleware/work=ManyKeys", "100,000 keys in turn"},
		{"Middleware/work=Rejected", "refused, `429`"},
		{"Middleware/work=NewKey", "a new key each request"},
	} {
		want := quoted(t, c.label, row(t, cpu, c.work))
		if !strings.Contains(perf, want+"\n") {
			t.Errorf("README's Performance section lacks the row of RESULTS.md's %s:\n%s", c.work, want)
		}
	}
}

// quoted returns the README's row for a row of the ratios table: the
// label, ratelimit's figure, the fastest peer library's and the ratio.
func quoted(t *testing.T, label, row string) string {
	t.Helper()
	f := strings.Split(row, "|")
	if len(f) < 5 {
		t.Fatalf("row %q: too few columns", row)
	}
	name, peer, ok := strings.Cut(strings.TrimSpace(f[3]), " ")
	if !ok {
		t.Fatalf("row %q: no fastest peer library", row)
	}
	ratio := strings.Trim(strings.TrimSpace(f[4]), "*")
	return fmt.Sprintf("| %s | %s | %s %s | %s |", label, roundNs(t, f[2]), name, roundNs(t, peer), ratio)
}

// roundNs turns the table's "1118.5 ns" into the README's "1,119 ns".
func roundNs(t *testing.T, s string) string {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), " ns"), 64)
	if err != nil {
		t.Fatalf("figure %q: %v", s, err)
	}
	d := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return d + " ns"
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// between returns the text of s from start to the next end after it.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, s, ok := strings.Cut(s, start)
	if !ok {
		t.Fatalf("no %q", start)
	}
	s, _, _ = strings.Cut(s, end)
	return s
}
