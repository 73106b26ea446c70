"""BootcNode.status as the daemon writes it: building it from a decision (metav1 condition
semantics; kstatus's conditions for the node's own work), diffing it (timestamps ignored)
and the merge patch (stale fields cleared)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.v1alpha1 import BootcNodeStatus
from bootc_operator.api.wire import BootAssessment, BootAssessmentState, ImageInfo, RebootKind
from bootc_operator.daemon.bootc_status import DeploymentImages
from bootc_operator.daemon.decide import (
    HEALTHY,
    IDLE,
    Decision,
    degraded,
    rebooting,
    staged,
    staging,
)
from bootc_operator.daemon.status_report import (
    booted_short,
    build_status,
    completed_reboot,
    node_kstatus,
    same_status,
    status_patch,
)
from hack.testenv.mergepatch import merge_patch

T0 = dt.datetime(2026, 1, 1, 10, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)
A = "quay.io/example/os@sha256:" + "a" * 64
B = "quay.io/example/os@sha256:" + "b" * 64


def info(ref: str, **extra: Any) -> ImageInfo:
    return ImageInfo(image=ref, image_digest=ref.partition("@")[2], architecture="amd64", **extra)


ON_A = DeploymentImages(booted=info(A, version="1.0"), staged=None, rollback=None)
A_STAGED_B = DeploymentImages(booted=info(A, version="1.0"), staged=info(B), rollback=None)


def cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(x for x in status["conditions"] if x["type"] == ctype)


def test_first_status_has_conditions_images_and_generation() -> None:
    status = build_status(None, Decision(IDLE, HEALTHY), ON_A, 3, T0)
    assert status["observedGeneration"] == 3
    assert status["booted"]["image"] == A
    assert status["booted"]["version"] == "1.0"
    assert status["staged"] is None and status["rollback"] is None
    assert [x["type"] for x in status["conditions"]] == [
        c.COND_IDLE,
        c.COND_DEGRADED,
        c.COND_READY,
    ]
    idle, deg = cond(status, c.COND_IDLE), cond(status, c.COND_DEGRADED)
    assert idle == {
        "type": "Idle",
        "status": "True",
        "reason": "Idle",
        "message": "",
        "lastTransitionTime": "2026-01-01T10:00:00Z",
        "observedGeneration": 3,
    }
    assert (deg["status"], deg["reason"], deg["observedGeneration"]) == ("False", "Healthy", 3)
    # valid against the API model (what the CRD schema is generated from)
    BootcNodeStatus.model_validate(merge_patch({}, status_patch(status)["status"]))


def test_last_transition_time_moves_only_when_the_status_flips() -> None:
    first = build_status(None, Decision(staging(B), HEALTHY), ON_A, 1, T0)
    # Staging -> Staged: Idle stays False (reason/message change), Degraded stays False
    second = build_status(first, Decision(staged(B), HEALTHY), A_STAGED_B, 2, T1)
    assert cond(second, c.COND_IDLE)["reason"] == c.REASON_STAGED
    assert cond(second, c.COND_IDLE)["lastTransitionTime"] == "2026-01-01T10:00:00Z"
    assert cond(second, c.COND_DEGRADED)["lastTransitionTime"] == "2026-01-01T10:00:00Z"
    assert cond(second, c.COND_IDLE)["observedGeneration"] == 2
    # Degraded flips to True: its time moves, Idle's does not
    third = build_status(second, Decision(IDLE, degraded("boom")), A_STAGED_B, 2, T1)
    assert cond(third, c.COND_DEGRADED)["lastTransitionTime"] == "2026-01-01T10:05:00Z"
    assert cond(third, c.COND_DEGRADED)["message"] == "boom"
    assert cond(third, c.COND_IDLE)["lastTransitionTime"] == "2026-01-01T10:05:00Z"  # flipped


def test_unknown_host_keeps_images_and_idle() -> None:
    before = build_status(None, Decision(staged(B), HEALTHY), A_STAGED_B, 1, T0)
    after = build_status(before, Decision(None, degraded("bootc status timed out")), None, 1, T1)
    assert after["staged"] == before["staged"] and after["booted"] == before["booted"]
    assert cond(after, c.COND_IDLE) == cond(before, c.COND_IDLE)
    assert cond(after, c.COND_DEGRADED)["status"] == "True"


def test_other_condition_types_are_kept() -> None:
    current = {"conditions": [{"type": "Custom", "status": "True", "reason": "X"}]}
    status = build_status(current, Decision(IDLE, HEALTHY), ON_A, 1, T0)
    assert [x["type"] for x in status["conditions"]] == ["Custom", "Idle", "Degraded", "Ready"]


def test_same_status_ignores_timestamps_nulls_and_order() -> None:
    status = build_status(None, Decision(staged(B), HEALTHY), A_STAGED_B, 1, T0)
    stored = merge_patch({}, status_patch(status)["status"])  # nulls gone, as on the server
    assert same_status(stored, status)
    later = build_status(stored, Decision(staged(B), HEALTHY), A_STAGED_B, 1, T1)
    assert same_status(stored, later)
    moved = copy.deepcopy(stored)
    for x in moved["conditions"]:
        x["lastTransitionTime"] = "2030-01-01T00:00:00Z"
    moved["conditions"].reverse()
    assert same_status(moved, status)


def test_same_status_sees_every_real_change() -> None:
    base = build_status(None, Decision(staged(B), HEALTHY), A_STAGED_B, 1, T0)
    assert not same_status(base, build_status(base, Decision(staged(B), HEALTHY), ON_A, 1, T0))
    assert not same_status(
        base, build_status(base, Decision(staged(B), HEALTHY), A_STAGED_B, 2, T0)
    )
    assert not same_status(
        base, build_status(base, Decision(staged(B), degraded("x")), A_STAGED_B, 1, T0)
    )
    assert not same_status(
        base, build_status(base, Decision(staged(A), HEALTHY), A_STAGED_B, 1, T0)
    )  # message
    assert not same_status(None, base)


def test_patch_clears_what_disappeared() -> None:
    server = merge_patch(
        {}, status_patch(build_status(None, Decision(IDLE, HEALTHY), A_STAGED_B, 1, T0))["status"]
    )
    assert server["booted"]["version"] == "1.0" and "staged" in server
    # the host now reports no staged deployment and no version for the booted one
    images = DeploymentImages(booted=info(A), staged=None, rollback=None)
    new = build_status(server, Decision(IDLE, HEALTHY), images, 1, T1)
    patch = status_patch(new)
    assert patch["status"]["staged"] is None and patch["status"]["rollback"] is None
    applied = merge_patch(server, patch["status"])
    assert "staged" not in applied
    assert "version" not in applied["booted"]
    assert same_status(applied, new)


# ------------------------------------------------------------------ bootedShort (issue 13)

INDEX = "quay.io/example/os@sha256:" + "f" * 12 + "0" * 52


def test_booted_short_of_a_digest_pinned_ref_is_that_digest() -> None:
    assert booted_short(info(A)) == "a" * 12
    # a multi-arch index: the ref names the index, imageDigest the per-arch manifest
    multi = ImageInfo(image=INDEX, image_digest="sha256:" + "e" * 64, architecture="amd64")
    assert booted_short(multi) == "f" * 12


def test_booted_short_of_a_tag_ref_is_the_image_digest() -> None:
    tagged = ImageInfo(image="quay.io/example/os:stable", image_digest="sha256:" + "C0" * 32)
    assert booted_short(tagged) == "c0" * 6
    oci = ImageInfo(image="oci:/var/mnt/img", image_digest="sha256:" + "d" * 64)
    assert booted_short(oci) == "d" * 12
    assert booted_short(None) is None


def test_booted_short_is_written_kept_and_cleared() -> None:
    status = build_status(None, Decision(IDLE, HEALTHY), ON_A, 1, T0)
    assert status["bootedShort"] == "a" * 12
    server = merge_patch({}, status_patch(status)["status"])
    assert BootcNodeStatus.model_validate(server).booted_short == "a" * 12
    # bootc status unreadable: kept as it was, like booted/staged/rollback
    kept = build_status(server, Decision(None, degraded("bootc status failed")), None, 1, T1)
    assert kept["bootedShort"] == "a" * 12
    # nothing booted (not a bootc host): removed by the merge patch
    nothing = DeploymentImages(booted=None, staged=None, rollback=None)
    cleared = build_status(server, Decision(IDLE, HEALTHY), nothing, 1, T1)
    assert "bootedShort" not in merge_patch(server, status_patch(cleared)["status"])


# ------------------------------------------------------------------ bootAssessment (issue 16)

PENDING = BootAssessment(state=BootAssessmentState.PENDING, message="not reached yet")
COMPLETE = BootAssessment(state=BootAssessmentState.COMPLETE, message="reached")


def test_boot_assessment_is_written_and_seen_when_it_changes() -> None:
    pending = build_status(None, Decision(IDLE, HEALTHY), ON_A, 1, T0, PENDING)
    assert pending["bootAssessment"] == {"state": "Pending", "message": "not reached yet"}
    server = merge_patch({}, status_patch(pending)["status"])
    written = BootcNodeStatus.model_validate(server).boot_assessment
    assert written is not None and written.to_wire() == PENDING.to_wire()
    assert same_status(server, build_status(server, Decision(IDLE, HEALTHY), ON_A, 1, T1, PENDING))
    complete = build_status(server, Decision(IDLE, HEALTHY), ON_A, 1, T1, COMPLETE)
    assert not same_status(server, complete)
    assert merge_patch(server, status_patch(complete)["status"])["bootAssessment"] == {
        "state": "Complete",
        "message": "reached",
    }


def test_boot_assessment_is_never_kept_from_the_stored_status() -> None:
    # the server may hold the previous boot's Complete: a status without an assessment
    # of this boot removes it, even when bootc status could not be read either
    server = merge_patch(
        {},
        status_patch(build_status(None, Decision(IDLE, HEALTHY), ON_A, 1, T0, COMPLETE))["status"],
    )
    for images in (ON_A, None):
        new = build_status(server, Decision(IDLE, HEALTHY), images, 1, T1)
        assert new["bootAssessment"] is None
        assert "bootAssessment" not in merge_patch(server, status_patch(new)["status"])
    # a message-less assessment has no message field on the wire
    bare = build_status(
        None,
        Decision(IDLE, HEALTHY),
        ON_A,
        1,
        T0,
        BootAssessment(state=BootAssessmentState.UNKNOWN),
    )
    assert bare["bootAssessment"] == {"state": "Unknown"}


# ------------------------------------------------------------------ lastRebootKind (issue 17)

ON_B = DeploymentImages(booted=info(B), staged=None, rollback=info(A))


def test_last_reboot_kind_is_written_with_rebooting_and_kept_after() -> None:
    server = merge_patch(
        {}, status_patch(build_status(None, Decision(IDLE, HEALTHY), ON_A, 1, T0))["status"]
    )
    assert "lastRebootKind" not in server
    soft = Decision(rebooting(B, soft=True), HEALTHY, soft_reboot=True, reboot_kind=RebootKind.SOFT)
    new = build_status(server, soft, A_STAGED_B, 2, T1)
    assert new["lastRebootKind"] == "Soft" and not same_status(server, new)
    server = merge_patch(server, status_patch(new)["status"])
    assert BootcNodeStatus.model_validate(server).last_reboot_kind == RebootKind.SOFT
    # after the reboot: another boot, the kind kept (and no write for it alone)
    after = build_status(server, Decision(IDLE, HEALTHY), ON_B, 2, T1)
    assert after["lastRebootKind"] == "Soft"
    server = merge_patch(server, status_patch(after)["status"])
    assert same_status(server, build_status(server, Decision(IDLE, HEALTHY), ON_B, 2, T1))
    full = Decision(rebooting(A), HEALTHY, reboot=True, reboot_kind=RebootKind.FULL)
    assert build_status(server, full, ON_B, 3, T1)["lastRebootKind"] == "Full"


def left_rebooting(kind: str | None) -> dict[str, Any]:
    """What the daemon left on the server right before rebooting from A into B."""
    reboot_kind = None if kind is None else RebootKind(kind)
    decision = Decision(rebooting(B), HEALTHY, reboot=True, reboot_kind=reboot_kind)
    left: dict[str, Any] = merge_patch(
        {}, status_patch(build_status(None, decision, A_STAGED_B, 1, T0))["status"]
    )
    return left


def test_completed_reboot_is_the_kind_left_before_a_reboot_into_another_deployment() -> None:
    assert completed_reboot(left_rebooting("Soft"), ON_B) == RebootKind.SOFT
    assert completed_reboot(left_rebooting("Full"), ON_B) == RebootKind.FULL
    # written by a daemon that does not know the field: it reboots fully
    assert completed_reboot(left_rebooting(None), ON_B) == RebootKind.FULL


def test_no_completed_reboot_without_a_new_deployment_or_a_rebooting_status() -> None:
    assert completed_reboot(left_rebooting("Soft"), A_STAGED_B) is None, "a daemon restart"
    assert completed_reboot(left_rebooting("Soft"), DeploymentImages(None, None, None)) is None
    idle = merge_patch(
        {}, status_patch(build_status(None, Decision(IDLE, HEALTHY), ON_A, 1, T0))["status"]
    )
    assert completed_reboot(idle, ON_B) is None
    assert completed_reboot(None, ON_B) is None
    assert completed_reboot({**left_rebooting("Soft"), "lastRebootKind": "Sideways"}, ON_B) == (
        RebootKind.FULL
    )


def kstatus_of(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """kstatus's conditions present: type -> (status, reason)."""
    return {
        x["type"]: (x["status"], x["reason"])
        for x in status["conditions"]
        if x["type"] in (c.COND_READY, c.COND_RECONCILING, c.COND_STALLED)
    }


def test_kstatus_follows_the_nodes_own_work() -> None:
    """Reconciling while staging or rebooting, Ready once the spec is done (Idle, or
    staged while the spec asks for Staged), Stalled while Degraded; Reconciling and
    Stalled only while True, every condition at the decision's generation."""
    steps = [
        (
            Decision(staging(B), HEALTHY),
            "Staged",
            {"Ready": ("False", "Staging"), "Reconciling": ("True", "Staging")},
        ),
        (Decision(staged(B), HEALTHY), "Staged", {"Ready": ("True", "Staged")}),
        (
            Decision(staged(B), HEALTHY),
            "Booted",
            {"Ready": ("False", "Staged"), "Reconciling": ("True", "Staged")},
        ),
        (
            Decision(rebooting(B), HEALTHY),
            "Booted",
            {"Ready": ("False", "Rebooting"), "Reconciling": ("True", "Rebooting")},
        ),
        (
            Decision(None, degraded("bootc status timed out")),
            "Booted",
            {"Ready": ("False", "Error"), "Stalled": ("True", "Error")},
        ),
        (Decision(IDLE, HEALTHY), "Booted", {"Ready": ("True", "Idle")}),
    ]
    status: dict[str, Any] | None = None
    for generation, (decision, want, expected) in enumerate(steps, start=1):
        status = build_status(status, decision, A_STAGED_B, generation, T0, desired_state=want)
        assert kstatus_of(status) == expected, (decision, want)
        for x in status["conditions"]:
            if x["type"] != c.COND_IDLE or decision.idle is not None:  # None: Idle is kept
                assert x["observedGeneration"] == generation
    assert status is not None
    assert cond(status, c.COND_READY)["message"] == "runs the desired image"


def test_kstatus_of_a_node_without_an_idle_condition_yet_is_reconciling() -> None:
    ks = node_kstatus([{"type": "Degraded", "status": "False", "reason": "Healthy"}])
    assert (ks.ready, ks.reconciling, ks.stalled, ks.reason) == (False, True, False, "Pending")
    assert ks.verdict == "InProgress"
    stalled = node_kstatus([{"type": "Degraded", "status": "True", "reason": "RebootNotAllowed"}])
    assert (stalled.verdict, stalled.reason) == ("Failed", "RebootNotAllowed")
