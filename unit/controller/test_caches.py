"""What the controller caches of Nodes and BootcNodes (``controller.caches``): everything
the reconcilers read, and nothing of the bulk."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.controller.caches import BOOTC_NODE_TRANSFORM, NODE_TRANSFORM
from bootc_operator.policy.autoscaler import (
    CLUSTER_AUTOSCALER_TAINT,
    DO_NOT_DISRUPT,
    PROTECT,
    leaving,
    prior_record,
    protection,
)
from bootc_operator.policy.nodestate import view
from bootc_operator.policy.slots import hold_repair_patch
from bootc_operator.reconcilers.triggers import node_changed, node_membership_changed
from hack.perf.nodes import kubelet_node
from hack.testenv.fleet import daemon_status

TARGET = "registry.example.com/os@sha256:" + "2" * 64
BOOTED = "registry.example.com/os@sha256:" + "1" * 64


def node(**changes: Any) -> dict[str, Any]:
    n = kubelet_node(7, "worker-7", {"pool": "a", c.CANARY_LABEL: ""}, detailed=True)
    n["metadata"] |= {
        "uid": "u-7",
        "resourceVersion": "41",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "managedFields": [{"manager": "kubelet"}],
    }
    n["metadata"]["annotations"] |= {"other/big": "x" * 500}
    for path, value in changes.items():
        *parents, leaf = path.split(".")
        cur = n
        for part in parents:
            cur = cur.setdefault(part, {})
        cur[leaf] = value
    return n


def bootc_node(**annotations: str) -> dict[str, Any]:
    bn: dict[str, Any] = {
        "metadata": {
            "name": "worker-7",
            "uid": "b-7",
            "resourceVersion": "42",
            "generation": 3,
            "labels": {c.POOL_LABEL: "a"},
            "annotations": annotations,
            "ownerReferences": [
                {"apiVersion": c.API_VERSION, "kind": c.POOL_KIND, "name": "a", "uid": "p",
                 "controller": True, "blockOwnerDeletion": True}
            ],
            "managedFields": [{"manager": "bootc-operator"}],
        },
        "spec": {
            "desiredImage": TARGET,
            "desiredImageState": "Staged",
            "sealedPullSecret": {"keyID": "k", "data": "Y2lwaGVy" * 100},
        },
    }  # fmt: skip
    bn["status"] = daemon_status(bn, BOOTED, TARGET, None, ("False", "Staged"))
    return bn


NODES = [
    node(),
    node(**{"spec.unschedulable": True}),
    node(**{"spec.taints": [{"key": CLUSTER_AUTOSCALER_TAINT, "effect": "NoSchedule"}]}),
    node(**{"metadata.annotations": {DO_NOT_DISRUPT: "false", "kubeadm/x": "y"}}),
    node(**{"metadata.annotations": dict(PROTECT)}),
    node(**{"metadata.deletionTimestamp": "2026-01-02T00:00:00Z"}),
    node(**{"status.conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown",
                                   "lastTransitionTime": "2026-01-03T00:00:00Z"}]}),
    node(**{"status": {}}),
]  # fmt: skip


@pytest.mark.parametrize("full", NODES)
def test_a_cached_node_reads_as_the_node_to_every_reader(full: dict[str, Any]) -> None:
    slim = NODE_TRANSFORM(copy.deepcopy(full))
    targets = frozenset({TARGET.split("@")[1]})
    for bn in (bootc_node(), bootc_node(**{c.IN_REBOOT_SLOT_ANNOTATION: "t",
                                            c.AUTOSCALER_PRIOR_ANNOTATION: "{}"})):  # fmt: skip
        assert view(bn, slim, targets) == view(bn, full, targets)
        annotations = bn["metadata"]["annotations"]
        for cordon in (True, False):
            assert hold_repair_patch(slim, annotations, cordon=cordon) == hold_repair_patch(
                full, annotations, cordon=cordon
            )
    assert protection(slim) == protection(full)
    assert leaving(slim) == leaving(full)
    meta = full["metadata"]
    assert prior_record(slim["metadata"].get("annotations") or {}) == prior_record(
        meta.get("annotations") or {}
    )
    assert slim["metadata"]["uid"] == meta["uid"]
    assert slim["metadata"]["resourceVersion"] == meta["resourceVersion"]
    for other in NODES:
        slim_other = NODE_TRANSFORM(copy.deepcopy(other))
        assert node_changed(slim, slim_other) == node_changed(full, other)
        assert node_membership_changed(slim, slim_other) == node_membership_changed(full, other)


def test_a_cached_node_is_a_small_part_of_the_node() -> None:
    full = node()
    slim = NODE_TRANSFORM(copy.deepcopy(full))
    assert set(slim) == {"metadata", "status"}
    assert "annotations" not in slim["metadata"] and "managedFields" not in slim["metadata"]
    assert [cond["type"] for cond in slim["status"]["conditions"]] == ["Ready"]
    assert len(json.dumps(slim)) < len(json.dumps(full)) / 5


def test_a_cached_bootc_node_keeps_what_is_read_and_drops_the_rest() -> None:
    full = bootc_node(**{c.IN_REBOOT_SLOT_ANNOTATION: "t"})
    kstatus = {cond["type"] for cond in full["status"]["conditions"]} - {"Idle", "Degraded"}
    assert kstatus, "the daemon writes kstatus conditions"
    slim = BOOTC_NODE_TRANSFORM(copy.deepcopy(full))
    targets = frozenset({TARGET.split("@")[1]})
    assert view(slim, None, targets) == view(full, None, targets)
    assert {cond["type"] for cond in slim["status"]["conditions"]} == {"Idle", "Degraded"}
    assert slim["spec"]["sealedPullSecret"] == {"keyID": "k"}
    assert "managedFields" not in slim["metadata"]
    assert slim["metadata"]["ownerReferences"] == full["metadata"]["ownerReferences"]
