#!/usr/bin/env bash
# Build and cache hack/argocd-health: Argo CD's own health code (its settings manager
# reading an argocd-cm, its gopher-lua sandbox running the Lua health checks;
# github.com/argoproj/argo-cd/v3 from the Go module proxy), for the tests of
# manifests/argocd (e2e/test_gitops.py, e2e/test_fleet.py).
# Output: $BOOTC_OPERATOR_CACHE/bin/argocd-health-<Argo CD version>-<hash of its sources>/argocd-health.
# Prints that binary's path on stdout. A warm cache costs a hash and a stat. A cold
# build (empty Go module and build caches) took 14 min here on the loaded shared
# 2-core machine (5m30s of CPU; Argo CD brings much of Kubernetes along): 814 MB of
# modules downloaded, 1.2 GB of Go build cache, an 86 MB binary.
# Concurrent invocations build once and never see a partly written binary
# (hack/lib/cache.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$ROOT/hack/lib/cache.sh"
SRC="$ROOT/hack/argocd-health"
VERSION="$(sed -n 's/^\s*github\.com\/argoproj\/argo-cd\/v3 \(v[^ ]*\).*/\1/p' "$SRC/go.mod")"
[[ -n "$VERSION" ]] || { echo "build-argocd-health: error: no github.com/argoproj/argo-cd/v3 in $SRC/go.mod" >&2; exit 1; }
# its sources and the shared reader of objects it builds in (hack/goobjects)
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" "$ROOT"/hack/goobjects/* | sha256sum | cut -c1-16)"
OUT="$(cache_root)/bin/argocd-health-$VERSION-$HASH"

have() { [[ -x "$OUT/argocd-health" ]]; }

build() {
  command -v go >/dev/null || { echo "build-argocd-health: error: Go toolchain not found" >&2; exit 1; }
  echo "build-argocd-health: building $OUT/argocd-health (Argo CD $VERSION; a cold build takes minutes)" >&2
  (cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -o "$1/argocd-health" .)
  cache_install "$1/argocd-health" "$OUT/argocd-health"
}

cache_build_once build-argocd-health "$OUT" have build
echo "$OUT/argocd-health"
