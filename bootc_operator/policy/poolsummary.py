"""The pool's status, as one pure function of what the status loop gathered.

``summarize(PoolInputs) -> PoolSummary``: the counts, every Degraded problem by
reason, the slot plan's news (health gates, canaries, topology, order, the budget's
outside users, the alert gate), the ``UpToDate`` and ``Degraded`` conditions
(``poolstatus.rollout_condition`` / ``degraded_condition``), the status fields and
when to look again. The status loop (``reconcilers.loops.status``) reads the caches
into ``PoolInputs``, calls this, and writes the result, its gauges and its Events;
``kubectl bootc`` reads the same conditions back.

Step by step: ``problems_of`` (what the spec, membership, the nodes and the pull
secret say), ``plan_news`` (what the slot plan adds, and its problems), ``facts_of``
(the ``RolloutFacts`` the conditions are read from) and ``status_fields``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.imageref import display_ref, short_digest
from bootc_operator.api.kstatus import KStatus
from bootc_operator.api.timefmt import now_rfc3339
from bootc_operator.gates.alerts import AlertGate
from bootc_operator.policy.drainplan import halt_message
from bootc_operator.policy.health import GateResult, Verdict
from bootc_operator.policy.nodestate import NodeView
from bootc_operator.policy.order import order_news
from bootc_operator.policy.poolspec import PoolPolicy
from bootc_operator.policy.poolstatus import (
    Counts,
    RolloutFacts,
    count_states,
    degraded_condition,
    degraded_nodes_message,
    halted_message,
    phase,
    pool_kstatus,
    rollout_condition,
)
from bootc_operator.policy.selectors import is_empty
from bootc_operator.policy.slots import (
    GateNews,
    RolloutPlan,
    gate_news,
    next_reboot_deadline,
    plan_pool,
    retargets_due,
)
from bootc_operator.policy.topology import display, domain_news
from bootc_operator.policy.windows import ALWAYS_OPEN, WindowState, describe_opening

#: how often a pool whose pull Secret is not read yet is looked at again
SECRET_PENDING_RECHECK = 5.0
#: the longest condition message the API takes
MAX_MESSAGE = 32768


@dataclass(frozen=True)
class PoolInputs:
    """What the status loop gathered for one pass over a pool."""

    pool: Mapping[str, Any]
    policy: PoolPolicy
    views: Sequence[NodeView]
    now: dt.datetime
    #: the health gate's verdicts of the holders that arrived (``health_gates``)
    gates: Mapping[str, GateResult] = field(default_factory=dict)
    #: Nodes the pool matches that have no BootcNode yet
    without_bootc_node: int = 0
    conflict: str = ""  # NodeConflict message
    #: problems other loops know (tags, signatures): reason -> message
    extra_problems: Mapping[str, str] = field(default_factory=dict)
    #: the generation membership processed in this process (None: not yet)
    membership_generation: int | None = None
    membership_problem: str = ""  # the API refused membership's writes (admission)
    secret_problem: str = ""  # the pull secret cannot be used
    secret_pending: bool = False  # the pull Secret's watch has not synced yet
    alert_gate: AlertGate | None = None
    #: a drain's state as it stands, by node (which pod blocks it, and why)
    drain_message: Callable[[str], str | None] = lambda node: None
    #: the pool's blocked drains, each one message
    blocked_drains: Sequence[str] = ()


@dataclass(frozen=True)
class PoolSummary:
    """The pool's status as the status loop writes it."""

    counts: Counts
    checking: frozenset[str]  # members whose health check has not passed
    problems: Mapping[str, str]  # Degraded reasons that apply -> message
    up: tuple[bool, str, str]  # UpToDate (status, reason, message)
    degraded: tuple[bool, str, str]  # Degraded (status, reason, message)
    kstatus: KStatus  # Ready, Reconciling, Stalled (``poolstatus.pool_kstatus``)
    fields: Mapping[str, Any]  # the status fields besides conditions
    max_unavailable: int  # 0: no plan (invalid spec, no target)
    selects_all: bool  # an empty nodeSelector takes every node
    requeue: float | None  # look again then (None: on the next event)


def summarize(i: PoolInputs) -> PoolSummary:
    """The pool's status (module doc)."""
    policy = i.policy
    checking = frozenset(n for n, g in i.gates.items() if g.verdict is not Verdict.PASSED)
    counts = count_states(i.views, without_bootc_node=i.without_bootc_node, checking=checking)
    problems = problems_of(i, counts)
    requeue = next_reboot_deadline(i.views, i.now, policy.reboot_timeout)
    if i.secret_pending:
        requeue = min(requeue or SECRET_PENDING_RECHECK, SECRET_PENDING_RECHECK)
    news = PlanNews()
    if policy.valid and policy.targets:
        news = plan_news(i, counts)
        problems.update(news.problems)
        requeue = _earliest(requeue, news.requeue)
    facts = facts_of(i, counts, problems, news)
    up, up_reason, up_message = rollout_condition(facts)
    if i.blocked_drains and not up:
        up_message += "; " + "; ".join(sorted(i.blocked_drains)[:3])
    degraded = degraded_condition(problems)
    up_cond = (up, up_reason, up_message[:MAX_MESSAGE])
    deg_cond = (degraded[0], degraded[1], degraded[2][:MAX_MESSAGE])
    fields = status_fields(i, counts, facts, news, up=(up, up_reason), degraded=degraded)
    return PoolSummary(
        counts=counts,
        checking=checking,
        problems=problems,
        up=up_cond,
        degraded=deg_cond,
        kstatus=pool_kstatus(up_cond, deg_cond, fields["phase"]),
        fields=fields,
        max_unavailable=news.max_unavailable,
        selects_all=facts.selects_all,
        requeue=requeue,
    )


def problems_of(i: PoolInputs, counts: Counts) -> dict[str, str]:
    """Degraded's problems before the plan: other loops' (the rollout's refused writes
    among them, as NodeDegraded), the spec's, the selector's conflicts, membership's
    refused writes, degraded nodes, the pull secret."""
    problems = dict(i.extra_problems)
    if i.policy.problems:
        problems[c.REASON_INVALID_SPEC] = "; ".join(i.policy.problems)
    if i.conflict:
        problems[c.REASON_NODE_CONFLICT] = i.conflict
    if i.membership_problem:
        problems[c.REASON_INVALID_SPEC] = "; ".join(
            p for p in (problems.get(c.REASON_INVALID_SPEC), i.membership_problem) if p
        )
    if counts.degraded:
        # after the nodes' own errors, the writes the rollout had refused for some
        refused = problems.get(c.REASON_NODE_DEGRADED)
        problems[c.REASON_NODE_DEGRADED] = "; ".join(
            p for p in (degraded_nodes_message(i.views), refused) if p
        )
    if i.secret_problem:
        problems[c.REASON_PULL_SECRET_ERROR] = (
            f"{i.secret_problem}; nodes keep their last good credentials"
        )
    return problems


@dataclass(frozen=True)
class PlanNews:
    """What the slot plan adds to the status (all empty without a plan)."""

    plan: RolloutPlan | None = None
    window: WindowState = ALWAYS_OPEN
    max_unavailable: int = 0
    gated: GateNews = field(default_factory=GateNews)
    blocked_by_alerts: str = ""
    blocked_reason: str = ""
    domain: str | None = None  # status.currentDomain
    domain_note: str = ""
    order_note: str = ""
    budget_used_by: str = ""  # members outside the rollout that use up the budget
    problems: Mapping[str, str] = field(default_factory=dict)  # HealthCheckFailed, halted
    requeue: float | None = None


def plan_news(i: PoolInputs, counts: Counts) -> PlanNews:
    """Plan the slots (``slots.plan_pool``) and read the plan's news for the status."""
    policy, views = i.policy, i.views
    blocked = i.alert_gate is not None and i.alert_gate.blocked
    plan, window = plan_pool(policy, views, i.now, i.gates, alerts_blocked=blocked)
    gated = gate_news(plan, {v.name: v for v in views}, policy)
    alert = i.alert_gate if plan.alerts_blocked else None
    domain: str | None = None
    domain_note = order_note = ""
    if policy.topology is not None and plan.domain is not None:
        domain = display(plan.domain)
        domain_note = domain_news(policy.topology, views, plan.domain)
    if policy.order is not None and plan.next_up:
        order_note = order_news(policy.order, plan.next_up)
    return PlanNews(
        plan=plan,
        window=window,
        max_unavailable=plan.max_unavailable,
        gated=gated,
        blocked_by_alerts=alert.message if alert is not None else "",
        blocked_reason=alert.reason if alert is not None else "",
        domain=domain,
        domain_note=domain_note,
        order_note=order_note,
        budget_used_by=_budget_users(plan) if plan.budget_blocked else "",
        problems=_plan_problems(plan, gated, i.drain_message),
        requeue=_plan_requeue(i, window, counts),
    )


def _budget_users(plan: RolloutPlan, limit: int = 5) -> str:
    shown = [f"{name} {why}" for name, why in plan.outside[:limit]]
    more = len(plan.outside) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _plan_problems(
    plan: RolloutPlan, gated: GateNews, drain_message: Callable[[str], str | None]
) -> dict[str, str]:
    """HealthCheckFailed, and RolloutHalted by unhealthy holders or halting drains."""
    problems: dict[str, str] = {}
    if gated.failed:
        problems[c.REASON_HEALTH_CHECK_FAILED] = gated.failed
    halted = []
    if plan.halted:
        halted.append(halted_message(plan.unhealthy, plan.max_unhealthy))
    if plan.drain_halted:
        drains = {n: m for n in plan.drain_halted if (m := drain_message(n)) is not None}
        halted.append(halt_message(plan.drain_halted, drains))
    if any(halted):
        problems[c.REASON_ROLLOUT_HALTED] = "; ".join(h for h in halted if h)
    return problems


def _plan_requeue(i: PoolInputs, window: WindowState, counts: Counts) -> float | None:
    """When the plan's answer changes by time alone: a health gate's wait, or a
    maintenance window opening or closing while nodes are left to update."""
    requeue = None
    for gate in i.gates.values():
        requeue = _earliest(requeue, gate.wait)
    wake = window.next_opening if not window.open else window.closes_at
    if wake is not None and counts.updated < counts.total:
        requeue = _earliest(requeue, (wake - i.now).total_seconds() + 0.5)
    return requeue


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def facts_of(
    i: PoolInputs, counts: Counts, problems: Mapping[str, str], news: PlanNews
) -> RolloutFacts:
    """The ``RolloutFacts`` the UpToDate condition is read from."""
    policy = i.policy
    signature = next(
        (
            (r, problems[r])
            for r in (c.REASON_SIGNATURE_VERIFICATION_FAILED, c.REASON_SIGNATURE_REGISTRY_ERROR)
            if problems.get(r)
        ),
        None,
    )
    reverifying = _reverifying(i)
    return RolloutFacts(
        counts=counts,
        generation=i.pool["metadata"].get("generation"),
        membership_done=membership_done(i),
        invalid=problems.get(c.REASON_INVALID_SPEC, ""),
        tag=policy.tag,
        target_known=policy.target_digest is not None or reverifying,
        tag_error=problems.get(c.REASON_TAG_RESOLUTION_ERROR, ""),
        signature_error=signature,
        unverified="" if reverifying else (policy.unverified_digest or ""),
        halted=problems.get(c.REASON_ROLLOUT_HALTED, ""),
        paused=policy.paused,
        max_unavailable=news.max_unavailable if news.plan is not None else None,
        window_closed=not news.window.open,
        next_window=describe_opening(news.window) if not news.window.open else "",
        budget_used_by=news.budget_used_by,
        health_failed=news.gated.failed,
        health_pending=news.gated.pending,
        canaries=news.gated.canaries,
        awaiting_approval=news.gated.approval,
        blocked_by_alerts=news.blocked_by_alerts,
        blocked_reason=news.blocked_reason,
        domain=news.domain_note,
        order=news.order_note,
        selects_all=policy.selector_ok and is_empty(policy.selector),
    )


def membership_done(i: PoolInputs) -> bool:
    """Membership has matched nodes against this generation and every member due names
    its target (``slots.retargets_due``: the rollout loop's write): in this process, or
    (after a restart or failover) in the one that wrote status.observedGeneration. So
    ``kubectl wait`` never returns for a target a member's spec does not name yet, e.g.
    a pool reverted to the image its nodes still run while they have the abandoned
    one staged."""
    generation = i.pool["metadata"].get("generation")
    old = i.pool.get("status") or {}
    if generation is None:
        return False
    if old.get("observedGeneration") == generation:
        return True
    return i.membership_generation == generation and not retargets_due(i.views, i.policy)


def _reverifying(i: PoolInputs) -> bool:
    """The deployed digest being verified again (a new controller's empty cache, e.g.
    after a failover): not news, the conditions must not flap meanwhile."""
    unverified = i.policy.unverified_digest
    return unverified is not None and unverified == (i.pool.get("status") or {}).get(
        "deployedDigest"
    )


def status_fields(
    i: PoolInputs,
    counts: Counts,
    facts: RolloutFacts,
    news: PlanNews,
    *,
    up: tuple[bool, str],
    degraded: tuple[bool, str, str],
) -> dict[str, Any]:
    """The status fields besides the conditions (None: the field does not apply)."""
    policy, old, window = i.policy, i.pool.get("status") or {}, news.window
    target = policy.target_digest
    deployed = old.get("deployedDigest")
    # Only once the pool has nodes: an empty pool has deployed nothing.
    if target is not None and up[0] and counts.total and counts.updated == counts.total:
        deployed = target
    # the tag as resolved (the tags loop's knowledge; only status writes targetDigest);
    # an unverified digest is shown (the pool is Degraded saying why it is not rolled out)
    shown_target = policy.candidate_digest or old.get("targetDigest")
    return {
        # Claimed only once membership has seen this generation (kubectl wait
        # compares it with metadata.generation).
        "observedGeneration": facts.generation
        if facts.membership_done
        else old.get("observedGeneration"),
        "targetDigest": shown_target,
        "deployedDigest": deployed,
        "updateAvailable": bool(target) and target != deployed,
        "nodeCount": counts.total,
        "updatedCount": counts.updated,
        "updatingCount": counts.updating,
        "degradedCount": counts.degraded,
        "phase": phase(up[1], degraded[0], degraded[1]),
        "imageShort": display_ref(policy.image_ref),
        "targetShort": short_digest(shown_target) or None,
        "currentDomain": news.domain,
        "nextMaintenanceWindow": now_rfc3339(window.next_opening)
        if not window.open and window.next_opening is not None
        else None,
    }
