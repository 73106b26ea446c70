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
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
bash hack/install-registry.sh
bash hack/install-prometheus.sh
bash hack/install-image-tools.sh
BIN_DIR="$(bash hack/build-binaries.sh)"
export BOOTC_OPERATOR_BIN_DIR="$BIN_DIR"
BOOTC_OPERATOR_HELM="$(bash hack/build-helm.sh)"
export BOOTC_OPERATOR_HELM
BOOTC_OPERATOR_COSIGN="$(bash hack/build-cosign.sh)"
export BOOTC_OPERATOR_COSIGN
echo "== ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -50; exit 1; }
echo "== mypy" >&2
.venv/bin/mypy bootc_operator hack e2e unit
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
