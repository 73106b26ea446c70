#!/usr/bin/env bash
# `make image`: build the one image from Containerfile with podman (or buildah) into
# the project's container storage (hack/lib/engine.sh; `hack/podman images` lists it).
#   IMG            the tag to build (default localhost/bootc-operator:dev)
#   PYTHON_IMAGE   the build stage's base; RUNTIME_IMAGE the runtime's (default: the
#                  same). Given, they are used as they are (pulled if need be).
#                  Not given, both are made here from Debian packages of this
#                  machine's own suite and apt sources (mmdebstrap; no container
#                  registry needed), cached in the container storage under a tag
#                  keyed by their inputs, and made again only when those change.
# The build reaches PyPI for the wheels, every one checked against its sha256 in
# requirements.lock (the host's network and CA bundle). Layers
# are cached: with unchanged sources a rebuild takes seconds.
# Prints the image's tag on stdout, and its size on stderr.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
# shellcheck source=lib/engine.sh
source "$HERE/lib/engine.sh"

IMG="${IMG:-localhost/bootc-operator:dev}"
log() { printf 'build-image: %s\n' "$*" >&2; }

bash "$HERE/install-image-tools.sh"
engine_setup

images_exist() {
  local i
  for i in "$@"; do
    if [[ "$ENGINE" == podman ]]; then podman image exists "$i" || return 1
    else buildah inspect --type image "$i" >/dev/null 2>&1 || return 1; fi
  done
}

# ---- the Python bases from Debian packages
BASE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Documentation, manual pages and translations are left out of both bases.
DPKG_OPTS=(
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)
# Build: python3 with venv and pip. Runtime: only Essential (util-linux: nsenter;
# no apt) plus python3 and the CA bundle; usrmerge (init-system-helpers' first
# choice, whose conversion the bases do not need) and the perl it pulls in are
# purged again (46 MB).
BUILD_BASE_ARGS=(--variant=minbase --include=usr-is-merged,python3,python3-venv,python3-pip,python-is-python3,ca-certificates)
RUNTIME_BASE_ARGS=(--variant=essential --include=usr-is-merged,python3,ca-certificates
  --customize-hook='chroot "$1" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl libperl5.36 perl-modules-5.36')

debian_sources() {
  # The machine's own apt sources for its suite (third-party repositories left out).
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] && grep -qw -- "$SUITE" "$f" && printf '%s\n' "$f"
  done
  return 0
}

make_bases() {
  local stage="$1" pids=() kind
  log "making the Python bases from Debian $SUITE packages (mmdebstrap; about a minute)"
  mmdebstrap "${BUILD_BASE_ARGS[@]}" "${DPKG_OPTS[@]}" "$SUITE" "$stage/build.tar" "${SOURCES[@]}" \
    >"$stage/build.log" 2>&1 & pids+=($!)
  mmdebstrap "${RUNTIME_BASE_ARGS[@]}" "${DPKG_OPTS[@]}" "$SUITE" "$stage/runtime.tar" "${SOURCES[@]}" \
    >"$stage/runtime.log" 2>&1 & pids+=($!)
  local failed=0 i=0
  for kind in build runtime; do
    if ! wait "${pids[$i]}"; then
      tail -20 "$stage/$kind.log" >&2
      log "error: mmdebstrap of the $kind base failed (output above)"
      failed=1
    fi
    i=$((i + 1))
  done
  [[ "$failed" == 0 ]] || exit 1
  for kind in build runtime; do
    local tag="$BASE_REPO:$kind-$KEY"
    if [[ "$ENGINE" == podman ]]; then
      podman import --quiet --change "ENV=PATH=$BASE_PATH" "$stage/$kind.tar" "$tag" >/dev/null
    else
      local c; c="$(buildah from scratch)"
      buildah add "$c" "$stage/$kind.tar" / >/dev/null
      buildah config --env "PATH=$BASE_PATH" "$c"
      buildah commit --quiet --rm "$c" "$tag" >/dev/null
    fi
    rm -f "$stage/$kind.tar"
  done
  # The bases of earlier inputs are not needed again.
  local old
  for old in $(images_list "$BASE_REPO"); do
    [[ "$old" == *"-$KEY" ]] || remove_image "$old"
  done
}

images_list() {
  if [[ "$ENGINE" == podman ]]; then podman images --format '{{.Repository}}:{{.Tag}}' "$1"
  else buildah images --format '{{.Name}}:{{.Tag}}' "$1"; fi
}

remove_image() { "$ENGINE" rmi "$1" >/dev/null 2>&1 || true; }

have_bases() { images_exist "$BASE_REPO:build-$KEY" "$BASE_REPO:runtime-$KEY"; }

# REPO@sha256:... of a local image: the build takes the bases by digest, as the
# Containerfile's default base is (a tag moved in between cannot slip in).
image_by_digest() {
  local digest
  if [[ "$ENGINE" == podman ]]; then digest="$(podman image inspect --format '{{.Digest}}' "$1")"
  else digest="$(buildah inspect --type image --format '{{.FromImageDigest}}' "$1")"; fi
  [[ "$digest" == sha256:* ]] || { log "error: no digest for $1"; exit 1; }
  printf '%s@%s\n' "${1%:*}" "$digest"
}

if [[ -z "${PYTHON_IMAGE:-}" ]]; then
  # shellcheck disable=SC1091
  SUITE="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
  if ! { [[ -n "$SUITE" ]] && grep -qx 'ID=debian' /etc/os-release; }; then
    log "error: no PYTHON_IMAGE given and this machine is not Debian, so no base can be made from its packages; pass PYTHON_IMAGE= the Containerfile's default (docker.io/library/python:3.11-slim-bookworm@sha256:...) or your mirror of it"
    exit 1
  fi
  mapfile -t SOURCES < <(debian_sources)
  if [[ "${#SOURCES[@]}" == 0 ]]; then
    log "error: no apt source for Debian $SUITE in /etc/apt (the bases are made from its packages)"
    exit 1
  fi
  KEY="$({
    printf '%s\n' "$SUITE" "$BASE_PATH" "${BUILD_BASE_ARGS[*]}" "${RUNTIME_BASE_ARGS[*]}" "${DPKG_OPTS[*]}"
    cat "${SOURCES[@]}"
  } | sha256sum | cut -c1-16)"
  BASE_REPO=localhost/bootc-operator-base
  cache_build_once build-image "$(cache_root)/image-base" have_bases make_bases
  PYTHON_IMAGE="$(image_by_digest "$BASE_REPO:build-$KEY")"
  RUNTIME_IMAGE="${RUNTIME_IMAGE:-$(image_by_digest "$BASE_REPO:runtime-$KEY")}"
  PULL=(--pull=never)
else
  RUNTIME_IMAGE="${RUNTIME_IMAGE:-$PYTHON_IMAGE}"
  PULL=()
  for ref in "$PYTHON_IMAGE" "$RUNTIME_IMAGE"; do
    [[ "$ref" =~ @sha256:[0-9a-f]{64}$ ]] ||
      log "warning: $ref is not pinned by digest: the build takes whatever its tag names now"
  done
fi

# ---- the image
# pip in the build stage verifies PyPI against the host's CA bundle (which may hold
# a site's own CA), mounted for the build only.
CA=/etc/ssl/certs/ca-certificates.crt
MOUNTS=()
[[ -f "$CA" ]] && MOUNTS=(--volume "$CA:$CA:ro")
log "building $IMG from $PYTHON_IMAGE (runtime $RUNTIME_IMAGE)"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! "$ENGINE" build "${PULL[@]}" --network host "${ENGINE_ULIMITS[@]}" "${MOUNTS[@]}" \
    --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" \
    --layers --tag "$IMG" --file "$ROOT/Containerfile" "$ROOT" >"$LOG" 2>&1; then
  cat "$LOG" >&2
  log "error: $ENGINE build failed (output above)"
  exit 1
fi
# Layers no tag reaches (earlier builds) go after a week; the recent ones stay as
# the build cache.
"$ENGINE" image prune --force --filter until=168h >/dev/null 2>&1 || true
if [[ "$ENGINE" == podman ]]; then
  log "$IMG: $(podman image inspect --format '{{.Size}}' "$IMG" | awk '{printf "%.1f MB", $1/1e6}')"
fi
printf '%s\n' "$IMG"
