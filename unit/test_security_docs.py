"""The RBAC table of docs/security.md is the RBAC of manifests/rbac, rule for rule.

Every (who, where, API group, resource, resource name, verb) that a binding in
``manifests/rbac/`` grants one of the two ServiceAccounts is a row of the guide's
Security table, and the table lists nothing that no rule grants. A ClusterRole
bound to neither (one the admin binds, such as a metrics reader) is listed under
its own name, where "bind it". Each row says why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RBAC = ROOT / "manifests" / "rbac"
NAMESPACE = "bootc-operator"
ACCOUNTS = {"bootc-operator-controller": "controller", "bootc-operator-daemon": "daemon"}
UNBOUND = "bind it"

Grant = tuple[str, str, str, str, str, str]  # who, where, group, resource, name, verb


def _objects() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((RBAC / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((RBAC / name).read_text()) if d]
    return docs


def _rule_grants(who: str, where: str, rule: dict[str, Any]) -> set[Grant]:
    names = rule.get("resourceNames") or [""]
    out: set[Grant] = set()
    for verb in rule["verbs"]:
        for url in rule.get("nonResourceURLs", []):
            out.add((who, where, "-", url, "", verb))
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for name in names:
                    out.add((who, where, group or "core", resource, name, verb))
    return out


def manifest_grants(docs: list[dict[str, Any]]) -> set[Grant]:
    """What the RBAC objects DOCS grant the operator's ServiceAccounts, plus the rules
    of ClusterRoles bound to neither (under their own name)."""
    roles = {
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    grants: set[Grant] = set()
    bound: set[str] = set()
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace", "")
        role = roles[(ref["kind"], ref["name"], namespace if ref["kind"] == "Role" else "")]
        where = "cluster" if binding["kind"] == "ClusterRoleBinding" else f"ns {namespace}"
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount", subject
            assert subject["namespace"] == NAMESPACE, subject
            who = ACCOUNTS[subject["name"]]
            bound.add(ref["name"])
            for rule in role["rules"]:
                grants |= _rule_grants(who, where, rule)
    for (kind, name, _), role in roles.items():
        if kind == "ClusterRole" and name not in bound:
            for rule in role["rules"]:
                grants |= _rule_grants(name, UNBOUND, rule)
    return grants


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def documented_grants(page: str) -> set[Grant]:
    """The grants PAGE's first table lists (its rows, verbs expanded)."""
    lines = page[page.index("\n|") + 1 :].splitlines()
    lines = lines[: next((i for i, line in enumerate(lines) if not line.startswith("|")), None)]
    header = _cells(lines[0])
    assert header == ["who", "where", "API group", "resource", "verbs", "why"], header
    grants: set[Grant] = set()
    for line in lines[2:]:
        who, where, group, resource, verbs, why = _cells(line)
        assert why, f"a row without a why: {line}"
        who = who.strip("`")
        where = where.replace("`", "")
        m = re.fullmatch(r"`([^`]+)`(?: name `([^`]+)`)?", resource)
        assert m is not None, f"resource cell not `RESOURCE` [name `NAME`]: {resource}"
        for verb in (v.strip() for v in verbs.split(",")):
            grants.add((who, where, group, m[1], m[2] or "", verb))
    return grants


def test_every_rbac_rule_is_in_the_guide_and_nothing_else() -> None:
    granted = manifest_grants(_objects())
    listed = documented_grants((ROOT / "docs" / "security.md").read_text())
    missing = sorted(granted - listed)
    extra = sorted(listed - granted)
    assert not missing, "granted by manifests/rbac but not in docs/security.md's table:\n" + (
        "\n".join(map(str, missing))
    )
    assert not extra, "in docs/security.md's table but granted by no rule:\n" + (
        "\n".join(map(str, extra))
    )


def test_the_comparison_sees_a_change_either_way() -> None:
    """A verb added to a rule, and a rule dropped, both show."""
    docs = _objects()
    before = manifest_grants(docs)
    daemon = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "bootc-operator-daemon"
    )
    status = next(r for r in daemon["rules"] if r["resources"] == ["bootcnodes/status"])
    status["verbs"].append("update")
    grant = ("daemon", "cluster", "node.bootc.dev", "bootcnodes/status", "")
    assert manifest_grants(docs) - before == {(*grant, "update")}
    daemon["rules"] = []
    assert (*grant, "patch") not in manifest_grants(docs)
    reader = {
        "kind": "ClusterRole",
        "metadata": {"name": "bootc-operator-metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    assert ("bootc-operator-metrics-reader", UNBOUND, "-", "/metrics", "", "get") in (
        manifest_grants([*docs, reader])
    )


@pytest.mark.parametrize(
    "row",
    [
        "| daemon | cluster | core | secrets | get | no backticks |",
        "| daemon | cluster | core | `secrets` | get |  |",
    ],
)
def test_malformed_rows_are_refused(row: str) -> None:
    page = (
        "\n# Security\n| who | where | API group | resource | verbs | why |\n"
        "|---|---|---|---|---|---|\n" + row + "\n\n## Next\n"
    )
    with pytest.raises(AssertionError):
        documented_grants(page)
