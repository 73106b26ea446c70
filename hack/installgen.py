"""Render ``manifests/install.yaml`` from the kustomize tree ``manifests/default``.

Used by ``hack/gen-install`` (write, or ``--check``) and by the test that fails
when the committed file is stale, so both run the same renderer: the cached
kubectl's built-in kustomize (``kubectl kustomize``), plus a header.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from hack.testenv.controlplane import REPO_ROOT, resolve_bin_dir

MANIFESTS = REPO_ROOT / "manifests"
KUSTOMIZATION = MANIFESTS / "default"
INSTALL_YAML = MANIFESTS / "install.yaml"

HEADER = """\
# bootc-operator: the whole default install in one file.
#   kubectl apply -f manifests/install.yaml
# Rendered by hack/gen-install from manifests/default (kustomize); do not edit
# by hand (a test fails when it is stale). Needs Kubernetes >= 1.30.
# The commented sources (why each RBAC rule, the admission policy, the Pod
# Security level) are under manifests/.
"""


def kubectl_path() -> Path:
    """The cached kubectl (``hack/build-binaries.sh``), which has kustomize built in."""
    return resolve_bin_dir() / "kubectl"


def kustomize(directory: Path, kubectl: Path | None = None) -> str:
    """``kubectl kustomize DIRECTORY`` (raises CalledProcessError with its stderr)."""
    res = subprocess.run(
        [str(kubectl or kubectl_path()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if res.returncode != 0:
        raise subprocess.CalledProcessError(res.returncode, res.args, res.stdout, res.stderr)
    return res.stdout


def render(kubectl: Path | None = None) -> str:
    """The text ``manifests/install.yaml`` must have."""
    return HEADER + kustomize(KUSTOMIZATION, kubectl)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if manifests/install.yaml is stale"
    )
    args = parser.parse_args(argv)
    try:
        text = render()
    except subprocess.CalledProcessError as err:
        print(f"gen-install: kubectl kustomize failed:\n{err.stderr}", file=sys.stderr)
        return 1
    if args.check:
        current = INSTALL_YAML.read_text() if INSTALL_YAML.exists() else ""
        if current != text:
            print(f"{INSTALL_YAML} is stale: run hack/gen-install", file=sys.stderr)
            return 1
        return 0
    INSTALL_YAML.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
