#!/usr/bin/env bash
# Installs Prometheus' promtool (Debian's prometheus package) for the test
# that checks /metrics and deploy/prometheus/alerts.yml with it
# (httpd/metrics_test.go) when promtool is missing. Needs root or sudo and
# Debian's package archive; does nothing when promtool is present. The
# package's service is not started (no init system runs in CI; policy-rc.d
# refuses it elsewhere).
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "install-promtool: promtool is missing and this is not root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends prometheus
promtool --version | head -n 1
