#!/usr/bin/env bash
# Build and cache hack/kstatus: kstatus's verdict for objects (sigs.k8s.io/cli-utils
# pkg/kstatus/status from the Go module proxy, the library Flux computes health with),
# for the tests of the pools' and BootcNodes' kstatus conditions (e2e/test_gitops.py).
# Output: $BOOTC_OPERATOR_CACHE/bin/kstatus-<cli-utils version>-<hash of its sources>/kstatus.
# Prints that binary's path on stdout. A warm cache costs a hash and a stat. A cold
# build (empty Go caches) took 3 min here on the loaded machine: 130 MB of modules,
# 168 MB of Go build cache, a 9 MB binary.
# Concurrent invocations build once and never see a partly written binary
# (hack/lib/cache.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$ROOT/hack/lib/cache.sh"
SRC="$ROOT/hack/kstatus"
VERSION="$(sed -n 's/^\s*sigs\.k8s\.io\/cli-utils \(v[^ ]*\).*/\1/p' "$SRC/go.mod")"
[[ -n "$VERSION" ]] || { echo "build-kstatus: error: no sigs.k8s.io/cli-utils in $SRC/go.mod" >&2; exit 1; }
# its sources and the shared reader of objects it builds in (hack/goobjects)
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" "$ROOT"/hack/goobjects/* | sha256sum | cut -c1-16)"
OUT="$(cache_root)/bin/kstatus-$VERSION-$HASH"

have() { [[ -x "$OUT/kstatus" ]]; }

build() {
  command -v go >/dev/null || { echo "build-kstatus: error: Go toolchain not found" >&2; exit 1; }
  echo "build-kstatus: building $OUT/kstatus (cli-utils $VERSION)" >&2
  (cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -o "$1/kstatus" .)
  cache_install "$1/kstatus" "$OUT/kstatus"
}

cache_build_once build-kstatus "$OUT" have build
echo "$OUT/kstatus"
