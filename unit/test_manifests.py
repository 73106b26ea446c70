"""The install manifests as files: layout, workload settings, RBAC hygiene.

What the apiserver thinks of them (dry-run, RBAC decisions, the admission
policy) and the rendered ``install.yaml``'s freshness are tested in
``e2e/test_security.py``; the Prometheus kit in ``e2e/test_prometheus_kit.py``.
Here: the kustomize tree names every file, the container args are flags the
real CLI accepts, the Deployment
and DaemonSet carry the settings the design asks for, and every RBAC rule is
commented and free of wildcards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootc_operator import cli
from bootc_operator.api import constants as c
from bootc_operator.api.crdgen import all_crds
from bootc_operator.api.imageref import InvalidImageRef
from hack.installgen import INSTALL_YAML, SHIPPED_IMAGE, image_override, stale_chart_files

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "bootc-operator"
IMAGE = "ghcr.io/bootc-dev/bootc-operator-py"

Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def one(path: Path, kind: str) -> Obj:
    docs = [d for d in load(path) if d["kind"] == kind]
    assert len(docs) == 1, f"{path}: expected one {kind}"
    return docs[0]


def kustomizations() -> list[Path]:
    return sorted(MANIFESTS.glob("**/kustomization.yaml"))


# ------------------------------------------------------------------ layout


def test_crd_kustomization_names_every_generated_crd() -> None:
    kust = yaml.safe_load((MANIFESTS / "crd" / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(all_crds())


def test_chart_generated_files_are_fresh() -> None:
    """The Helm chart's crds/ and files/ are what hack/gen-install writes (the CRDs
    of install.yaml, the Prometheus kit's rules and dashboard)."""
    assert stale_chart_files(INSTALL_YAML.read_text()) == [], "run hack/gen-install"


@pytest.mark.parametrize("kust", kustomizations(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_kustomization_resources_exist(kust: Path) -> None:
    doc = yaml.safe_load(kust.read_text())
    for res in doc.get("resources", []):
        target = kust.parent / res
        assert target.exists(), f"{kust}: {res} does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").exists(), f"{target} is not a kustomization"
    for gen in doc.get("configMapGenerator", []):
        for spec in gen.get("files", []):
            assert (kust.parent / spec.split("=", 1)[-1]).exists(), spec


def test_default_install_composes_everything_with_a_pinned_image() -> None:
    kust = yaml.safe_load((MANIFESTS / "default" / "kustomization.yaml").read_text())
    assert set(kust["resources"]) == {
        "namespace.yaml",
        "../crd",
        "../rbac",
        "../admission",
        "../controller",
        "../daemon",
        "../networkpolicy",
    }
    # No namespace transformer: it would move the Events Role out of "default".
    assert "namespace" not in kust
    (image,) = kust["images"]
    assert image == {"name": "bootc-operator", "newName": IMAGE, "newTag": "v0.1.0"}


def test_namespaced_objects_name_their_namespace() -> None:
    for path in MANIFESTS.glob("*/*.yaml"):
        if path.name == "kustomization.yaml" or path.parent.name == "crd":
            continue
        for doc in load(path):
            if doc["kind"] in ("Role", "RoleBinding"):
                assert doc["metadata"]["namespace"] in (NAMESPACE, "default"), path
            elif doc["kind"] in ("ServiceAccount", "Deployment", "DaemonSet", "Service"):
                assert doc["metadata"]["namespace"] == NAMESPACE, path


def test_namespace_allows_the_privileged_daemon() -> None:
    ns = one(MANIFESTS / "default" / "namespace.yaml", "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    comment = (MANIFESTS / "default" / "namespace.yaml").read_text().split("apiVersion")[0]
    assert "privileged" in comment and "hostPID" in comment, "say why in a comment"


# ------------------------------------------------------------------ workloads


def _container(workload: Obj) -> Obj:
    containers: list[Obj] = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env_field(container: Obj, name: str) -> str:
    for env in container["env"]:
        if env["name"] == name:
            return str(env["valueFrom"]["fieldRef"]["fieldPath"])
    raise AssertionError(f"no env {name}")


def test_controller_deployment() -> None:
    dep = one(MANIFESTS / "controller" / "deployment.yaml", "Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    ctr = _container(dep)
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == "bootc-operator-controller"
    assert ctr["image"] == "bootc-operator"  # set by kustomize `images:`
    args = cli.build_parser().parse_args(ctr["args"])
    assert args.mode == "controller"
    assert args.leader_elect is True
    assert args.log_format == "json"
    assert args.leader_election_id == "bootc-operator-controller"
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert args.metrics_bind_address == f":{ports['metrics']}" == ":8080"
    assert args.metrics_secure is True, "metrics over HTTPS with the token check"
    assert args.health_probe_bind_address == f":{ports['health']}" == ":8081"
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert _env_field(ctr, "POD_NAME") == "metadata.name"
    assert _env_field(ctr, "POD_NAMESPACE") == "metadata.namespace"
    assert ctr["resources"]["requests"].keys() == {"cpu", "memory"}
    assert "memory" in ctr["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sec = ctr["securityContext"]
    assert sec["allowPrivilegeEscalation"] is False
    assert sec["readOnlyRootFilesystem"] is True
    assert sec["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in sec
    assert not pod.get("hostPID") and not pod.get("hostNetwork")


def test_daemon_daemonset() -> None:
    ds = one(MANIFESTS / "daemon" / "daemonset.yaml", "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    ctr = _container(ds)
    assert pod["serviceAccountName"] == "bootc-operator-daemon"
    assert pod["nodeSelector"] == {c.MANAGED_LABEL: ""}
    assert pod["hostPID"] is True
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["priorityClassName"] == "system-node-critical"
    assert not pod.get("hostNetwork")
    assert ctr["image"] == "bootc-operator"
    args = cli.build_parser().parse_args(ctr["args"])
    assert args.mode == "daemon"
    assert args.log_format == "json"
    # The defaults the host access depends on are not overridden.
    assert args.host_exec == cli.DEFAULT_HOST_EXEC
    assert args.host_root == "/proc/1/root"
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert args.metrics_bind_address == f":{ports['metrics']}" == ":8090"
    assert args.metrics_secure is True, "metrics over HTTPS with the token check"
    assert args.health_probe_bind_address == f":{ports['health']}" == ":8091"
    assert _env_field(ctr, "NODE_NAME") == "spec.nodeName"
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert ctr["readinessProbe"]["httpGet"]["port"] == "health"
    sec = ctr["securityContext"]
    assert sec["privileged"] is True
    assert sec["runAsUser"] == 0
    assert sec["runAsNonRoot"] is False
    assert "memory" in ctr["resources"]["limits"]


@pytest.mark.parametrize(
    ("path", "component", "port"),
    [("controller/service.yaml", "controller", 8080), ("daemon/service.yaml", "daemon", 8090)],
)
def test_metrics_services_select_their_pods(path: str, component: str, port: int) -> None:
    svc = one(MANIFESTS / path, "Service")
    assert svc["spec"]["selector"] == {
        "app.kubernetes.io/name": "bootc-operator",
        "app.kubernetes.io/component": component,
    }
    (p,) = svc["spec"]["ports"]
    assert (p["name"], p["port"], p["targetPort"]) == ("metrics", port, "metrics")
    workload = next(
        d
        for f in (MANIFESTS / component).glob("*.yaml")
        for d in load(f)
        if d["kind"] in ("Deployment", "DaemonSet")
    )
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert workload["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]


@pytest.mark.parametrize("component", ["controller", "daemon"])
def test_only_the_monitoring_namespace_reaches_the_metrics_port(component: str) -> None:
    """Issue 37 item 2: made-up tokens from anywhere each cost a TokenReview. The
    component's NetworkPolicy selects its Pods and lets Pods of the namespace
    "monitoring" reach the metrics port, anyone the probe port, and nothing else."""
    policies = {
        d["metadata"]["name"]: d for d in load(MANIFESTS / "networkpolicy" / "networkpolicy.yaml")
    }
    policy = policies[f"bootc-operator-{component}"]
    assert policy["metadata"]["namespace"] == NAMESPACE
    workload = next(
        d
        for f in (MANIFESTS / component).glob("*.yaml")
        for d in load(f)
        if d["kind"] in ("Deployment", "DaemonSet")
    )
    assert (
        policy["spec"]["podSelector"]["matchLabels"] == workload["spec"]["selector"]["matchLabels"]
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    metrics, probes = policy["spec"]["ingress"]
    assert metrics == {
        "from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
        "ports": [{"port": "metrics", "protocol": "TCP"}],
    }
    assert probes == {"ports": [{"port": "health", "protocol": "TCP"}]}
    # every port the Pod serves is one of the two, by name
    ports = {p["name"] for p in _container(workload)["ports"]}
    assert ports == {"metrics", "health"}


# ------------------------------------------------------------------ RBAC


def rbac_docs() -> list[Obj]:
    return [d for p in sorted((MANIFESTS / "rbac").glob("*.yaml")) for d in load(p)]


def test_every_rbac_rule_has_a_justification_comment() -> None:
    for path in sorted((MANIFESTS / "rbac").glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^\s*- apiGroups:", line):
                before = [b.strip() for b in lines[:i] if b.strip()]
                assert before and before[-1].startswith("#"), (
                    f"{path.name}:{i + 1}: rule without a justification comment above it"
                )


def test_rbac_has_no_wildcards_and_no_dangerous_verbs() -> None:
    for doc in rbac_docs():
        for rule in doc.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), (doc["metadata"]["name"], rule)
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(
                rule["verbs"]
            ), rule
            assert not {"pods/exec", "pods/attach", "serviceaccounts/token"} & set(
                rule.get("resources", [])
            ), rule


def test_secret_rules_are_bound_only_in_the_operator_namespace() -> None:
    docs = rbac_docs()
    secret_roles = {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
        and any("secrets" in r.get("resources", []) for r in d.get("rules", []))
    }
    # the daemon reads none: its pull secret comes sealed to its key (issue 27 §2)
    assert secret_roles == {("ClusterRole", "bootc-operator-controller-secrets")}
    for d in docs:
        if d["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = (d["roleRef"]["kind"], d["roleRef"]["name"])
        if ref in secret_roles:
            assert d["kind"] == "RoleBinding", (
                f"{d['metadata']['name']} grants Secrets cluster-wide"
            )
            assert d["metadata"]["namespace"] == NAMESPACE


def test_each_binding_targets_one_of_our_service_accounts() -> None:
    sas = {
        d["metadata"]["name"]
        for d in load(MANIFESTS / "rbac" / "service_accounts.yaml")
        if d["kind"] == "ServiceAccount"
    }
    assert sas == {"bootc-operator-controller", "bootc-operator-daemon"}
    for d in rbac_docs():
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert d["subjects"], d["metadata"]["name"]
            for subject in d["subjects"]:
                assert subject["kind"] == "ServiceAccount"
                assert (subject["namespace"], subject["name"]) in {(NAMESPACE, s) for s in sas}


def test_metrics_roles_reviews_for_both_processes_and_a_reader_role_unbound() -> None:
    """Both processes review scrapers' tokens (TokenReview + SubjectAccessReview); the
    reader ClusterRole grants get on /metrics alone and is left for the admin to bind
    to their Prometheus."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rbac_docs() if "metadata" in d}
    auth = docs[("ClusterRole", "bootc-operator-metrics-auth")]
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in auth["rules"]] == [
        (["authentication.k8s.io"], ["tokenreviews"], ["create"]),
        (["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
    ]
    binding = docs[("ClusterRoleBinding", "bootc-operator-metrics-auth")]
    assert binding["roleRef"]["name"] == "bootc-operator-metrics-auth"
    assert {s["name"] for s in binding["subjects"]} == {
        "bootc-operator-controller",
        "bootc-operator-daemon",
    }
    reader = docs[("ClusterRole", "bootc-operator-metrics-reader")]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bound = {d["roleRef"]["name"] for d in docs.values() if "roleRef" in d}
    assert "bootc-operator-metrics-reader" not in bound


def test_admission_policy_matches_the_daemon_service_account() -> None:
    docs = load(MANIFESTS / "admission" / "policy.yaml")
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (cond,) = policy["spec"]["matchConditions"]
    assert f"system:serviceaccount:{NAMESPACE}:bootc-operator-daemon" in cond["expression"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [c.GROUP]
    assert set(rule["resources"]) == {c.NODE_PLURAL, f"{c.NODE_PLURAL}/status"}


def test_deploy_image_override_replaces_the_shipped_image() -> None:
    """``make deploy IMG=...``: a tag, a digest, or a tag with a digest (the digest
    wins: kustomize writes name@digest); a short name is refused with the fix."""
    assert image_override("quay.io/me/op:v1") == {
        "name": IMAGE,
        "newName": "quay.io/me/op",
        "newTag": "v1",
    }
    assert image_override("localhost:5000/op") == {
        "name": IMAGE,
        "newName": "localhost:5000/op",
        "newTag": "latest",
    }
    digest = "sha256:" + "ab" * 32
    for ref in (f"quay.io/me/op@{digest}", f"quay.io/me/op:v1@{digest}"):
        assert image_override(ref) == {"name": IMAGE, "newName": "quay.io/me/op", "digest": digest}
    with pytest.raises(InvalidImageRef, match="fully qualified"):
        image_override("op:v1")
    assert SHIPPED_IMAGE == IMAGE
