#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv with the package in
# editable mode plus test and dev extras. Idempotent: re-installs only when
# pyproject.toml or constraints.txt changed. Prints nothing on a warm run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" ]]; then exit 0; fi
echo "setup: creating $VENV and installing dependencies" >&2
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >&2
"$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[test,dev]' >&2
rm -f "$VENV"/.installed-*
touch "$STAMP"
