"""``poolspec``: a pool's spec resolved into its ``PoolPolicy``, and every way it is invalid.

Each invalid case pins the whole ``Degraded/InvalidSpec`` message the status shows."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.policy.drainplan import DrainPolicy
from bootc_operator.policy.health import HealthPolicy
from bootc_operator.policy.poolspec import Budgets, PoolPolicy, check_pool
from bootc_operator.policy.windows import parse_windows

DIGEST = "sha256:" + "a" * 64
TAGGED = "quay.io/x/os:stable"
BAD_SELECTOR = {"matchExpressions": [{"key": "a", "operator": "Near"}]}
BAD_OPERATOR = (
    "operator \"Near\" for key \"a\" is not one of ('In', 'NotIn', 'Exists', 'DoesNotExist')"
)
WINDOW = {"days": ["Sat"], "start": "22:00", "duration": "4h", "timeZone": "UTC"}


def pool(rollout: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "nodeSelector": {"matchLabels": {"a": "b"}},
        "image": {"ref": f"quay.io/x/os@{DIGEST}"},
        "rollout": rollout or {},
    }
    body.update(spec)
    return {"metadata": {"name": "p"}, "spec": {k: v for k, v in body.items() if v is not None}}


def test_a_full_spec_resolves_into_one_typed_policy() -> None:
    policy = check_pool(
        pool(
            rollout={
                "paused": True,
                "maxUnavailable": "20%",
                "maxUnhealthy": 3,
                "stageAhead": "10%",
                "drainTimeoutSeconds": 300,
                "rebootTimeoutSeconds": 900,
                "maintenanceWindows": [WINDOW],
                "canary": {"nodes": 2, "requireApproval": True},
                "approvedDigest": DIGEST,
            },
            health={"minReadySeconds": 30, "bootComplete": True, "onFailure": "Rollback"},
            disruption={"rebootPolicy": "AllowSoftReboot"},
        )
    )
    assert policy == PoolPolicy(
        image_ref=f"quay.io/x/os@{DIGEST}",
        repository="quay.io/x/os",
        target_digest=DIGEST,
        selector_ok=True,
        selector={"matchLabels": {"a": "b"}},
        paused=True,
        drain_timeout=300.0,
        drain=DrainPolicy(timeout=300.0),
        reboot_timeout=900.0,
        max_unavailable="20%",
        targets=frozenset({DIGEST}),
        max_unhealthy=3,
        stage_ahead="10%",
        windows=tuple(parse_windows([WINDOW])[0]),
        health=HealthPolicy(
            min_ready_seconds=30,
            boot_complete=True,
            pods_selector=None,
            pods_namespaces=frozenset(),
            timeout_seconds=600.0,
            rollback=True,
        ),
        canary_nodes=2,
        require_approval=True,
        approved_digest=DIGEST,
        reboot_policy="AllowSoftReboot",
    )
    assert policy.valid and not policy.awaiting_approval
    assert policy.desired_image == f"quay.io/x/os@{DIGEST}"
    assert policy.budgets(50) == Budgets(
        max_unavailable=10, max_unhealthy=3, canaries=2, stage_ahead=5
    )


def test_an_empty_rollout_takes_the_defaults() -> None:
    policy = check_pool(pool(), None)
    assert policy.valid and policy.windows == () and policy.health is None
    assert (policy.paused, policy.drain_timeout, policy.reboot_timeout) == (False, None, None)
    assert policy.reboot_policy is None  # unset, or RebootOnly, writes nothing on members
    assert policy.budgets(10) == Budgets(
        max_unavailable=1, max_unhealthy=2, canaries=0, stage_ahead=None
    )
    assert policy.budgets(0).canaries == 0
    timeouts = check_pool(pool({"drainTimeoutSeconds": 0, "rebootTimeoutSeconds": 0}))
    assert (timeouts.drain_timeout, timeouts.reboot_timeout) == (None, None)  # 0: no limit


def test_a_tag_targets_only_the_digest_resolved_for_that_very_ref() -> None:
    unresolved = check_pool(pool(image={"ref": TAGGED}))
    assert unresolved.valid and unresolved.tag == "stable" and unresolved.target_digest is None
    assert unresolved.targets == frozenset() and unresolved.desired_image is None
    resolved = check_pool(pool(image={"ref": TAGGED}), {TAGGED: DIGEST})
    assert resolved.targets == frozenset({DIGEST})
    assert resolved.desired_image == f"quay.io/x/os@{DIGEST}"
    other = check_pool(pool(image={"ref": TAGGED}), {"quay.io/x/os:old": DIGEST})
    assert other.target_digest is None


def test_size_dependent_budgets_resolve_with_their_rules() -> None:
    assert check_pool(pool()).resolve_max_unhealthy(1) == 2  # a 1-node pool keeps 2
    tuned = check_pool(pool({"maxUnhealthy": "10%", "stageAhead": "20%"}))
    assert tuned.resolve_max_unhealthy(35) == 4 and tuned.resolve_max_unhealthy(3) == 1
    assert tuned.resolve_stage_ahead(10, 1) == 2
    assert check_pool(pool({"stageAhead": 0})).resolve_stage_ahead(10, 3) == 3
    assert check_pool(pool({"stageAhead": "0%"})).resolve_stage_ahead(10, 0) == 1
    assert check_pool(pool({"maxUnhealthy": 5})).resolve_max_unhealthy(3) == 5  # not clamped
    canaries = check_pool(pool({"canary": {"nodes": "10%"}}))
    assert canaries.resolve_canaries(25) == 3 and canaries.resolve_canaries(3) == 1
    assert check_pool(pool({"canary": {}})).budgets(5).canaries == 1  # nodes defaults to 1


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("no selector", pool(nodeSelector=None), "spec.nodeSelector is required"),
    ("bad selector", pool(nodeSelector=BAD_SELECTOR), f"spec.nodeSelector: {BAD_OPERATOR}"),
    (
        "bad image ref",
        pool(image={"ref": "UPPER/Case::x"}),
        'spec.image.ref: image reference "UPPER/Case::x" has no registry host ("UPPER" is not '
        "a host); write it fully qualified, e.g. quay.io/UPPER/Case::x",
    ),
    ("no image ref", pool(image={}), "spec.image.ref: image reference is empty"),
    (
        "maxUnavailable word",
        pool({"maxUnavailable": "ten"}),
        'spec.rollout.maxUnavailable: maxUnavailable "ten" is not a non-negative integer or a '
        'percentage like "25%"',
    ),
    (
        "maxUnavailable negative",
        pool({"maxUnavailable": -1}),
        "spec.rollout.maxUnavailable: maxUnavailable -1 must not be negative",
    ),
    ("maxUnhealthy 0", pool({"maxUnhealthy": 0}), "spec.rollout.maxUnhealthy must be at least 1"),
    (
        "maxUnhealthy 0%",
        pool({"maxUnhealthy": "0%"}),
        "spec.rollout.maxUnhealthy must be at least 1",
    ),
    (
        "stageAhead quoted",
        pool({"stageAhead": "5"}),
        'spec.rollout.stageAhead: stageAhead "5" is a string: write a percentage like "25%" or '
        "the integer 5 without quotes",
    ),
    (
        "window time zone",
        pool({"maintenanceWindows": [{**WINDOW, "timeZone": "Mars/Base"}]}),
        'spec.rollout.maintenanceWindows[0].timeZone: "Mars/Base" is not a known IANA time zone',
    ),
    (
        "window start",
        pool({"maintenanceWindows": [{**WINDOW, "start": "25:00"}]}),
        'spec.rollout.maintenanceWindows[0].start: "25:00" is not a time like "22:00"',
    ),
    ("health not an object", pool(health=3), "spec.health must be an object"),
    (
        "health timeout",
        pool(health={"timeoutSeconds": 0}),
        "spec.health.timeoutSeconds must be an integer >= 1, not 0",
    ),
    (
        "health minReadySeconds",
        pool(health={"minReadySeconds": -1}),
        "spec.health.minReadySeconds must be an integer >= 0, not -1",
    ),
    (
        "health pods without selector",
        pool(health={"pods": {}}),
        "spec.health.pods.selector: is required",
    ),
    (
        "health pods bad selector",
        pool(health={"pods": {"selector": BAD_SELECTOR}}),
        f"spec.health.pods.selector: {BAD_OPERATOR}",
    ),
    ("canary not an object", pool({"canary": 3}), "spec.rollout.canary must be an object"),
    (
        "canary 0",
        pool({"canary": {"nodes": 0}}),
        "spec.rollout.canary.nodes must be at least 1",
    ),
    (
        "canary word",
        pool({"canary": {"nodes": "x"}}),
        'spec.rollout.canary.nodes: canary.nodes "x" is not a non-negative integer or a '
        'percentage like "25%"',
    ),
    (
        "drain timeout negative",
        pool({"drainTimeoutSeconds": -5}),
        "spec.rollout.drainTimeoutSeconds must be a non-negative integer, not -5",
    ),
    (
        "reboot timeout quoted",
        pool({"rebootTimeoutSeconds": "10"}),
        'spec.rollout.rebootTimeoutSeconds must be a non-negative integer, not "10"',
    ),
]


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_each_invalid_field_is_one_problem_with_its_message(
    body: dict[str, Any], message: str
) -> None:
    policy = check_pool(body)
    assert not policy.valid
    assert policy.problems == (message,)


def test_problems_accumulate_and_a_bad_setting_falls_back_to_its_default() -> None:
    policy = check_pool(
        pool(
            {"canary": {"nodes": "x"}, "drainTimeoutSeconds": True},
            health={"timeoutSeconds": 0},
            nodeSelector=BAD_SELECTOR,
        )
    )
    assert len(policy.problems) == 4 and not policy.selector_ok and policy.selector is None
    assert policy.canary_nodes is None and policy.drain_timeout is None
    assert policy.health is not None and policy.health.timeout_seconds == 600.0
