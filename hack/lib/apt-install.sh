# Sourced by hack/install-*.sh: `apt_install_quietly TAG PACKAGES [NOTE]` installs
# Debian packages (PACKAGES: one name, or several separated by spaces). It needs root (or passwordless sudo); messages go to stderr,
# prefixed with TAG (NOTE ends the "installing" line); apt-get's output is shown
# only when it fails. Stale or missing package lists are refreshed once. The
# package's service is never started: a policy-rc.d forbids it for the install
# (there may be no init system at all) and is removed again unless it was there.
# Runs in a subshell: a failure exits the subshell with 1, which under
# `set -e` ends the caller too.

# shellcheck source=budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/budget.sh"

apt_install_quietly() (
  set -euo pipefail
  local tag="$1" package="$2" note="${3:-}" start="$EPOCHREALTIME"
  SUDO=()
  if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
      echo "$tag: error: need root to apt-get install $package" >&2
      exit 1
    fi
  fi
  echo "$tag: installing $package (Debian package)$note" >&2
  LOG="$(mktemp)"
  POLICY_CREATED=0
  cleanup() {
    rm -f "$LOG"
    if [[ "$POLICY_CREATED" == 1 ]]; then "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d; fi
  }
  trap cleanup EXIT
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod 0755 /usr/sbin/policy-rc.d
    POLICY_CREATED=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local names
  read -r -a names <<<"$package"
  # several installs may run at once (hack/test.sh starts its builds together): each
  # waits for dpkg's lock instead of failing on it
  local lockwait=(-o DPkg::Lock::Timeout=900)
  apt_install() { "${SUDO[@]}" apt-get "${lockwait[@]}" install -y -q --no-install-recommends "${names[@]}"; }
  if ! apt_install >"$LOG" 2>&1; then
    if ! { "${SUDO[@]}" apt-get "${lockwait[@]}" update -q && apt_install; } >>"$LOG" 2>&1; then
      cat "$LOG" >&2
      echo "$tag: error: apt-get install $package failed (output above)" >&2
      exit 1
    fi
  fi
  budget_note "$tag" "$start" "apt-get install $package"
)
