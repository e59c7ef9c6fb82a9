#!/usr/bin/env bash
# Runs every test of every module, under the race detector. Tests that need
# Redis fail (not skip) here: RATELIMIT_REQUIRE_REDIS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
export RATELIMIT_REQUIRE_REDIS="${RATELIMIT_REQUIRE_REDIS:-1}"

for mod in . $(git ls-files '*/go.mod' | xargs -rn1 dirname); do
	echo "== go test -race $mod"
	(cd "$mod" && go test -race -count=1 ./...)
done
