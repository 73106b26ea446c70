"""Round-trips of the wire models and their tolerance of real-world documents."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from bootc_operator.api import v1alpha1, wire
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


@pytest.mark.parametrize(
    ("plain", "model"),
    [(wire.ImageInfo, v1alpha1.ImageInfo), (wire.BootAssessment, v1alpha1.BootAssessment)],
)
def test_the_daemons_plain_types_have_the_api_models_fields(
    plain: type, model: type[v1alpha1.WireModel]
) -> None:
    """The daemon writes ``wire``'s dataclasses (no pydantic on the node); the CRD and
    the controller use ``v1alpha1``'s models: the same fields, in the same order."""
    assert [f.name for f in dataclasses.fields(plain)] == list(model.model_fields)


@pytest.mark.parametrize(
    "timestamp",
    [
        None,
        dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC),
        dt.datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=dt.UTC),
        dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    ],
)
def test_an_image_info_renders_what_the_api_model_renders(timestamp: dt.datetime | None) -> None:
    fields: dict[str, Any] = {
        "image": "quay.io/example/os@sha256:" + "a" * 64,
        "image_digest": "sha256:" + "b" * 64,
        "version": "42.1",
        "timestamp": timestamp,
        "architecture": "amd64",
        "soft_reboot_capable": True,
        "incompatible": False,
    }
    plain, model = wire.ImageInfo(**fields), v1alpha1.ImageInfo(**fields)
    assert plain.to_wire() == model.to_wire()
    assert plain.to_wire(nulls=True) == model.model_dump(mode="json", by_alias=True)
    assert v1alpha1.ImageInfo.model_validate(plain.to_wire()) == model


def test_a_boot_assessment_renders_what_the_api_model_renders() -> None:
    for message in (None, "boot-complete.target reached"):
        state = wire.BootAssessmentState.FAILED
        plain = wire.BootAssessment(state=state, message=message)
        model = v1alpha1.BootAssessment(state=state, message=message)
        assert plain.to_wire() == model.to_wire()
        assert plain.to_wire(nulls=True) == model.model_dump(mode="json", by_alias=True)
