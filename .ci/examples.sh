#!/usr/bin/env bash
# Vets and tests the examples module (framework integrations, demo,
# loadgen, plot), which has its own go.mod with a replace to the root.
set -euo pipefail
cd "$(dirname "$0")/../examples"
go vet ./...
go test -race -count=1 ./...
