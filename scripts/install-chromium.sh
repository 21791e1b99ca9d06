#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test
# (daemon/browser_test.go) when /usr/bin/chromium is missing. Needs root or
# sudo and Debian's package archive; does nothing when chromium is present.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "install-chromium: /usr/bin/chromium is missing and this is not root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium
/usr/bin/chromium --version
