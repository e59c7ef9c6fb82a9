#!/usr/bin/env bash
# Runs every test of every module, under the race detector, and ends with
# one line per module saying whether it passed. A module that fails does
# not stop the others; the script exits 1 if any failed. Tests that need
# Redis fail (not skip) here: RATELIMIT_REQUIRE_REDIS=1.
set -uo pipefail
cd "$(dirname "$0")/.."
export RATELIMIT_REQUIRE_REDIS="${RATELIMIT_REQUIRE_REDIS:-1}"
export REDIS_ADDR="${REDIS_ADDR:-127.0.0.1:6379}"

summary=()
failed=0
for mod in . $(git ls-files '*/go.mod' | xargs -rn1 dirname); do
	echo "== go test -race $mod"
	start=$SECONDS
	if (cd "$mod" && go test -race -count=1 ./...); then
		summary+=("ok    $mod ($((SECONDS - start)) s)")
	else
		summary+=("FAIL  $mod ($((SECONDS - start)) s)")
		failed=1
	fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
