#!/usr/bin/env bash
# The project's test command (README, .ci/run, `make test`): lint and types, the unit
# tier, the e2e tier, then the real-bootc tier; it ends with the budget table
# (hack/budget.py; the budgets are in docs/development.md).
#
#   hack/test.sh [TIER...] [PYTEST ARGS...]
#
# TIER: lint, unit, e2e, real-bootc (default: all). Other arguments go to every pytest
# phase, e.g. `hack/test.sh -k informer` or `hack/test.sh e2e -x`; paths among them
# choose the tiers too (`hack/test.sh e2e/test_crds.py` runs that module, nothing else).
#
# It installs and builds what the chosen tiers need, and only that, in the background
# from its first second, so the cold builds overlap the phases that need none:
#   e2e:        hack/build-binaries.sh (kube binaries), build-helm.sh, build-cosign.sh,
#               build-promql-check.sh, build-kstatus.sh, build-argocd-health.sh (Go;
#               each its own job) and the Debian packages
#               (install-registry.sh, install-prometheus.sh, install-image-tools.sh; one
#               job); awaited before the e2e phase.
#   real-bootc: hack/build-bootc.sh (Rust) and hack/build-policygate.sh (Go: the real
#               host's skopeo), niced, started once setup found tests marked
#               `realbootc`. Already built by the time the e2e tier starts (a warm
#               cache), those tests run in its parallel phase; else in a last phase
#               of their own, which awaits the build.
# Each build script takes its own lock and cache, so a test calling one meanwhile waits
# for the same build; a failed build fails this script when it is awaited.
#
# Exported for the tests: BOOTC_OPERATOR_BIN_DIR, BOOTC_OPERATOR_HELM,
# BOOTC_OPERATOR_COSIGN, BOOTC_OPERATOR_KSTATUS, BOOTC_OPERATOR_ARGOCD_HEALTH (the
# GitOps health tools), BOOTC_OPERATOR_BOOTC_DIR (the real bootc's build),
# BOOTC_OPERATOR_POLICYGATE (the real host's skopeo), and
# BOOTC_OPERATOR_BUDGET_DIR (.cache/budget: the table's records).
# BOOTC_OPERATOR_TEST_WORKERS: the e2e tier's parallel workers (default 3; the unit tier
# takes 2; 0: one pytest process per tier). BOOTC_OPERATOR_TEST_HEAVY: how many units with
# a test marked `slow` (whole simulated clusters) run at once (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
run_start=$EPOCHREALTIME

tiers=()
while (($#)); do
  case "$1" in
    lint | unit | e2e | real-bootc) tiers+=("$1") ;;
    --) shift; break ;;
    *) break ;;
  esac
  shift
done
((${#tiers[@]})) || tiers=(lint unit e2e real-bootc)
want() { [[ " ${tiers[*]} " == *" $1 "* ]]; }
drop() {
  local t kept=()
  for t in "${tiers[@]}"; do [[ "$t" == "$1" ]] || kept+=("$t"); done
  tiers=("${kept[@]}")
}
# Paths among the pytest arguments choose the tiers: each pytest phase gets those under
# its directory; a test tier with none is not run.
opts=() unit_paths=() e2e_paths=()
for arg in "$@"; do
  case "$arg" in
    unit/* | e2e/*) [[ -e "${arg%%::*}" ]] || { opts+=("$arg"); continue; } ;;
    *) opts+=("$arg"); continue ;;
  esac
  if [[ "$arg" == unit/* ]]; then unit_paths+=("$arg"); else e2e_paths+=("$arg"); fi
done
if ((${#unit_paths[@]} + ${#e2e_paths[@]})); then
  ((${#unit_paths[@]})) || drop unit
  ((${#e2e_paths[@]})) || { drop e2e; drop real-bootc; }
else
  unit_paths=(unit) e2e_paths=(e2e)
fi
set -- "${opts[@]}"
workers="${BOOTC_OPERATOR_TEST_WORKERS:-3}"

# shellcheck source=lib/cache.sh
source hack/lib/cache.sh
BOOTC_OPERATOR_CACHE="$(cache_root)"
# builds into another cache (a test's scratch one) are not this run's cold builds
BOOTC_OPERATOR_BUDGET_CACHE="$BOOTC_OPERATOR_CACHE"
BOOTC_OPERATOR_BUDGET_DIR="${BOOTC_OPERATOR_BUDGET_DIR:-$PWD/.cache/budget}"
export BOOTC_OPERATOR_CACHE BOOTC_OPERATOR_BUDGET_CACHE BOOTC_OPERATOR_BUDGET_DIR
budget="$BOOTC_OPERATOR_BUDGET_DIR"
rm -rf "$budget"
mkdir -p "$budget/jobs"
# the last runs' test times order the parallel work (hack/pytest_parallel.py); every
# worker reads this run's snapshot
times="$BOOTC_OPERATOR_CACHE/test-times.json"
if [[ -f "$times" ]]; then
  cp "$times" "$budget/test-times.json"
  export BOOTC_OPERATOR_TEST_TIMES="$budget/test-times.json"
fi

seconds_since() {
  local us=$((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}
record() { # NAME START [OUTCOME]: one row of the table
  printf '%s\t%s\t%s\n' "$1" "$(seconds_since "$2")" "${3:-ok}" >>"$budget/phases.tsv"
}

# The table, whatever happened (also after a failure or an interrupt).
status=0
finish() {
  local rc=$?
  ((status)) || status=$rc
  trap - EXIT
  local pids # builds still running (the run ended early) go with it
  pids="$(jobs -pr)"
  # shellcheck disable=SC2086  # one pid a word
  [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
  seconds_since "$run_start" >"$budget/total"
  times >"$budget/times" # the CPU of what it waited for
  if [[ -x .venv/bin/python ]]; then
    echo
    .venv/bin/python -m hack.budget "$budget" --save-times "$times" || true
  fi
  exit "$status"
}
trap finish EXIT

# phase NAME COMMAND...: one phase, timed. A failed phase fails the run, but the later
# phases still run (all the news in one CI run); pytest's "no tests collected" (5) is
# no failure.
phase() {
  local name="$1" start=$EPOCHREALTIME rc=0 outcome=ok
  shift
  echo "== $name" >&2
  "$@" || rc=$?
  if ((rc == 5)); then outcome="no tests" rc=0; fi
  if ((rc)); then
    outcome="failed ($rc)"
    ((status)) || status=$rc
  fi
  record "$name" "$start" "$outcome"
}

# ---------------------------------------------------------------- background builds

declare -A job_pid=()
bg() { # NAME COMMAND...: a build job; its stdout (the built path) goes to jobs/NAME
  local name="$1"
  shift
  "$@" >"$budget/jobs/$name" &
  job_pid[$name]=$!
}
await() { # ROW NAME...: wait for build jobs (a row of the table); a failed one ends the run
  local row="$1" start=$EPOCHREALTIME name
  shift
  echo "== $row" >&2
  for name in "$@"; do
    wait "${job_pid[$name]}" || {
      echo "hack/test.sh: $name failed (its messages above)" >&2
      record "$row" "$start" "failed: $name"
      status=1
      exit 1
    }
  done
  record "$row" "$start"
}
built() { tail -n 1 "$budget/jobs/$1"; }

packages() { # one job: apt takes a lock
  bash hack/install-registry.sh
  bash hack/install-prometheus.sh
  bash hack/install-image-tools.sh
}

if want e2e; then
  bg packages packages
  bg binaries bash hack/build-binaries.sh
  bg helm bash hack/build-helm.sh
  bg cosign bash hack/build-cosign.sh
  bg promql-check bash hack/build-promql-check.sh
  bg kstatus bash hack/build-kstatus.sh
  bg argocd-health bash hack/build-argocd-health.sh
fi

setup() {
  bash hack/setup.sh || return
  want real-bootc || return 0
  # only with tests for it: a cold build is ~11-15 minutes of both cores
  # collected into a variable first: `pytest | grep -q` under pipefail fails whenever
  # grep has quit before pytest's last line (SIGPIPE), and dropped the tier at random
  local collected
  collected="$(.venv/bin/pytest --collect-only -q -p no:cacheprovider -m realbootc \
    "${e2e_paths[@]}" "$@" 2>/dev/null || true)"
  if [[ "$collected" == *::* ]]; then
    bg bootc nice -n 10 bash hack/build-bootc.sh
    bg policygate nice -n 10 bash hack/build-policygate.sh
  else
    drop real-bootc
  fi
}
phase setup setup "$@"
((status == 0)) || exit "$status"

# ---------------------------------------------------------------- the phases

lint() {
  .venv/bin/ruff check . || return
  .venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -50; return 1; }
  .venv/bin/mypy bootc_operator hack e2e unit
}
if want lint; then phase "lint + types" lint; fi

if want unit; then
  # mostly the simulated host's waiting, not CPU: two workers
  unit_parallel=()
  ((workers == 0)) || unit_parallel=(-n 2 --dist loadgroup)
  phase unit .venv/bin/pytest "${unit_paths[@]}" "${unit_parallel[@]}" "$@"
fi

# finished SECONDS NAME...: the build jobs have all finished within SECONDS (successfully
# or not: await says). A cached build answers in well under a second, a cold one takes
# minutes: the short deadline tells them apart.
finished() {
  local deadline=$((SECONDS + $1)) name
  shift
  for name in "$@"; do
    while kill -0 "${job_pid[$name]}" 2>/dev/null; do
      ((SECONDS < deadline)) || return 1
      sleep 0.2
    done
  done
}
export_bootc() {
  BOOTC_OPERATOR_BOOTC_DIR="$(built bootc)"
  BOOTC_OPERATOR_POLICYGATE="$(built policygate)"
  export BOOTC_OPERATOR_BOOTC_DIR BOOTC_OPERATOR_POLICYGATE
}

if want e2e; then
  await "waiting for builds" packages binaries helm cosign promql-check kstatus argocd-health
  BOOTC_OPERATOR_BIN_DIR="$(built binaries)"
  BOOTC_OPERATOR_HELM="$(built helm)"
  BOOTC_OPERATOR_COSIGN="$(built cosign)"
  BOOTC_OPERATOR_KSTATUS="$(built kstatus)"
  BOOTC_OPERATOR_ARGOCD_HEALTH="$(built argocd-health)"
  export BOOTC_OPERATOR_BIN_DIR BOOTC_OPERATOR_HELM BOOTC_OPERATOR_COSIGN \
    BOOTC_OPERATOR_KSTATUS BOOTC_OPERATOR_ARGOCD_HEALTH
  # The real-bootc tests join the parallel phase when the bootc build is already there
  # (a warm cache): they mostly wait for their hosts, as the e2e tests do. A cold build
  # (~11-15 minutes) is not waited for here: they get their own last phase instead.
  besides=" and not realbootc"
  if ((workers)) && want real-bootc && finished 10 bootc policygate; then
    await "waiting for the bootc build" bootc policygate
    export_bootc
    drop real-bootc
    besides=""
  fi
  if ((workers)); then
    # each worker its own control plane; a module is a unit of work, longest first
    # (hack/pytest_parallel.py); what must run alone (`serial`) runs afterwards
    phase "e2e ($workers workers)" .venv/bin/pytest "${e2e_paths[@]}" -n "$workers" \
      --dist loadgroup -m "not serial$besides" "$@"
    phase "e2e serial" .venv/bin/pytest "${e2e_paths[@]}" -m "serial$besides" "$@"
  else
    phase e2e .venv/bin/pytest "${e2e_paths[@]}" -m "not realbootc" "$@"
  fi
fi

if want real-bootc; then
  await "waiting for the bootc build" bootc policygate
  export_bootc
  phase "real bootc" env BOOTC_OPERATOR_TEST_TIER=real-bootc \
    .venv/bin/pytest "${e2e_paths[@]}" -m realbootc "$@"
fi
