# Sourced by the scripts that build into the shared binary cache
# (hack/build-binaries.sh, hack/build-helm.sh, hack/build-cosign.sh, hack/build-promql-check.sh): where the cache is, and
# `cache_build_once`, which makes concurrent builds from several checkouts safe.
#
# `cache_build_once TAG OUT HAVE BUILD` fills the directory OUT:
#   HAVE   a command that succeeds when OUT is complete. It is run first without
#          any lock, so a warm cache costs what HAVE costs (a stat per file).
#   BUILD  a command run with a fresh staging directory ($1, inside OUT, so on the
#          same file system) while holding an exclusive flock on OUT/.lock. It builds
#          into the staging directory and puts each finished file in place with
#          `cache_install`: a rename, so OUT never holds a partly written file and a
#          reader sees either no file or the whole one.
# After taking the lock HAVE is asked again: a second invocation that waited for
# the first finds the work done and builds nothing. Staging directories left by a
# killed build are removed under the lock (only a lock holder makes one). Messages
# go to stderr, prefixed with TAG; the lock is released when the build ends.
#
# With $BOOTC_OPERATOR_BUDGET_DIR set (hack/test.sh), a build that did the work, or
# waited for another invocation's, appends one line to builds.tsv there: the budget
# table's cold builds (hack/budget.py). A warm cache appends nothing.

# shellcheck source=budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/budget.sh"

cache_root() {
  printf '%s\n' "${BOOTC_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootc-operator}"
}

# cache_install SRC DEST: make SRC executable and rename it over DEST (atomic
# within one file system; SRC comes from the staging directory inside OUT).
cache_install() {
  chmod +x "$1"
  mv -f -T "$1" "$2"
}

cache_build_once() (
  set -euo pipefail
  local tag="$1" out="$2" have="$3" build="$4"
  "$have" && return 0
  command -v flock >/dev/null || {
    echo "$tag: error: flock (util-linux) not found; it keeps concurrent builds apart" >&2
    exit 1
  }
  mkdir -p "$out"
  local lock="$out/.lock" fd start="$EPOCHREALTIME"
  exec {fd}>>"$lock"
  if ! flock -n "$fd"; then
    echo "$tag: waiting for another build holding $lock" >&2
    flock "$fd"
  fi
  if "$have"; then
    echo "$tag: built by another invocation meanwhile" >&2
    budget_note "$tag" "$start" "waited for another invocation's build"
    return 0
  fi
  rm -rf "$out"/.staging.*
  local stage
  stage="$(mktemp -d "$out/.staging.XXXXXX")"
  # shellcheck disable=SC2064  # expand now: $stage is local
  trap "rm -rf '$stage'" EXIT
  "$build" "$stage"
  "$have" || { echo "$tag: error: the build left $out incomplete" >&2; exit 1; }
  budget_note "$tag" "$start" "built"
)
