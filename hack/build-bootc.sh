#!/usr/bin/env bash
# Build and cache the real bootc CLI and the libostree it links, from pinned sources,
# for the real-bootc tier (hack/realbootc, e2e/test_daemon*.py --host=real).
#
# Neither is packaged for Debian 12 in the versions needed: bootc's ostree-ext needs
# libostree >= 2025.3 (Debian 12 has 2022.7) and bootc is not on crates.io. The
# sources are archives and git bundles in ../shared/third_party (or
# $BOOTC_OPERATOR_THIRD_PARTY), checked against its SHA256SUMS before use; every other
# crate comes from crates.io (`cargo fetch --locked`). Outside this environment,
# BOOTC_OPERATOR_THIRD_PARTY may name a directory holding the same files made from
# the upstream repositories at the same commits (git archive / git bundle).
#
# Output: $BOOTC_OPERATOR_CACHE/bootc/<key>/ with bin/bootc and prefix/ (libostree,
# the ostree CLI; bootc has an rpath to prefix/lib). <key> covers the pinned commits,
# the Rust toolchain and this script's recipe. Prints the directory on stdout.
# A warm cache costs a stat. Cold, on 2 cores: about 1 min of apt packages,
# 1.5 min for libostree, 20 s of crate downloads and about 11 min for bootc (dev
# profile without debuginfo: the tier needs the CLI's behaviour, not its speed).
# Concurrent invocations build once (hack/lib/cache.sh). When a source is missing
# or its sum is wrong, it exits 1 with one line saying which.
# `--check`: print the directory and exit 0 when it is built, exit 3 when it is not
# (building nothing): the test harness asks this first, to start a cold build in the
# background early (e2e/conftest.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/cache.sh
source "$here/lib/cache.sh"
# shellcheck source=lib/apt-install.sh
source "$here/lib/apt-install.sh"

BOOTC_COMMIT=534c76ea474a356aa288f6767635e579ea2614d5
OSTREE_COMMIT=462046551181b14c91668eb5378a70ba18607ddd
LIBGLNX_COMMIT=b415d046880d585e5161bf230590543adeea4fe6
BSDIFF_COMMIT=b817e9491cf7b8699c8462ef9e2657ca4ccd7667
COMPOSEFS_RS_COMMIT=0fbc853325ff92dbb842e715611bed7ddf9fe169
BCVK_COMMIT=d0433d9efec73836c447ab511a365421dd90da82
RECIPE=1 # bump when the build steps below change what they produce

THIRD_PARTY="${BOOTC_OPERATOR_THIRD_PARTY:-$here/../../shared/third_party}"
BUILD_DEPS=(autoconf automake libtool bison gtk-doc-tools pkg-config libglib2.0-dev libgpgme-dev
  libarchive-dev libcurl4-openssl-dev libsystemd-dev liblzma-dev libmount-dev e2fslibs-dev
  libfuse3-dev libselinux1-dev libssl-dev zlib1g-dev libcap-dev libzstd-dev)
# What the built bootc needs at run time: skopeo's experimental-image-proxy pulls images.
RUN_DEPS=(skopeo)

short() { printf '%s' "${1:0:12}"; }
toolchain() { { rustc --version && cargo --version; } 2>/dev/null | tr '\n' ' '; }

command -v cargo >/dev/null || { echo "build-bootc: error: cargo not found (the Rust toolchain builds bootc)" >&2; exit 1; }
KEY="$(printf '%s\n' "$BOOTC_COMMIT" "$OSTREE_COMMIT" "$LIBGLNX_COMMIT" "$BSDIFF_COMMIT" \
  "$COMPOSEFS_RS_COMMIT" "$BCVK_COMMIT" "$RECIPE" "$(toolchain)" | sha256sum | cut -c1-16)"
OUT="$(cache_root)/bootc/$KEY"

have() { [[ -x "$OUT/bin/bootc" && -x "$OUT/prefix/bin/ostree" ]]; }

# The packages are checked on every call (a dpkg query, no lock): a warm cache on a
# machine that lost them still needs libostree's shared libraries and skopeo.
install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) || apt_install_quietly build-bootc "${missing[*]}"
}

source_file() { # source_file NAME: the path of one pinned source, after its sum
  local f="$THIRD_PARTY/$1"
  [[ -f "$f" ]] || {
    echo "build-bootc: error: missing source $f (the real-bootc tier needs ../shared/third_party or BOOTC_OPERATOR_THIRD_PARTY)" >&2
    exit 1
  }
  local want
  want="$(awk -v n="$1" '$2 == n {print $1}' "$THIRD_PARTY/SHA256SUMS" 2>/dev/null)"
  [[ -n "$want" ]] || { echo "build-bootc: error: $1 is not listed in $THIRD_PARTY/SHA256SUMS" >&2; exit 1; }
  [[ "$(sha256sum "$f" | cut -d' ' -f1)" == "$want" ]] || {
    echo "build-bootc: error: $f does not match its sha256 in SHA256SUMS" >&2
    exit 1
  }
  printf '%s\n' "$f"
}

build_ostree() { # build_ostree SRC STAGE
  local src="$1" stage="$2" t0=$SECONDS
  tar -xzf "$(source_file "libglnx-$(short $LIBGLNX_COMMIT).tar.gz")" -C "$src"
  tar -xzf "$(source_file "bsdiff-$(short $BSDIFF_COMMIT).tar.gz")" -C "$src"
  rmdir "$src/ostree/libglnx" "$src/ostree/bsdiff" 2>/dev/null || true
  mv "$src/libglnx-$(short $LIBGLNX_COMMIT)" "$src/ostree/libglnx"
  mv "$src/bsdiff-$(short $BSDIFF_COMMIT)" "$src/ostree/bsdiff"
  (
    cd "$src/ostree"
    NOCONFIGURE=1 ./autogen.sh >"$stage/ostree-autogen.log" 2>&1
    ./configure --prefix="$OUT/prefix" --with-curl --without-soup --without-soup3 --with-openssl \
      --disable-man --disable-gtk-doc --with-libarchive --with-selinux --with-libsystemd \
      --without-composefs --disable-rofiles-fuse --disable-introspection \
      --with-systemdsystemunitdir="$OUT/prefix/lib/systemd/system" \
      --with-systemdsystemgeneratordir="$OUT/prefix/lib/systemd/system-generators" \
      >"$stage/ostree-configure.log" 2>&1
    make -j"$(nproc)" >"$stage/ostree-make.log" 2>&1
    make install DESTDIR="$stage/dest" >"$stage/ostree-install.log" 2>&1
  ) || {
    tail -n 30 "$stage"/ostree-*.log >&2
    echo "build-bootc: error: libostree failed to build (log tails above)" >&2
    exit 1
  }
  rm -rf "$OUT/prefix"
  mv -T "$stage/dest$OUT/prefix" "$OUT/prefix"
  echo "build-bootc: libostree built in $((SECONDS - t0)) s" >&2
}

build_bootc() { # build_bootc SRC STAGE
  local src="$1" stage="$2" t0=$SECONDS name
  for name in composefs-rs bcvk; do
    local commit
    if [[ $name == composefs-rs ]]; then commit=$COMPOSEFS_RS_COMMIT; else commit=$BCVK_COMMIT; fi
    git clone -q --bare "$(source_file "$name-$(short "$commit").bundle")" "$src/git/$name.git"
    git -C "$src/git/$name.git" cat-file -e "$commit^{commit}" || {
      echo "build-bootc: error: $name bundle lacks commit $commit" >&2
      exit 1
    }
  done
  cat >"$src/gitconfig" <<EOF
[url "file://$src/git/composefs-rs.git"]
	insteadOf = https://github.com/composefs/composefs-rs
[url "file://$src/git/bcvk.git"]
	insteadOf = https://github.com/bootc-dev/bcvk
EOF
  (
    cd "$src/bootc"
    export GIT_CONFIG_GLOBAL="$src/gitconfig" GIT_CONFIG_NOSYSTEM=1 CARGO_NET_GIT_FETCH_WITH_CLI=true
    export PKG_CONFIG_PATH="$OUT/prefix/lib/pkgconfig"
    export RUSTFLAGS="-C link-arg=-Wl,-rpath,$OUT/prefix/lib"
    export CARGO_PROFILE_DEV_DEBUG=0 CARGO_TARGET_DIR="$src/target"
    cargo fetch --locked >"$stage/cargo-fetch.log" 2>&1
    echo "build-bootc: crates fetched in $((SECONDS - t0)) s; building bootc (about 11 min cold on 2 cores)" >&2
    cargo build --locked --offline -p bootc --bin bootc >"$stage/cargo-build.log" 2>&1
  ) || {
    tail -n 40 "$stage"/cargo-*.log >&2
    echo "build-bootc: error: bootc failed to build (log tail above)" >&2
    exit 1
  }
  mkdir -p "$OUT/bin"
  cp "$src/target/debug/bootc" "$stage/bootc"
  cache_install "$stage/bootc" "$OUT/bin/bootc"
  echo "build-bootc: bootc built in $((SECONDS - t0)) s" >&2
}

build() {
  local stage="$1" t0=$SECONDS
  echo "build-bootc: building libostree $(short $OSTREE_COMMIT) and bootc $(short $BOOTC_COMMIT) into $OUT (cold: about 15 min)" >&2
  install_packages "${BUILD_DEPS[@]}"
  local src="$stage/src"
  mkdir -p "$src/git"
  tar -xzf "$(source_file "ostree-$(short $OSTREE_COMMIT).tar.gz")" -C "$src"
  mv "$src/ostree-$(short $OSTREE_COMMIT)" "$src/ostree"
  tar -xzf "$(source_file "bootc-$(short $BOOTC_COMMIT).tar.gz")" -C "$src"
  mv "$src/bootc-$(short $BOOTC_COMMIT)" "$src/bootc"
  build_ostree "$src" "$stage"
  build_bootc "$src" "$stage"
  printf '%s\n' "bootc $BOOTC_COMMIT" "ostree $OSTREE_COMMIT" "toolchain $(toolchain)" \
    "built in $((SECONDS - t0)) s" >"$OUT/BUILD-INFO"
  echo "build-bootc: done in $((SECONDS - t0)) s" >&2
}

if [[ "${1:-}" == --check ]]; then
  have || exit 3
  printf '%s\n' "$OUT"
  exit 0
fi
install_packages "${RUN_DEPS[@]}" libglib2.0-0 libgpgme11 libarchive13 libcurl4
cache_build_once build-bootc "$OUT" have build
printf '%s\n' "$OUT"
