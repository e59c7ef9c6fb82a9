// Package benchmarks compares ratelimit with the main Go rate-limit
// middleware on the same workloads, side by side in one run. It is a
// separate module so that the peers never enter ratelimit's own go.mod.
//
// Run it with scripts/bench.sh from the repository root, which writes
// RESULTS.md beside this file; see that file for the workloads and how to
// read the figures.
package benchmarks
