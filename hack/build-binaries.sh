#!/usr/bin/env bash
# Build and cache the control-plane binaries the e2e tier, hack/controlplane and
# hack/sim need, from the published Go modules (Go module proxy only):
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet (k8s.io/kubernetes;
#   kubelet: the real-node tier)
#   etcd                                                             (go.etcd.io/etcd/server/v3)
#   kwok                                                             (sigs.k8s.io/kwok)
# Output: $BOOTC_OPERATOR_CACHE/bin/<versions>/  (default ~/.cache/bootc-operator).
# Prints that directory on stdout. A warm cache costs a stat per binary.
# Safe when several checkouts build at once: one builds, the others wait for it
# (a lock in the output directory) and no one ever sees a partly written binary
# (hack/lib/cache.sh).
set -euo pipefail
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"

CACHE="$(cache_root)"
OUT="$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)

log() { printf 'build-binaries: %s\n' "$*" >&2; }

have_all() {
  for b in "${K8S_BINS[@]}" etcd kwok; do [[ -x "$OUT/$b" ]] || return 1; done
}

if have_all; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { log "error: Go toolchain not found (needed to build $K8S_VERSION binaries)"; exit 1; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

build_k8s() {
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local dir="$WORK/k8s"; mkdir -p "$dir"
  log "resolving k8s.io/kubernetes@$K8S_VERSION"
  local gomod
  gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module bootc-operator.local/k8sbuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    # k8s.io/kubernetes replaces its staging modules with local paths; a wrapper
    # must pin each of them to the published v0.<minor>.<patch> tag instead.
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$gomod" | awk -v v="v0.${K8S_VERSION#v1.}" '{print "replace " $1 " => " $1 " " v}'
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go mod download >/dev/null)
  local date; date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  for b in "${K8S_BINS[@]}"; do
    [[ -x "$OUT/$b" ]] && continue
    log "building $b $K8S_VERSION (cold builds take minutes)"
    (cd "$dir" && go build -tags tools -trimpath -ldflags "$ld" -o "$WORK/bin/$b" "k8s.io/kubernetes/cmd/$b")
    cache_install "$WORK/bin/$b" "$OUT/$b"
  done
}

build_etcd() {
  [[ -x "$OUT/etcd" ]] && return 0
  local dir="$WORK/etcd"; mkdir -p "$dir"
  log "building etcd $ETCD_VERSION"
  printf 'module bootc-operator.local/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -tags tools -trimpath -ldflags "-s -w" -o "$WORK/bin/etcd" go.etcd.io/etcd/server/v3)
  cache_install "$WORK/bin/etcd" "$OUT/etcd"
}

build_kwok() {
  [[ -x "$OUT/kwok" ]] && return 0
  log "building kwok $KWOK_VERSION"
  GOBIN="$WORK/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  cache_install "$WORK/bin/kwok" "$OUT/kwok"
}

# Each binary is installed as soon as it is built: an interrupted cold build keeps
# what it finished.
build_all() {
  WORK="$1"
  build_etcd
  build_kwok
  build_k8s
  log "done: $OUT"
}

cache_build_once build-binaries "$OUT" have_all build_all
echo "$OUT"
