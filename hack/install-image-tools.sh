#!/usr/bin/env bash
# Install what `make image` (hack/build-image.sh) needs from Debian packages: podman
# (builds the Containerfile; its build is buildah's library), runc (the OCI runtime
# hack/lib/engine.sh chooses) and mmdebstrap (makes the
# Python base image from Debian packages where no base image can be pulled).
# Idempotent: silent and instant when both are there. Prints nothing on stdout.
# Needs root (or passwordless sudo) the first time. A host that already has buildah
# instead of podman needs only mmdebstrap.
set -euo pipefail
# shellcheck source=lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"
if ! command -v podman >/dev/null 2>&1 && ! command -v buildah >/dev/null 2>&1; then
  apt_install_quietly install-image-tools podman " (builds the image)"
fi
if ! command -v runc >/dev/null 2>&1; then
  apt_install_quietly install-image-tools runc " (the OCI runtime podman is told to use)"
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  apt_install_quietly install-image-tools mmdebstrap " (makes the Python base image)"
fi
