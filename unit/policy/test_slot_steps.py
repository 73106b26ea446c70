"""``plan_rollout``'s named steps one at a time (``slots``): the holders that release,
their health, the candidates in order, the canaries, the topology, the budget. The
whole plan's rules are ``test_decisions``; here each step alone."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from bootc_operator.policy.health import GateResult, HealthPolicy, Verdict
from bootc_operator.policy.nodestate import NodeState
from bootc_operator.policy.order import Order
from bootc_operator.policy.poolspec import Budgets, PoolPolicy
from bootc_operator.policy.slots import (
    Gates,
    Queue,
    budget_step,
    canary_step,
    candidates,
    holder_health,
    plan_rollout,
    plan_withdrawn,
    release_step,
    topology_step,
)
from unit.policy.test_decisions import NOW, v
from unit.policy.test_topology import TOPO, z

S = NodeState
BUDGETS = Budgets(max_unavailable=2, max_unhealthy=2, canaries=0, stage_ahead=None)
PENDING = GateResult(Verdict.PENDING, "pods", "1 of 2 Ready")
FAILED = GateResult(Verdict.FAILED, "pods", "timed out")


def test_release_step_frees_the_done_and_the_retargeted_and_names_the_outside() -> None:
    done = v("done", S.UP_TO_DATE, slot=True)
    moved = v("moved", S.STAGING, slot=True)
    draining = v("draining", S.STAGED, slot=True)
    down = v("down", S.STAGED, ready=False)
    holders = release_step([done, down, draining, moved], {})
    assert holders.release == ("done", "moved") and holders.cancel == ("moved",)
    assert [h.name for h in holders.kept] == ["draining"]
    assert holders.outside == (("down", "NotReady"),)
    # a holder whose health check is still pending keeps its slot
    assert release_step([done], {"done": PENDING}).release == ()


def test_holder_health_sorts_verdicts_and_halts_at_max_unhealthy() -> None:
    kept = [v("a", S.UP_TO_DATE, slot=True), v("b", S.UP_TO_DATE, slot=True)]
    policy = PoolPolicy()
    health = holder_health(kept, NOW, policy, BUDGETS, {"a": PENDING, "b": FAILED})
    assert health.gate_pending == (("a", "pods", "1 of 2 Ready"),)
    assert health.health_failed == (("b", "pods", "timed out"),) and health.stops
    rollback = PoolPolicy(health=HealthPolicy(rollback=True))
    with_deployment = [replace(kept[1], rollback_image="quay.io/x/os@sha256:old")]
    assert holder_health(with_deployment, NOW, rollback, BUDGETS, {"b": FAILED}).rollback == ("b",)
    sick = [v("a", S.DEGRADED, slot=True), v("b", S.DEGRADED, slot=True)]
    judged = holder_health(sick, NOW, policy, BUDGETS, {})
    assert judged.unhealthy == ("a", "b") and judged.halted
    assert not holder_health(sick[:1], NOW, policy, BUDGETS, {}).halted


def test_candidates_are_the_staged_in_slot_order_or_the_admins() -> None:
    late = v("a", S.STAGED, idle_since=NOW)
    early = v("b", S.STAGED, idle_since=NOW - dt.timedelta(hours=1))
    cordoned = v("c", S.STAGED, idle_since=NOW, unschedulable=True)
    skipped = replace(v("d", S.STAGED, idle_since=NOW - dt.timedelta(days=1)), drain_skips=1)
    staging = v("e", S.STAGING)
    found = candidates([late, early, cordoned, skipped, staging], None)
    assert [c.name for c in found] == ["c", "b", "a", "d"]
    by_name = candidates([late, early, cordoned, skipped, staging], Order())
    assert [c.name for c in by_name] == ["a", "b", "c", "d"]


def test_canary_step_lets_only_canaries_go_then_waits_for_approval() -> None:
    nodes = [v("a", S.STAGED), v("b", S.STAGED)]
    queue = canary_step(nodes, nodes, frozenset({"b"}), approval_needed=True)
    assert [c.name for c in queue.candidates] == ["b"] and queue.canary_pending == ("b",)
    assert not queue.awaiting_approval
    updated = [v("a", S.STAGED), v("b", S.UP_TO_DATE)]
    after = canary_step(updated, updated[:1], frozenset({"b"}), approval_needed=True)
    assert after.awaiting_approval and after.canary_pending == ()
    assert not canary_step(updated, updated[:1], frozenset({"b"}), False).awaiting_approval


def test_topology_step_keeps_candidates_in_the_current_domain_and_its_budget() -> None:
    nodes = [z("a1", "a"), z("a2", "a"), z("b1", "b")]
    queue = Queue(tuple(nodes))
    assert topology_step(None, nodes, (), queue).candidates == tuple(nodes)
    zone = topology_step(TOPO, nodes, (), queue)
    assert zone.domain == "a" and [c.name for c in zone.candidates] == ["a1", "a2"]
    assert zone.other_domains == ("b1",) and zone.room is None
    per_domain = replace(TOPO, max_unavailable=1)
    holder = z("a1", "a", slot=True)
    assert topology_step(per_domain, nodes, (holder,), queue).room == 0


def test_budget_step_takes_what_capacity_and_budget_leave() -> None:
    queue = [v("a", S.STAGED), v("b", S.STAGED, unschedulable=True), v("c", S.STAGED)]
    slots = budget_step(queue, capacity=2, budget=1)
    assert slots.take == ("a", "b") and slots.waiting == ("c",) and not slots.budget_blocked
    blocked = budget_step(queue, capacity=3, budget=0)
    assert blocked.take == ("b",) and blocked.waiting == ("a", "c") and blocked.budget_blocked


def test_plan_rollout_composes_the_steps_under_the_policy() -> None:
    nodes = [v("a", S.STAGED), v("b", S.STAGED), v("c", S.UP_TO_DATE, slot=True)]
    plan = plan_rollout(PoolPolicy(), BUDGETS, nodes, NOW, Gates())
    assert plan.release == ("c",) and plan.take == ("a", "b") and plan.holders == ("a", "b")
    paused = plan_rollout(PoolPolicy(paused=True), BUDGETS, nodes, NOW, Gates())
    assert paused.take == () and paused.waiting == ("a", "b")
    closed = plan_rollout(PoolPolicy(), BUDGETS, nodes, NOW, Gates(window_open=False))
    assert closed.take == () and closed.window_closed


def test_a_withdrawn_target_frees_the_slots_not_yet_used_for_a_reboot() -> None:
    """Issue 37 follow-up: the pool's target withdrawn (a signing key revoked), a holder
    not yet told to reboot gives its slot back at once, whatever its state (draining,
    degraded while draining, someone else's cordon); one told to reboot keeps it until
    it is back (Idle, not Degraded, Ready, running its desiredImage), then gives it
    back; nothing is taken nor drained, and members without a slot are left alone."""
    told = NOW - dt.timedelta(seconds=30)
    draining = v("draining", S.PENDING, slot=True)  # no target: Staged reads as Pending
    sick = v("sick", S.DEGRADED, slot=True)
    theirs = v("theirs", S.PENDING, slot=True, was_cordoned=True, unschedulable=True)
    rebooting = v("rebooting", S.REBOOTING, slot=True, want="Booted", reboot_requested_at=told)
    booted = v("booted", S.PENDING, slot=True, want="Booted", reboot_requested_at=told)
    about_to = v("about-to", S.PENDING, slot=True, want="Booted", reboot_requested_at=told)
    back = replace(booted, name="back", idle=True, booted_desired=True)
    not_ready = replace(back, name="not-ready", ready=False)
    broken = replace(back, name="broken", state=S.DEGRADED)
    waiting = v("waiting", S.PENDING)
    plan = plan_withdrawn(
        [draining, sick, theirs, rebooting, about_to, back, not_ready, broken, waiting]
    )
    assert plan.withdrawn == ("draining", "sick", "theirs")
    assert plan.release == ("back", "draining", "sick", "theirs")
    assert plan.holders == ("about-to", "broken", "not-ready", "rebooting")
    assert plan.take == plan.drain == plan.cancel == plan.restore == ()
    # a holder with reboot-requested but (somehow) Staged still: it was told, it keeps it
    told_staged = v("told", S.PENDING, slot=True, reboot_requested_at=told)
    assert plan_withdrawn([told_staged]).holders == ("told",)
