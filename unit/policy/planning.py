"""``rollout_plan``: ``slots.plan_rollout`` with its inputs spelled one by one, as the
slot tests set them (a budget, pause, the gates), not as a whole pool policy."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from bootc_operator.policy.health import GateResult, HealthPolicy
from bootc_operator.policy.nodestate import NodeView
from bootc_operator.policy.order import Order
from bootc_operator.policy.poolspec import Budgets, PoolPolicy
from bootc_operator.policy.slots import Gates, RolloutPlan, plan_rollout
from bootc_operator.policy.topology import Topology

#: the target an approval is awaited for (``approval_needed``)
TARGET = "sha256:" + "7" * 64


def rollout_plan(
    views: Iterable[NodeView],
    max_unavailable: int,
    *,
    paused: bool,
    now: dt.datetime,
    reboot_timeout: float | None = None,
    max_unhealthy: int = 2,
    window_open: bool = True,
    gates: Mapping[str, GateResult] | None = None,
    rollback_on_failure: bool = False,
    canaries: frozenset[str] = frozenset(),
    approval_needed: bool = False,
    alerts_blocked: bool = False,
    topology: Topology | None = None,
    order: Order | None = None,
    drain_halted: tuple[str, ...] = (),
) -> RolloutPlan:
    policy = PoolPolicy(
        paused=paused,
        reboot_timeout=reboot_timeout,
        health=HealthPolicy(rollback=True) if rollback_on_failure else None,
        require_approval=approval_needed,
        target_digest=TARGET if approval_needed else None,
        topology=topology,
        order=order,
    )
    assert policy.awaiting_approval == approval_needed
    budgets = Budgets(max_unavailable, max_unhealthy, len(canaries), None)
    judged = Gates(gates or {}, canaries, window_open, alerts_blocked, drain_halted)
    return plan_rollout(policy, budgets, views, now, judged)
