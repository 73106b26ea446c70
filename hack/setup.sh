#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv with the package in
# editable mode plus test and dev extras, pinned by constraints.txt. Idempotent:
# re-installs only when pyproject.toml or constraints.txt changed; silent when warm.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" ]]; then exit 0; fi
echo "setup: installing dependencies into $VENV" >&2
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! {
  { [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"; } &&
    "$VENV/bin/python" -m pip install -q --upgrade pip &&
    "$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[test,dev]'
} >"$LOG" 2>&1; then
  cat "$LOG" >&2
  echo "setup: error: installing dependencies failed (output above)" >&2
  exit 1
fi
rm -f "$VENV"/.installed-*
touch "$STAMP"
