#!/usr/bin/env bash
# Runs every fuzz target of the root package for a bounded time each
# (FUZZTIME, default 10s; any value go test -fuzztime accepts, e.g. 30s or
# 5000x). New crashers land in testdata/fuzz/<target>/: commit them with
# the fix so that they run in every go test from then on.
#
# Usage: .ci/fuzz.sh            # from anywhere in the repository
#        FUZZTIME=1m .ci/fuzz.sh
set -euo pipefail

cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
# Minimizing each new interesting input may take go test's default of 60s,
# which would spend a short run on minimizing instead of fuzzing (seen with
# FuzzMemoryStore: no executions after the first 3s of 15).
minimize="${FUZZMINIMIZETIME:-3s}"

# go test -fuzz takes one target at a time; list them from the package.
mapfile -t targets < <(go test -list '^Fuzz' . | grep '^Fuzz')
if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi

for t in "${targets[@]}"; do
	echo "== $t ($fuzztime)"
	go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" .
done
echo "fuzz.sh: ${#targets[@]} targets passed"
