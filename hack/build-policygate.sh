#!/usr/bin/env bash
# Build and cache hack/policygate, the real-bootc host's `skopeo` (hack/realbootc):
# Debian 12's skopeo 1.9.3 with the containers policy check of skopeo >= 1.13's image
# proxy in front of it (containers/image's own policy engine, go.podman.io/image/v5
# from the Go module proxy; why not a newer skopeo: docs/development.md, real-bootc
# tier). Output: $BOOTC_OPERATOR_CACHE/bin/policygate-<image version>-<hash of its
# sources>/policygate. Prints that binary's path on stdout.
# A warm cache costs a hash and a stat. Cold (empty Go caches), on the shared 2-core
# machine: 7.5 min wall at load 24, 5 min at load 13-16, 1.2-1.3 min of CPU (300 MB of
# modules, 200 MB of Go build cache), a 13 MB binary. Pure Go: containers/image's OpenPGP mechanism instead
# of gpgme, no containers-storage or docker-daemon transport.
# Concurrent invocations build once and never see a partly written binary
# (hack/lib/cache.sh). `--check`: print the path and exit 0 when it is built, exit 3
# when it is not (building nothing).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$ROOT/hack/lib/cache.sh"
SRC="$ROOT/hack/policygate"
VERSION="$(sed -n 's/^\s*require go\.podman\.io\/image\/v5 \(v[^ ]*\).*/\1/p; s/^\s*go\.podman\.io\/image\/v5 \(v[^ ]*\).*/\1/p' "$SRC/go.mod" | head -n 1)"
[[ -n "$VERSION" ]] || { echo "build-policygate: error: no go.podman.io/image/v5 in $SRC/go.mod" >&2; exit 1; }
TAGS="containers_image_openpgp containers_image_storage_stub containers_image_docker_daemon_stub"
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" <(echo "$TAGS") | sha256sum | cut -c1-16)"
OUT="$(cache_root)/bin/policygate-$VERSION-$HASH"

have() { [[ -x "$OUT/policygate" ]]; }

if [[ "${1:-}" == "--check" ]]; then
  have || exit 3
  echo "$OUT/policygate"
  exit 0
fi

build() {
  command -v go >/dev/null || { echo "build-policygate: error: Go toolchain not found (needed to build hack/policygate)" >&2; exit 1; }
  echo "build-policygate: building $OUT/policygate (containers/image $VERSION; a cold build takes minutes)" >&2
  (cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -tags "$TAGS" -o "$1/policygate" .)
  cache_install "$1/policygate" "$OUT/policygate"
}

cache_build_once build-policygate "$OUT" have build
echo "$OUT/policygate"
