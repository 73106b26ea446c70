"""The user documentation (README.md and docs/*.md) holds together: every relative
link and anchor resolves, every command it shows is checked by a test (plain
kubectl, curl and hack/controlplane: run as written, line for line) or listed
here as one no test runs, with the reason, every YAML example fits the CRD, and
the generated API reference is fresh.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootc_operator import cli
from hack import apidocs, userdocs

ROOT = userdocs.ROOT

#: Programs whose every command in the documentation a test parses or runs.
CHECKED = {
    "bootc-operator": "unit/test_cli.py parses every one",
    "hack/sim": "unit/hack/test_sim_faults.py parses every one; e2e/test_sim.py runs the "
    "faults session",
    "kubectl bootc": "unit/kubectl/test_kubectl_cli.py parses every one "
    "(e2e/test_kubectl_bootc.py runs the subcommands through the real kubectl; "
    "e2e/test_quickstart.py the quick start's)",
    "helm": "each is a line of docs/install.md's Helm block, which e2e/test_chart.py runs",
    "hack/krew-archive": "unit/kubectl/test_kubectl_cli.py parses every one (e2e/test_krew.py runs "
    "the release step into a temporary directory)",
    "make": "its target is one of the Makefile's (checked here)",
    "kubectl": "each line is one a test runs as written (RUN_AS_WRITTEN) or is in NOT_RUN",
    "curl": "each line is in NOT_RUN",
    "hack/controlplane": "each line is one a test runs as written (RUN_AS_WRITTEN)",
}

#: The tests that run documented lines as written, and which lines (``_run_as_written``).
RUN_AS_WRITTEN = {
    "e2e/test_quickstart.py": "the quick start (hack.userdocs.quickstart_commands) and "
    "docs/development.md's local control plane",
    "e2e/test_chart.py": "docs/install.md's Helm block",
}

#: The lines of kubectl, curl and hack/controlplane the documentation shows that
#: no test runs as written, and why: each needs what the harness has not (a
#: kubelet to run the image, a published image, another product's CRDs), or is a
#: template the reader fills in. A test checks what each one does by other means.
NOT_RUN = {
    "kubectl -n bootc-operator patch daemonset bootc-operator-daemon --type=json -p "
    '\'[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": '
    '"--enforce-container-sigpolicy"}]\'': "an installed operator's DaemonSet; "
    "test_the_sigpolicy_patch_fits_install_yaml applies it to install.yaml's, "
    "e2e/test_daemon_sigpolicy.py runs daemons with the flag",
    "kubectl apply -f bootc-operator.yaml": "the install of your own pushed image: its Pods "
    "need kubelets; e2e/test_realnode.py applies the rendered install on a real node",
    "kubectl delete -f bootc-operator.yaml": "the same install's removal (e2e/test_realnode.py)",
    "make -s deploy IMG=localhost/bootc-operator:dev | kubectl apply -f -": "kind's cluster",
    "kubectl apply -f manifests/install.yaml": "its Pods need kubelets and the published image; "
    "e2e/test_chart.py installs the chart, whose render is this file, and "
    "e2e/test_metrics_auth.py applies it to a control plane of its own",
    "kubectl apply -k manifests/default": "the kustomize tree hack/gen-install renders into "
    "install.yaml (unit/test_manifests.py: the render is fresh)",
    "kubectl delete -f manifests/install.yaml": "the removal of that install",
    "kubectl create clusterrolebinding prometheus-bootc-operator-metrics "
    "--clusterrole=bootc-operator-metrics-reader --serviceaccount=monitoring:prometheus-k8s": (
        "a Prometheus of kube-prometheus; e2e/test_metrics_auth.py binds the same ClusterRole"
    ),
    "kubectl --namespace=bootc-operator create serviceaccount metrics-peek": "the metrics peek "
    "needs a running controller Pod (port-forward: a kubelet); e2e/test_metrics_auth.py checks "
    "the same token, role and answers",
    "kubectl create clusterrolebinding metrics-peek --clusterrole=bootc-operator-metrics-reader "
    "--serviceaccount=bootc-operator:metrics-peek": "the metrics peek (above)",
    "TOKEN=$(kubectl --namespace=bootc-operator create token metrics-peek)": "the metrics peek",
    "kubectl --namespace=bootc-operator port-forward deploy/bootc-operator-controller 8080 &": (
        "the metrics peek"
    ),
    'curl -sk -H "Authorization: Bearer $TOKEN" https://127.0.0.1:8080/metrics | head': (
        "the metrics peek"
    ),
    "kubectl apply -k manifests/prometheus": "needs the Prometheus Operator's CRDs; "
    "e2e/test_prometheus_kit.py applies the same kustomize output to an apiserver with them",
    "kubectl -n argocd patch configmap argocd-cm --patch-file manifests/argocd/argocd-cm.yaml": (
        "an Argo CD install's ConfigMap; e2e/test_gitops.py applies the same patch file to an "
        "argocd-cm on the harness apiserver and runs Argo CD's own health code on the result"
    ),
    "kubectl -n NS create rolebinding bootc-operator-controller-secrets "
    "--clusterrole=bootc-operator-controller-secrets "
    "--serviceaccount=bootc-operator:bootc-operator-controller": "a template (NS is the "
    "reader's); e2e/test_security.py checks what the binding grants",
}

#: Programs the documentation shows that no test runs as written, and why that is fine.
ILLUSTRATIVE = {
    "hack/podman": "podman on the project's storage; the script exists (checked here)",
    "kind": "kind's own CLI, not part of this project",
    "head": "a pipe's tail",
    "cat": "a heredoc: the pool file of the faults session (e2e/test_sim.py uses the same pool)",
    "pool": "a shell function the faults session defines (around hack/sim pool)",
    "xdg-open": "opens a browser",
    "printf": "writes the sim hosts' policy file (docs/simulation.md); the same policy is "
    "e2e/test_daemon_sigpolicy.py's",
    "hack/fake-host": "the simulated host's CLI; unit/hack/test_fakebootc_policy.py runs its "
    "`policy` command as docs/simulation.md shows it",
}


def _development_block() -> str:
    """docs/development.md's local control plane (e2e/test_quickstart.py runs it)."""
    text = (ROOT / "docs" / "development.md").read_text()
    return userdocs.section(text, "A local control plane")


def _programs(command: str) -> list[tuple[str, str]]:
    """Every simple command of the shell line COMMAND (also inside ``$(...)`` and
    ``{ ...; }``) as (program, the simple command's text). ``kubectl bootc`` is one
    program; variable assignments and ``eval`` are skipped."""
    line = re.sub(r"(^|\s)#.*$", "", command)  # a comment
    line = re.sub(r"'[^']*'", "''", line)  # quoted text is no command...
    line = re.sub(r'"([^"]*)"', lambda m: m[1] if "$(" in m[1] else '""', line)  # ...but $(...) is
    tokens = re.findall(r"\$\(|&&|\|\||[|;&(){}]|[^\s|;&(){}]+", line)
    found: list[tuple[str, str]] = []
    start = True
    for i, token in enumerate(tokens):
        if token in ("$(", "&&", "||", "|", ";", "&", "(", "{"):
            start = True
            continue
        if token in (")", "}") or not start:
            continue
        if re.match(r"^\w+=", token) or token in ("eval", "!"):
            continue
        start = False
        rest = []
        for word in tokens[i + 1 :]:
            if word in ("$(", "&&", "||", "|", ";", "&", ")", "}"):
                break
            rest.append(word)
        program = "bootc-operator" if Path(token).name == "bootc-operator" else token
        if program == "kubectl" and rest[:1] == ["bootc"]:
            program = "kubectl bootc"
        found.append((program, " ".join([token, *rest])))
    return found


def test_program_extraction() -> None:
    line = 'eval "$(hack/sim up --nodes 3)"   # prints export KUBECONFIG=...'
    assert _programs(line) == [("hack/sim", "hack/sim up --nodes 3")]
    line = "TOKEN=$(kubectl create token x) && curl -H 'a: $TOKEN' https://x | head"
    assert [p for p, _ in _programs(line)] == ["kubectl", "curl", "head"]
    line = 'pool() { hack/sim pool --image "$SIM_REGISTRY/os:$1"; }'
    assert [p for p, _ in _programs(line)] == ["pool", "hack/sim"]
    assert [p for p, _ in _programs(".venv/bin/bootc-operator daemon --x")] == ["bootc-operator"]
    assert [p for p, _ in _programs("kubectl bootc why w   # kubectl get")] == ["kubectl bootc"]


def test_shell_command_extraction() -> None:
    sample = (
        "```sh\nhack/sim up \\\n  --nodes 3   # six\n# a comment\ncat > p.yaml <<'EOF'\n"
        "kind: X\nEOF\nhack/sim down\n```\n"
        "```console\n$ kubectl get bnp\nNAME   PHASE\n```\n"
        "```yaml\nkubectl: no\n```\n"
        "- item\n  ```sh\n  kubectl bootc why x\n  ```\n"
    )
    assert userdocs.shell_commands(sample) == [
        "hack/sim up    --nodes 3   # six",
        "cat > p.yaml <<'EOF'",
        "hack/sim down",
        "kubectl get bnp",
        "kubectl bootc why x",
    ]


def _helm_block() -> list[str]:
    install = (ROOT / "docs" / "install.md").read_text()
    section = userdocs.section(install, "Install with Helm")
    block = next(b for b in userdocs.blocks(section) if b.language == "sh")
    return [line.strip() for line in block.body.splitlines() if line.strip()]


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", makefile, flags=re.M))


def _check(program: str, simple: str, command: str, where: str) -> None:
    """One simple command SIMPLE (of the line COMMAND) running PROGRAM."""
    if program.startswith("hack/"):
        script = ROOT / program
        assert script.is_file() and os.access(script, os.X_OK), f"no script: {where}"
    if program == "helm":
        line = re.sub(r"\s+#.*$", "", command).strip()
        assert line in _helm_block(), f"a helm command e2e/test_chart.py does not run: {where}"
    if program == "make":
        words = [w for w in simple.split()[1:] if not w.startswith("-") and "=" not in w]
        assert words and words[0] in _make_targets(), f"no such make target: {where}"
    if program in ("kubectl", "curl", "hack/controlplane"):
        line = userdocs.bare(command)
        assert line in _run_as_written() or line in NOT_RUN, (
            f"{where}: no test runs this line as written; run it (RUN_AS_WRITTEN) or "
            "list it in NOT_RUN with the reason"
        )
    if program not in CHECKED and program not in ILLUSTRATIVE:
        pytest.fail(
            f"{where}: no test checks `{program}` commands; check them, or list "
            "the program in ILLUSTRATIVE with the reason"
        )


def _run_as_written() -> set[str]:
    """The lines the tests of RUN_AS_WRITTEN run."""
    development = userdocs.shell_commands(_development_block())
    lines = [*userdocs.quickstart_commands(), *development, *_helm_block()]
    return {userdocs.bare(line) for line in lines}


def test_every_shell_command_is_checked_or_listed_as_illustrative() -> None:
    seen: set[str] = set()
    lines: set[str] = set()
    for path in userdocs.files():
        for command in userdocs.shell_commands(path.read_text()):
            lines.add(userdocs.bare(command))
            for program, simple in _programs(command):
                seen.add(program)
                _check(program, simple, command, f"{path.relative_to(ROOT)}: `{command}`")
    # Every entry is still used: a stale one would hide a program or line nobody checks.
    assert seen >= set(CHECKED) | set(ILLUSTRATIVE) - {"head"}, (
        set(CHECKED) | set(ILLUSTRATIVE)
    ) - seen
    assert set(NOT_RUN) <= lines, set(NOT_RUN) - lines
    assert not set(NOT_RUN) & _run_as_written(), "a line both run and listed as not run"


def test_the_sigpolicy_patch_fits_install_yaml() -> None:
    """docs/security.md's JSON patch, applied to install.yaml's DaemonSet, adds the flag
    to the daemon container's arguments, which the daemon's parser accepts."""
    line = next(k for k in NOT_RUN if "enforce-container-sigpolicy" in k)
    (op,) = json.loads(shlex.split(line)[-1])
    ds = next(
        d
        for d in yaml.safe_load_all((ROOT / "manifests" / "install.yaml").read_text())
        if d and d["kind"] == "DaemonSet" and d["metadata"]["name"] == "bootc-operator-daemon"
    )
    assert ds["metadata"]["namespace"] == "bootc-operator" and op["op"] == "add"
    *path, last = op["path"].strip("/").split("/")
    target: Any = ds
    for part in path:
        target = target[int(part)] if isinstance(target, list) else target[part]
    assert last == "-" and isinstance(target, list)
    target.append(op["value"])
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert cli.build_parser().parse_args(args).enforce_container_sigpolicy is True


def test_the_quick_start_runs_the_readmes_first_pool_and_watching_it() -> None:
    """The quick start e2e/test_quickstart.py runs starts with the README's first
    pool, applied and waited for, and ends by uninstalling the pools."""
    commands = [userdocs.bare(c) for c in userdocs.quickstart_commands()]
    assert commands[0].startswith("kubectl apply -f pool.yaml && kubectl wait "), commands
    assert "kubectl get bnp" in commands and "kubectl bootc status workers" in commands
    assert commands[-1] == userdocs.UNINSTALL_POOLS


def test_every_path_a_command_names_exists() -> None:
    """``kubectl apply -f manifests/...``, ``helm install ... manifests/chart/...``: the
    repository paths the commands name are there."""
    for path in userdocs.files():
        for command in userdocs.shell_commands(path.read_text()):
            for word in re.findall(r"(?<![\w./-])((?:manifests|plugins|hack)/[\w./-]+)", command):
                assert (ROOT / word).exists(), f"{path.relative_to(ROOT)}: `{command}` names {word}"


def test_every_relative_link_and_anchor_resolves() -> None:
    checked = 0
    for path in userdocs.files():
        for target in userdocs.links(path.read_text()):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}: ({target})"
            assert linked.exists(), f"{where}: no such file"
            assert linked.is_relative_to(ROOT), f"{where}: outside the repository"
            if fragment:
                assert linked.suffix == ".md", f"{where}: an anchor into a non-Markdown file"
                assert fragment in userdocs.anchors(linked.read_text()), f"{where}: no such heading"
            checked += 1
    assert checked > 20, "the pages link to each other"


def test_every_guide_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = {t.partition("#")[0] for t in userdocs.links(readme)}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, sorted(pages - linked)


def test_anchor_slugs() -> None:
    assert userdocs.anchor("Metrics: HTTPS and a token") == "metrics-https-and-a-token"
    assert (
        userdocs.anchor("Rollout policies (all optional; a pool written for the Go operator works)")
        == "rollout-policies-all-optional-a-pool-written-for-the-go-operator-works"
    )
    assert userdocs.anchor("kubectl bootc: what a rollout waits for") == (
        "kubectl-bootc-what-a-rollout-waits-for"
    )
    assert userdocs.anchors("# A\n```sh\n# not a heading\n```\n## A\n") == {"a", "a-1"}


def test_the_api_reference_is_fresh() -> None:
    committed = (ROOT / "docs" / "api.md").read_text()
    assert committed == apidocs.render(apidocs.committed_crds()), "stale: run hack/gen-crds"
    # Every spec field is in it (a field the renderer skipped would go unnoticed).
    for field in ("spec.rollout.maintenanceWindows[].timeZone", "spec.health.onFailure"):
        assert f"| `{field}` |" in committed, field


def _unknown_fields(value: object, schema: dict[str, Any], path: str) -> list[str]:
    """Where VALUE does not fit the CRD's SCHEMA: a field it lacks, a value outside its
    enum, a type it does not take."""
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, int | str) else [f"{path}: not an int or string"]
    kind = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    if kind == "object" and isinstance(value, dict):
        if "additionalProperties" in schema or "properties" not in schema:
            return []  # a map, or an object the CRD leaves open (metadata)
        props = schema.get("properties", {})
        problems = []
        for key, inner in value.items():
            if key not in props:
                problems.append(f"{path}.{key}: no such field")
            else:
                problems += _unknown_fields(inner, props[key], f"{path}.{key}")
        return problems
    if kind == "array" and isinstance(value, list):
        return [
            p
            for i, v in enumerate(value)
            for p in _unknown_fields(v, schema["items"], f"{path}[{i}]")
        ]
    python = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
    if kind in python and not isinstance(value, python[kind]):
        return [f"{path}: {value!r} is not a {kind}"]
    return []


#: Other products' kinds the guide shows in YAML (how to wire the operator into them):
#: parsed, not checked against their schemas, which this repository does not have.
OTHER_KINDS = {
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"): "Flux's, docs/fleets.md",
    ("argoproj.io/v1alpha1", "ApplicationSet"): "Argo CD's, docs/fleets.md",
}


def test_every_yaml_example_fits_the_crd() -> None:
    """The pools and pool fragments the guide shows use fields the CRD has, with
    values it takes (a renamed field or a typo in an example fails here); another
    product's object must be of a kind listed in OTHER_KINDS."""
    pool_crd = next(
        c for c in apidocs.committed_crds() if c["spec"]["names"]["kind"] == "BootcNodePool"
    )
    schema = pool_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    examples = 0
    for path in userdocs.files():
        for block in userdocs.blocks(path.read_text()):
            if block.language != "yaml":
                continue
            doc = yaml.safe_load(block.body)
            assert isinstance(doc, dict) and "spec" in doc, f"{path.name}: not a pool: {block.body}"
            if (doc.get("apiVersion"), doc.get("kind")) in OTHER_KINDS:
                continue
            problems = _unknown_fields(doc, schema, "")
            assert not problems, f"{path.relative_to(ROOT)}: {problems}\n{block.body}"
            examples += 1
    assert examples >= 5


def test_the_schema_check_finds_a_typo() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"a": {"type": "string", "enum": ["X"]}, "n": {"type": "integer"}},
            }
        },
    }
    assert _unknown_fields({"spec": {"a": "X", "n": 1}}, schema, "") == []
    assert _unknown_fields({"spec": {"b": 1, "a": "Y", "n": "1"}}, schema, "") == [
        ".spec.b: no such field",
        ".spec.a: 'Y' is not one of ['X']",
        ".spec.n: '1' is not a integer",
    ]
