#!/usr/bin/env bash
# release-check.sh checks that a stranger could install every library
# module of the working tree, as it would be published at a version.
#
#   bash scripts/release-check.sh              # candidate version v0.1.0
#   bash scripts/release-check.sh v0.2.0       # another candidate
#   bash scripts/release-check.sh --self-test  # plant faults, want failures
#
# Modules and library modules (the ones published) are those of
# scripts/modules.sh: every go.mod git would commit, the library modules
# being all but those under examples/, benchmarks/ and scripts/ (the tools
# this script runs live in scripts/, a module of its own, to keep
# golang.org/x/mod and x/tools out of the library modules' go.mod).
#
# Steps, each failure naming the module:
#  1. go.mod files (scripts/internal/modcheck): no requirement of the
#     placeholder v0.0.0-00010101000000-000000000000; every requirement of
#     a module of the repository has a replace by its directory; a library
#     module has a LICENSE of its own.
#  2. Packs the files git would commit of each library module at the
#     version into a temporary file:// module proxy
#     (scripts/internal/modpack, golang.org/x/mod/zip).
#  3. For each library module alone, in a fresh empty module: go get
#     <module>@<version> through that proxy (then the module cache and the
#     usual proxy for third-party modules; a private module cache, and no
#     checksum database for github.com/slidelog/ratelimit), then writes
#     the README's quick start (the Go block after <!-- quickstart -->) as
#     main.go with the imports goimports finds (scripts/internal/quickstart),
#     and runs go vet and go build on it.
#  4. API compatibility: with an earlier tag of the module (vX.Y.Z for the
#     root, redisstore/vX.Y.Z for redisstore...), gorelease compares the
#     working tree with the latest before the candidate, and incompatible
#     changes fail the check unless the candidate is a new minor version
#     (major from v1 on); with no earlier tag, it says so and skips.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
placeholder=v0.0.0-00010101000000-000000000000
gorelease_version=v0.0.0-20261113113407-e3970619a1a4 # golang.org/x/exp

modules() { bash "$root/scripts/modules.sh" --all; }
library_modules() { bash "$root/scripts/modules.sh"; }

# module_path prints the module path declared by the go.mod in $1.
module_path() {
	sed -n 's/^module[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$1/go.mod"
}

# series prints what must change for an incompatible release: the minor
# version under v1 (v0.3 of v0.3.2), the major from v1 on (v2 of v2.1.0).
series() {
	if [[ $1 == v0.* ]]; then cut -d. -f1,2 <<<"$1"; else cut -d. -f1 <<<"$1"; fi
}

self_test() {
	local out rc
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "release-check self-test: copies of the tree in $tmp"

	# copy makes a copy of the files git would commit, as a git
	# repository of its own, so that module discovery works the same.
	copy() {
		mkdir -p "$1"
		git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
			[[ -f $f ]] && printf '%s\0' "$f"
		done | tar --null -T - -cf - | tar -xf - -C "$1"
		git -C "$1" init -q
		git -C "$1" add -A
	}

	# Case 1: a library module requires the placeholder.
	local lib
	lib=$(library_modules | grep -v '^\.$' | head -n1)
	lib=${lib:-.}
	copy "$tmp/placeholder"
	(cd "$tmp/placeholder/$lib" && go mod edit -require="github.com/slidelog/ratelimit@$placeholder")
	set +e
	out=$(bash "$tmp/placeholder/scripts/release-check.sh" 2>&1)
	rc=$?
	set -e
	if ((rc == 0)) || ! grep -q "$lib/go.mod requires github.com/slidelog/ratelimit at the placeholder" <<<"$out"; then
		echo "$out"
		echo "release-check self-test: FAIL: a placeholder planted in $lib/go.mod went unnoticed (exit $rc)" >&2
		exit 1
	fi
	echo "release-check self-test: ok, the placeholder planted in $lib/go.mod fails the check:"
	grep -E '^(modcheck|release-check):' <<<"$out" | sed 's/^/    /'

	# Case 2: what only a stranger's install shows: a library module that
	# requires a version of the root that is never packed, and a quick
	# start that does not compile on its own.
	copy "$tmp/install"
	local mp
	mp=$(module_path "$tmp/install/$lib")
	(cd "$tmp/install/$lib" && go mod edit -require="github.com/slidelog/ratelimit@v0.99.0")
	# The root's quick start is a whole program: the call goes in main.
	sed -i '0,/^func main() {$/s//func main() {\n\tundefinedInQuickStart()/' "$tmp/install/README.md"
	set +e
	out=$(bash "$tmp/install/scripts/release-check.sh" 2>&1)
	rc=$?
	set -e
	if ((rc == 0)) ||
		! grep -q "^release-check: FAIL: .* (in [0-9]*s)$" <<<"$out" ||
		! grep -q "release-check: FAIL: $mp@v0.1.0: go get" <<<"$out" ||
		! grep -q "release-check: FAIL: github.com/slidelog/ratelimit@v0.1.0: quick start" <<<"$out" ||
		! grep -q "README.md:[0-9]*:[0-9]*: undefined: undefinedInQuickStart" <<<"$out"; then
		echo "$out"
		echo "release-check self-test: FAIL: an uninstallable $mp or a broken quick start went unnoticed (exit $rc)" >&2
		exit 1
	fi
	echo "release-check self-test: ok, an uninstallable $mp and a broken root quick start fail the check:"
	grep -E '^release-check: FAIL|undefinedInQuickStart|v0.99.0' <<<"$out" | sed 's/^/    /'
	echo "release-check self-test: passed"
}

if [[ ${1:-} == --self-test ]]; then
	self_test
	exit 0
fi
version=${1:-v0.1.0}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release-check: $version is not a version such as v0.1.0" >&2
	exit 2
fi

start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mapfile -t all < <(modules)
mapfile -t libs < <(library_modules)
echo "release-check: $version; library modules: ${libs[*]}; not published: $(comm -23 <(printf '%s\n' "${all[@]}") <(printf '%s\n' "${libs[@]}") | tr '\n' ' ')"

go -C scripts build -o "$tmp/bin/" ./internal/modcheck ./internal/modpack ./internal/quickstart

# 1. go.mod files.
if ! "$tmp/bin/modcheck" -lib "${libs[*]}" "${all[@]}"; then
	echo "release-check: FAIL: the problems above would keep strangers from installing or redistributing the library modules" >&2
	exit 1
fi

# 2. Pack the files git would commit.
tree=$tmp/tree
mkdir -p "$tree"
git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
	[[ -f $f ]] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$tree"
proxy=$tmp/proxy
(cd "$tree" && "$tmp/bin/modpack" -version "$version" -out "$proxy" "${libs[@]}")

# The latest earlier tag of each library module: packed too, as it is
# published by then, for the API check below and for nested modules whose
# require of another module stays at an earlier version.
# A proxy of their own: gorelease refuses a version that a proxy has.
declare -A bases=()
baseproxy=$tmp/baseproxy
mkdir -p "$baseproxy"
for dir in "${libs[@]}"; do
	prefix=""
	[[ $dir != . ]] && prefix="$dir/"
	base=$({ git tag -l "${prefix}v*" | sed "s|^${prefix}||" | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+' || true
		echo "$version"; } | sort -V -u | grep -B1 -x -- "$version" | head -n1)
	[[ $base == "$version" ]] && continue
	bases[$dir]=$base
	rm -rf "$tmp/base"
	mkdir -p "$tmp/base"
	git archive "${prefix}$base" | tar -xf - -C "$tmp/base"
	(cd "$tmp/base" && "$tmp/bin/modpack" -version "$base" -out "$baseproxy" "$dir")
done
rm -rf "$tmp/base"

# 3. Install each library module alone, as a stranger would. The packed
# modules are not in sum.golang.org: GONOSUMDB skips the checksum database
# for them alone (GOPRIVATE would also skip the proxy and try git).
# -mod=mod lets go build add a requirement that the quick start's imports
# need; -trimpath keeps build cache entries valid across the temporary
# module caches; the private module cache keeps the packed versions out of
# the user's.
export GOPROXY="file://$proxy,file://$baseproxy,file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
export GONOSUMDB=github.com/slidelog/ratelimit GOWORK=off
export GOFLAGS="-mod=mod -modcacherw -trimpath"
export GOMODCACHE=$tmp/modcache
failed=()
for dir in "${libs[@]}"; do
	mp=$(module_path "$tree/$dir")
	c=$tmp/consumer/$dir
	mkdir -p "$c"
	(cd "$c" && go mod init example.com/stranger >/dev/null 2>&1)
	readme=$dir/README.md
	[[ $dir == . ]] && readme=README.md
	echo "== $mp@$version: go get, quick start of $readme, go vet, go build"
	if ! (cd "$c" && go get "$mp@$version"); then
		echo "release-check: FAIL: $mp@$version: go get failed: a stranger cannot install it" >&2
		failed+=("$mp")
		continue
	fi
	if ! "$tmp/bin/quickstart" -dir "$c" -o main.go "$root/$readme" ||
		! (cd "$c" && go vet . && go build -o /dev/null .); then
		echo "release-check: FAIL: $mp@$version: quick start of $readme does not build in a stranger's module" >&2
		failed+=("$mp")
	fi
done
unset GOPROXY GONOSUMDB GOFLAGS GOMODCACHE

# 4. API compatibility with the latest earlier tag of each module.
if ((${#bases[@]} > 0)); then
	command -v gorelease >/dev/null || go install "golang.org/x/exp/cmd/gorelease@$gorelease_version"
	# gorelease wants the module in a clean git repository.
	git -C "$tree" init -q
	git -C "$tree" add -A
	git -C "$tree" -c user.name=release-check -c user.email=release-check@localhost commit -qm "release candidate"
fi
for dir in "${libs[@]}"; do
	mp=$(module_path "$tree/$dir")
	prefix=""
	[[ $dir != . ]] && prefix="$dir/"
	if [[ -z ${bases[$dir]:-} ]]; then
		echo "== $mp: no tag ${prefix}v* before $version: API compatibility check skipped"
		continue
	fi
	echo "== $mp: API of the working tree against ${prefix}${bases[$dir]} (gorelease)"
	# gorelease looks at the module as users get it, without its replaces,
	# and so reports that go.sum lacks the sums of the repository's other
	# modules, which go mod tidy never writes while they are replaced: the
	# verdict is the summary's "is a valid semantic version".
	out=$(cd "$tree/$dir" && GOPROXY="file://$baseproxy,$(go env GOPROXY)" GONOSUMDB=github.com/slidelog/ratelimit \
		GOFLAGS="-mod=mod -modcacherw" GOMODCACHE="$tmp/modcache" gorelease -base="${bases[$dir]}" -version="$version" 2>&1) || true
	echo "$out"
	if ! grep -q "is a valid semantic version for this release" <<<"$out"; then
		echo "release-check: FAIL: $mp: $version is not a valid next version after ${bases[$dir]} (see gorelease above)" >&2
		failed+=("$mp")
	elif grep -q '^## incompatible changes' <<<"$out" && [[ $(series "$version") == $(series "${bases[$dir]}") ]]; then
		# gorelease accepts anything in v0; RELEASING.md asks for a new
		# minor version at least.
		echo "release-check: FAIL: $mp: incompatible API changes since ${bases[$dir]} (above) need a new $( [[ $version == v0.* ]] && echo minor || echo major ) version, not $version" >&2
		failed+=("$mp")
	fi
done

if ((${#failed[@]} > 0)); then
	echo "release-check: FAIL: ${failed[*]} (in $((SECONDS - start))s)" >&2
	exit 1
fi
echo "release-check: every library module installs alone at $version and builds its quick start (${libs[*]}; $((SECONDS - start))s)"
