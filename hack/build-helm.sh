#!/usr/bin/env bash
# Build and cache helm (v3, helm.sh/helm/v3/cmd/helm from the Go module proxy; Helm
# is not packaged in Debian 12), with which the chart's tests (unit/test_chart.py,
# e2e/test_chart.py) render, lint, install, upgrade and uninstall
# manifests/chart/bootc-operator. Output: $BOOTC_OPERATOR_CACHE/bin/helm-<version>/helm.
# Prints that binary's path on stdout. A warm cache costs a stat. Concurrent
# invocations build once and never see a partly written binary (hack/lib/cache.sh).
set -euo pipefail
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
OUT="$(cache_root)/bin/helm-$HELM_VERSION"

have() { [[ -x "$OUT/helm" ]]; }

build() {
  command -v go >/dev/null || { echo "build-helm: error: Go toolchain not found (needed to build helm $HELM_VERSION)" >&2; exit 1; }
  echo "build-helm: building helm $HELM_VERSION (a cold build takes minutes)" >&2
  # The same version stamps as helm's Makefile. The default Kubernetes version
  # (`helm template` and `helm lint` without a cluster) follows the client-go helm
  # is built with, as upstream's release binaries do; left unset it would be 1.20,
  # below the chart's kubeVersion.
  local ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ld+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  local gomod k8s_minor
  gomod="$(CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
    | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  k8s_minor="$(sed -n 's/^\s*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")"
  [[ -n "$k8s_minor" ]] || { echo "build-helm: error: no k8s.io/client-go in $gomod" >&2; exit 1; }
  for pkg in pkg/lint/rules pkg/chartutil; do
    ld+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN="$1" \
    go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  cache_install "$1/helm" "$OUT/helm"
}

cache_build_once build-helm "$OUT" have build
echo "$OUT/helm"
