#!/usr/bin/env bash
# Install Debian's `docker-registry` (the CNCF distribution registry, v2 API) for the
# e2e tier, which runs it on loopback (hack/testenv/registry.py). Idempotent: silent
# and instant when the binary is already there. Prints nothing on stdout.
# Needs root (or passwordless sudo) the first time. The package's own service is
# never started here: a policy-rc.d forbids it for the install (hack/lib/apt-install.sh).
set -euo pipefail
BIN="${BOOTC_OPERATOR_REGISTRY_BIN:-/usr/bin/docker-registry}"
if [[ -x "$BIN" ]] || command -v docker-registry >/dev/null 2>&1; then exit 0; fi
# shellcheck source=lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"
apt_install_quietly install-registry docker-registry
if ! [[ -x "$BIN" ]] && ! command -v docker-registry >/dev/null 2>&1; then
  echo "install-registry: error: docker-registry installed but no binary found" >&2
  exit 1
fi
