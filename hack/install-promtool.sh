#!/usr/bin/env bash
# Install Debian's `prometheus` package for its `promtool`, with which the tests
# of the Prometheus kit check and unit-test the alerting rules
# (e2e/test_prometheus_kit.py). Idempotent: silent and instant when promtool is
# there. Prints promtool's path on stdout. Needs root (or passwordless sudo)
# the first time. The package's own service is never started: a policy-rc.d
# forbids it for the install (hack/lib/apt-install.sh).
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
# shellcheck source=lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"
apt_install_quietly install-promtool prometheus " for promtool"
command -v promtool || { echo "install-promtool: error: installed, but no promtool" >&2; exit 1; }
