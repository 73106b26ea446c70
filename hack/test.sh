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
echo "== ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -50; exit 1; }
echo "== mypy" >&2
.venv/bin/mypy bootc_operator hack e2e unit
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
