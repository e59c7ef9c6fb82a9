package benchmarks

import (
	"testing"
	"time"
)

// A measure times the parallel part of a benchmark. Besides go test's
// wall-clock ns/op it reports cpu-ns/op: the CPU time of the whole process
// (every goroutine, the garbage collector included) per op. On a shared,
// busy machine wall time also counts the time other processes held the
// CPUs; CPU time does not, so it is the steadier figure to compare peers
// by there. With GOMAXPROCS=P and no other load, cpu-ns/op is about P
// times ns/op.
type measure struct {
	b   *testing.B
	cpu time.Duration
}

// startMeasure resets b's timer and starts the CPU clock.
func startMeasure(b *testing.B) *measure {
	b.ReportAllocs()
	b.ResetTimer()
	return &measure{b: b, cpu: processCPU()}
}

// stop stops b's timer and reports cpu-ns/op.
func (m *measure) stop() {
	m.b.StopTimer()
	if cpu := processCPU(); cpu > 0 {
		m.b.ReportMetric(float64(cpu-m.cpu)/float64(m.b.N), "cpu-ns/op")
	}
}
