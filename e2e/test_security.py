"""The default install on a real kube-apiserver: freshness, apply, least privilege.

A control plane of its own (the install's ClusterRoles, admission policy and
namespace would otherwise leak into the other tests' cluster), started empty:
no CRDs, no kube-controller-manager.

- ``manifests/install.yaml`` is what ``hack/gen-install`` renders (not stale);
  it passes ``kubectl apply --dry-run=server`` and then really applies.
- Pod Security: the controller's Pod passes the "restricted" level, the
  daemon's needs "privileged" (the level of the operator's namespace).
- RBAC, checked with SubjectAccessReviews and SelfSubjectRulesReviews: each
  ServiceAccount can do what its process needs, nothing on a list of dangerous
  things, and no resource rule beyond the expected ones in any namespace.
- The ValidatingAdmissionPolicy: with a TokenRequest token bound to a Pod on
  node A, the daemon's ServiceAccount may patch BootcNode A's status, not B's;
  a token without a node name may patch none.
- Placement, with a node's own credentials (client certificate
  ``system:node:<name>``, group ``system:nodes``; the apiserver runs the Node
  authorizer and NodeRestriction): the node may set the old label
  ``bootc.dev/managed`` on itself, which no longer places the daemon, and is
  refused the DaemonSet's label; it gets no daemon token, no mirror Pod running
  as the daemon and no pull secret. The controller, with its own
  ServiceAccount's rights, strips the label from a Node without a BootcNode.
- Sealed pull secrets: member nodes mint their daemon's token themselves (kubelet
  certificate, TokenRequest for the daemon Pod bound to them); that token gets no
  Secret (403), publishes a sealing key only in its own BootcNode, and the
  controller (its own ServiceAccount) seals each member's pool secret to that key:
  each node opens its own blob, and no other node's, of its pool or another.
- Signature keys (``spec.image.verification.publicKeySecretRefs``): the controller,
  with its own ServiceAccount, reads a key Secret of its namespace (the pull secrets'
  rule, nothing added) and verifies a cosign signature with it; one elsewhere is
  forbidden, the pool says so and no node is given the digest.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, ApiError
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    list_objects,
    patch_object,
    request_json,
)
from bootc_operator.sealing import NodeKey, Sealed, SealedForAnotherKey, UnsealFailed
from e2e.helpers import condition, image, push, unique_name, wait_for
from hack.installgen import INSTALL_YAML, render
from hack.testenv import ControlPlane, api_client, certs
from hack.testenv.controller import running_controller
from hack.testenv.cosign import Cosign, resolve_cosign
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

NS = "bootc-operator"
CONTROLLER = "bootc-operator-controller"
DAEMON = "bootc-operator-daemon"
POLICY = "bootc-operator-daemon-node-scope"
LEASE = "bootc-operator-controller"
DIGEST = "sha256:" + "a" * 64

NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
NODES_R = Resource("", "v1", "nodes", namespaced=False, kind="Node")
PODS_R = Resource("", "v1", "pods", namespaced=True, kind="Pod")
SAS = Resource("", "v1", "serviceaccounts", namespaced=True, kind="ServiceAccount")
SECRETS_R = Resource("", "v1", "secrets", namespaced=True, kind="Secret")

Obj = dict[str, Any]


def install_docs() -> list[Obj]:
    return [d for d in yaml.safe_load_all(INSTALL_YAML.read_text()) if d]


def workload(kind: str) -> Obj:
    return next(d for d in install_docs() if d["kind"] == kind)


# ------------------------------------------------------------------ the cluster


class Cluster:
    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.dry_run: str = ""
        self.applied: str = ""

    def token_kubeconfig(self, token: str, name: str) -> Path:
        """A kubeconfig for this cluster that authenticates with ``token``."""
        doc = yaml.safe_load(self.cp.kubeconfig.read_text())
        doc["users"] = [{"name": "token", "user": {"token": token}}]
        doc["contexts"][0]["context"]["user"] = "token"
        path = self.cp.state_dir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with ControlPlane(crd_dir=None, controller_manager=False) as cp:
        cl = Cluster(cp)
        # A server-side dry run cannot create the namespace the other objects
        # go to (kubectl sends them one by one), so only it exists beforehand.
        namespace = next(d for d in install_docs() if d["kind"] == "Namespace")
        cp.kubectl("apply", "-f", "-", input=json.dumps(namespace))
        cl.dry_run = cp.kubectl("apply", "--dry-run=server", "-f", str(INSTALL_YAML)).stdout
        cl.applied = cp.kubectl("apply", "-f", str(INSTALL_YAML)).stdout
        cp.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{c.POOL_PLURAL}.{c.GROUP}",
            f"crd/{c.NODE_PLURAL}.{c.GROUP}",
        )
        yield cl


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[ApiClient]:
    client = await api_client(cluster.cp.kubeconfig)
    async with client:
        yield client


# ------------------------------------------------------------------ install.yaml


def test_install_yaml_is_fresh() -> None:
    assert INSTALL_YAML.read_text() == render(), f"{INSTALL_YAML} is stale: run hack/gen-install"


def test_install_yaml_passes_server_dry_run_and_applies(cluster: Cluster) -> None:
    objects = len(install_docs())
    assert objects >= 20
    for kind in ("Deployment", "DaemonSet"):
        (container,) = workload(kind)["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "ghcr.io/bootc-dev/bootc-operator-py:v0.1.0", kind
    assert cluster.dry_run.count("(server dry run)") == objects, cluster.dry_run
    applied = [line for line in cluster.applied.splitlines() if line.strip()]
    assert len(applied) == objects, cluster.applied
    # Applying again (an upgrade in place) still passes and creates nothing new.
    again = cluster.cp.kubectl("apply", "--dry-run=server", "-f", str(INSTALL_YAML)).stdout
    assert again.count("(server dry run)") == objects, again
    assert "created" not in again, again


def _pod_from(kind: str, namespace: str, name: str, node: str | None = None) -> Obj:
    template = copy.deepcopy(workload(kind)["spec"]["template"])
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name, "namespace": namespace},
        "spec": template["spec"],
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def test_pod_security_levels(cluster: Cluster) -> None:
    """The controller's Pod is "restricted"-clean; the daemon's needs "privileged"."""
    cp = cluster.cp
    ns = unique_name("restricted")
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
                },
            }
        ),
    )
    for sa in (CONTROLLER, DAEMON):
        cp.kubectl("-n", ns, "create", "serviceaccount", sa)
    ctl = _pod_from("Deployment", ns, "controller")
    res = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(ctl), check=False)
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr, res.stderr
    dmn = _pod_from("DaemonSet", ns, "daemon")
    res = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(dmn), check=False)
    assert res.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in res.stderr, res.stderr
    for needs in ("privileged", "host namespaces", "runAsNonRoot"):
        assert needs in res.stderr, res.stderr
    # ... and is admitted in the operator's namespace.
    dmn = _pod_from("DaemonSet", NS, "daemon")
    res = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(dmn), check=False)
    assert res.returncode == 0, res.stderr


# ------------------------------------------------------------------ RBAC

# (verb, group, resource, subresource, namespace, name); namespace "" = cluster-wide
Check = tuple[str, str, str, str, str, str]


def chk(
    verb: str, resource: str, *, group: str = "", sub: str = "", ns: str = "", name: str = ""
) -> Check:
    return (verb, group, resource, sub, ns, name)


B = c.GROUP
CONTROLLER_NEEDS: list[Check] = [
    *(chk(v, "bootcnodepools", group=B) for v in ("get", "list", "watch", "patch")),
    chk("patch", "bootcnodepools", group=B, sub="status"),
    chk("update", "bootcnodepools", group=B, sub="finalizers"),
    *(chk(v, "bootcnodes", group=B) for v in ("get", "list", "watch", "create", "patch", "delete")),
    *(chk(v, "nodes") for v in ("get", "list", "watch", "patch")),
    chk("list", "pods"),
    chk("watch", "pods"),
    chk("list", "pods", ns="kube-system"),
    chk("create", "pods", sub="eviction", ns="some-app"),
    # spec.rollout.drain.onTimeout: Force deletes the pods a drain could not evict
    chk("delete", "pods", ns="some-app"),
    chk("create", "events", ns="default"),
    chk("patch", "events", ns="default"),
    chk("create", "leases", group="coordination.k8s.io", ns=NS),
    chk("get", "leases", group="coordination.k8s.io", ns=NS, name=LEASE),
    chk("update", "leases", group="coordination.k8s.io", ns=NS, name=LEASE),
    *(chk(v, "secrets", ns=NS) for v in ("get", "list", "watch")),
    # /metrics callers' tokens reviewed (manifests/rbac/metrics.yaml).
    chk("create", "tokenreviews", group="authentication.k8s.io"),
    chk("create", "subjectaccessreviews", group="authorization.k8s.io"),
]
CONTROLLER_DENIED: list[Check] = [
    # Secrets: nowhere but the operator's namespace.
    *(chk(v, "secrets") for v in ("get", "list", "watch")),
    chk("get", "secrets", ns="kube-system"),
    chk("list", "secrets", ns="default"),
    *(chk(v, "secrets", ns=NS) for v in ("create", "update", "patch", "delete")),
    # Nodes: label and cordon only.
    *(chk(v, "nodes") for v in ("create", "update", "delete", "deletecollection")),
    chk("patch", "nodes", sub="status"),
    chk("create", "nodes", sub="proxy"),
    # Pods: evict (or delete, for onTimeout: Force), never create, exec or change.
    *(chk(v, "pods", ns="some-app") for v in ("get", "create", "update", "patch")),
    *(
        chk("create", "pods", sub=s, ns="some-app")
        for s in ("exec", "attach", "portforward", "binding")
    ),
    chk("patch", "pods", sub="ephemeralcontainers", ns="some-app"),
    # Its own API: no create/delete of pools, no BootcNode status, no update verbs.
    *(chk(v, "bootcnodepools", group=B) for v in ("create", "update", "delete")),
    chk("update", "bootcnodepools", group=B, sub="status"),
    chk("update", "bootcnodes", group=B),
    chk("patch", "bootcnodes", group=B, sub="status"),
    chk("deletecollection", "bootcnodes", group=B),
    # Events only in "default", only core v1 (see runtime/events.py).
    chk("create", "events", ns="kube-system"),
    chk("create", "events", group="events.k8s.io", ns="default"),
    chk("delete", "events", ns="default"),
    # Leases: only its own, only in its namespace.
    chk("update", "leases", group="coordination.k8s.io", ns="kube-system", name="kube-scheduler"),
    chk("update", "leases", group="coordination.k8s.io", ns=NS, name="someone-else"),
    chk("delete", "leases", group="coordination.k8s.io", ns=NS, name=LEASE),
    # Privilege escalation paths.
    chk("create", "serviceaccounts", sub="token", ns=NS),
    chk("create", "clusterrolebindings", group="rbac.authorization.k8s.io"),
    chk("escalate", "clusterroles", group="rbac.authorization.k8s.io"),
    chk("bind", "clusterroles", group="rbac.authorization.k8s.io"),
    chk("impersonate", "users"),
    chk("create", "certificatesigningrequests", group="certificates.k8s.io"),
    chk("update", "customresourcedefinitions", group="apiextensions.k8s.io"),
    chk("delete", "validatingadmissionpolicies", group="admissionregistration.k8s.io"),
    chk("update", "daemonsets", group="apps", ns=NS),
    chk("get", "configmaps", ns="kube-system"),
    chk("delete", "namespaces"),
]
DAEMON_NEEDS: list[Check] = [
    *(chk(v, "bootcnodes", group=B) for v in ("get", "list", "watch")),
    chk("patch", "bootcnodes", group=B, sub="status"),
    chk("create", "tokenreviews", group="authentication.k8s.io"),
    chk("create", "subjectaccessreviews", group="authorization.k8s.io"),
]
DAEMON_DENIED: list[Check] = [
    # BootcNode spec is the controller's; no create/delete; status by patch only.
    *(chk(v, "bootcnodes", group=B) for v in ("create", "update", "patch", "delete")),
    chk("update", "bootcnodes", group=B, sub="status"),
    # Pools are none of its business.
    *(chk(v, "bootcnodepools", group=B) for v in ("get", "list", "update", "patch")),
    chk("patch", "bootcnodepools", group=B, sub="status"),
    # Secrets: none at all, not even in the operator's namespace (its pull secret
    # comes sealed to its own key in its BootcNode).
    *(chk(v, "secrets", ns=NS) for v in ("get", "list", "watch")),
    *(chk(v, "secrets") for v in ("get", "list")),
    chk("get", "secrets", ns="kube-system"),
    chk("get", "secrets", ns="default"),
    # Nodes, Pods, Events, Leases: nothing.
    *(chk(v, "nodes") for v in ("get", "list", "patch", "delete")),
    *(chk(v, "pods", ns="some-app") for v in ("list", "create", "delete")),
    chk("create", "pods", sub="exec", ns="some-app"),
    chk("create", "pods", sub="eviction", ns="some-app"),
    chk("create", "events", group="events.k8s.io", ns="default"),
    chk("create", "events", ns="default"),
    chk("get", "leases", group="coordination.k8s.io", ns=NS, name=LEASE),
    chk("create", "serviceaccounts", sub="token", ns=NS),
    chk("impersonate", "users"),
]


async def can(api: ApiClient, sa: str, check: Check) -> bool:
    verb, group, resource, sub, ns, name = check
    attrs = {"verb": verb, "group": group, "resource": resource}
    attrs.update({k: v for k, v in (("subresource", sub), ("namespace", ns), ("name", name)) if v})
    review = await request_json(
        api,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{NS}:{sa}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
                "resourceAttributes": attrs,
            },
        },
    )
    return bool(review["status"].get("allowed"))


@pytest.mark.parametrize(
    ("sa", "needs", "denied"),
    [(CONTROLLER, CONTROLLER_NEEDS, CONTROLLER_DENIED), (DAEMON, DAEMON_NEEDS, DAEMON_DENIED)],
    ids=["controller", "daemon"],
)
async def test_service_account_can_do_what_it_needs_and_nothing_dangerous(
    admin: ApiClient, sa: str, needs: list[Check], denied: list[Check]
) -> None:
    answers = await asyncio.gather(*(can(admin, sa, ch) for ch in [*needs, *denied]))
    missing = [ch for ch, ok in zip(needs, answers, strict=False) if not ok]
    excess = [ch for ch, ok in zip(denied, answers[len(needs) :], strict=True) if ok]
    assert not missing, f"{sa} lacks: {missing}"
    assert not excess, f"{sa} may: {excess}"


def rules_review(cp: ControlPlane, sa: str, namespace: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) with resourceNames folded in, from a SelfSubjectRulesReview
    made as ``sa``; minus what every authenticated user may do (self reviews)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    res = cp.kubectl(
        "create",
        "--validate=false",  # client-side validation would list CRDs as the ServiceAccount
        "-o",
        "json",
        "-f",
        "-",
        f"--as=system:serviceaccount:{NS}:{sa}",
        "--as-group=system:serviceaccounts",
        f"--as-group=system:serviceaccounts:{NS}",
        "--as-group=system:authenticated",
        input=json.dumps(review),
    )
    status = json.loads(res.stdout)["status"]
    assert not status.get("incomplete"), status
    out = set()
    for rule in status["resourceRules"]:
        for group in rule.get("apiGroups", [""]):
            for resource in rule["resources"]:
                if resource.startswith("selfsubject"):  # every user's (system:basic-user)
                    continue
                for verb in rule["verbs"]:
                    names = ",".join(sorted(rule.get("resourceNames", [])))
                    out.add((group, resource + (f"[{names}]" if names else ""), verb))
    return out


def _expected(rules: str) -> set[tuple[str, str, str]]:
    out = set()
    for line in rules.strip().splitlines():
        group, resource, verbs = line.split()
        for verb in verbs.split(","):
            out.add(("" if group == "core" else group, resource, verb))
    return out


CONTROLLER_CLUSTER = f"""
node.bootc.dev bootcnodepools get,list,watch,patch
node.bootc.dev bootcnodepools/status patch
node.bootc.dev bootcnodepools/finalizers update
node.bootc.dev bootcnodes get,list,watch,create,patch,delete
core nodes get,list,watch,patch
core pods list,watch,delete
core pods/eviction create
admissionregistration.k8s.io validatingadmissionpolicies[{POLICY}] get,list,watch
admissionregistration.k8s.io validatingadmissionpolicybindings[{POLICY}] get,list,watch
policy poddisruptionbudgets list,watch
authentication.k8s.io tokenreviews create
authorization.k8s.io subjectaccessreviews create
"""
DAEMON_CLUSTER = """
node.bootc.dev bootcnodes get,list,watch
node.bootc.dev bootcnodes/status patch
authentication.k8s.io tokenreviews create
authorization.k8s.io subjectaccessreviews create
"""


def test_no_rule_beyond_the_expected_ones_in_any_namespace(cluster: Cluster) -> None:
    cp = cluster.cp
    controller = _expected(CONTROLLER_CLUSTER)
    daemon = _expected(DAEMON_CLUSTER)
    expected = {
        (CONTROLLER, "kube-system"): controller,
        (CONTROLLER, "default"): controller | _expected("core events create,patch"),
        (CONTROLLER, NS): controller
        | _expected(
            f"""
            core secrets get,list,watch
            coordination.k8s.io leases create
            coordination.k8s.io leases[{LEASE}] get,update
            """
        ),
        (DAEMON, "kube-system"): daemon,
        (DAEMON, "default"): daemon,
        (DAEMON, NS): daemon,
    }
    for (sa, namespace), want in expected.items():
        assert rules_review(cp, sa, namespace) == want, (sa, namespace)


async def test_pull_secrets_elsewhere_need_an_explicit_role_binding(
    cluster: Cluster, admin: ApiClient
) -> None:
    """What docs/security.md tells admins who keep pull secrets in another namespace."""
    ns = unique_name("team")
    cp = cluster.cp
    cp.kubectl("create", "namespace", ns)
    for sa in (CONTROLLER, DAEMON):
        assert not await can(admin, sa, chk("get", "secrets", ns=ns))
    cp.kubectl(
        "-n",
        ns,
        "create",
        "rolebinding",
        "bootc-operator-controller-secrets",
        "--clusterrole=bootc-operator-controller-secrets",
        f"--serviceaccount={NS}:{CONTROLLER}",
    )
    for v in ("get", "list", "watch"):
        assert await can(admin, CONTROLLER, chk(v, "secrets", ns=ns))
    # the daemon needs none: the controller seals the content to each node's key
    assert not await can(admin, DAEMON, chk("get", "secrets", ns=ns))
    assert not await can(admin, CONTROLLER, chk("get", "secrets", ns="kube-system"))


# ------------------------------------------------------------------ node-scoped daemon writes


async def _node(api: ApiClient, name: str) -> None:
    await create_object(
        api, NODES_R, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    )
    await create_object(
        api,
        BOOTC_NODES,
        {
            "apiVersion": c.API_VERSION,
            "kind": c.NODE_KIND,
            "metadata": {"name": name},
            "spec": {
                "desiredImage": f"quay.io/example/os@{DIGEST}",
                "desiredImageState": "Staged",
            },
        },
    )


async def _unbound_client(cluster: Cluster, admin: ApiClient, sa: str, name: str) -> ApiClient:
    """A client with a token of ``sa`` bound to no Pod (TokenRequest by the admin)."""
    review = await request_json(
        admin,
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return await api_client(cluster.token_kubeconfig(review["status"]["token"], name))


async def _pod_token(api: ApiClient, pod: Obj) -> str:
    """A daemon ServiceAccount token bound to ``pod`` (TokenRequest API), as the kubelet gets."""
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/{DAEMON}/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        },
    }
    review = await request_json(api, "POST", path, body=body)
    return str(review["status"]["token"])


def _status_patch(generation: int) -> Obj:
    return {"status": {"observedGeneration": generation}}


async def test_daemon_may_write_only_its_own_nodes_bootcnode(
    cluster: Cluster, admin: ApiClient
) -> None:
    node_a, node_b = unique_name("node-a"), unique_name("node-b")
    for name in (node_a, node_b):
        await _node(admin, name)
    pod = await create_object(
        admin, PODS_R, _pod_from("DaemonSet", NS, unique_name(DAEMON), node=node_a), NS
    )
    token = await _pod_token(admin, pod)
    client = await api_client(cluster.token_kubeconfig(token, "daemon-a"))
    async with client:
        # Who the apiserver thinks this is: the daemon, on node A.
        me = await request_json(
            client,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        info = me["status"]["userInfo"]
        assert info["username"] == f"system:serviceaccount:{NS}:{DAEMON}"
        assert info["extra"]["authentication.kubernetes.io/node-name"] == [node_a]

        # What the daemon does: watch its own BootcNode, patch its status.
        own, _ = await list_objects(client, BOOTC_NODES, field_selector=f"metadata.name={node_a}")
        assert [o["metadata"]["name"] for o in own] == [node_a]
        written = await patch_object(
            client, BOOTC_NODES, node_a, _status_patch(1), subresource="status"
        )
        assert written["status"]["observedGeneration"] == 1

        with pytest.raises(ApiError) as denied:
            await patch_object(client, BOOTC_NODES, node_b, _status_patch(1), subresource="status")
        assert denied.value.status == 403
        assert POLICY in str(denied.value)
        assert f"may only change BootcNode {node_a}, not {node_b}" in str(denied.value)

        # RBAC already stops spec writes, even of its own BootcNode.
        with pytest.raises(ApiError) as rbac:
            await patch_object(
                client, BOOTC_NODES, node_a, {"spec": {"desiredImageState": "Booted"}}
            )
        assert rbac.value.status == 403
        assert POLICY not in str(rbac.value)

    # Others are not affected by the policy: the admin writes B's status.
    written = await patch_object(admin, BOOTC_NODES, node_b, _status_patch(2), subresource="status")
    assert written["status"]["observedGeneration"] == 2


async def test_daemon_credentials_without_a_node_name_are_denied(
    cluster: Cluster, admin: ApiClient
) -> None:
    """Fail closed: a token not bound to a Pod (or a cluster that does not put the
    node name in tokens) gets no write at all, with a message that says why."""
    node = unique_name("node-c")
    await _node(admin, node)
    client = await _unbound_client(cluster, admin, DAEMON, "unbound")
    async with client:
        with pytest.raises(ApiError) as denied:
            await patch_object(client, BOOTC_NODES, node, _status_patch(1), subresource="status")
    assert denied.value.status == 403
    assert "token carries no node name" in str(denied.value)
    # The same for credentials with no extra info at all (impersonation).
    status, body = await asyncio.to_thread(
        _impersonated_patch, cluster.cp, f"system:serviceaccount:{NS}:{DAEMON}", node
    )
    assert status == 403, body
    assert "token carries no node name" in body, body


def _impersonated_patch(cp: ControlPlane, user: str, node: str) -> tuple[int, str]:
    """PATCH a BootcNode's status as the admin impersonating ``user`` (raw HTTP: kubectl
    would GET the status first, which RBAC denies the daemon before admission runs)."""
    ctx = ssl.create_default_context(cafile=str(cp.pki.ca.cert))
    admin = cp.pki.client("admin")
    ctx.load_cert_chain(str(admin.cert), str(admin.key))
    req = urllib.request.Request(
        f"{cp.server}{BOOTC_NODES.path(name=node, subresource='status')}",
        data=json.dumps(_status_patch(1)).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json", "Impersonate-User": user},
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_admission_policy_is_active(cluster: Cluster) -> None:
    out = cluster.cp.kubectl("get", "validatingadmissionpolicy", POLICY, "-o", "json").stdout
    status = json.loads(out).get("status", {})
    # The apiserver type-checks the CEL expressions; no warnings means they are sound.
    assert not status.get("typeChecking", {}).get("expressionWarnings"), status


# ------------------------------------------------------------------ a node's own credentials


def node_kubeconfig(cluster: Cluster, node: str) -> Path:
    """A kubeconfig with the credentials a kubelet has: a client certificate for
    ``system:node:<node>`` in group ``system:nodes``, signed by the cluster's CA."""
    pair = certs.issue_client(cluster.cp.pki, f"system:node:{node}", ("system:nodes",))
    doc = yaml.safe_load(cluster.cp.kubeconfig.read_text())
    doc["users"] = [
        {
            "name": "node",
            "user": {
                "client-certificate-data": base64.b64encode(pair.cert.read_bytes()).decode(),
                "client-key-data": base64.b64encode(pair.key.read_bytes()).decode(),
            },
        }
    ]
    doc["contexts"][0]["context"]["user"] = "node"
    path = cluster.cp.state_dir / f"node-{node}.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def _label_patch(key: str) -> Obj:
    return {"metadata": {"labels": {key: ""}}}


def _daemonset_places_on(labels: dict[str, str]) -> bool:
    selector = workload("DaemonSet")["spec"]["template"]["spec"]["nodeSelector"]
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


async def test_a_node_cannot_label_itself_into_getting_the_daemons_token(
    cluster: Cluster, admin: ApiClient
) -> None:
    """Issue 27 §2: a compromised kubelet labels its own Node, hoping for a daemon Pod
    (and with it the daemon's token, which may read the pull secrets)."""
    node = unique_name("rogue")
    secret = unique_name("pull")
    await create_object(
        admin, NODES_R, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    )
    cluster.cp.kubectl(
        "-n", NS, "create", "secret", "generic", secret, "--from-literal=.dockerconfigjson={}"
    )
    client = await api_client(node_kubeconfig(cluster, node))
    async with client:
        # The label the DaemonSet used to select on: a kubelet may set it, and it
        # now places nothing.
        labelled = await patch_object(client, NODES_R, node, _label_patch(c.LEGACY_MANAGED_LABEL))
        assert c.LEGACY_MANAGED_LABEL in labelled["metadata"]["labels"]
        assert not _daemonset_places_on(labelled["metadata"]["labels"])
        # The label it selects on now: NodeRestriction refuses it to the kubelet.
        with pytest.raises(ApiError) as refused:
            await patch_object(client, NODES_R, node, _label_patch(c.MANAGED_LABEL))
        assert refused.value.status == 403, refused.value
        assert "is not allowed to modify labels" in str(refused.value), refused.value
        assert c.MANAGED_LABEL in str(refused.value), refused.value
        now = await get_object(admin, NODES_R, node)
        assert c.MANAGED_LABEL not in now["metadata"]["labels"]
        assert not _daemonset_places_on(now["metadata"]["labels"])
        # Nor can the node get the daemon's identity another way: no token for a
        # ServiceAccount without a Pod of it bound to the node, no mirror Pod that
        # runs as it, and no pull secret read by its own identity.
        with pytest.raises(ApiError) as token:
            await request_json(
                client,
                "POST",
                f"/api/v1/namespaces/{NS}/serviceaccounts/{DAEMON}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
            )
        assert token.value.status == 403, token.value
        mirror = _pod_from("DaemonSet", NS, unique_name("mirror"), node=node)
        mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
        mirror["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": now["metadata"]["uid"]}
        ]
        with pytest.raises(ApiError) as pod:
            await create_object(client, PODS_R, mirror, NS)
        assert pod.value.status == 403, pod.value
        with pytest.raises(ApiError) as read:
            await get_object(client, SECRETS_R, secret, NS)
        assert read.value.status == 403, read.value


async def test_the_controller_strips_the_placement_label_from_nodes_without_a_bootcnode(
    cluster: Cluster, admin: ApiClient
) -> None:
    """Whoever else labels a Node for the daemon (an admin, a tool with Node patch
    rights), the controller (with its own ServiceAccount's rights) takes the label
    away unless the Node has a BootcNode; a pool's member keeps it."""
    rogue, member = unique_name("stray"), unique_name("member")
    group = unique_name("grp")
    for name, initial in (
        (rogue, {c.MANAGED_LABEL: "", c.LEGACY_MANAGED_LABEL: ""}),
        (member, {"group": group, c.LEGACY_MANAGED_LABEL: ""}),
    ):
        await create_object(
            admin,
            NODES_R,
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": initial}},
        )
    ctl_api = await _unbound_client(cluster, admin, CONTROLLER, "controller")

    async def labels(name: str) -> dict[str, str]:
        node = await get_object(admin, NODES_R, name)
        return dict(node["metadata"].get("labels") or {})

    async def placed() -> bool:
        r, m = await labels(rogue), await labels(member)
        return (
            c.MANAGED_LABEL not in r
            and c.LEGACY_MANAGED_LABEL not in r
            and m.get(c.MANAGED_LABEL) == ""
            and m.get(c.LEGACY_MANAGED_LABEL) == ""
        )

    async with ctl_api, running_controller(ctl_api):
        await create_object(admin, BOOTC_NODE_POOLS, pool_body(group, {"group": group}, image(1)))
        await wait_for(placed, 60, "the stray node unlabelled and the member labelled")
        assert _daemonset_places_on(await labels(member))
        # Labelled again: stripped again, and the member keeps its label throughout.
        await patch_object(admin, NODES_R, rogue, _label_patch(c.MANAGED_LABEL))

        async def stripped_again() -> bool:
            return c.MANAGED_LABEL not in await labels(rogue)

        await wait_for(stripped_again, 60, "the stray node unlabelled again")
        assert (await labels(member)).get(c.MANAGED_LABEL) == ""
        await get_object(admin, BOOTC_NODES, member)

        # A labelled Node that a pool selects keeps the label while that pool has
        # no BootcNode for it yet (here: its tag cannot be resolved), and loses it
        # when no pool selects it any more.
        waiting, hold = unique_name("waiting"), unique_name("hold")
        await create_object(
            admin, BOOTC_NODE_POOLS, pool_body(hold, {"hold": hold}, "127.0.0.1:1/os:latest")
        )

        async def unresolved() -> bool:
            pool = await get_object(admin, BOOTC_NODE_POOLS, hold)
            return condition(pool, "Degraded").get("reason") == c.REASON_TAG_RESOLUTION_ERROR

        await wait_for(unresolved, 60, "the pool reporting its tag unresolvable")
        await create_object(
            admin,
            NODES_R,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": waiting, "labels": {"hold": hold, c.MANAGED_LABEL: ""}},
            },
        )
        # Nodes are handled in the order their events came: the stray node,
        # labelled after the waiting one was, is looked at after it.
        await patch_object(admin, NODES_R, rogue, _label_patch(c.MANAGED_LABEL))
        await wait_for(stripped_again, 60, "the stray node unlabelled a third time")
        assert (await labels(waiting)).get(c.MANAGED_LABEL) == ""
        await delete_object(admin, BOOTC_NODE_POOLS, hold)

        async def waiting_stripped() -> bool:
            return c.MANAGED_LABEL not in await labels(waiting)

        await wait_for(waiting_stripped, 60, "the node no pool selects any more unlabelled")


# ------------------------------------------------------------------ sealed pull secrets


def _dockerconfig(user: str) -> bytes:
    token = base64.b64encode(f"{user}:pw-{user}".encode()).decode()
    return json.dumps({"auths": {f"{user}.example.com": {"auth": token}}}).encode()


async def _daemon_client_of(cluster: Cluster, admin: ApiClient, node: str) -> ApiClient:
    """The daemon's credentials as a (compromised) member node gets them itself: with
    its kubelet certificate it asks for a token of the daemon Pod bound to it."""
    pod = await create_object(
        admin, PODS_R, _pod_from("DaemonSet", NS, unique_name(DAEMON), node=node), NS
    )
    kubelet = await api_client(node_kubeconfig(cluster, node))
    async with kubelet:
        token = await _pod_token(kubelet, pod)
    return await api_client(cluster.token_kubeconfig(token, f"daemon-{node}"))


async def test_a_member_reads_only_its_own_pools_secret_sealed_to_its_own_key(
    cluster: Cluster, admin: ApiClient
) -> None:
    """Issue 27 §2, "better still": a member node (labelled by its pool, with a daemon
    Pod and so the daemon's token) can read no Secret at all; it gets its own pool's
    pull secret sealed to the key its daemon published, and cannot open another
    node's blob, of its own pool or another."""
    group_a, group_b = unique_name("sa"), unique_name("sb")
    a1, a2, b1 = unique_name("a1"), unique_name("a2"), unique_name("b1")
    secret_a, secret_b = unique_name("pull-a"), unique_name("pull-b")
    content = {secret_a: _dockerconfig("alice"), secret_b: _dockerconfig("bob")}
    for name, raw in content.items():
        await create_object(
            admin,
            SECRETS_R,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": NS},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(raw).decode()},
            },
            NS,
        )
    for name, group in ((a1, group_a), (a2, group_a), (b1, group_b)):
        await create_object(
            admin,
            NODES_R,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"g": group}},
            },
        )
    ctl_api = await _unbound_client(cluster, admin, CONTROLLER, "ctl-seal")
    daemons = {n: await _daemon_client_of(cluster, admin, n) for n in (a1, a2, b1)}
    keys = {n: NodeKey.generate() for n in daemons}

    async def opened(node: str) -> bytes | None:
        """What ``node``'s daemon reads from its own BootcNode (None: not sealed yet)."""
        spec = (await get_object(daemons[node], BOOTC_NODES, node))["spec"]
        sealed = spec.get("sealedPullSecret")
        if not sealed or sealed["keyID"] != keys[node].key_id:
            return None
        return keys[node].unseal(
            Sealed.from_wire(sealed), node=node, secret_hash=spec["pullSecretHash"]
        )

    async def members_opened() -> bool:
        return (
            await opened(a1) == await opened(a2) == content[secret_a]
            and await opened(b1) == content[secret_b]
        )

    try:
        async with ctl_api, running_controller(ctl_api):
            for group, name in ((group_a, secret_a), (group_b, secret_b)):
                pool = pool_body(group, {"g": group}, image(1))
                pool["spec"]["pullSecretRef"] = {"name": name, "namespace": NS}
                await create_object(admin, BOOTC_NODE_POOLS, pool)

            async def members_labelled() -> bool:
                for n in daemons:
                    node = await get_object(admin, NODES_R, n)
                    if not _daemonset_places_on(node["metadata"].get("labels") or {}):
                        return False
                return True

            await wait_for(members_labelled, 60, "every member placed for the daemon")
            # the daemons' tokens read no Secret: neither their pool's nor another's
            for n, client in daemons.items():
                for name in content:
                    with pytest.raises(ApiError) as denied:
                        await get_object(client, SECRETS_R, name, NS)
                    assert denied.value.status == 403, (n, name, denied.value)
            # each daemon publishes its key in its own status, and only there
            for n, client in daemons.items():
                await patch_object(
                    client,
                    BOOTC_NODES,
                    n,
                    {"status": {"sealingKey": keys[n].public}},
                    subresource="status",
                )
            with pytest.raises(ApiError) as other:
                await patch_object(
                    daemons[a1],
                    BOOTC_NODES,
                    b1,
                    {"status": {"sealingKey": keys[a1].public}},
                    subresource="status",
                )
            assert other.value.status == 403 and POLICY in str(other.value), other.value
            await wait_for(members_opened, 60, "each member's pool secret sealed to its key")
            # a1 may read the other BootcNodes (RBAC cannot say "its own"), but opens none
            # of their blobs: of its own pool (a2) or of the other pool (b1), as sent or
            # relabelled with its own key id
            for other_node in (a2, b1):
                spec = (await get_object(daemons[a1], BOOTC_NODES, other_node))["spec"]
                blob = Sealed.from_wire(spec["sealedPullSecret"])
                with pytest.raises(SealedForAnotherKey):
                    keys[a1].unseal(blob, node=a1, secret_hash=spec["pullSecretHash"])
                forged = Sealed(keys[a1].key_id, blob.data)
                for as_node in (a1, other_node):
                    with pytest.raises(UnsealFailed):
                        keys[a1].unseal(forged, node=as_node, secret_hash=spec["pullSecretHash"])
    finally:
        for client in daemons.values():
            await client.close()
        for group in (group_a, group_b):
            with contextlib.suppress(ApiError):
                await delete_object(admin, BOOTC_NODE_POOLS, group)


# ------------------------------------------------------------------ signature keys


async def test_the_controller_reads_signature_keys_in_its_namespace_only(
    cluster: Cluster, admin: ApiClient, registry: Registry, tmp_path: Path
) -> None:
    """``spec.image.verification.publicKeySecretRefs`` with the controller's own rights
    (the pull secrets' rule, nothing added): a key Secret elsewhere cannot be read, the
    pool says so and no node is given the digest; the same key in the operator's
    namespace verifies the cosign signature and the node gets it."""
    cosign = Cosign(resolve_cosign(), tmp_path / "cosign")
    key = cosign.generate_key_pair("release")
    repo = unique_name("keyed")
    digest = await push(registry, registry.ref(repo, "v1"), "signed, key in a Secret")
    pinned = registry.ref(repo, digest=digest)
    cosign.sign(registry, pinned, key)
    elsewhere = unique_name("keys")
    cluster.cp.kubectl("create", "namespace", elsewhere)
    secret = unique_name("cosign")
    for ns in (NS, elsewhere):
        await create_object(
            admin,
            SECRETS_R,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": ns},
                "data": {"cosign.pub": base64.b64encode(key.public.encode()).decode()},
            },
            ns,
        )
    group = unique_name("kp")
    node = f"{group}-n0"
    await create_object(
        admin,
        NODES_R,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": {"group": group}},
        },
    )
    pool = pool_body(group, {"group": group}, pinned)
    refs = [{"name": secret, "namespace": elsewhere}]
    pool["spec"]["image"]["verification"] = {"publicKeySecretRefs": refs}
    ctl_api = await _unbound_client(cluster, admin, CONTROLLER, "controller-keys")

    async def degraded_reading() -> bool:
        deg = condition(await get_object(admin, BOOTC_NODE_POOLS, group), "Degraded")
        return deg.get("reason") == c.REASON_SIGNATURE_VERIFICATION_FAILED and (
            f"cannot read the key Secret {elsewhere}/{secret}" in deg.get("message", "")
        )

    async def given() -> str | None:
        try:
            return str((await get_object(admin, BOOTC_NODES, node))["spec"]["desiredImage"])
        except ApiError:
            return None

    async with ctl_api, running_controller(ctl_api, registry=registry.options()):
        await create_object(admin, BOOTC_NODE_POOLS, pool)
        await wait_for(degraded_reading, 60, "the unreadable key Secret reported")
        deg = condition(await get_object(admin, BOOTC_NODE_POOLS, group), "Degraded")
        assert "forbidden" in deg["message"], deg
        assert await given() is None  # no BootcNode: nothing was given the digest
        refs[0]["namespace"] = NS
        await patch_object(
            admin,
            BOOTC_NODE_POOLS,
            group,
            {"spec": {"image": {"verification": pool["spec"]["image"]["verification"]}}},
        )
        assert await wait_for(given, 60, "the verified digest given to the node") == pinned
        await delete_object(admin, BOOTC_NODE_POOLS, group)
