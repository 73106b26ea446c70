# Sourced by the scripts that run podman or buildah (hack/build-image.sh, hack/podman):
# `engine_setup` points both at the project's own container storage and settings, so
# they work as root without a user session or systemd, and on machines that cannot
# raise their own limits (no CAP_SYS_RESOURCE). It sets:
#   ENGINE        podman, or buildah where only buildah is installed
#   ENGINE_ULIMITS  the --ulimit options a build needs (it does not read them from
#                  containers.conf's default_ulimits, which `run` does)
#   CONTAINERS_STORAGE_CONF, CONTAINERS_CONF   (exported; read by podman and buildah)
# Storage: $BOOTC_OPERATOR_CACHE/containers/storage-<driver> (the layer cache that
# keeps a warm `make image` cheap); run state under $TMPDIR. The driver is overlay
# unless BOOTC_OPERATOR_STORAGE_DRIVER says otherwise (vfs where overlay cannot mount).
# Runtime: runc (crun refuses cgroup v1 hybrid hosts; the real-node tier's containerd
# runs runc too).
# Limits: the containers get the caller's own hard limits for open files and
# processes (podman's defaults are higher and fail without CAP_SYS_RESOURCE).

# shellcheck source=cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

engine_setup() {
  if command -v podman >/dev/null 2>&1; then ENGINE=podman
  elif command -v buildah >/dev/null 2>&1; then ENGINE=buildah
  else
    echo "engine: error: neither podman nor buildah is installed (bash hack/install-image-tools.sh installs podman)" >&2
    return 1
  fi
  local driver="${BOOTC_OPERATOR_STORAGE_DRIVER:-overlay}"
  local graph; graph="$(cache_root)/containers/storage-$driver"
  # One run directory per storage (a cache elsewhere gets its own settings files).
  local run
  run="${TMPDIR:-/tmp}/bootc-operator-containers-$(id -u)-$(printf '%s' "$graph" | sha256sum | cut -c1-8)"
  mkdir -p "$graph" "$run"
  local nofile nproc
  nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
  [[ "$nofile" == unlimited ]] && nofile=1048576
  # A container's RLIMIT_NPROC above 32768 was refused even below the hard limit.
  if [[ "$nproc" == unlimited ]] || ((nproc > 32768)); then nproc=32768; fi
  ENGINE_ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  _engine_write "$run/storage.conf" "$(printf '[storage]\ndriver = "%s"\ngraphroot = "%s"\nrunroot = "%s"\n' \
    "$driver" "$graph" "$run/storage")"
  _engine_write "$run/containers.conf" "$(printf '%s\n' \
    '[containers]' \
    "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]" \
    '[engine]' \
    'runtime = "runc"' \
    'cgroup_manager = "cgroupfs"' \
    'events_logger = "file"' \
    "events_logfile_path = \"$run/events.log\"" \
    "tmp_dir = \"$run/libpod\"")"
  export CONTAINERS_STORAGE_CONF="$run/storage.conf" CONTAINERS_CONF="$run/containers.conf"
}

# _engine_write FILE CONTENT: replace FILE atomically when its content differs
# (several checkouts share the run directory).
_engine_write() {
  if [[ -f "$1" && "$(cat "$1")" == "$2" ]]; then return 0; fi
  local tmp; tmp="$(mktemp "$1.XXXXXX")"
  printf '%s\n' "$2" > "$tmp"
  mv -f -T "$tmp" "$1"
}
