#!/usr/bin/env bash
# Build and cache hack/promql-check (Prometheus' own PromQL parser, from the Go
# module proxy) for the Prometheus kit's tests. Output:
# $BOOTC_OPERATOR_CACHE/bin/promql-check-<hash of its sources>/promql-check.
# Prints that binary's path on stdout. A warm cache costs a hash and a stat.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$ROOT/hack/promql-check"
CACHE="${BOOTC_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootc-operator}"
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-16)"
OUT="$CACHE/bin/promql-check-$HASH"
if [[ -x "$OUT/promql-check" ]]; then
  echo "$OUT/promql-check"
  exit 0
fi
command -v go >/dev/null || { echo "build-promql-check: error: Go toolchain not found" >&2; exit 1; }
mkdir -p "$OUT"
echo "build-promql-check: building $OUT/promql-check" >&2
(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
  go build -trimpath -ldflags "-s -w" -o "$OUT/promql-check.tmp" .)
mv "$OUT/promql-check.tmp" "$OUT/promql-check"
echo "$OUT/promql-check"
