"""The container image, built here the way ``make image`` builds it, and run.

- ``hack/build-image.sh`` builds the image from ``Containerfile`` with podman on
  a Python base made from this machine's Debian packages (no registry reached;
  the bases and the build's layers are cached, so a warm run takes seconds).
- Inside it, both modes answer ``--help`` and ``--version``; the default user is
  not root; there is no pip, compiler or package manager, no wheels or sources;
  ``nsenter`` (the daemon's way into the host) is there.
- The image carries the SBOM of its Python dependencies
  (``/usr/share/doc/bootc-operator/sbom.cdx.json``, CycloneDX, made in the build
  from ``requirements.lock``): it lists exactly the packages installed in its
  virtualenv, at their versions, each with its purl and hashes as locked.
- ``make deploy IMG=...`` renders ``install.yaml`` with that image and changes
  nothing else.
The image's size is shown in the terminal summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from e2e.helpers import run_ok as run
from e2e.test_packaging import assert_sbom_matches_lock
from hack.installgen import INSTALL_YAML, render_with_image

# A cold build makes the two Debian bases first (minutes; CI's first run).
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[1]
PODMAN = ROOT / "hack" / "podman"
# One tag per checkout: two checkouts building at once never overwrite each other's.
BASE_REPO = "localhost/bootc-operator-base"  # hack/build-image.sh's Debian-made bases
IMAGE = "localhost/bootc-operator:e2e-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]


def in_image(script: str) -> str:
    """SCRIPT run by bash in a container of the image, without network."""
    return run(PODMAN, "run", "--rm", "--network=none", "--entrypoint=bash", IMAGE, "-c", script)


def build_image(img: str, **bases: str) -> subprocess.CompletedProcess[str]:
    """``hack/build-image.sh`` for the tag IMG (PYTHON_IMAGE=, RUNTIME_IMAGE= as given)."""
    res = subprocess.run(
        ["bash", ROOT / "hack" / "build-image.sh"],
        env={**os.environ, "IMG": img, **bases},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert res.returncode == 0, f"build-image.sh failed:\n{res.stdout}\n{res.stderr}"
    assert res.stdout.strip().splitlines()[-1] == img
    return res


@pytest.fixture(scope="module", autouse=True)
def built(request: pytest.FixtureRequest) -> str:
    """The image, built (or found up to date in the layer cache) for this checkout;
    what the build said on stderr."""
    res = build_image(IMAGE)
    size = int(run(PODMAN, "image", "inspect", "--format", "{{.Size}}", IMAGE))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nimage {IMAGE}: {size / 1e6:.1f} MB")
    return res.stderr


def test_both_modes_run_in_the_image() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(PODMAN, "run", "--rm", "--network", "none", IMAGE, "--version").strip() == (
        f"bootc-operator {version}"
    )
    for mode, flag in (("controller", "--leader-elect"), ("daemon", "--node-name")):
        out = run(PODMAN, "run", "--rm", "--network", "none", IMAGE, mode, "--help")
        assert f"usage: bootc-operator {mode}" in out
        assert flag in out


def test_runs_as_non_root_by_default() -> None:
    (config,) = json.loads(run(PODMAN, "image", "inspect", IMAGE))
    assert config["Config"]["User"] == "65532:65532"
    assert config["Config"]["Entrypoint"] == ["bootc-operator"]
    assert in_image("id -u; id -g").split() == ["65532", "65532"]


def test_final_stage_has_no_build_tools_or_sources() -> None:
    tools = "pip pip3 pip3.11 gcc cc c++ make apt apt-get"
    found = in_image(f"for t in {tools}; do command -v $t || true; done")
    assert found == "", f"build tools in the final image:\n{found}"
    assert "ModuleNotFoundError" in in_image("python3 -c 'import pip' 2>&1 || true")
    assert in_image("ls -d /wheels /src /root/.cache 2>/dev/null || true") == ""
    assert in_image("command -v nsenter").strip() == "/usr/bin/nsenter"
    # The package is installed (byte-compiled), not a copy of the sources.
    where = in_image("python3 -c 'import bootc_operator; print(bootc_operator.__file__)'")
    assert where.startswith("/opt/bootc-operator/lib/python3"), where


def test_sbom_in_the_image_lists_what_is_installed() -> None:
    sbom = json.loads(in_image("cat /usr/share/doc/bootc-operator/sbom.cdx.json"))
    assert_sbom_matches_lock(sbom)
    installed = json.loads(
        in_image(
            "python3 -c 'import importlib.metadata as m, json; "
            'print(json.dumps({d.metadata["Name"]: d.version for d in m.distributions()}))\''
        )
    )
    project = sbom["metadata"]["component"]
    assert installed.pop(project["name"]) == project["version"]
    listed = {c["name"]: c["version"] for c in sbom["components"]}
    norm = {canonicalize_name(k): v for k, v in installed.items()}
    assert {canonicalize_name(k): v for k, v in listed.items()} == norm


def test_a_base_given_by_tag_is_built_with_a_warning(built: str) -> None:
    """The Debian-made bases go to the build by digest; ``make image PYTHON_IMAGE=<tag>``
    builds (from the layer cache here: the same bases by tag) and says the base is not
    pinned."""
    assert "not pinned" not in built
    assert f"from {BASE_REPO}@sha256:" in built
    bases = run(PODMAN, "images", "--format", "{{.Repository}}:{{.Tag}}", BASE_REPO).split()
    base = next(b for b in bases if ":build-" in b)
    runtime = base.replace(":build-", ":runtime-")
    assert runtime in bases
    img = IMAGE + "-bytag"
    try:
        said = build_image(img, PYTHON_IMAGE=base, RUNTIME_IMAGE=runtime).stderr
    finally:
        subprocess.run([PODMAN, "rmi", img], capture_output=True, check=False)
    for ref in (base, runtime):
        assert f"warning: {ref} is not pinned by digest" in said


def test_deploy_renders_install_yaml_with_the_image() -> None:
    rendered = render_with_image(IMAGE).splitlines()
    shipped = [line for line in INSTALL_YAML.read_text().splitlines() if not line.startswith("#")]
    assert len(rendered) == len(shipped)
    changed = [(a, b) for a, b in zip(shipped, rendered, strict=True) if a != b]
    assert changed and all(b.strip() == f"image: {IMAGE}" for _, b in changed), changed
    assert len(changed) == 2, "the controller's Deployment and the daemon's DaemonSet"
