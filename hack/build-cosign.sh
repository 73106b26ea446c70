#!/usr/bin/env bash
# Build and cache cosign (v2, github.com/sigstore/cosign/v2/cmd/cosign from the Go
# module proxy; not packaged in Debian 12, whose podman and skopeo refuse to make
# sigstore signatures: "Debian-local change: sigstore disabled"). The e2e tier signs
# its test images with it (hack/testenv/cosign.py) to check the operator's signature
# verification against a real signer. Output: $BOOTC_OPERATOR_CACHE/bin/cosign-<version>/cosign.
# Prints that binary's path on stdout. A warm cache costs a stat; a cold build took
# 11m40s here (3m30s of CPU; mostly module downloads). Concurrent invocations build
# once and never see a partly written binary (hack/lib/cache.sh).
set -euo pipefail
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

COSIGN_VERSION="${COSIGN_VERSION:-v2.6.5}"
OUT="$(cache_root)/bin/cosign-$COSIGN_VERSION"

have() { [[ -x "$OUT/cosign" ]]; }

build() {
  command -v go >/dev/null || { echo "build-cosign: error: Go toolchain not found (needed to build cosign $COSIGN_VERSION)" >&2; exit 1; }
  echo "build-cosign: building cosign $COSIGN_VERSION (a cold build takes minutes)" >&2
  # The version stamp of cosign's Makefile, so `cosign version` tells which it is.
  local ld="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION"
  CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN="$1" \
    go install -trimpath -ldflags "$ld" "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
  cache_install "$1/cosign" "$OUT/cosign"
}

cache_build_once build-cosign "$OUT" have build
echo "$OUT/cosign"
