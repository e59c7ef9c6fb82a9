#!/usr/bin/env bash
# readme-check.sh compiles the Go code blocks of every module's README.md
# (found by their go.mod: README.md, redisstore/README.md, and any module
# added later) and names the file and line of each error.
#
# The rule, which keeps the READMEs readable: a block may be a fragment.
# A marker, an HTML comment alone on the line before the opening fence,
# changes how a block is compiled; GitHub shows neither the comment nor any
# trace of it, and keeps the highlighting of ```go.
#
#   (no marker)          A fragment: the body of a function, compiled with
#                        the names of examples/internal/readme/placeholders.go
#                        in scope (l, hello, rdb, ...: what the README made
#                        elsewhere). A name a block uses and nothing
#                        declares is an error: declare it in the block, or
#                        add it to placeholders.go. A block of top-level
#                        declarations (func, type, var) is compiled as such.
#   <!-- snippets -->    Each paragraph (blank-line separated) of the block
#                        is a fragment in a scope of its own, so that
#                        independent snippets may reuse a name (r := ...).
#   <!-- quickstart -->  The module's quick start: the body of func main,
#                        with no placeholders; release-check.sh also builds
#                        it against the packed module in an empty module.
#                        One per library module's README.
#   <!-- nocompile -->   Not compiled (pseudo-code). Use it sparingly.
#
# A block whose first line is a package clause is a whole file, compiled
# alone. Imports are left out: goimports finds them in the examples module,
# which requires every library module, preferring the paths imported by
# placeholders.go (so echo is v4). A variable declared and not used is no
# error; every other compile error is.
#
# Usage: bash scripts/readme-check.sh [README.md...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
files=()
for f in "$@"; do files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
go -C "$root/scripts" run ./internal/readmecheck -root "$root" "${files[@]}"
