#!/usr/bin/env bash
# Install Debian's `prometheus` package for its `promtool`, with which the tests
# of the Prometheus kit check and unit-test the alerting rules
# (e2e/test_prometheus_kit.py). Idempotent: silent and instant when promtool is
# there. Prints promtool's path on stdout. Needs root (or passwordless sudo)
# the first time. The package's own service is never started: a policy-rc.d
# forbids it for the install.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
    echo "install-promtool: error: need root to apt-get install prometheus" >&2
    exit 1
  fi
fi
echo "install-promtool: installing prometheus (Debian package) for promtool" >&2
LOG="$(mktemp)"
POLICY_CREATED=0
cleanup() {
  rm -f "$LOG"
  if [[ "$POLICY_CREATED" == 1 ]]; then "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d; fi
}
trap cleanup EXIT
# Keep the package's service from being started (there may be no init system at all).
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${SUDO[@]}" chmod 0755 /usr/sbin/policy-rc.d
  POLICY_CREATED=1
fi
export DEBIAN_FRONTEND=noninteractive
apt_install() { "${SUDO[@]}" apt-get install -y -q --no-install-recommends prometheus; }
if ! apt_install >"$LOG" 2>&1; then
  # Stale or missing package lists: refresh once, then try again.
  if ! { "${SUDO[@]}" apt-get update -q && apt_install; } >>"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "install-promtool: error: apt-get install prometheus failed (output above)" >&2
    exit 1
  fi
fi
command -v promtool || { echo "install-promtool: error: installed, but no promtool" >&2; exit 1; }
