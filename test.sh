#!/usr/bin/env bash
# The test command of the README: every package, with the race detector.
# Extra arguments go to `go test` (e.g. ./test.sh -run TestE2E -v).
set -euo pipefail
cd "$(dirname "$0")"
exec go test -race -count=1 -timeout 20m "$@" ./...
