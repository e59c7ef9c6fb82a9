//go:build !unix

package benchmarks

import "time"

// processCPU is not measured here; cpu-ns/op is then not reported.
func processCPU() time.Duration { return 0 }
