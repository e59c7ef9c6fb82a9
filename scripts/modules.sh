#!/usr/bin/env bash
# modules.sh prints the directory of each module of the repository,
# relative to its root, one a line: with --all every module, without it
# the library modules only, the ones published and tagged.
#
# Modules: every go.mod that git would commit (tracked, or untracked and
# not ignored), so that a module being added counts before its first
# commit. Library modules: all of them except those under examples/,
# benchmarks/ and scripts/, which are never published (scripts/ holds the
# release tools, in a module of their own to keep golang.org/x/mod and
# x/tools out of the library modules' go.mod).
#
# Usage: bash scripts/modules.sh [--all]
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -co --exclude-standard -- go.mod '*/go.mod' |
	while read -r f; do if [[ -f $f ]]; then dirname "$f"; fi; done | sort -u |
	if [[ ${1:-} == --all ]]; then cat; else grep -Ev '^(examples|benchmarks|scripts)(/|$)' || true; fi
