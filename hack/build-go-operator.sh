#!/usr/bin/env bash
# Build and cache the Go bootc-operator's controller (the peer, same API) for
# hack/bench's side-by-side run (`hack/bench --go-controller BIN`; issue 39). Its
# source never enters this repository: give a snapshot of it, either a git directory
# (bare or not) or a git URL, and it is exported at one commit into the cache, built
# there with its own go.mod/go.sum (modules from the Go module proxy), and kept.
#   hack/build-go-operator.sh SOURCE [REV]     (REV default HEAD)
# Output: $BOOTC_OPERATOR_CACHE/go-operator/<commit>/manager (its cmd/controller).
# Prints that binary's path on stdout. A warm cache costs a git rev-parse and a stat.
# Concurrent invocations build once (hack/lib/cache.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$ROOT/hack/lib/cache.sh"
SOURCE="${1:?usage: hack/build-go-operator.sh SOURCE (git dir or URL) [REV]}"
REV="${2:-HEAD}"
BASE="$(cache_root)/go-operator"

if [[ -d "$SOURCE" ]]; then
  GIT=(git --git-dir="$(git -C "$SOURCE" rev-parse --absolute-git-dir 2>/dev/null || echo "$SOURCE")")
else
  # A URL: a bare clone kept beside the builds, fetched again on each call.
  MIRROR="$BASE/src.git"
  if [[ ! -d "$MIRROR" ]]; then
    git clone --quiet --bare "$SOURCE" "$MIRROR"
  else
    git --git-dir="$MIRROR" fetch --quiet "$SOURCE" "+refs/heads/*:refs/heads/*"
  fi
  GIT=(git --git-dir="$MIRROR")
fi
COMMIT="$("${GIT[@]}" rev-parse --verify "$REV^{commit}")" || {
  echo "build-go-operator: error: $SOURCE has no commit $REV" >&2
  exit 1
}
OUT="$BASE/$COMMIT"

have() { [[ -x "$OUT/manager" ]]; }

build() {
  command -v go >/dev/null || { echo "build-go-operator: error: Go toolchain not found" >&2; exit 1; }
  echo "build-go-operator: building $OUT/manager (commit $COMMIT)" >&2
  mkdir -p "$1/src"
  "${GIT[@]}" archive "$COMMIT" | tar -x -C "$1/src"
  (cd "$1/src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    nice go build -trimpath -ldflags "-s -w" -o "$1/manager" ./cmd/controller)
  # Its CRDs, to compare with ours (hack/bench runs both on our CRDs).
  cp -r "$1/src/config/crd/bases" "$1/crd.staging"
  rm -rf "$OUT/crd" && mv -T "$1/crd.staging" "$OUT/crd"
  cache_install "$1/manager" "$OUT/manager"
}

cache_build_once build-go-operator "$OUT" have build
echo "$OUT/manager"
