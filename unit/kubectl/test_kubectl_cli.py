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

REPO = Path(__file__).resolve().parents[2]


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


TAG = "v1.2.3"
URI = f"https://github.com/bootc-dev/bootc-operator-py/releases/download/{TAG}/kubectl-bootc-{TAG}.tar.gz"


def _sha256_of(url: str) -> str:
    """A stand-in for the archive's sha256 (the template renders without building)."""
    return "ab" * 32 if url == URI else pytest.fail(f"addURIAndSha names {url}")


def test_the_krew_template_keeps_its_placeholders() -> None:
    """The committed template holds no release's values: its version and the
    archive's uri and sha256 are krew-release-bot's placeholders."""
    text = krewpkg.TEMPLATE.read_text()
    assert "  version: {{ .TagName }}\n" in text
    uri_template = URI.replace(TAG, "{{ .TagName }}")
    assert f'    {{{{ addURIAndSha "{uri_template}" .TagName }}}}\n' in text
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert not re.search(r"(?m)\b[0-9a-f]{64}\b|^\s*(sha256|uri):|\bv\d+\.\d+\.\d+\b", body)


def test_the_krew_template_renders_a_manifest_krew_accepts() -> None:
    text = krewpkg.render(krewpkg.TEMPLATE.read_text(), TAG, _sha256_of)
    doc = yaml.safe_load(text)
    assert krewpkg.problems(doc) == []
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert (doc["kind"], doc["metadata"]["name"], doc["spec"]["version"]) == (
        "Plugin",
        "bootc",
        TAG,
    )
    (platform,) = doc["spec"]["platforms"]
    assert (platform["uri"], platform["sha256"]) == (URI, "ab" * 32)
    assert platform["bin"] == "kubectl-bootc"
    assert platform["selector"]["matchExpressions"][0]["values"] == ["linux", "darwin"]
    scripts = (REPO / "pyproject.toml").read_text()
    assert 'kubectl-bootc = "bootc_operator.kubectl.main:main"' in scripts


def test_render_is_krew_release_bots_language() -> None:
    """``addURIAndSha`` as the bot writes it (sha256 indented by 4), ``.Version``,
    and an action it does not know is an error, never left in the manifest."""
    template = (
        'v: {{.Version}}\n  - x: 1\n    {{addURIAndSha "https://h/{{ .TagName }}/a" .TagName}}\n'
    )
    assert krewpkg.render(template, "v0.3.0", lambda url: f"sha-of-{url}") == (
        "v: 0.3.0\n  - x: 1\n    uri: https://h/v0.3.0/a\n    sha256: sha-of-https://h/v0.3.0/a\n"
    )
    for bad in ("{{ .Tag }}", "{{- .TagName }}", '{{ addURIAndSha "u" "v1" }}', "{{ end }}"):
        with pytest.raises(ValueError, match="line 1: a template action render does not know"):
            krewpkg.render(bad, TAG, _sha256_of)


def test_problems_names_what_krew_refuses() -> None:
    doc = yaml.safe_load(krewpkg.render(krewpkg.TEMPLATE.read_text(), TAG, _sha256_of))
    platform = doc["spec"]["platforms"][0]
    platform["sha256"], platform["bin"] = "ab", "other"
    del platform["selector"]
    doc["kind"], doc["spec"]["version"] = "Pluginn", "1.2.3"
    assert krewpkg.problems(doc) == [
        "kind is not Plugin",
        "version '1.2.3'",
        "platforms[0]: no selector",
        "platforms[0]: uri " + repr(URI),
        "platforms[0]: sha256",
        "platforms[0]: bin is not kubectl-bootc",
        "platforms[0]: bin not in files",
    ]


def test_a_release_of_another_version_than_the_trees_is_refused(tmp_path: Path) -> None:
    for tag, problem in (("1.2.3", "vMAJOR.MINOR.PATCH"), ("v99.0.0", "this tree is v")):
        with pytest.raises(ValueError, match=problem):
            krewpkg.release(tag, tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before building


def test_every_documented_release_command_parses() -> None:
    commands = [
        shlex.split(line.split("#")[0])
        for line in userdocs.shell_commands(userdocs.text())
        if line.startswith("hack/krew-archive ")
    ]
    assert commands, "docs/development.md shows the release step"
    for argv in commands:
        args = krewpkg.build_parser().parse_args(argv[1:])
        assert re.fullmatch(r"v\d+\.\d+\.\d+", args.version), argv


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
