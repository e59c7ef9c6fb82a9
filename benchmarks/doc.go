// Package benchmarks compares ratelimit with the main Go rate-limit
// middleware on the same workloads, side by side in one run. It is a
// separate module so that the peers never enter ratelimit's own go.mod.
//
// Run it with scripts/bench.sh from the repository root, which writes
// RESULTS.md beside this file; see that file for the workloads and how to
// read the figures.
//
// TestFleet is the fleet proof of redisstore: 4 processes of
// 16 goroutines on a private redis-server, every admission checked
// against its algorithm's bound, through disruptions, FailLocal and a
// Reset seen elsewhere, with the server's cost beside redis_rate's. It
// runs for about two minutes, so only when asked:
//
//	FLEET=1 FLEET_OUT=/tmp/fleet.md go test -run '^TestFleet$' -v -count=1 -timeout 15m .
//
// TestFleetSmoke, 2 processes for a second, runs with the other tests.
package benchmarks
