#!/usr/bin/env bash
# Build and cache hack/promql-check (Prometheus' own PromQL parser, from the Go
# module proxy) for the Prometheus kit's tests. Output:
# $BOOTC_OPERATOR_CACHE/bin/promql-check-<hash of its sources>/promql-check.
# Prints that binary's path on stdout. A warm cache costs a hash and a stat.
# Concurrent invocations build once and never see a partly written binary
# (hack/lib/cache.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$ROOT/hack/lib/cache.sh"
SRC="$ROOT/hack/promql-check"
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-16)"
OUT="$(cache_root)/bin/promql-check-$HASH"

have() { [[ -x "$OUT/promql-check" ]]; }

build() {
  command -v go >/dev/null || { echo "build-promql-check: error: Go toolchain not found" >&2; exit 1; }
  echo "build-promql-check: building $OUT/promql-check" >&2
  (cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -o "$1/promql-check" .)
  cache_install "$1/promql-check" "$OUT/promql-check"
}

cache_build_once build-promql-check "$OUT" have build
echo "$OUT/promql-check"
