#!/usr/bin/env bash
# Starts stripe-mock on a free loopback port for manual runs and prints the
# line to export, e.g.:
#
#   eval "$(scripts/stripe-mock.sh)"   # sets PAYSTATE_STRIPE_MOCK_URL
#   go test ./psp/stripe/...           # the tests reuse this stripe-mock
#   kill "$STRIPE_MOCK_PID"
#
# The tests do not need it: they install and start stripe-mock themselves
# (psp/stripe/stripetest). This script installs the same version into
# $(go env GOPATH)/bin (or GOBIN) if it is missing there.
set -euo pipefail

version=v0.203.0
bindir=$(go env GOBIN)
if [ -z "$bindir" ]; then
  bindir="$(go env GOPATH | cut -d: -f1)/bin"
fi
bin="$bindir/stripe-mock"

if ! go version -m "$bin" 2>/dev/null | grep -q "github.com/stripe/stripe-mock[[:space:]]*$version"; then
  echo "installing stripe-mock $version into $bindir" >&2
  (cd "$(mktemp -d)" && GOFLAGS= GOWORK=off go install "github.com/stripe/stripe-mock@$version")
fi

log=$(mktemp)
"$bin" -http-addr 127.0.0.1:0 -https-addr 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  addr=$(sed -n 's/^Listening for HTTP at address: //p' "$log")
  if [ -n "$addr" ]; then
    echo "export PAYSTATE_STRIPE_MOCK_URL=http://$addr STRIPE_MOCK_PID=$pid"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$log" >&2
    echo "stripe-mock exited before listening" >&2
    exit 1
  fi
  sleep 0.1
done
kill "$pid"
echo "stripe-mock did not listen within 30 s" >&2
exit 1
