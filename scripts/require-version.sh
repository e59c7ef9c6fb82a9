#!/usr/bin/env bash
# require-version.sh raises, in every module's go.mod, each requirement of
# a library module of this repository to the version about to be tagged,
# keeping the replace beside it (see RELEASING.md). Modules and library
# modules are those of scripts/modules.sh.
#
# Usage: bash scripts/require-version.sh v0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: require-version.sh vX.Y.Z}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "require-version: $version is not a version such as v0.2.0" >&2
	exit 2
fi

mapfile -t mods < <(bash scripts/modules.sh --all)
mapfile -t libs < <(bash scripts/modules.sh)
libpaths=()
for d in "${libs[@]}"; do
	libpaths+=("$(sed -n 's/^module[[:space:]]*"\{0,1\}\([^"[:space:]]*\).*/\1/p' "$d/go.mod")")
done
for d in "${mods[@]}"; do
	# A requirement, unlike a replace's old path, always has a version.
	reqs=$(go -C "$d" mod edit -json | tr -d ' \t\n')
	for p in "${libpaths[@]}"; do
		if [[ $reqs == *"{\"Path\":\"$p\",\"Version\":"* ]]; then
			go -C "$d" mod edit -require="$p@$version"
			echo "require-version: $d/go.mod requires $p $version"
		fi
	done
done
