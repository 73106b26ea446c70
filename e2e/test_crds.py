"""The generated CRDs on a real kube-apiserver (+ kube-controller-manager).

Covers: the CRDs become Established; spec and status round-trip for both kinds
(status only through the status subresource); the apiserver itself rejects
invalid enums, empty required strings, tag refs as desiredImage and bad
maxUnavailable values (schema + CEL) and accepts the good ones; defaults are
applied; printer columns come back through the Table API and ``kubectl``;
ownerReference cascades are carried out by the real garbage collector.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import (
    ApiClient,
    ApiextensionsV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
)
from kubernetes_asyncio.client.exceptions import ApiException

from bootc_operator.api import constants as c
from bootc_operator.api.imageref import parse_image_ref
from bootc_operator.api.v1alpha1 import (
    BootcNode,
    BootcNodePool,
    BootcNodePoolSpec,
    BootcNodePoolStatus,
    BootcNodeSpec,
    BootcNodeStatus,
    Condition,
    ConditionStatus,
    DesiredImageState,
    DisruptionSpec,
    ImageInfo,
    ImageSpec,
    LabelSelector,
    LabelSelectorOperator,
    LabelSelectorRequirement,
    ObjectMeta,
    PoolPhase,
    RebootPolicy,
    RolloutSpec,
    SecretReference,
)
from bootc_operator.policy.ownership import owner_reference
from e2e.helpers import UNWRITTEN_STATUS, unique_name, wait_for
from hack.testenv import ControlPlane
from hack.testenv.controlplane import DEFAULT_CRD_DIR

POOLS, NODES = c.POOL_PLURAL, c.NODE_PLURAL
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
DIGEST_C = "sha256:" + "c" * 64
REPO = "quay.io/example/myos"
TIME = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
GC_TIMEOUT = 60.0


def _crds() -> dict[str, dict[str, Any]]:
    """The committed CRD documents by kind."""
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(DEFAULT_CRD_DIR).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":  # not kustomization.yaml
                docs[doc["spec"]["names"]["kind"]] = doc
    return docs


CRDS = _crds()


def _printer_columns(kind: str) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    return columns


class Objects:
    """Creates BootcNodePools and BootcNodes; deletes whatever is left at teardown."""

    def __init__(self, api: ApiClient) -> None:
        self.custom = CustomObjectsApi(api)
        self._created: list[tuple[str, str]] = []

    async def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        self._created.append((plural, body["metadata"]["name"]))
        obj: dict[str, Any] = await self.custom.create_cluster_custom_object(
            c.GROUP, c.VERSION, plural, body
        )
        return obj

    async def get(self, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self.custom.get_cluster_custom_object(
            c.GROUP, c.VERSION, plural, name
        )
        return obj

    async def replace(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = await self.custom.replace_cluster_custom_object(
            c.GROUP, c.VERSION, plural, body["metadata"]["name"], body
        )
        return obj

    async def replace_status(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = await self.custom.replace_cluster_custom_object_status(
            c.GROUP, c.VERSION, plural, body["metadata"]["name"], body
        )
        return obj

    async def delete(
        self, plural: str, name: str, propagation: str | None = None
    ) -> dict[str, Any]:
        body = V1DeleteOptions(propagation_policy=propagation)  # None: the server's default
        obj: dict[str, Any] = await self.custom.delete_cluster_custom_object(
            c.GROUP, c.VERSION, plural, name, body=body
        )
        return obj

    async def gone(self, plural: str, name: str) -> bool:
        try:
            await self.get(plural, name)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    async def cleanup(self) -> None:
        for plural, name in reversed(self._created):
            try:
                await self.delete(plural, name)
            except ApiException as e:
                if e.status != 404:
                    raise


@pytest.fixture
async def objects(api: ApiClient) -> AsyncIterator[Objects]:
    objs = Objects(api)
    try:
        yield objs
    finally:
        await objs.cleanup()


def raw_pool(name: str, **spec: Any) -> dict[str, Any]:
    """A minimal valid pool as a plain dict (no client-side defaults), ``spec`` merged in."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.POOL_KIND,
        "metadata": {"name": name},
        "spec": {
            # A label no Node carries: these pools never select anything.
            "nodeSelector": {"matchLabels": {"e2e.bootc.dev/pool": name}},
            "image": {"ref": f"{REPO}:latest"},
            **spec,
        },
    }


def raw_node(name: str, **spec: Any) -> dict[str, Any]:
    """A minimal valid BootcNode as a plain dict, ``spec`` merged in."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": {"name": name},
        "spec": {"desiredImage": f"{REPO}@{DIGEST_A}", "desiredImageState": "Staged", **spec},
    }


def full_pool(name: str) -> BootcNodePool:
    """A pool with every spec and status field set."""
    return BootcNodePool(
        metadata=ObjectMeta(name=name, labels={"e2e.bootc.dev/test": "round-trip"}),
        spec=BootcNodePoolSpec(
            node_selector=LabelSelector(
                match_labels={"e2e.bootc.dev/pool": name},
                match_expressions=[
                    LabelSelectorRequirement(
                        key="node-role.kubernetes.io/worker",
                        operator=LabelSelectorOperator.EXISTS,
                    ),
                    LabelSelectorRequirement(
                        key="topology.kubernetes.io/zone",
                        operator=LabelSelectorOperator.IN,
                        values=["a", "b"],
                    ),
                ],
            ),
            image=ImageSpec(ref=f"{REPO}:latest"),
            rollout=RolloutSpec(
                max_unavailable="25%",
                paused=True,
                drain_timeout_seconds=600,
                reboot_timeout_seconds=900,
            ),
            disruption=DisruptionSpec(reboot_policy=RebootPolicy.ALLOW_SOFT_REBOOT),
            pull_secret_ref=SecretReference(name="pull-secret", namespace="bootc-system"),
        ),
        status=BootcNodePoolStatus(
            observed_generation=1,
            target_digest=DIGEST_B,
            deployed_digest=DIGEST_A,
            update_available=True,
            next_tag_resolution_time=TIME,
            node_count=3,
            updated_count=1,
            updating_count=1,
            degraded_count=0,
            phase=PoolPhase.PROGRESSING,
            image_short=f"{REPO}:latest",
            target_short=DIGEST_B[7:19],
            conditions=[
                Condition(
                    type=c.COND_UP_TO_DATE,
                    status=ConditionStatus.FALSE,
                    observed_generation=1,
                    last_transition_time=TIME,
                    reason=c.REASON_ROLLOUT_IN_PROGRESS,
                    message="1 of 3 nodes updated",
                ),
                Condition(
                    type=c.COND_DEGRADED,
                    status=ConditionStatus.FALSE,
                    observed_generation=1,
                    last_transition_time=TIME,
                    reason=c.REASON_HEALTHY,
                    message="",
                ),
            ],
        ),
    )


def _image(digest: str, version: str, soft: bool) -> ImageInfo:
    return ImageInfo(
        image=f"{REPO}@{digest}",
        image_digest=digest,
        version=version,
        timestamp=TIME,
        architecture="amd64",
        soft_reboot_capable=soft,
        incompatible=False,
    )


def full_node(name: str, owner: dict[str, Any] | None = None) -> BootcNode:
    """A BootcNode with every spec and status field set."""
    return BootcNode(
        metadata=ObjectMeta(
            name=name,
            labels={c.POOL_LABEL: owner["name"], c.DESIRED_DIGEST_LABEL: DIGEST_B[7:19]}
            if owner
            else None,
            owner_references=[owner] if owner else None,
        ),
        spec=BootcNodeSpec(
            desired_image=f"{REPO}@{DIGEST_B}",
            desired_image_state=DesiredImageState.BOOTED,
            pull_secret_ref=SecretReference(name="pull-secret", namespace="bootc-system"),
            pull_secret_hash="sha256:" + "d" * 64,
        ),
        status=BootcNodeStatus(
            observed_generation=1,
            booted=_image(DIGEST_A, "41.20260101.0", soft=False),
            staged=_image(DIGEST_B, "41.20260102.0", soft=True),
            rollback=_image(DIGEST_C, "41.20251201.0", soft=False),
            booted_short=DIGEST_A[7:19],
            conditions=[
                Condition(
                    type=c.COND_IDLE,
                    status=ConditionStatus.FALSE,
                    observed_generation=1,
                    last_transition_time=TIME,
                    reason="Staged",
                    message="staged 41.20260102.0",
                ),
                Condition(
                    type=c.COND_DEGRADED,
                    status=ConditionStatus.FALSE,
                    observed_generation=1,
                    last_transition_time=TIME,
                    reason="AsExpected",
                    message="",
                ),
            ],
        ),
    )


async def _create_with_status(
    objects: Objects, plural: str, wire: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Create ``wire`` (status included, which the apiserver must drop), then write its
    status through the status subresource. Returns (created, after status update)."""
    created = await objects.create(plural, wire)
    body = copy.deepcopy(created)
    body["status"] = wire["status"]
    updated = await objects.replace_status(plural, body)
    return created, updated


# ------------------------------------------------------------------ CRDs


async def test_crds_are_established(control_plane: ControlPlane, api: ApiClient) -> None:
    ext = ApiextensionsV1Api(api)
    for kind, doc in CRDS.items():
        crd = await ext.read_custom_resource_definition(doc["metadata"]["name"])
        conditions = {cond.type: cond.status for cond in crd.status.conditions}
        assert conditions.get("Established") == "True", (kind, conditions)
        assert conditions.get("NamesAccepted") == "True", (kind, conditions)
        assert crd.spec.scope == "Cluster"
        assert crd.status.accepted_names.kind == kind
        assert crd.status.accepted_names.categories == ["bootc"]
    assert set(CRDS) == {c.POOL_KIND, c.NODE_KIND}
    res = await asyncio.to_thread(control_plane.kubectl, "api-resources", "--api-group", c.GROUP)
    lines = {line.split()[0]: line.split() for line in res.stdout.splitlines()[1:]}
    assert lines[POOLS][1] == "bnp" and lines[POOLS][-1] == c.POOL_KIND, res.stdout
    assert lines[NODES][1] == "bn" and lines[NODES][-1] == c.NODE_KIND, res.stdout
    assert lines[POOLS][-2] == lines[NODES][-2] == "false", "must be cluster-scoped"


# ------------------------------------------------------------------ round trips


async def test_pool_spec_and_status_round_trip(objects: Objects) -> None:
    pool = full_pool(unique_name("roundtrip"))
    wire = pool.to_wire()
    assert pool.status is not None

    created, updated = await _create_with_status(objects, POOLS, wire)
    assert created["spec"] == wire["spec"]
    assert created["metadata"]["labels"] == wire["metadata"]["labels"]
    # status is ignored on create (status subresource); the server shows the schema's
    # default until a status is written: kstatus reads "generation not observed yet"
    assert created["status"] == UNWRITTEN_STATUS, "status must be ignored on create"

    assert updated["status"] == wire["status"]
    assert updated["spec"] == wire["spec"]
    assert updated["metadata"]["generation"] == 1, "a status write must not bump generation"

    got = await objects.get(POOLS, pool.metadata.name)
    assert got["spec"] == wire["spec"] and got["status"] == wire["status"]
    parsed = BootcNodePool.model_validate(got)
    assert parsed.spec == pool.spec
    assert parsed.status == pool.status


async def test_node_spec_and_status_round_trip(objects: Objects) -> None:
    node = full_node(unique_name("roundtrip"))
    wire = node.to_wire()

    created, updated = await _create_with_status(objects, NODES, wire)
    assert created["spec"] == wire["spec"]
    # status is ignored on create (status subresource); the server shows the schema's
    # default until a status is written: kstatus reads "generation not observed yet"
    assert created["status"] == UNWRITTEN_STATUS, "status must be ignored on create"
    assert updated["status"] == wire["status"]
    assert updated["metadata"]["generation"] == 1

    got = await objects.get(NODES, node.metadata.name)
    assert got["spec"] == wire["spec"] and got["status"] == wire["status"]
    parsed = BootcNode.model_validate(got)
    assert parsed.spec == node.spec
    assert parsed.status == node.status


async def test_status_subresource_ignores_spec_and_main_resource_ignores_status(
    objects: Objects,
) -> None:
    name = unique_name("subresource")
    created = await objects.create(NODES, raw_node(name))

    body = copy.deepcopy(created)
    body["spec"]["desiredImageState"] = "Booted"
    body["status"] = {"observedGeneration": 1}
    after_status = await objects.replace_status(NODES, body)
    assert after_status["spec"]["desiredImageState"] == "Staged"
    assert after_status["status"] == {"observedGeneration": 1}

    body = copy.deepcopy(after_status)
    body["spec"]["desiredImageState"] = "Booted"
    body["status"] = {"observedGeneration": 99}
    after_spec = await objects.replace(NODES, body)
    assert after_spec["spec"]["desiredImageState"] == "Booted"
    assert after_spec["status"] == {"observedGeneration": 1}
    assert after_spec["metadata"]["generation"] == 2


# ------------------------------------------------------------------ validation


def _status(e: ApiException) -> dict[str, Any]:
    """The metav1.Status body of a failed request."""
    assert e.body, f"HTTP {e.status} without a body"
    status: dict[str, Any] = json.loads(e.body)
    return status


_MISSING = object()


def _set(obj: dict[str, Any], path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        obj = obj.setdefault(key, {})
    if value is _MISSING:
        del obj[leaf]
    else:
        obj[leaf] = value


_BAD_MAX_UNAVAILABLE = ["-1", -1, "abc", "150%", "", "1", "10", "-5%", "1.5"]

REJECTED = [
    pytest.param(POOLS, "spec.disruption.rebootPolicy", "Sometimes", id="rebootPolicy=Sometimes"),
    pytest.param(POOLS, "spec.image.ref", "", id="image.ref=empty"),
    pytest.param(POOLS, "spec.image", _MISSING, id="image=missing"),
    pytest.param(POOLS, "spec.image.verification", {}, id="verification=no-key"),
    pytest.param(POOLS, "spec.nodeSelector", _MISSING, id="nodeSelector=missing"),
    *(
        pytest.param(POOLS, "spec.rollout.maxUnavailable", v, id=f"maxUnavailable={v!r}")
        for v in _BAD_MAX_UNAVAILABLE
    ),
    pytest.param(NODES, "spec.desiredImageState", "Rebooted", id="desiredImageState=Rebooted"),
    pytest.param(NODES, "spec.desiredImageState", _MISSING, id="desiredImageState=missing"),
    pytest.param(NODES, "spec.desiredImage", "", id="desiredImage=empty"),
    pytest.param(NODES, "spec.desiredImage", f"{REPO}:latest", id="desiredImage=tag"),
    pytest.param(NODES, "spec.desiredImage", f"{REPO}@sha256:abc", id="desiredImage=shortdigest"),
    pytest.param(NODES, "spec.desiredImage", f"{REPO}:1@sha256", id="desiredImage=nodigest"),
    # would reach `bootc switch` as an option, or carry control characters
    pytest.param(NODES, "spec.desiredImage", f"--apply@{DIGEST_A}", id="desiredImage=--apply"),
    pytest.param(
        NODES, "spec.desiredImage", f"--transport=dir@{DIGEST_A}", id="desiredImage=--transport"
    ),
    pytest.param(NODES, "spec.desiredImage", f"-x.io/os@{DIGEST_A}", id="desiredImage=-host"),
    pytest.param(NODES, "spec.desiredImage", f"{REPO}\x1b[2J@{DIGEST_A}", id="desiredImage=ESC"),
    pytest.param(NODES, "spec.desiredImage", f"{REPO}@{DIGEST_A}\n", id="desiredImage=newline"),
    pytest.param(POOLS, "spec.image.ref", "--apply", id="image.ref=--apply"),
    pytest.param(POOLS, "spec.image.ref", "--transport=dir:/tmp/x", id="image.ref=--transport"),
    pytest.param(POOLS, "spec.image.ref", f"{REPO}:1\x07", id="image.ref=BEL"),
    pytest.param(POOLS, "spec.image.ref", f"{REPO} :1", id="image.ref=space"),
]

#: References a pool written for the Go operator may hold: all still valid.
GO_OPERATOR_REFS = [
    "registry.example.com:5000/team/os:42",
    f"quay.io/example/myos@{DIGEST_A}",
    f"quay.io/example/myos:stable@{DIGEST_A}",
    "localhost/bootc-os:latest",
    "localhost:5000/os",
    "[::1]:5000/os:1",
    "ghcr.io/org/sub/my_os-image.v2:v1.2.3-rc_1",
]


@pytest.mark.parametrize("ref", GO_OPERATOR_REFS)
async def test_ordinary_refs_stay_valid(objects: Objects, ref: str) -> None:
    pool = await objects.create(POOLS, raw_pool(unique_name("ref"), image={"ref": ref}))
    assert pool["spec"]["image"]["ref"] == ref
    desired = parse_image_ref(ref).with_digest(DIGEST_B)  # what the controller writes
    node = await objects.create(NODES, raw_node(unique_name("ref"), desiredImage=desired))
    assert node["spec"]["desiredImage"] == desired


@pytest.mark.parametrize(("plural", "field", "value"), REJECTED)
async def test_apiserver_rejects_invalid_objects(
    objects: Objects, plural: str, field: str, value: object
) -> None:
    name = unique_name("invalid")
    body = raw_pool(name) if plural == POOLS else raw_node(name)
    _set(body, field, value)

    with pytest.raises(ApiException) as excinfo:
        await objects.create(plural, body)
    assert excinfo.value.status == 422, excinfo.value.body
    status = _status(excinfo.value)
    assert status["reason"] == "Invalid"
    assert field in status["message"], status["message"]
    assert field in [cause.get("field") for cause in status["details"]["causes"]]
    assert await objects.gone(plural, name)


@pytest.mark.parametrize(
    ("verification", "field"),
    [
        ({"publicKeys": ["ssh-ed25519 AAAA"]}, "spec.image.verification.publicKeys[0]"),
        (
            {"publicKeySecretRefs": [{"name": "keys"}]},
            "spec.image.verification.publicKeySecretRefs[0].namespace",
        ),
    ],
    ids=["not-pem", "no-namespace"],
)
async def test_apiserver_rejects_an_unusable_verification_key(
    objects: Objects, verification: dict[str, Any], field: str
) -> None:
    body = raw_pool(unique_name("verify"))
    body["spec"]["image"]["verification"] = verification
    with pytest.raises(ApiException) as excinfo:
        await objects.create(POOLS, body)
    assert excinfo.value.status == 422, excinfo.value.body
    assert field in [c.get("field") for c in _status(excinfo.value)["details"]["causes"]]


async def test_desired_image_tag_rejection_explains_digest(objects: Objects) -> None:
    with pytest.raises(ApiException) as excinfo:
        await objects.create(NODES, raw_node(unique_name("tag"), desiredImage=f"{REPO}:latest"))
    assert excinfo.value.status == 422
    assert "digest reference" in _status(excinfo.value)["message"]


@pytest.mark.parametrize("value", [1, "10%", "100%", "0%", 0, 7, "5%"], ids=repr)
async def test_apiserver_accepts_valid_max_unavailable(objects: Objects, value: int | str) -> None:
    name = unique_name("maxunavail")
    created = await objects.create(POOLS, raw_pool(name, rollout={"maxUnavailable": value}))
    stored = created["spec"]["rollout"]["maxUnavailable"]
    assert stored == value and type(stored) is type(value)


@pytest.mark.parametrize("value", ["150%", -1, "abc"], ids=repr)
async def test_apiserver_rejects_invalid_max_unavailable_on_update(
    objects: Objects, value: int | str
) -> None:
    name = unique_name("update")
    created = await objects.create(POOLS, raw_pool(name, rollout={"maxUnavailable": "50%"}))
    body = copy.deepcopy(created)
    body["spec"]["rollout"]["maxUnavailable"] = value
    with pytest.raises(ApiException) as excinfo:
        await objects.replace(POOLS, body)
    assert excinfo.value.status == 422
    assert "spec.rollout.maxUnavailable" in _status(excinfo.value)["message"]
    got = await objects.get(POOLS, name)
    assert got["spec"]["rollout"]["maxUnavailable"] == "50%"


async def test_defaults_are_applied(objects: Objects) -> None:
    bare = await objects.create(POOLS, raw_pool(unique_name("defaults")))
    assert bare["spec"]["rollout"] == {"maxUnavailable": 1}
    assert bare["spec"]["disruption"] == {"rebootPolicy": "RebootOnly"}

    partial = await objects.create(
        POOLS, raw_pool(unique_name("defaults"), rollout={"paused": True}, disruption={})
    )
    assert partial["spec"]["rollout"] == {"maxUnavailable": 1, "paused": True}
    assert partial["spec"]["disruption"] == {"rebootPolicy": "RebootOnly"}

    # Condition.message is required but defaults to "" (as metav1.Condition's).
    body = copy.deepcopy(bare)
    condition = {
        "type": c.COND_DEGRADED,
        "status": "False",
        "reason": c.REASON_HEALTHY,
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    body["status"] = {"conditions": [condition]}
    updated = await objects.replace_status(POOLS, body)
    assert updated["status"]["conditions"] == [{**condition, "message": ""}]


# ------------------------------------------------------------------ printing


async def _pool_and_node(objects: Objects) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pool and an owned BootcNode, both with status, for the printing tests."""
    pool_wire = full_pool(unique_name("print")).to_wire()
    _, pool = await _create_with_status(objects, POOLS, pool_wire)
    node_wire = full_node(unique_name("print-node"), owner=owner_reference(pool)).to_wire()
    _, node = await _create_with_status(objects, NODES, node_wire)
    return pool, node


async def _table(api: ApiClient, plural: str, name: str) -> dict[str, Any]:
    resp = await api.call_api(
        f"/apis/{c.GROUP}/{c.VERSION}/{plural}",
        "GET",
        query_params=[("fieldSelector", f"metadata.name={name}")],
        header_params={"Accept": TABLE},
        _preload_content=False,
    )
    assert resp.status == 200
    table: dict[str, Any] = json.loads(await resp.read())
    return table


async def test_printer_columns_through_table_api(api: ApiClient, objects: Objects) -> None:
    pool, node = await _pool_and_node(objects)

    expected_cells = {
        c.POOL_KIND: {
            "Name": pool["metadata"]["name"],
            "Phase": "Progressing",
            "Image": f"{REPO}:latest",
            "Target": DIGEST_B[7:19],
            "Nodes": 3,
            "Updated": 1,
            "Updating": 1,
            "Degraded": 0,
            "UpToDate": "False",
            "Progress": "1 of 3 nodes updated",
        },
        c.NODE_KIND: {
            "Name": node["metadata"]["name"],
            "Pool": pool["metadata"]["name"],
            "Desired": DIGEST_B[7:19],
            "Booted": DIGEST_A[7:19],
            "State": "Staged",
            "Degraded": "False",
            "Want": "Booted",
            "Image": f"{REPO}@{DIGEST_B}",
            "Message": "",
        },
    }
    for kind, plural, obj in ((c.POOL_KIND, POOLS, pool), (c.NODE_KIND, NODES, node)):
        table = await _table(api, plural, obj["metadata"]["name"])
        assert table["kind"] == "Table"
        columns = [(col["name"], col.get("priority", 0)) for col in table["columnDefinitions"]]
        crd_columns = [(col["name"], col.get("priority", 0)) for col in _printer_columns(kind)]
        assert columns == [("Name", 0), *crd_columns]
        assert len(table["rows"]) == 1
        cells = dict(zip([name for name, _ in columns], table["rows"][0]["cells"], strict=True))
        for column, value in expected_cells[kind].items():
            assert cells[column] == value, (kind, column, cells)
        assert cells["Age"], "Age is rendered from creationTimestamp"


def _blocks(output: str) -> list[list[list[str]]]:
    """kubectl's table output split into tables (blank-line separated) of split lines."""
    tables: list[list[list[str]]] = [[]]
    for line in output.splitlines():
        if not line.strip():
            tables.append([])
        else:
            tables[-1].append(line.split())
    return [t for t in tables if t]


def _headers(kind: str, wide: bool = False) -> list[str]:
    cols = [
        col["name"].upper() for col in _printer_columns(kind) if wide or not col.get("priority")
    ]
    return ["NAME", *cols]


async def test_kubectl_get_prints_columns(control_plane: ControlPlane, objects: Objects) -> None:
    pool, node = await _pool_and_node(objects)
    pool_name, node_name = pool["metadata"]["name"], node["metadata"]["name"]

    res = await asyncio.to_thread(control_plane.kubectl, "get", "bnp,bn")
    pools_table, nodes_table = _blocks(res.stdout)
    assert pools_table[0] == _headers(c.POOL_KIND), res.stdout
    assert nodes_table[0] == _headers(c.NODE_KIND), res.stdout
    pool_row = next(r for r in pools_table if r[0] == f"bootcnodepool.node.bootc.dev/{pool_name}")
    assert pool_row[1:8] == ["Progressing", f"{REPO}:latest", "3", "1", "1", "0", "False"]
    node_row = next(r for r in nodes_table if r[0] == f"bootcnode.node.bootc.dev/{node_name}")
    # DESIRED and BOOTED in the same short form, comparable by eye
    assert node_row[1:6] == [pool_name, DIGEST_B[7:19], DIGEST_A[7:19], "Staged", "False"]
    # the columns after NAME fit a terminal beside a node name (a full digest ref alone
    # was ~100 characters)
    for row in (pool_row, node_row):
        assert len(" ".join(row[1:])) < 80, res.stdout

    res = await asyncio.to_thread(control_plane.kubectl, "get", "bn", node_name, "-o", "wide")
    (table,) = _blocks(res.stdout)
    assert table[0] == _headers(c.NODE_KIND, wide=True), res.stdout
    assert table[1][0] == node_name and "Booted" in table[1]

    res = await asyncio.to_thread(control_plane.kubectl, "get", "bootc", "-o", "name")
    names = res.stdout.split()
    assert f"bootcnodepool.node.bootc.dev/{pool_name}" in names, res.stdout
    assert f"bootcnode.node.bootc.dev/{node_name}" in names, res.stdout


# ------------------------------------------------------------------ garbage collection


@pytest.mark.parametrize("propagation", [None, "Background", "Foreground"])
async def test_owned_nodes_are_garbage_collected_with_their_pool(
    objects: Objects, propagation: str | None
) -> None:
    pool = await objects.create(POOLS, raw_pool(unique_name("gc")))
    owned = unique_name("gc-owned")
    bystander = unique_name("gc-bystander")
    body = raw_node(owned)
    body["metadata"]["ownerReferences"] = [owner_reference(pool)]
    await objects.create(NODES, body)
    await objects.create(NODES, raw_node(bystander))

    deleted = await objects.delete(POOLS, pool["metadata"]["name"], propagation)
    if propagation == "Foreground":
        # Foreground: the owner stays (with a finalizer) until its dependents are gone.
        assert "foregroundDeletion" in deleted["metadata"].get("finalizers", []), deleted

    await wait_for(
        lambda: objects.gone(NODES, owned),
        GC_TIMEOUT,
        f"the garbage collector to delete BootcNode {owned}",
    )
    await wait_for(
        lambda: objects.gone(POOLS, pool["metadata"]["name"]),
        GC_TIMEOUT,
        "the pool to be deleted",
    )
    assert not await objects.gone(NODES, bystander), "a BootcNode without owner must survive"


# ------------------------------------------------------------------ kubectl explain


@pytest.mark.parametrize(
    ("path", "fragments"),
    [
        ("bnp.spec.rollout.maintenanceWindows", ["when new reboots may start", "days", "start"]),
        ("bnp.spec.rollout.maintenanceWindows.duration", ['"4h", "90m" or "1h30m"']),
        ("bnp.spec.rollout.maintenanceWindows.timeZone", ["IANA time zone"]),
        ("bnp.spec.rollout.stageAhead", ["beyond the reboot slot holders"]),
        ("bnp.spec.rollout.maxUnhealthy", ["unhealthy slot holders", "Unset: 2"]),
        ("bnp.status.phase", ["one word"]),
        ("bnp.status.nextMaintenanceWindow", ["next maintenance window opens"]),
        ("bn.status.bootedShort", ["12 hex digits"]),
        ("bnp.spec.health", ["before it counts as updated", "minReadySeconds", "onFailure"]),
        ("bnp.spec.health.onFailure", ["bootc rollback", "HealthCheckFailed"]),
        ("bnp.spec.health.timeoutSeconds", ["from the reboot request", "Unset: 600"]),
        ("bnp.spec.health.pods.selector", ["at least one must run on the node"]),
        ("bnp.spec.rollout.canary", ["canary nodes update first", "requireApproval"]),
        ("bnp.spec.rollout.canary.nodes", ["bootc.dev/canary come first"]),
        ("bnp.spec.rollout.approvedDigest", ["never approves another"]),
        ("bn.status.bootAssessment.state", ["Complete", "Failed"]),
        (
            "bootcnodepool.spec.rollout.drain",
            [
                "what happens past it (onTimeout)",
                '"Halt" keeps the node cordoned in its slot',
                "no new reboots until it drains",
                '"Skip" uncordons the node, gives its slot back',
                "at most 3 tries, then it is marked drain-blocked",
                '"Force" deletes the pods left without the Eviction API',
                "Unset: as drainTimeoutSeconds alone does",
                "deleteEmptyDirData",
                "as kubectl drain --delete-emptydir-data",
                "the reason EmptyDirData",
                "Unset: evicted, as true",
            ],
        ),
        ("bnp.spec.rollout.drain.onTimeout", ['"Halt"', '"Skip"', '"Force"', "Unset: as"]),
    ],
)
async def test_kubectl_explain_shows_the_field_descriptions(
    control_plane: ControlPlane, path: str, fragments: list[str]
) -> None:
    res = await asyncio.to_thread(control_plane.kubectl, "explain", path)
    text = " ".join(res.stdout.split())  # explain wraps descriptions
    for fragment in fragments:
        assert fragment in text, res.stdout


async def test_the_crd_refuses_malformed_maintenance_windows(objects: Objects) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"maintenanceWindows": [{"start": "25:00", "duration": "1h"}]}, "start"),
        ({"maintenanceWindows": [{"start": "22:00", "duration": "1d"}]}, "duration"),
        (
            {"maintenanceWindows": [{"start": "22:00", "duration": "4h", "days": ["Funday"]}]},
            "days",
        ),
        ({"maxUnhealthy": 0}, "maxUnhealthy must be an integer >= 1"),
        ({"maxUnhealthy": "0%"}, "maxUnhealthy must be an integer >= 1"),
        ({"stageAhead": -1}, "stageAhead must be an integer >= 0"),
        ({"drain": {"deleteEmptyDirData": "yes"}}, "deleteEmptyDirData in body must be of type"),
        ({"drain": {"onTimeout": "Drop"}}, "spec.rollout.drain.onTimeout: Unsupported value"),
    ]
    for rollout, fragment in cases:
        with pytest.raises(ApiException) as excinfo:
            await objects.create(POOLS, raw_pool(unique_name("policy"), rollout=rollout))
        assert excinfo.value.status == 422, excinfo.value.body
        assert fragment in _status(excinfo.value)["message"], _status(excinfo.value)
    ok = {
        "maintenanceWindows": [{"days": ["Sat"], "start": "22:00", "duration": "1h30m"}],
        "maxUnhealthy": "10%",
        "stageAhead": 0,
    }
    created = await objects.create(POOLS, raw_pool(unique_name("policy"), rollout=ok))
    assert created["spec"]["rollout"]["maintenanceWindows"][0]["timeZone"] == "UTC"  # default


async def test_the_crd_checks_health_and_canary_fields_and_fills_their_defaults(
    objects: Objects,
) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"rollout": {"canary": {"nodes": 0}}}, "canary.nodes must be an integer >= 1"),
        ({"rollout": {"canary": {"nodes": "0%"}}}, "canary.nodes must be an integer >= 1"),
        ({"rollout": {"approvedDigest": "latest"}}, "approvedDigest"),
        ({"health": {"onFailure": "Reboot"}}, "onFailure"),
        ({"health": {"timeoutSeconds": 0}}, "timeoutSeconds"),
        ({"health": {"minReadySeconds": -1}}, "minReadySeconds"),
        ({"health": {"pods": {"namespaces": ["a"]}}}, "selector"),
    ]
    for spec, fragment in bad:
        with pytest.raises(ApiException) as excinfo:
            await objects.create(POOLS, raw_pool(unique_name("health"), **spec))
        assert excinfo.value.status == 422, excinfo.value.body
        assert fragment in _status(excinfo.value)["message"], (spec, _status(excinfo.value))
    created = await objects.create(
        POOLS,
        raw_pool(
            unique_name("health"),
            health={"bootComplete": True},
            rollout={"canary": {}, "approvedDigest": "sha256:" + "a" * 64},
        ),
    )
    assert created["spec"]["health"] == {"bootComplete": True, "onFailure": "Halt"}
    assert created["spec"]["rollout"]["canary"] == {"nodes": 1}


async def test_the_crd_checks_the_topology(objects: Objects) -> None:
    zone = "topology.kubernetes.io/zone"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"topology": {}}, "spec.rollout.topology.key: Required value"),
        ({"topology": {"key": "a b"}}, "spec.rollout.topology.key"),
        ({"topology": {"key": zone, "order": ["a", "b", "a"]}}, "name each domain once"),
        ({"topology": {"key": zone, "order": ["not a value"]}}, "spec.rollout.topology.order"),
        (
            {"topology": {"key": zone, "maxUnavailablePerDomain": 0}},
            "maxUnavailablePerDomain must be an integer >= 1",
        ),
    ]
    for rollout, fragment in bad:
        with pytest.raises(ApiException) as excinfo:
            await objects.create(POOLS, raw_pool(unique_name("topo"), rollout=rollout))
        assert excinfo.value.status == 422, excinfo.value.body
        assert fragment in _status(excinfo.value)["message"], (rollout, _status(excinfo.value))
    ok = {"topology": {"key": zone, "order": ["eu-1c", "eu-1a"]}}
    created = await objects.create(POOLS, raw_pool(unique_name("topo"), rollout=ok))
    assert created["spec"]["rollout"]["topology"] == ok["topology"]


async def test_the_crd_checks_the_order(objects: Objects) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"order": {"by": "Age"}}, "spec.rollout.order.by"),
        ({"order": {"controlPlane": "Middle"}}, "spec.rollout.order.controlPlane"),
        ({"order": {"byLabel": "a b"}}, "spec.rollout.order.byLabel"),
    ]
    for rollout, fragment in bad:
        with pytest.raises(ApiException) as excinfo:
            await objects.create(POOLS, raw_pool(unique_name("order"), rollout=rollout))
        assert excinfo.value.status == 422, excinfo.value.body
        assert fragment in _status(excinfo.value)["message"], (rollout, _status(excinfo.value))
    ok = {"order": {"byLabel": "example.com/rack", "controlPlane": "Last"}}
    created = await objects.create(POOLS, raw_pool(unique_name("order"), rollout=ok))
    assert created["spec"]["rollout"]["order"] == ok["order"] | {"by": "Name"}  # default


@pytest.mark.parametrize(
    ("where", "value", "cause"),
    [
        (
            "health",
            {"queries": [{"name": "a", "expr": "up"}, {"name": "a", "expr": "up == 1"}]},
            "spec.health.queries[1]",
        ),
        ("health", {"queries": [{"name": "a", "expr": "up", "for": "30"}]},
         "spec.health.queries[0].for"),
        ("health", {"queries": [{"name": "A b", "expr": "up"}]}, "spec.health.queries[0].name"),
        ("health", {"queries": [{"name": "a", "expr": ""}]}, "spec.health.queries[0].expr"),
        (
            "rollout",
            {"preconditions": [{"name": "ceph", "expr": "x"}, {"name": "ceph", "expr": "y"}]},
            "spec.rollout.preconditions[1]",
        ),
        ("rollout", {"preconditions": [{"name": "ceph"}]}, "spec.rollout.preconditions[0].expr"),
    ],
    ids=["duplicate-query", "for-unitless", "query-name", "empty-expr", "duplicate-precondition",
         "precondition-no-expr"],
)  # fmt: skip
async def test_apiserver_rejects_bad_queries_and_preconditions(
    objects: Objects, where: str, value: dict[str, Any], cause: str
) -> None:
    """Names are unique (list-maps keyed by name), ``for`` is a duration, expr is required."""
    name = unique_name("queries")
    with pytest.raises(ApiException) as excinfo:
        await objects.create(POOLS, raw_pool(name, **{where: value}))
    assert excinfo.value.status == 422, excinfo.value.body
    causes = [c.get("field") for c in _status(excinfo.value)["details"]["causes"]]
    assert cause in causes, causes
    ok = {"queries": [{"name": "a", "expr": 'up{node="$node"}', "for": "1m30s"}]}
    pool = await objects.create(
        POOLS, raw_pool(name, health=ok, rollout={"preconditions": [{"name": "b", "expr": "up"}]})
    )
    assert pool["spec"]["health"]["queries"][0]["for"] == "1m30s"
