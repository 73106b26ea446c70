#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv: every dependency of the
# package and of its test and dev extras from requirements-dev.lock (versions and
# sha256 hashes, `--require-hashes`; hack/lock refreshes it), then the package
# itself in editable mode. Idempotent: re-installs only when pyproject.toml or the
# lock changed; silent when warm.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv
LOCK=requirements-dev.lock
STAMP="$VENV/.installed-$(cat pyproject.toml "$LOCK" | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" ]]; then exit 0; fi
echo "setup: installing dependencies into $VENV" >&2
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
# The lock holds pip and setuptools too (pip-tools needs pip; setuptools builds the
# editable package, so without build isolation: nothing unhashed is fetched).
if ! {
  { [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"; } &&
    "$VENV/bin/python" -m pip install -q --require-hashes --requirement "$LOCK" &&
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation --editable .
} >"$LOG" 2>&1; then
  cat "$LOG" >&2
  echo "setup: error: installing dependencies failed (output above)" >&2
  exit 1
fi
rm -f "$VENV"/.installed-*
touch "$STAMP"
