#!/usr/bin/env bash
# Install Debian's `prometheus` package for the server the e2e tier runs on loopback
# (hack/testenv/prometheus.py: it scrapes the simulated cluster's controllers and
# daemons and evaluates the project's alerting rules; `hack/sim up --prometheus`).
# The same package brings promtool (hack/install-promtool.sh). Idempotent: silent and
# instant when the binary is already there. Prints nothing on stdout.
# Needs root (or passwordless sudo) the first time. The package's own service is
# never started here: a policy-rc.d forbids it for the install (hack/lib/apt-install.sh).
set -euo pipefail
BIN="${BOOTC_OPERATOR_PROMETHEUS_BIN:-/usr/bin/prometheus}"
if [[ -x "$BIN" ]] || command -v prometheus >/dev/null 2>&1; then exit 0; fi
# shellcheck source=lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"
apt_install_quietly install-prometheus prometheus
if ! [[ -x "$BIN" ]] && ! command -v prometheus >/dev/null 2>&1; then
  echo "install-prometheus: error: prometheus installed but no binary found" >&2
  exit 1
fi
