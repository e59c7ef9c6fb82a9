#!/usr/bin/env bash
# Runs every fuzz target of every package, in every module of the
# repository, for a bounded number of inputs each (FUZZTIME, default
# 60000x; any value go test -fuzztime accepts, e.g. 200000x or 30s).
# Counts, not durations, by default: with a duration, Go 1.26's fuzz
# coordinator can report its own deadline as a failure ("context deadline
# exceeded", no crasher written) when a loaded machine delays a worker at
# the end (go.dev/issue/75804, fixed in Go 1.27); CI failed so once. New crashers land in
# <package>/testdata/fuzz/<target>/: commit them with the fix so that they
# run in every go test from then on.
#
# Usage: .ci/fuzz.sh            # from anywhere in the repository
#        FUZZTIME=1m .ci/fuzz.sh
set -euo pipefail

cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-60000x}"
# Minimizing each new interesting input may take go test's default of 60s,
# which would spend a short run on minimizing instead of fuzzing (seen with
# FuzzMemoryStore: no executions after the first 3s of 15); a count bounds
# it without a deadline.
minimize="${FUZZMINIMIZETIME:-2000x}"

# The packages that may hold fuzz targets: the directories of test files
# that declare one, tracked or new. go test -list then names the targets,
# so a match in a comment or a string costs only a listing.
mapfile -t dirs < <(git ls-files --cached --others --exclude-standard '*_test.go' |
	xargs -r grep -l '^func Fuzz' | xargs -rn1 dirname | sort -u)

# go test -fuzz takes one target of one package at a time; go -C runs it
# in whichever module holds the package.
n=0
for dir in "${dirs[@]}"; do
	# Listed apart, so that a package that does not build fails the run.
	list=$(go -C "$dir" test -list '^Fuzz' .)
	mapfile -t targets < <(grep '^Fuzz' <<<"$list" || true)
	for t in "${targets[@]}"; do
		echo "== $dir $t ($fuzztime)"
		go -C "$dir" test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" .
		n=$((n + 1))
	done
done
if [ "$n" -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz.sh: $n targets in ${#dirs[@]} packages passed"
