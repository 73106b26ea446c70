"""The health gate, rollback and canary decisions (pure): ``health``, their part of
``slots.plan_rollout``, the BootcNode view's new fields, ``poolspec`` and the status words."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.health import (
    CHECK_BOOT_COMPLETE,
    CHECK_MIN_READY,
    CHECK_PODS,
    CHECK_READY,
    GateResult,
    HealthPolicy,
    PodHealth,
    Verdict,
    arrived,
    choose_canaries,
    evaluate,
    gate_results,
    pod_health,
)
from bootc_operator.policy.nodestate import NodeState, NodeView, rollback_ref, view
from bootc_operator.policy.ownership import retarget_due, retarget_patch
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.poolstatus import (
    RolloutFacts,
    count_states,
    phase,
    progress_message,
    rollout_condition,
)
from bootc_operator.policy.slots import gate_news, plan_pool, plan_staging
from bootc_operator.reconcilers.watchers.healthpods import slim_pod
from unit.policy.planning import rollout_plan

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
OLD = "sha256:" + "a" * 64
NEW = "sha256:" + "b" * 64
REPO = "registry.example.com/os"
S = NodeState


def ago(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def node(name: str, state: NodeState = S.STAGED, **kw: Any) -> NodeView:
    base = NodeView(
        name=name,
        state=state,
        desired_image=f"{REPO}@{NEW}",
        desired_image_state="Staged",
        spec_in_sync=True,
        in_slot=False,
        was_cordoned=False,
        ready=True,
        unschedulable=False,
        idle=state is S.UP_TO_DATE,
        idle_since=None,
        degraded_message="",
        booted_digest=NEW if state is S.UP_TO_DATE else OLD,
        staged_digest=None,
        rollback_image=f"{REPO}@{OLD}",
    )
    return replace(base, **kw)


def back(name: str, **kw: Any) -> NodeView:
    """A holder that rebooted into the target 30 s ago and is Idle (it ``arrived``)."""
    fields: dict[str, Any] = {
        "in_slot": True,
        "desired_image_state": "Booted",
        "reboot_requested_at": ago(30),
        "slot_since": ago(60),
        "ready_since": ago(10),
        "unschedulable": True,
    }
    fields.update(kw)
    state = fields.pop("state", S.UP_TO_DATE)
    return replace(node(name, S.UP_TO_DATE), state=state, **fields)


PODS_SELECTOR = {"matchLabels": {"app": "cni"}}


def fresh(key: str, ready: bool = True) -> PodHealth:
    """A pod its kubelet reported 5 s ago, after a ``back`` holder's reboot request."""
    return PodHealth(key, ready, ready_since=ago(5))


# ------------------------------------------------------------------ the gate's table

CHECK_CASES: dict[str, dict[str, tuple[dict[str, Any], list[PodHealth] | None]]] = {
    # check -> outcome -> (view fields, pods)
    CHECK_READY: {
        "pass": ({}, None),
        "pending": ({"ready": False}, None),
    },
    CHECK_BOOT_COMPLETE: {
        "pass": ({"boot_assessment": "Complete"}, None),
        "pending": ({"boot_assessment": "Pending"}, None),
        "fail": ({"boot_assessment": "Failed", "boot_assessment_message": "x.service"}, None),
    },
    CHECK_MIN_READY: {
        "pass": ({"ready_since": ago(120)}, None),
        "pending": ({"ready_since": ago(10)}, None),
    },
    CHECK_PODS: {
        "pass": ({}, [fresh("kube-system/cni-1")]),
        "pending": ({}, [fresh("kube-system/cni-1", False)]),
    },
}
POLICY = HealthPolicy(
    min_ready_seconds=60, boot_complete=True, pods_selector=PODS_SELECTOR, timeout_seconds=300
)
HEALTHY: dict[str, Any] = {"boot_assessment": "Complete", "ready_since": ago(120)}
HEALTHY_PODS = [fresh("kube-system/cni-1")]


@pytest.mark.parametrize(
    ("check", "outcome", "timed_out"),
    [
        (check, outcome, timed_out)
        for check, outcomes in CHECK_CASES.items()
        for outcome in outcomes
        for timed_out in (False, True)
    ],
)
def test_every_check_pending_passing_failing_and_timing_out(
    check: str, outcome: str, timed_out: bool
) -> None:
    fields, pods = CHECK_CASES[check][outcome]
    requested = ago(400) if timed_out else ago(30)
    v = back("n1", **(HEALTHY | fields | {"reboot_requested_at": requested}))
    got = evaluate(POLICY, v, pods if pods is not None else HEALTHY_PODS, NOW)
    if outcome == "pass":
        assert got == GateResult(Verdict.PASSED)  # passing never times out
    elif outcome == "fail":  # a failed boot assessment fails at once
        assert (got.verdict, got.check) == (Verdict.FAILED, check)
        assert got.message == "x.service"  # the daemon's words, not repeated
    elif timed_out:
        assert (got.verdict, got.check) == (Verdict.FAILED, check)
        assert got.message.startswith("not healthy 300s after its reboot was requested: ")
    else:
        assert (got.verdict, got.check) == (Verdict.PENDING, check)
        assert got.wait is not None and got.wait > 0


def test_pending_waits_until_min_ready_or_the_timeout_whichever_is_first() -> None:
    v = back("n1", boot_assessment="Complete", ready_since=ago(50), reboot_requested_at=ago(30))
    assert evaluate(POLICY, v, HEALTHY_PODS, NOW).wait == pytest.approx(10.5)
    v = back("n1", boot_assessment="Pending", ready_since=ago(120), reboot_requested_at=ago(290))
    assert evaluate(POLICY, v, HEALTHY_PODS, NOW).wait == pytest.approx(10.5)


def test_a_ready_flap_restarts_min_ready_seconds() -> None:
    policy = HealthPolicy(min_ready_seconds=60)
    steady = back("n1", ready_since=ago(61))
    flapped = back("n1", ready_since=ago(5))  # went NotReady and back 5 s ago
    assert evaluate(policy, steady, None, NOW).verdict is Verdict.PASSED
    got = evaluate(policy, flapped, None, NOW)
    assert (got.verdict, got.check, got.message) == (
        Verdict.PENDING,
        CHECK_MIN_READY,
        "Ready for 5s of 60s",
    )
    assert evaluate(policy, back("n1", ready=False), None, NOW).check == CHECK_READY


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        (None, "the node's pods have not been listed yet"),
        ([], "no pod matching the selector runs on the node"),
        (
            [fresh("ns/a"), fresh("ns/b", False), fresh("ns/c", False)],
            "ns/b, ns/c are not Ready (1/3 Ready)",
        ),
        ([fresh("ns/b", False)], "ns/b is not Ready (0/1 Ready)"),
        (
            [fresh(f"ns/p{i}", False) for i in range(7)],
            "ns/p0, ns/p1, ns/p2, ns/p3, ns/p4 and 2 more are not Ready (0/7 Ready)",
        ),
        (
            [PodHealth("ns/a", True, ready_since=ago(31)), fresh("ns/b")],
            "ns/a has not been reported Ready since the reboot (1/2 Ready)",
        ),
        (
            [
                PodHealth("ns/a", True, ready_since=ago(3600)),
                PodHealth("ns/b", True),  # no lastTransitionTime: nothing says when
                fresh("ns/c", False),
                fresh("ns/d"),
            ],
            "ns/c is not Ready; ns/a, ns/b have not been reported Ready since the reboot "
            "(1/4 Ready)",
        ),
    ],
)
def test_the_pods_check_names_the_pods(pods: list[PodHealth] | None, message: str) -> None:
    got = evaluate(HealthPolicy(pods_selector=PODS_SELECTOR), back("n1"), pods, NOW)
    assert (got.verdict, got.check, got.message) == (Verdict.PENDING, CHECK_PODS, message)
    assert got.describe() == f"Pending: pods: {message}"


# When the pod's Ready condition last changed, relative to the reboot request (30 s
# ago in ``back``), and whether that Ready counts (issue 25: stale readiness).
READY_SINCE_CASES = [
    (ago(3600), False),  # Ready long before the slot: the kubelet has not reported since
    (ago(45), False),  # turned Ready during the drain, before the reboot request
    (ago(31), False),  # one second before the request
    (ago(30), True),  # in the second of the request (whole seconds: counts as after)
    (ago(29), True),  # re-reported after the node came back
    (ago(0), True),  # a pod recreated after the reboot, Ready just now
    (None, False),  # no lastTransitionTime: nothing proves it was reported since
]


@pytest.mark.parametrize(("ready_since", "counts"), READY_SINCE_CASES)
def test_only_readiness_reported_since_the_reboot_passes_the_pods_check(
    ready_since: dt.datetime | None, counts: bool
) -> None:
    policy = HealthPolicy(pods_selector=PODS_SELECTOR, timeout_seconds=300)
    pods = [PodHealth("ns/cni", True, "Running", ready_since), fresh("ns/other")]
    got = evaluate(policy, back("n1"), pods, NOW)
    if counts:
        assert got == GateResult(Verdict.PASSED)
    else:
        assert (got.verdict, got.check, got.message) == (
            Verdict.PENDING,
            CHECK_PODS,
            "ns/cni has not been reported Ready since the reboot (1/2 Ready)",
        )
        # never reported again: it fails at the timeout like any pending check
        late = back("n1", reboot_requested_at=ago(400))
        failed = evaluate(policy, late, [replace(pods[0], ready_since=ago(3600))], NOW)
        assert (failed.verdict, failed.check) == (Verdict.FAILED, CHECK_PODS)
        assert "has not been reported Ready since the reboot" in failed.message


@pytest.mark.parametrize(("ready_since", "counts"), READY_SINCE_CASES)
def test_a_pod_not_ready_is_never_counted_whenever_it_changed(
    ready_since: dt.datetime | None, counts: bool
) -> None:
    pod = PodHealth("ns/cni", False, "Running", ready_since)
    assert not pod.ready_after(ago(30)) and not pod.ready_after(None)
    assert PodHealth("ns/cni", True, "", ready_since).ready_after(ago(30)) is counts
    assert PodHealth("ns/cni", True, "", ready_since).ready_after(None)  # no reboot to judge by


@pytest.mark.parametrize(
    ("ready_since", "counts"),
    [
        (ago(31), False),  # the second before the request's
        (ago(30), True),  # the request's second, stamped before or after it within it
        (ago(29), True),
    ],
)
def test_a_request_to_the_microsecond_is_judged_by_the_kubelets_whole_second(
    ready_since: dt.datetime, counts: bool
) -> None:
    """The controller stamps bootc.dev/reboot-requested to the microsecond (a1da25d), a
    kubelet its Ready in whole seconds: a node back and re-reported within the second
    of its request (a fast reboot) passes, and is not held as stale until the timeout
    (no later report moves its stamp; seen in e2e/test_health_gate.py, 0 s reboots)."""
    requested = ago(30) + dt.timedelta(microseconds=700_000)
    policy = HealthPolicy(pods_selector=PODS_SELECTOR, timeout_seconds=300)
    pod = PodHealth("ns/cni", True, "Running", ready_since)
    assert pod.ready_after(requested) is counts
    got = evaluate(policy, back("n1", reboot_requested_at=requested), [pod], NOW)
    assert (got.verdict is Verdict.PASSED) is counts, got


def test_a_stale_pod_passes_once_its_kubelet_reports_it_ready_again() -> None:
    policy = HealthPolicy(pods_selector=PODS_SELECTOR)
    before = [PodHealth("ns/cni", True, "Running", ago(600))]
    assert evaluate(policy, back("n1"), before, NOW).verdict is Verdict.PENDING
    after = [PodHealth("ns/cni", True, "Running", ago(2))]
    assert evaluate(policy, back("n1"), after, NOW) == GateResult(Verdict.PASSED)


def test_boot_assessment_not_reported_or_unknown_is_pending() -> None:
    policy = HealthPolicy(boot_complete=True)
    for state, text in (
        ("", "the daemon has not reported a boot assessment"),
        ("Unknown", "the boot assessment could not be read: no detail"),
        ("Pending", "boot-complete.target not reached yet"),
    ):
        got = evaluate(policy, back("n1", boot_assessment=state), None, NOW)
        assert (got.verdict, got.message) == (Verdict.PENDING, text)


def test_the_daemons_message_is_used_as_it_is() -> None:
    policy = HealthPolicy(boot_complete=True)
    said = "the boot finished without reaching boot-complete.target: failed units: a.service"
    failed = back("n1", boot_assessment="Failed", boot_assessment_message=said)
    assert evaluate(policy, failed, None, NOW).message == said
    v = back("n1", boot_assessment="Failed")
    assert evaluate(policy, v, None, NOW).message == "the boot did not reach boot-complete.target"


def test_checks_report_in_order_ready_boot_minready_pods() -> None:
    v = back("n1", ready=False, boot_assessment="Pending")
    assert evaluate(POLICY, v, [], NOW).check == CHECK_READY
    v = back("n1", boot_assessment="Pending", ready_since=ago(1))
    assert evaluate(POLICY, v, [], NOW).check == CHECK_BOOT_COMPLETE


def test_only_arrived_holders_are_gated() -> None:
    views = [
        back("arrived"),
        back("not-idle", idle=False),
        node("waiting", S.STAGED),
        node("updated-before", S.UP_TO_DATE),  # not in a slot
        back("rolling-back", held_back=True),
        back("no-request", reboot_requested_at=None),
    ]
    assert [v.name for v in views if arrived(v)] == ["arrived"]
    got = gate_results(HealthPolicy(min_ready_seconds=60), views, NOW, lambda n: None)
    assert set(got) == {"arrived"}
    assert gate_results(None, views, NOW, lambda n: None) == {}
    asked: list[str] = []

    def pods_of(name: str) -> list[PodHealth] | None:
        asked.append(name)
        return None

    gate_results(HealthPolicy(), views, NOW, pods_of)
    assert asked == []  # pods are only looked up when the policy checks them


# ------------------------------------------------------------------ plan_rollout with gates


def test_a_pending_gate_keeps_the_slot_and_the_budget() -> None:
    views = [back("a"), node("b"), node("c")]
    pending = {"a": GateResult(Verdict.PENDING, CHECK_PODS, "ns/x is not Ready")}
    plan = rollout_plan(views, 1, paused=False, now=NOW, gates=pending)
    assert plan.release == () and plan.take == () and plan.holders == ("a",)
    assert plan.gate_pending == (("a", CHECK_PODS, "ns/x is not Ready"),)
    assert not plan.halted and not plan.health_halted
    passed = rollout_plan(views, 1, paused=False, now=NOW, gates={"a": GateResult(Verdict.PASSED)})
    assert passed.release == ("a",) and passed.take == ("b",)
    # without a health spec (no verdicts) an arrived holder is released as before
    assert rollout_plan(views, 1, paused=False, now=NOW).release == ("a",)


def test_a_failed_gate_halts_and_keeps_the_slot_with_halt() -> None:
    views = [back("a"), back("b"), node("c")]
    gates = {
        "a": GateResult(Verdict.FAILED, CHECK_BOOT_COMPLETE, "did not complete"),
        "b": GateResult(Verdict.PASSED),
    }
    plan = rollout_plan(views, 2, paused=False, now=NOW, gates=gates)
    assert plan.health_failed == (("a", CHECK_BOOT_COMPLETE, "did not complete"),)
    assert plan.release == ("b",)  # a passed holder still finishes
    assert plan.take == () and plan.rollback == () and plan.health_halted
    assert plan.waiting == ("c",)


def test_a_failed_gate_rolls_back_with_rollback_when_there_is_a_rollback_deployment() -> None:
    views = [back("a"), back("b", rollback_image=None), node("c")]
    failed = GateResult(Verdict.FAILED, CHECK_PODS, "timed out")
    plan = rollout_plan(
        views,
        2,
        paused=False,
        now=NOW,
        gates={"a": failed, "b": failed},
        rollback_on_failure=True,
    )
    assert plan.rollback == ("a",)
    assert plan.health_failed == (
        ("b", CHECK_PODS, "timed out; no rollback deployment on the host to roll back to"),
    )
    assert plan.take == () and plan.release == () and set(plan.holders) == {"a", "b"}


def test_a_rolled_back_holder_is_released_once_it_runs_the_old_image_and_halts_the_pool() -> None:
    held = {"held_back": True, "health_failed": NEW, "desired_image": f"{REPO}@{OLD}"}
    rebooting = back("a", state=S.REBOOTING, idle=False, **held)
    plan = rollout_plan([rebooting, node("b")], 1, paused=False, now=NOW)
    assert plan.release == () and plan.take == () and plan.held_back == ("a",)
    booted_old = back("a", state=S.PENDING, booted_desired=True, booted_digest=OLD, **held)
    plan = rollout_plan([booted_old, node("b")], 1, paused=False, now=NOW)
    assert plan.release == ("a",) and plan.take == () and plan.health_halted
    released = node("a", S.PENDING, spec_in_sync=False, booted_digest=OLD, **held)
    plan = rollout_plan([released, node("b")], 1, paused=False, now=NOW)
    assert plan.take == () and plan.health_halted and plan.waiting == ("b",)


def test_held_back_members_are_never_candidates_nor_staged() -> None:
    held = node("a", S.STAGED, held_back=True, health_failed=NEW)
    assert rollout_plan([held], 1, paused=False, now=NOW).take == ()
    behind = node("b", S.UP_TO_DATE, spec_in_sync=False, booted_digest=OLD)
    assert plan_staging([replace(held, spec_in_sync=False), behind], 1) == ("b",)


# ------------------------------------------------------------------ canaries


def test_canaries_labelled_first_then_by_name() -> None:
    views = [node("d"), node("a"), node("c", canary_label=True), node("b")]
    assert choose_canaries(views, 1) == {"c"}
    assert choose_canaries(views, 3) == {"c", "a", "b"}
    assert choose_canaries(views, 0) == frozenset()


def test_canaries_go_alone_then_everyone_then_approval_stops_after_them() -> None:
    views = [node("a"), node("b"), node("c")]
    plan = rollout_plan(views, 2, paused=False, now=NOW, canaries=frozenset({"b"}))
    assert plan.take == ("b",) and plan.canary_pending == ("b",)
    holding = [node("a"), back("b"), node("c")]
    plan = rollout_plan(
        holding,
        2,
        paused=False,
        now=NOW,
        canaries=frozenset({"b"}),
        gates={"b": GateResult(Verdict.PENDING, CHECK_MIN_READY, "Ready for 1s of 60s")},
    )
    assert plan.take == () and plan.canary_pending == ("b",)
    done = [node("a"), node("b", S.UP_TO_DATE), node("c")]
    plan = rollout_plan(done, 2, paused=False, now=NOW, canaries=frozenset({"b"}))
    assert plan.take == ("a", "c") and not plan.awaiting_approval
    plan = rollout_plan(
        done, 2, paused=False, now=NOW, canaries=frozenset({"b"}), approval_needed=True
    )
    assert plan.take == () and plan.awaiting_approval and plan.waiting == ("a", "c")
    # nothing left to approve once everyone runs the target
    everyone = [node(n, S.UP_TO_DATE) for n in "abc"]
    plan = rollout_plan(
        everyone, 2, paused=False, now=NOW, canaries=frozenset({"b"}), approval_needed=True
    )
    assert not plan.awaiting_approval


def test_canaries_stage_first_under_stage_ahead() -> None:
    behind = [node(n, S.PENDING, spec_in_sync=False) for n in "abcd"]
    assert plan_staging(behind, 1, canaries=frozenset({"c"})) == ("c",)


def test_a_canary_never_exceeds_max_unavailable() -> None:
    views = [node(n) for n in "abcdef"]
    for budget, count in itertools.product((1, 2), (1, 3, 6)):
        canaries = choose_canaries(views, count)
        plan = rollout_plan(views, budget, paused=False, now=NOW, canaries=canaries)
        assert len(plan.take) == min(budget, count) and set(plan.take) <= canaries


# ------------------------------------------------------------------ the spec


def pool(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "nodeSelector": {"matchLabels": {"pool": "p"}},
        "image": {"ref": f"{REPO}@{NEW}"},
    }
    return {"metadata": {"name": "p", "generation": 1}, "spec": base | spec}


def test_health_and_canary_spec_are_read_and_checked() -> None:
    check = check_pool(
        pool(
            health={
                "minReadySeconds": 30,
                "bootComplete": True,
                "pods": {"selector": PODS_SELECTOR, "namespaces": ["kube-system"]},
                "onFailure": "Rollback",
            },
            rollout={"canary": {"nodes": "10%", "requireApproval": True}},
        )
    )
    assert check.valid
    assert check.health == HealthPolicy(
        min_ready_seconds=30,
        boot_complete=True,
        pods_selector=PODS_SELECTOR,
        pods_namespaces=frozenset({"kube-system"}),
        timeout_seconds=600.0,
        rollback=True,
    )
    assert check.resolve_canaries(25) == 3 and check.resolve_canaries(3) == 1
    assert check.awaiting_approval
    approved = check_pool(
        pool(rollout={"canary": {"nodes": 1, "requireApproval": True}, "approvedDigest": NEW})
    )
    assert not approved.awaiting_approval
    wrong = check_pool(pool(rollout={"canary": {"requireApproval": True}, "approvedDigest": OLD}))
    assert wrong.awaiting_approval and wrong.resolve_canaries(5) == 1
    assert check_pool(pool()).health is None and check_pool(pool()).resolve_canaries(5) == 0


def test_bad_health_spec_is_invalid_with_a_clear_message() -> None:
    check = check_pool(
        pool(health={"pods": {"selector": {"matchExpressions": [{"key": "a", "operator": "X"}]}}})
    )
    assert not check.valid and check.problems[0].startswith("spec.health.pods.selector: ")
    check = check_pool(pool(health={"timeoutSeconds": 0}))
    assert check.problems == ("spec.health.timeoutSeconds must be an integer >= 1, not 0",)
    check = check_pool(pool(rollout={"canary": {"nodes": 0}}))
    assert check.problems == ("spec.rollout.canary.nodes must be at least 1",)


def test_plan_pool_wires_health_and_canaries_from_the_spec() -> None:
    check = check_pool(
        pool(
            health={"onFailure": "Rollback"},
            rollout={"maxUnavailable": 2, "canary": {"nodes": 1}},
        )
    )
    views = [node("a"), node("b"), node("c", canary_label=True)]
    plan, _ = plan_pool(check, views, NOW)
    assert plan.take == ("c",) and plan.canaries == ("c",)
    failing = [back("a"), node("b"), node("c", S.UP_TO_DATE)]
    plan, _ = plan_pool(check, failing, NOW, {"a": GateResult(Verdict.FAILED, "pods", "x")})
    assert plan.rollback == ("a",)


# ------------------------------------------------------------------ status words


def test_status_names_failed_pending_rolled_back_canaries_and_approval() -> None:
    check = check_pool(pool(rollout={"canary": {"nodes": 1, "requireApproval": True}}))
    views = {
        "a": back("a"),
        "b": node("b", S.PENDING, held_back=True, health_failed=NEW, health_note="Failed: pods: x"),
    }
    plan = rollout_plan(
        list(views.values()),
        1,
        paused=False,
        now=NOW,
        gates={"a": GateResult(Verdict.PENDING, "minReadySeconds", "Ready for 3s of 60s")},
    )
    news = gate_news(plan, views, check)
    assert news.failed == (
        f"b failed its health check on {NEW} and was rolled back (pods: x); "
        "no new reboots until the target changes or the nodes recover"
    )
    assert news.pending == "waiting for health checks: a (minReadySeconds: Ready for 3s of 60s)"
    approval = rollout_plan(
        [node("a", S.UP_TO_DATE), node("b")],
        1,
        paused=False,
        now=NOW,
        canaries=frozenset({"a"}),
        approval_needed=True,
    )
    assert gate_news(approval, {}, check).approval == (
        f"1 canary healthy on {NEW}; set spec.rollout.approvedDigest to {NEW} to continue"
    )
    first = rollout_plan([node("a"), node("b")], 1, paused=False, now=NOW, canaries=frozenset("a"))
    assert gate_news(first, {}, check).canaries == "canaries first: a (0 of 1 updated and healthy)"


@pytest.mark.parametrize(
    ("facts", "reason", "phase_word"),
    [
        ({"health_failed": "a failed"}, c.REASON_HEALTH_CHECK_FAILED, c.PHASE_HALTED),
        ({"awaiting_approval": "approve"}, c.REASON_AWAITING_APPROVAL, c.PHASE_AWAITING_APPROVAL),
        ({"health_pending": "waiting"}, c.REASON_HEALTH_CHECK_PENDING, c.PHASE_PROGRESSING),
        ({"canaries": "canaries first: a"}, c.REASON_ROLLOUT_IN_PROGRESS, c.PHASE_PROGRESSING),
    ],
)
def test_up_to_date_reasons_and_phases(facts: dict[str, Any], reason: str, phase_word: str) -> None:
    counts = count_states([node("a"), node("b", S.UP_TO_DATE)])
    up, got_reason, message = rollout_condition(replace(RolloutFacts(counts=counts), **facts))
    assert (up, got_reason) == (False, reason)
    assert next(iter(facts.values())) in message
    degraded = reason == c.REASON_HEALTH_CHECK_FAILED
    assert phase(got_reason, degraded, got_reason if degraded else c.REASON_HEALTHY) == phase_word


def test_a_node_under_its_health_check_is_not_counted_as_updated() -> None:
    views = [node("a", S.UP_TO_DATE), back("b")]
    counts = count_states(views, checking=frozenset({"b"}))
    assert (counts.updated, counts.checking, counts.updating) == (1, 1, 1)
    assert progress_message(counts) == "1/2 updated; 1 under health check"
    up, reason, _ = rollout_condition(RolloutFacts(counts=counts))
    assert (up, reason) == (False, c.REASON_ROLLOUT_IN_PROGRESS)


def test_rolled_back_members_are_counted_as_such() -> None:
    views = [node("a", S.UP_TO_DATE), node("b", S.PENDING, held_back=True)]
    assert progress_message(count_states(views)) == "1/2 updated; 1 rolled back"


# ------------------------------------------------------------------ wire views


def bootc_node(**annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "annotations": annotations},
        "spec": {"desiredImage": f"{REPO}@{NEW}", "desiredImageState": "Staged"},
        "status": {
            "booted": {"image": f"{REPO}@{NEW}", "imageDigest": NEW},
            "rollback": {"image": f"{REPO}:v1", "imageDigest": OLD},
            "bootAssessment": {"state": "Failed", "message": "greenboot.service failed"},
            "conditions": [
                {"type": "Idle", "status": "True", "reason": "Idle", "lastTransitionTime": "x"}
            ],
        },
    }


def test_view_reads_assessment_rollback_hold_and_canary_label() -> None:
    k8s = {
        "metadata": {"name": "n1", "labels": {c.CANARY_LABEL: ""}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T11:59:00Z"}
            ]
        },
    }
    got = view(bootc_node(), k8s, frozenset({NEW}))
    assert got.state is S.UP_TO_DATE and got.canary_label and not got.held_back
    assert got.boot_assessment == "Failed" and "greenboot" in got.boot_assessment_message
    assert got.rollback_image == f"{REPO}@{OLD}" and got.booted_desired
    assert got.ready_since == ago(60)
    held = view(bootc_node(**{c.HEALTH_FAILED_ANNOTATION: NEW}), k8s, frozenset({NEW}))
    assert held.held_back and held.state is S.PENDING  # runs it only until rolled back
    later = view(bootc_node(**{c.HEALTH_FAILED_ANNOTATION: NEW}), k8s, frozenset({OLD}))
    assert not later.held_back  # the target changed: the hold is void


@pytest.mark.parametrize(
    ("info", "ref"),
    [
        ({"image": f"{REPO}@{OLD}", "imageDigest": NEW}, f"{REPO}@{OLD}"),  # an index digest
        ({"image": f"{REPO}:v1", "imageDigest": OLD}, f"{REPO}@{OLD}"),
        ({"image": "localhost:5000/os", "imageDigest": OLD}, f"localhost:5000/os@{OLD}"),
        ({"image": "localhost:5000/os:v2", "imageDigest": OLD}, f"localhost:5000/os@{OLD}"),
        ({"image": f"{REPO}:v1"}, None),
        (None, None),
    ],
)
def test_rollback_ref_is_a_digest_ref(info: dict[str, str] | None, ref: str | None) -> None:
    assert rollback_ref(info) == ref


def test_retargeting_clears_the_hold_and_the_retarget_rule_respects_it() -> None:
    annotations = retarget_patch(f"{REPO}@{OLD}")["metadata"]["annotations"]
    assert annotations[c.HEALTH_FAILED_ANNOTATION] is None
    assert annotations[c.HEALTH_CHECK_ANNOTATION] is None

    def held_back_from(failed: str | None, desired: str) -> bool:
        current = f"{REPO}@sha256:other"
        return not retarget_due(
            desired, current, in_slot=False, failed_digest=failed, every_member=True
        )

    assert held_back_from(NEW, f"{REPO}@{NEW}")
    assert not held_back_from(NEW, f"{REPO}@{OLD}") and not held_back_from(None, f"{REPO}@{NEW}")


def test_pod_health_filters_by_selector_and_namespace_and_reads_ready() -> None:
    def pod(ns: str, name: str, labels: dict[str, str], ready: str, **meta: Any) -> dict[str, Any]:
        cond = {"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-24T11:59:30Z"}
        return slim_pod(
            {
                "metadata": {"namespace": ns, "name": name, "labels": labels, **meta},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running", "conditions": [cond, {"type": "x"}]},
            }
        )

    pods = [
        pod("kube-system", "cni-1", {"app": "cni"}, "True"),
        pod("kube-system", "other", {"app": "x"}, "False"),
        pod("apps", "cni-2", {"app": "cni"}, "False"),
        pod("kube-system", "cni-3", {"app": "cni"}, "True", deletionTimestamp="t"),
    ]
    assert pod_health(pods, PODS_SELECTOR, ()) == [
        PodHealth("apps/cni-2", False, "Running", ago(30)),
        PodHealth("kube-system/cni-1", True, "Running", ago(30)),
        PodHealth("kube-system/cni-3", False, "Running", ago(30)),
    ]
    assert [p.key for p in pod_health(pods, PODS_SELECTOR, {"kube-system"})] == [
        "kube-system/cni-1",
        "kube-system/cni-3",
    ]
