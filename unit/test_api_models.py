"""Round-trips of the wire models and their tolerance of real-world documents."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from bootc_operator.api.v1alpha1 import (
    BootcNode,
    BootcNodePool,
    DesiredImageState,
    RebootPolicy,
)

DIGEST = "sha256:" + "a" * 64

POOL: dict[str, Any] = {
    "apiVersion": "node.bootc.dev/v1alpha1",
    "kind": "BootcNodePool",
    "metadata": {"name": "workers", "generation": 3, "uid": "u-1"},
    "spec": {
        "nodeSelector": {
            "matchLabels": {"node-role.kubernetes.io/worker": ""},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
        },
        "image": {"ref": "quay.io/example/os:stable"},
        "rollout": {"maxUnavailable": "25%", "paused": True, "drainTimeoutSeconds": 600},
        "disruption": {"rebootPolicy": "AllowSoftReboot"},
        "pullSecretRef": {"name": "pull", "namespace": "bootc-operator"},
    },
    "status": {
        "observedGeneration": 3,
        "targetDigest": DIGEST,
        "deployedDigest": DIGEST,
        "updateAvailable": False,
        "nextTagResolutionTime": "2026-11-21T10:05:00Z",
        "nodeCount": 10,
        "updatedCount": 7,
        "updatingCount": 3,
        "degradedCount": 0,
        "conditions": [
            {
                "type": "UpToDate",
                "status": "False",
                "reason": "RolloutInProgress",
                "message": "7/10 updated; 2 staging, 1 rebooting",
                "lastTransitionTime": "2026-11-21T10:00:00Z",
                "observedGeneration": 3,
            }
        ],
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "node.bootc.dev/v1alpha1",
    "kind": "BootcNode",
    "metadata": {"name": "node-1"},
    "spec": {
        "desiredImage": f"quay.io/example/os@{DIGEST}",
        "desiredImageState": "Staged",
        "pullSecretRef": {"name": "pull", "namespace": "bootc-operator"},
        "pullSecretHash": "abc",
    },
    "status": {
        "observedGeneration": 1,
        "booted": {
            "image": f"quay.io/example/os@{DIGEST}",
            "imageDigest": DIGEST,
            "version": "42.20261101.0",
            "timestamp": "2026-11-01T00:00:00Z",
            "architecture": "amd64",
            "softRebootCapable": False,
            "incompatible": False,
        },
        "conditions": [
            {
                "type": "Idle",
                "status": "True",
                "reason": "Idle",
                "message": "",
                "lastTransitionTime": "2026-11-21T10:00:00Z",
            }
        ],
    },
}


def test_pool_round_trips_unchanged() -> None:
    pool = BootcNodePool.model_validate(POOL)
    assert pool.to_wire() == POOL
    assert pool.spec.rollout.max_unavailable == "25%"
    assert pool.spec.disruption.reboot_policy == RebootPolicy.ALLOW_SOFT_REBOOT


def test_node_round_trips_unchanged() -> None:
    node = BootcNode.model_validate(NODE)
    assert node.to_wire() == NODE
    assert node.spec.desired_image_state == DesiredImageState.STAGED
    assert node.status is not None and node.status.booted is not None
    assert node.status.booted.timestamp == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def test_pool_defaults_match_crd_defaults() -> None:
    minimal = {
        "metadata": {"name": "p"},
        "spec": {"nodeSelector": {}, "image": {"ref": "quay.io/a/b:c"}},
    }
    wire = BootcNodePool.model_validate(minimal).to_wire()
    assert wire["spec"]["rollout"] == {"maxUnavailable": 1}
    assert wire["spec"]["disruption"] == {"rebootPolicy": "RebootOnly"}


def test_unknown_fields_are_ignored_but_metadata_is_kept() -> None:
    doc = {**NODE, "spec": {**NODE["spec"], "futureField": 1}}
    doc["metadata"] = {"name": "n", "managedFields": [{"manager": "x"}], "labels": {"a": "b"}}
    wire = BootcNode.model_validate(doc).to_wire()
    assert "futureField" not in wire["spec"]
    assert wire["metadata"]["managedFields"] == [{"manager": "x"}]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "desiredImageState"), "Rebooted"),
        (("spec", "desiredImage"), ""),
    ],
)
def test_node_rejects_invalid_values(path: tuple[str, str], value: str) -> None:
    doc = {**NODE, "spec": {**NODE["spec"], path[1]: value}}
    with pytest.raises(ValidationError):
        BootcNode.model_validate(doc)


def test_pool_rejects_invalid_reboot_policy_and_empty_ref() -> None:
    bad_policy = {**POOL, "spec": {**POOL["spec"], "disruption": {"rebootPolicy": "Kexec"}}}
    with pytest.raises(ValidationError):
        BootcNodePool.model_validate(bad_policy)
    empty_ref = {**POOL, "spec": {**POOL["spec"], "image": {"ref": ""}}}
    with pytest.raises(ValidationError):
        BootcNodePool.model_validate(empty_ref)


def test_python_names_are_accepted() -> None:
    node = BootcNode.model_validate(
        {"spec": {"desired_image": f"q.io/a@{DIGEST}", "desired_image_state": "Booted"}}
    )
    assert node.to_wire()["spec"] == {
        "desiredImage": f"q.io/a@{DIGEST}",
        "desiredImageState": "Booted",
    }
