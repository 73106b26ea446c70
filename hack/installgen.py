"""Render ``manifests/install.yaml`` from the kustomize tree ``manifests/default``.

Used by ``hack/gen-install`` (write, or ``--check``) and by the test that fails
when the committed file is stale, so both run the same renderer: the cached
kubectl's built-in kustomize (``kubectl kustomize``), plus a header.
``--image REF`` (``make deploy IMG=REF``) prints the same install with the
operator's image replaced (kustomize's image override in a throwaway overlay).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bootc_operator.api.imageref import InvalidImageRef, parse_image_ref
from hack.testenv.controlplane import REPO_ROOT, resolve_bin_dir

MANIFESTS = REPO_ROOT / "manifests"
KUSTOMIZATION = MANIFESTS / "default"
INSTALL_YAML = MANIFESTS / "install.yaml"
# The image manifests/default/kustomization.yaml renames "bootc-operator" to.
SHIPPED_IMAGE = "ghcr.io/bootc-dev/bootc-operator-py"

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


def image_override(image: str) -> dict[str, str]:
    """The kustomize ``images:`` entry that replaces the shipped image with IMAGE
    (a fully qualified reference with a tag, a digest or both; InvalidImageRef
    says what is wrong with any other)."""
    ref = parse_image_ref(image)
    entry = {"name": SHIPPED_IMAGE, "newName": ref.name}
    if ref.digest:
        entry["digest"] = ref.digest
    else:
        entry["newTag"] = ref.tag or "latest"
    return entry


def overlay(directory: Path, base: Path, **fields: object) -> str:
    """A kustomization (JSON is YAML) for DIRECTORY on BASE with FIELDS
    (``images=[...]``, ...); kustomize takes the base only as a relative path."""
    return json.dumps(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(base, directory)],
            **fields,
        },
        indent=2,
    )


def render_with_image(image: str, kubectl: Path | None = None) -> str:
    """The default install with the operator's image replaced by IMAGE."""
    images = [image_override(image)]
    with tempfile.TemporaryDirectory(prefix="bootc-operator-deploy-") as tmp:
        directory = Path(tmp)
        (directory / "kustomization.yaml").write_text(
            overlay(directory, KUSTOMIZATION, images=images)
        )
        return kustomize(directory, kubectl)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if manifests/install.yaml is stale"
    )
    parser.add_argument(
        "--image",
        metavar="REF",
        help="print the install with the operator's image replaced by REF (make deploy IMG=REF)",
    )
    args = parser.parse_args(argv)
    try:
        if args.image:
            sys.stdout.write(render_with_image(args.image))
            return 0
        text = render()
    except InvalidImageRef as err:
        print(f"gen-install: --image {args.image}: {err}", file=sys.stderr)
        return 2
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
