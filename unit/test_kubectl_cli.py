"""``kubectl bootc``'s command line: lean imports, every documented command parses, the
krew manifest follows krew's schema rules."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bootc_operator.kubectl.main import build_parser
from hack import krewpkg, userdocs

REPO = Path(__file__).resolve().parents[1]


def test_the_plugin_imports_neither_the_full_client_nor_pydantic() -> None:
    """Start-up stays short: every subcommand's modules, in a fresh interpreter."""
    code = (
        "import sys\n"
        "import bootc_operator.kubectl.main, bootc_operator.kubectl.cluster\n"
        "import bootc_operator.kubectl.explain, bootc_operator.kubectl.render\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes_asyncio', 'pydantic', 'pydantic_core'))\n"
        "assert not bad, bad[:5]\n"
        "assert 'bootc_operator.api.v1alpha1' not in sys.modules\n"
        "assert 'bootc_operator.reconcilers' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_help_imports_nothing_but_argparse() -> None:
    code = (
        "import sys\n"
        "import bootc_operator.kubectl.main\n"
        "heavy = ('aiohttp', 'yaml', 'asyncio')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "assert not bad, bad[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def readme_commands(text: str) -> list[list[str]]:
    """The arguments of every ``kubectl bootc ...`` command of TEXT's shell blocks (a
    console block's ``$ `` prompt dropped)."""
    found = []
    for line in userdocs.shell_commands(text):
        if line.startswith("kubectl bootc "):
            args = shlex.split(line.split("#", 1)[0])[2:]
            found.append(args)
    return found


def test_every_readme_command_parses() -> None:
    commands = readme_commands(userdocs.text())
    assert {args[0] for args in commands} >= {"status", "why", "approve"}, commands
    for args in commands:
        try:
            build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"documented command `kubectl bootc {shlex.join(args)}` exits {exc.code}")


def test_the_krew_manifest() -> None:
    doc = yaml.safe_load((REPO / "plugins/krew/bootc.yaml").read_text())
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert doc["kind"] == "Plugin"
    assert re.fullmatch(r"[a-z][a-z0-9-]*", doc["metadata"]["name"])
    spec = doc["spec"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", spec["version"])
    assert spec["shortDescription"] and len(spec["shortDescription"]) <= 50
    assert spec["homepage"].startswith("https://") and spec["description"]
    for platform in spec["platforms"]:
        assert platform["uri"].startswith("https://") and spec["version"] in platform["uri"]
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
        assert platform["bin"] == "kubectl-bootc"
        assert any(f["from"] == platform["bin"] for f in platform["files"])
        for expr in platform["selector"]["matchExpressions"]:
            assert expr["key"] in ("os", "arch") and expr["operator"] in ("In", "NotIn")
    assert platform["uri"] == krewpkg.uri()
    scripts = (REPO / "pyproject.toml").read_text()
    assert 'kubectl-bootc = "bootc_operator.kubectl.main:main"' in scripts


def test_the_krew_archive_bundles_only_pure_python() -> None:
    """The archive's modules are the plugin's import closure: none of the
    operator's other modes, and no dependency that has no pure-Python code (the
    full Kubernetes client, pydantic's compiled core, cryptography)."""
    modules, others = krewpkg.plugin_modules()
    assert krewpkg.ENTRY in modules and "bootc_operator.kubectl.explain" in modules
    assert not [
        m for m in modules if m.startswith(("bootc_operator.controller", "bootc_operator.daemon"))
    ]
    assert "bootc_operator.kube.client" not in modules  # NOT_BUNDLED
    assert not others & {"kubernetes_asyncio", "pydantic", "pydantic_core", "cryptography"}, others
    names = {d.metadata["Name"].lower() for d in krewpkg.distributions(others)}
    assert {"aiohttp", "pyyaml", "yarl", "multidict", "tzdata"} <= names, names


def test_the_krew_manifest_text_gets_uri_and_sha256() -> None:
    text = (REPO / "plugins/krew/bootc.yaml").read_text()
    rewritten = yaml.safe_load(krewpkg.manifest_text(text, "ab" * 32))
    (platform,) = rewritten["spec"]["platforms"]
    assert (platform["uri"], platform["sha256"]) == (krewpkg.uri(), "ab" * 32)
    assert krewpkg.manifest_text(text, "ab" * 32).count("\n") == text.count("\n")
