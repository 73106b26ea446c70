#!/usr/bin/env bash
# The project's test command (README, .ci/run): lint, type-check, unit and e2e tiers.
# Installs what it needs first: the virtualenv (hack/setup.sh) and the cached
# control-plane binaries (hack/build-binaries.sh; minutes on a cold cache) and helm
# (hack/build-helm.sh, likewise) and cosign (hack/build-cosign.sh, likewise: the
# e2e tier's real signer), the
# registry the e2e tier runs (hack/install-registry.sh: Debian's docker-registry) and
# its Prometheus server (hack/install-prometheus.sh: Debian's prometheus), and the
# image tools (hack/install-image-tools.sh: podman, runc, mmdebstrap).
# Extra arguments go to pytest, e.g. `hack/test.sh -k informer`.
# It ends with the budget table (hack/budget.py; the budgets are in
# docs/development.md), from what the phases, the build scripts and pytest
# (hack/pytest_budget.py) recorded in $BOOTC_OPERATOR_BUDGET_DIR (.cache/budget).
set -euo pipefail
cd "$(dirname "$0")/.."
run_start=$EPOCHREALTIME

# shellcheck source=lib/cache.sh
source hack/lib/cache.sh
BOOTC_OPERATOR_CACHE="$(cache_root)"
# builds into another cache (a test's scratch one) are not this run's cold builds
BOOTC_OPERATOR_BUDGET_CACHE="$BOOTC_OPERATOR_CACHE"
BOOTC_OPERATOR_BUDGET_DIR="${BOOTC_OPERATOR_BUDGET_DIR:-$PWD/.cache/budget}"
export BOOTC_OPERATOR_CACHE BOOTC_OPERATOR_BUDGET_CACHE BOOTC_OPERATOR_BUDGET_DIR
budget="$BOOTC_OPERATOR_BUDGET_DIR"
rm -rf "$budget"
mkdir -p "$budget"

seconds_since() {
  local us=$((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}
# record NAME START [STATUS]: one phase of the table
record() {
  printf '%s\t%s\t%s\n' "$1" "$(seconds_since "$2")" "${3:-ok}" >>"$budget/phases.tsv"
}

# The table, whatever happened (also after a failure or an interrupt).
phase_name="" phase_start=""
finish() {
  local rc=$?
  trap - EXIT
  [[ -z "$phase_name" ]] || record "$phase_name" "$phase_start" "failed ($rc)"
  seconds_since "$run_start" >"$budget/total"
  if [[ -x .venv/bin/python ]]; then
    echo
    .venv/bin/python -m hack.budget "$budget" || true
  fi
  exit "$rc"
}
trap finish EXIT
begin() { phase_name="$1" phase_start=$EPOCHREALTIME; }
end() { record "$phase_name" "$phase_start"; phase_name=""; }

begin setup
bash hack/setup.sh
end
begin "builds and installs"
# helm and cosign (cold: minutes, mostly module downloads) build in the background
# while the packages install and the control plane builds; each build script takes
# its own lock and cache, and a failed build fails this script at its `wait`.
tools="$(mktemp -d)"
bash hack/build-helm.sh >"$tools/helm" &
helm_job=$!
bash hack/build-cosign.sh >"$tools/cosign" &
cosign_job=$!
bash hack/install-registry.sh
bash hack/install-prometheus.sh
bash hack/install-image-tools.sh
BIN_DIR="$(bash hack/build-binaries.sh)"
export BOOTC_OPERATOR_BIN_DIR="$BIN_DIR"
wait "$helm_job" || { echo "hack/build-helm.sh failed" >&2; exit 1; }
wait "$cosign_job" || { echo "hack/build-cosign.sh failed" >&2; exit 1; }
BOOTC_OPERATOR_HELM="$(tail -n 1 "$tools/helm")"
BOOTC_OPERATOR_COSIGN="$(tail -n 1 "$tools/cosign")"
rm -rf "$tools"
export BOOTC_OPERATOR_HELM BOOTC_OPERATOR_COSIGN
end
begin "lint + types"
echo "== ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -50; exit 1; }
echo "== mypy" >&2
.venv/bin/mypy bootc_operator hack e2e unit
end
begin "pytest (unit + e2e)"
echo "== pytest" >&2
.venv/bin/pytest "$@"
end
