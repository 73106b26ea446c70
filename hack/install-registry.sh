#!/usr/bin/env bash
# Install Debian's `docker-registry` (the CNCF distribution registry, v2 API) for the
# e2e tier, which runs it on loopback (hack/testenv/registry.py). Idempotent: silent
# and instant when the binary is already there. Prints nothing on stdout.
# Needs root (or passwordless sudo) the first time. The package's own service is
# never started here: a policy-rc.d forbids it for the install.
set -euo pipefail
BIN="${BOOTC_OPERATOR_REGISTRY_BIN:-/usr/bin/docker-registry}"
if [[ -x "$BIN" ]] || command -v docker-registry >/dev/null 2>&1; then exit 0; fi
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
    echo "install-registry: error: need root to apt-get install docker-registry" >&2
    exit 1
  fi
fi
echo "install-registry: installing docker-registry (Debian package)" >&2
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
apt_install() { "${SUDO[@]}" apt-get install -y -q --no-install-recommends docker-registry; }
if ! apt_install >"$LOG" 2>&1; then
  # Stale or missing package lists: refresh once, then try again.
  if ! { "${SUDO[@]}" apt-get update -q && apt_install; } >>"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "install-registry: error: apt-get install docker-registry failed (output above)" >&2
    exit 1
  fi
fi
if ! [[ -x "$BIN" ]] && ! command -v docker-registry >/dev/null 2>&1; then
  echo "install-registry: error: docker-registry installed but no binary found" >&2
  exit 1
fi
