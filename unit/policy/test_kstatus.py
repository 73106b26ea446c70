"""kstatus's conditions: the pool's from its UpToDate, Degraded and phase
(``policy.poolstatus.pool_kstatus``) and how ``api.kstatus.set_kstatus`` writes them.

The verdicts are what kstatus computes from these conditions (``KStatus.verdict``,
checked against kstatus's own code by ``e2e/test_gitops.py``)."""

from __future__ import annotations

import datetime as dt

import pytest

from bootc_operator.api.kstatus import KStatus, set_kstatus
from bootc_operator.policy.poolstatus import pool_kstatus

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=1)
HEALTHY = (False, "Healthy", "all nodes healthy")


@pytest.mark.parametrize(
    ("up", "degraded", "phase", "verdict", "reason", "present"),
    [
        ((True, "AllUpdated", "3/3 updated"), HEALTHY, "UpToDate", "Current", "AllUpdated", ()),
        ((True, "NoMatchingNodes", "none"), HEALTHY, "UpToDate", "Current", "NoMatchingNodes", ()),
        # Ready exactly when UpToDate is: a problem that does not stop the rollout
        # (here a conflict over another node) leaves it Current
        (
            (True, "AllUpdated", "3/3"),
            (True, "NodeConflict", "n9 is claimed by two pools"),
            "Degraded",
            "Current",
            "AllUpdated",
            (),
        ),
        (
            (False, "Pending", "nodes not yet matched"),
            HEALTHY,
            "Pending",
            "InProgress",
            "Pending",
            ("Reconciling",),
        ),
        (
            (False, "RolloutInProgress", "1/3 updated"),
            HEALTHY,
            "Progressing",
            "InProgress",
            "Progressing",
            ("Reconciling",),
        ),
        (
            (False, "HealthCheckPending", "2/3 updated; n3 under health check"),
            HEALTHY,
            "Progressing",
            "InProgress",
            "Progressing",
            ("Reconciling",),
        ),
        (
            (False, "AwaitingMaintenanceWindow", "no new reboots"),
            HEALTHY,
            "AwaitingWindow",
            "InProgress",
            "AwaitingWindow",
            ("Reconciling",),
        ),
        (
            (False, "BlockedByAlerts", "alert X fires"),
            HEALTHY,
            "Blocked",
            "InProgress",
            "Blocked",
            ("Reconciling",),
        ),
        # a degraded node does not stop the others: still under way
        (
            (False, "RolloutInProgress", "1/3 updated; 1 degraded"),
            (True, "NodeDegraded", "n2: bootc failed"),
            "Degraded",
            "InProgress",
            "Degraded",
            ("Reconciling",),
        ),
        # a tag that does not resolve is retried: under way, not stalled
        (
            (False, "TagResolutionError", "no such tag"),
            (True, "TagResolutionError", "no such tag"),
            "Degraded",
            "InProgress",
            "Degraded",
            ("Reconciling",),
        ),
        # waiting for a person's decision: neither Reconciling nor Stalled
        ((False, "Paused", "rollout paused: 1/3"), HEALTHY, "Paused", "InProgress", "Paused", ()),
        (
            (False, "AwaitingApproval", "canaries passed"),
            HEALTHY,
            "AwaitingApproval",
            "InProgress",
            "AwaitingApproval",
            (),
        ),
        # cannot go on without a person: Stalled
        (
            (False, "RolloutHalted", "2 nodes holding reboot slots are unhealthy"),
            (True, "RolloutHalted", "2 nodes holding reboot slots are unhealthy"),
            "Halted",
            "Failed",
            "RolloutHalted",
            ("Stalled",),
        ),
        (
            (False, "HealthCheckFailed", "n1 failed"),
            (True, "HealthCheckFailed", "n1 failed"),
            "Halted",
            "Failed",
            "HealthCheckFailed",
            ("Stalled",),
        ),
        (
            (False, "InvalidSpec", "spec.rollout.maxUnavailable: bad"),
            (True, "InvalidSpec", "spec.rollout.maxUnavailable: bad"),
            "Degraded",
            "Failed",
            "InvalidSpec",
            ("Stalled",),
        ),
        (
            (False, "SignatureVerificationFailed", "unsigned"),
            (True, "SignatureVerificationFailed", "unsigned"),
            "Degraded",
            "Failed",
            "SignatureVerificationFailed",
            ("Stalled",),
        ),
        # a halt behind a pause (phase Halted) is still a halt
        (
            (False, "Paused", "rollout paused"),
            (True, "RolloutHalted", "drain of n2 timed out"),
            "Halted",
            "Failed",
            "RolloutHalted",
            ("Stalled",),
        ),
    ],
)
def test_pool_kstatus(
    up: tuple[bool, str, str],
    degraded: tuple[bool, str, str],
    phase: str,
    verdict: str,
    reason: str,
    present: tuple[str, ...],
) -> None:
    ks = pool_kstatus(up, degraded, phase)
    assert ks.verdict == verdict
    assert ks.ready is up[0]  # Ready exactly when UpToDate is
    conditions = set_kstatus([], ks, observed_generation=4, now=T0)
    by_type = {x["type"]: x for x in conditions}
    assert set(by_type) == {"Ready", *present}
    assert by_type["Ready"]["reason"] == (reason if ks.stalled else up[1])
    for cond_type in present:
        assert by_type[cond_type]["status"] == "True"
        assert by_type[cond_type]["reason"] == reason
    for x in conditions:
        assert x["observedGeneration"] == 4


def test_set_kstatus_removes_what_no_longer_holds_and_keeps_the_rest() -> None:
    others = [{"type": "UpToDate", "status": "False", "reason": "RolloutInProgress"}]
    going = set_kstatus(
        others,
        KStatus(False, "RolloutInProgress", "1/2", reconciling=True, detail="Progressing"),
        now=T0,
    )
    assert [x["type"] for x in going] == ["UpToDate", "Ready", "Reconciling"]
    assert going[2]["reason"] == "Progressing" and going[2]["message"] == "1/2"
    stalled = set_kstatus(going, KStatus(False, "RolloutHalted", "halted", stalled=True), now=T1)
    assert [x["type"] for x in stalled] == ["UpToDate", "Ready", "Stalled"]
    # Ready stayed False: its time did not move
    assert stalled[1]["lastTransitionTime"] == going[1]["lastTransitionTime"]
    done = set_kstatus(stalled, KStatus(True, "AllUpdated", "2/2"), now=T1)
    assert [(x["type"], x["status"]) for x in done] == [
        ("UpToDate", "False"),
        ("Ready", "True"),
    ]
    assert done[1]["lastTransitionTime"] != going[1]["lastTransitionTime"]


def test_kstatus_refuses_contradictions() -> None:
    with pytest.raises(ValueError, match="neither"):
        KStatus(True, "AllUpdated", reconciling=True)
    with pytest.raises(ValueError, match="exclude"):
        KStatus(False, "X", reconciling=True, stalled=True)
