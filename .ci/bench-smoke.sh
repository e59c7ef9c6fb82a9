#!/usr/bin/env bash
# bench-smoke.sh runs every benchmark a few times, to keep them compiling
# and working without measuring anything (well under 2 minutes). The real
# measurements are scripts/bench.sh, never run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench . -benchtime 100x .
cd benchmarks
go vet ./...
go test -run '^$' -bench . -benchtime 100x ./...
go test -run 'TestHarness' ./...
