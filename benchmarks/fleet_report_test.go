package benchmarks

// The fleet proof's markdown report: the machine, then a table per
// scenario, written to FLEET_OUT or logged.

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

type fleetReport struct {
	b strings.Builder
}

func (r *fleetReport) para(format string, args ...any) {
	fmt.Fprintf(&r.b, format+"\n\n", args...)
}

func (r *fleetReport) table(head []string, rows [][]string) {
	r.b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		r.b.WriteString("---|")
	}
	r.b.WriteString("\n")
	for _, row := range rows {
		r.b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	r.b.WriteString("\n")
}

// machine describes where the run ran.
func (r *fleetReport) machine(c *redis.Client) {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	r.table([]string{"machine", ""}, [][]string{
		{"CPU", cpu},
		{"nproc", fmt.Sprint(runtime.NumCPU())},
		{"redis-server", redisVersion(c) + " (private, loopback, `--save \"\" --appendonly no` unless a row says otherwise)"},
		{"Go", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{"date", time.Now().UTC().Format(time.RFC3339)},
	})
}

// write sends the report to FLEET_OUT, or to the test's log.
func (r *fleetReport) write(t *testing.T) {
	out := os.Getenv("FLEET_OUT")
	if out == "" {
		t.Log("\n" + r.b.String())
		return
	}
	if err := os.WriteFile(out, []byte(r.b.String()), 0o644); err != nil {
		t.Errorf("FLEET_OUT: %v", err)
		return
	}
	t.Logf("report written to %s", out)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func msList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, ms(d))
	}
	return strings.Join(s, ", ")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
