# Sourced by hack/lib/cache.sh and hack/lib/apt-install.sh: `budget_note TAG START [WHAT]`
# appends `TAG<TAB>SECONDS<TAB>WHAT` (SECONDS since START, an $EPOCHREALTIME) to
# $BOOTC_OPERATOR_BUDGET_DIR/builds.tsv when hack/test.sh set that directory: the cold
# builds and package installs of the budget table (hack/budget.py). A build into
# another cache than the run's ($BOOTC_OPERATOR_BUDGET_CACHE), e.g. a test's scratch
# one, is not recorded. Never fails.
budget_note() {
  [[ -n "${BOOTC_OPERATOR_BUDGET_DIR:-}" ]] || return 0
  if [[ -n "${BOOTC_OPERATOR_BUDGET_CACHE:-}" &&
    "${BOOTC_OPERATOR_CACHE:-}" != "$BOOTC_OPERATOR_BUDGET_CACHE" ]]; then
    return 0
  fi
  local us=$((${EPOCHREALTIME/[.,]/} - ${2/[.,]/}))
  { mkdir -p "$BOOTC_OPERATOR_BUDGET_DIR" &&
    printf '%s\t%d.%d\t%s\n' "$1" $((us / 1000000)) $((us % 1000000 / 100000)) "${3:-}" \
      >>"$BOOTC_OPERATOR_BUDGET_DIR/builds.tsv"; } || true
}
