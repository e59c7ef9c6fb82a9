#!/usr/bin/env bash
# Runs every fuzz target of every package, in every module of the
# repository, for a bounded time each (FUZZTIME, default 10s; any value go
# test -fuzztime accepts, e.g. 30s or 5000x). New crashers land in
# <package>/testdata/fuzz/<target>/: commit them with the fix so that they
# run in every go test from then on.
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
