"""Status: the pool's status subresource, its gauges, and an Event per condition change.

``reconcile(pool_name)`` recomputes everything from the caches (pure helpers in
``poolstatus``, ``slots``, ``membership_plan``, ``poolspec``) and writes
``status`` only when something other than a timestamp changed:

- counts (node, updated, updating, degraded), targetDigest, deployedDigest (the
  target once every node runs it; the previous value until then),
  updateAvailable, observedGeneration;
- ``UpToDate``: AllUpdated / Paused / RolloutInProgress with the progress message;
- ``Degraded``: the highest-precedence problem of InvalidSpec, NodeConflict,
  RolloutHalted, NodeDegraded (and TagResolutionError, SignatureVerificationFailed,
  SignatureRegistryError, PullSecretError fed by ``extra_problems``), else Healthy;
- ``Ready``, and ``Reconciling`` or ``Stalled`` while True: the same in kstatus's
  terms, for Flux and ``kubectl wait --for=condition=Ready``
  (``poolstatus.pool_kstatus``).

Every transition of UpToDate's or Degraded's status or reason is also an Event on the
pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import (
    conditions_equal_ignoring_time,
    get_condition,
    set_condition,
)
from bootc_operator.api.imageref import display_ref, short_digest
from bootc_operator.api.kstatus import set_kstatus
from bootc_operator.api.timefmt import now_rfc3339
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.kube import ApiError
from bootc_operator.policy.drainplan import halt_message
from bootc_operator.policy.health import GateResult, Verdict
from bootc_operator.policy.membership_plan import assign_nodes, claims
from bootc_operator.policy.nodestate import NodeState
from bootc_operator.policy.order import order_news
from bootc_operator.policy.poolstatus import (
    RolloutFacts,
    count_states,
    degraded_condition,
    degraded_nodes_message,
    halted_message,
    member_states,
    phase,
    pool_kstatus,
    rollout_condition,
)
from bootc_operator.policy.selectors import is_empty
from bootc_operator.policy.slots import GateNews, gate_news, next_reboot_deadline, plan_pool
from bootc_operator.policy.topology import display, domain_news
from bootc_operator.policy.windows import ALWAYS_OPEN, describe_opening
from bootc_operator.reconcilers import metrics as m
from bootc_operator.reconcilers.context import Context, Obj, pool_ref
from bootc_operator.reconcilers.loops.membership import MembershipProgress
from bootc_operator.reconcilers.watchers.drain import DrainManager
from bootc_operator.reconcilers.watchers.healthpods import HealthPods, health_gates
from bootc_operator.reconcilers.watchers.pullsecrets import SecretState

log = logging.getLogger("status")

STATUS_FIELDS = (
    "observedGeneration",
    "nextMaintenanceWindow",
    "phase",
    "imageShort",
    "targetShort",
    "currentDomain",
    "targetDigest",
    "deployedDigest",
    "updateAvailable",
    "nodeCount",
    "updatedCount",
    "updatingCount",
    "degradedCount",
)


class StatusReconciler:
    name = "status"

    def __init__(
        self,
        ctx: Context,
        drains: DrainManager,
        health_pods: HealthPods,
        extra_problems: Callable[[Obj], Mapping[str, str]] = lambda pool: {},
        secret_state: Callable[[Obj], SecretState | None] = lambda pool: None,
        membership: Callable[[str], MembershipProgress] = lambda pool: MembershipProgress(),
        health_queries: HealthQueries | None = None,
    ) -> None:
        self.ctx = ctx
        self.health_queries = health_queries
        self._membership = membership
        self.drains = drains
        self.health_pods = health_pods
        self._extra_problems = extra_problems
        self._secret_state = secret_state
        self._degraded: dict[str, dict[str, str]] = {}  # pool -> node -> message
        self._leaving: dict[str, set[str]] = {}  # pool -> members an autoscaler removes
        self._warned_selects_all: dict[str, int | None] = {}  # pool -> generation warned

    async def reconcile(self, pool_name: str) -> float | None:
        ctx = self.ctx
        pool = ctx.pool(pool_name)
        if pool is None:
            m.forget_pool(pool_name)
            ctx.forget_policy(pool_name)
            return None
        if pool["metadata"].get("deletionTimestamp"):
            return None
        policy = ctx.policy(pool)
        old_status: dict[str, Any] = pool.get("status") or {}
        bns = ctx.bootc_nodes_of(pool_name)
        # Until a changed tag resolves, count against the previous target: the nodes
        # still run it and nothing is rolled back.
        previous = old_status.get("targetDigest")
        targets = policy.targets or (frozenset({previous}) if previous else frozenset())
        views = [ctx.view(bn, targets) for bn in bns]
        matched, conflict = self._matched_nodes(pool, policy.selector_ok)
        now = ctx.now()
        gates: dict[str, GateResult] = {}
        if policy.valid and policy.targets:
            gates = health_gates(
                self.health_pods,
                pool_name,
                policy,
                views,
                now,
                watch=False,
                health_queries=self.health_queries,
            )
        checking = frozenset(n for n, g in gates.items() if g.verdict is not Verdict.PASSED)
        counts = count_states(
            views, without_bootc_node=len(matched - {v.name for v in views}), checking=checking
        )
        self._node_events(pool_name, views)
        problems: dict[str, str] = dict(self._extra_problems(pool))
        if policy.problems:
            problems[c.REASON_INVALID_SPEC] = "; ".join(policy.problems)
        if conflict:
            problems[c.REASON_NODE_CONFLICT] = conflict
        progress = self._membership(pool_name)
        if rejected := progress.problem:
            problems[c.REASON_INVALID_SPEC] = "; ".join(
                p for p in (problems.get(c.REASON_INVALID_SPEC), rejected) if p
            )
        if counts.degraded:
            problems[c.REASON_NODE_DEGRADED] = degraded_nodes_message(views)
        secret = self._secret_state(pool)
        if secret is not None and secret.problem:
            problems[c.REASON_PULL_SECRET_ERROR] = (
                f"{secret.problem}; nodes keep their last good credentials"
            )
        max_unavailable = 0
        requeue = next_reboot_deadline(views, ctx.now(), policy.reboot_timeout)
        if secret is not None and secret.pending:
            requeue = min(requeue or 5.0, 5.0)
        window = ALWAYS_OPEN
        waiting_on = ""  # members outside the rollout that use up the budget
        gated = GateNews()
        blocked_by_alerts = ""
        blocked_reason = ""
        domain: str | None = None  # status.currentDomain
        domain_note = ""
        order_note = ""
        if policy.valid and policy.targets:
            alert_gate = ctx.alert_gate(pool)
            plan, window = plan_pool(
                policy,
                views,
                now,
                gates,
                alerts_blocked=alert_gate is not None and alert_gate.blocked,
            )
            max_unavailable = plan.max_unavailable
            if plan.alerts_blocked and alert_gate is not None:
                blocked_by_alerts = alert_gate.message
                blocked_reason = alert_gate.reason
            gated = gate_news(plan, {v.name: v for v in views}, policy)
            if policy.topology is not None and plan.domain is not None:
                domain = display(plan.domain)
                domain_note = domain_news(policy.topology, views, plan.domain)
            if policy.order is not None and plan.next_up:
                order_note = order_news(policy.order, plan.next_up)
            if gated.failed:
                problems[c.REASON_HEALTH_CHECK_FAILED] = gated.failed
            for gate in gates.values():
                if gate.wait is not None:
                    requeue = gate.wait if requeue is None else min(requeue, gate.wait)
            if plan.halted:
                problems[c.REASON_ROLLOUT_HALTED] = halted_message(
                    plan.unhealthy, plan.max_unhealthy
                )
            if plan.drain_halted:
                problems[c.REASON_ROLLOUT_HALTED] = "; ".join(
                    p
                    for p in (
                        problems.get(c.REASON_ROLLOUT_HALTED),
                        halt_message(plan.drain_halted, self._drain_messages(plan.drain_halted)),
                    )
                    if p
                )
            if plan.budget_blocked:
                shown = [f"{name} {why}" for name, why in plan.outside[:5]]
                more = len(plan.outside) - len(shown)
                waiting_on = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
            wake = window.next_opening if not window.open else window.closes_at
            if wake is not None and counts.updated < counts.total:
                # the condition changes when a window opens or closes: look again then
                seconds = (wake - ctx.now()).total_seconds() + 0.5
                requeue = seconds if requeue is None else min(requeue, seconds)

        generation = pool["metadata"].get("generation")
        target = policy.target_digest
        # Membership has matched nodes against this generation: in this process, or
        # (after a restart or failover) in the one that wrote status.observedGeneration.
        membership_done = generation is not None and (
            progress.generation == generation or old_status.get("observedGeneration") == generation
        )
        # The deployed digest being verified again (a new controller's empty cache,
        # e.g. after a failover): not news, the conditions must not flap meanwhile.
        reverifying = policy.unverified_digest is not None and policy.unverified_digest == (
            old_status.get("deployedDigest")
        )
        facts = RolloutFacts(
            counts=counts,
            generation=generation,
            membership_done=membership_done,
            invalid=problems.get(c.REASON_INVALID_SPEC, ""),
            tag=policy.tag,
            target_known=target is not None or reverifying,
            tag_error=problems.get(c.REASON_TAG_RESOLUTION_ERROR, ""),
            signature_error=next(
                (
                    (r, problems[r])
                    for r in (
                        c.REASON_SIGNATURE_VERIFICATION_FAILED,
                        c.REASON_SIGNATURE_REGISTRY_ERROR,
                    )
                    if problems.get(r)
                ),
                None,
            ),
            unverified="" if reverifying else (policy.unverified_digest or ""),
            halted=problems.get(c.REASON_ROLLOUT_HALTED, ""),
            paused=policy.paused,
            max_unavailable=max_unavailable if policy.valid and policy.targets else None,
            window_closed=not window.open,
            next_window=describe_opening(window) if not window.open else "",
            budget_used_by=waiting_on,
            health_failed=gated.failed,
            health_pending=gated.pending,
            canaries=gated.canaries,
            awaiting_approval=gated.approval,
            blocked_by_alerts=blocked_by_alerts,
            blocked_reason=blocked_reason,
            domain=domain_note,
            order=order_note,
            selects_all=policy.selector_ok and is_empty(policy.selector),
        )
        up, up_reason, up_message = rollout_condition(facts)
        blocked = [r.message(n) for n, r in self.drains.blocked().items() if r.pool == pool_name]
        m.DRAIN_BLOCKED.labels(pool_name).set(len(blocked))
        if blocked and not up:
            up_message += "; " + "; ".join(sorted(blocked)[:3])
        deg, deg_reason, deg_message = degraded_condition(problems)
        self._selects_all_warning(pool, facts.selects_all)

        conditions = old_status.get("conditions")
        conditions = set_condition(
            conditions,
            c.COND_UP_TO_DATE,
            up,
            up_reason,
            up_message[:32768],
            observed_generation=generation,
        )
        conditions = set_condition(
            conditions,
            c.COND_DEGRADED,
            deg,
            deg_reason,
            deg_message[:32768],
            observed_generation=generation,
        )
        phase_word = phase(up_reason, deg, deg_reason)
        conditions = set_kstatus(
            conditions,
            pool_kstatus(
                (up, up_reason, up_message[:32768]),
                (deg, deg_reason, deg_message[:32768]),
                phase_word,
            ),
            observed_generation=generation,
        )
        deployed = old_status.get("deployedDigest")
        # Only once the pool has nodes: an empty pool has deployed nothing.
        if target is not None and up and counts.total and counts.updated == counts.total:
            deployed = target
        # an unverified digest is shown (the pool is Degraded saying why it is not rolled out)
        shown_target = policy.candidate_digest or old_status.get("targetDigest")
        new_status: dict[str, Any] = {
            # Claimed only once membership has seen this generation (kubectl wait
            # compares it with metadata.generation).
            "observedGeneration": generation
            if membership_done
            else old_status.get("observedGeneration"),
            "targetDigest": shown_target,
            "deployedDigest": deployed,
            "updateAvailable": bool(target) and target != deployed,
            "nodeCount": counts.total,
            "updatedCount": counts.updated,
            "updatingCount": counts.updating,
            "degradedCount": counts.degraded,
            "phase": phase_word,
            "imageShort": display_ref(policy.image_ref),
            "targetShort": short_digest(shown_target) or None,
            "currentDomain": domain,
            "nextMaintenanceWindow": now_rfc3339(window.next_opening)
            if not window.open and window.next_opening is not None
            else None,
        }
        m.set_pool_gauges(
            pool_name,
            members=member_states(views, checking=checking).items(),
            up_to_date=up,
            degraded_reasons={r for r, message in problems.items() if message},
            slots_in_use=sum(1 for v in views if v.in_slot),
            max_unavailable=max_unavailable,
        )
        m.POOL_PAUSED.labels(pool_name).set(1 if policy.paused else 0)
        changed = any(old_status.get(k) != new_status.get(k) for k in STATUS_FIELDS)
        if not changed and conditions_equal_ignoring_time(old_status.get("conditions"), conditions):
            return requeue
        # a field that no longer applies is removed (merge patch: null), never left stale
        patch_status = {
            k: v for k, v in new_status.items() if v is not None or old_status.get(k) is not None
        }
        patch_status["conditions"] = conditions
        try:
            await ctx.patch_pool(pool, {"status": patch_status}, status=True)
        except ApiError as err:
            if err.not_found:
                return None  # deleted meanwhile
            raise
        self._condition_events(pool, old_status.get("conditions"), conditions)
        return requeue

    def _drain_messages(self, nodes: tuple[str, ...]) -> dict[str, str]:
        """Each node's drain as it stands (which pod blocks it, and why)."""
        return {n: r.message(n) for n in nodes if (r := self.drains.result(n)) is not None}

    def _matched_nodes(self, pool: Obj, selector_ok: bool) -> tuple[set[str], str]:
        """Nodes the pool's selector gives it (conflicts resolved), and the conflict message."""
        if not selector_ok:
            return set(), ""
        ctx = self.ctx
        pool_name = pool["metadata"]["name"]
        pools = ctx.all_pools()
        # A conflict needs two pools claiming nodes; skip the incumbents otherwise.
        if sum(1 for p in pools if claims(p)) > 1:
            assignment = assign_nodes(pools, ctx.all_nodes(), ctx.current_owners())
        else:
            assignment = assign_nodes([pool], ctx.all_nodes(), {})
        return set(assignment.members(pool_name)), assignment.conflict_message(pool_name)

    def _selects_all_warning(self, pool: Obj, selects_all: bool) -> None:
        """One Warning per generation of a pool whose empty selector takes every node."""
        name, generation = pool["metadata"]["name"], pool["metadata"].get("generation")
        if not selects_all:
            self._warned_selects_all.pop(name, None)
            return
        if self._warned_selects_all.get(name) == generation:
            return
        self._warned_selects_all[name] = generation
        self.ctx.recorder.emit(
            pool_ref(pool),
            "Warning",
            "SelectsAllNodes",
            "Status",
            f"spec.nodeSelector of pool {name} is empty, so it selects every node "
            "that no other pool owns; set matchLabels to limit it",
        )

    def _node_events(self, pool_name: str, views: list[Any]) -> None:
        """A Warning on the node and its BootcNode (whose status the daemon reported it
        in) when it turns degraded, a Normal one when it recovers; a Normal
        ``NodeLeaving`` on the node when an autoscaler starts removing it."""
        now = {v.name: v.degraded_message for v in views if v.state is NodeState.DEGRADED}
        before = self._degraded.get(pool_name, {})
        for name, message in now.items():
            if name not in before:
                for ref in (self.ctx.node_ref(name), self.ctx.bootc_node_ref(name)):
                    self.ctx.recorder.emit(
                        ref,
                        "Warning",
                        "NodeDegraded",
                        "Status",
                        f"{name} is degraded: {message or 'no message'}",
                    )
        for name in before.keys() - now.keys():
            if any(v.name == name for v in views):
                for ref in (self.ctx.node_ref(name), self.ctx.bootc_node_ref(name)):
                    self.ctx.recorder.emit(
                        ref, "Normal", "NodeRecovered", "Status", f"{name} is healthy again"
                    )
        self._degraded[pool_name] = now
        # a member an autoscaler is removing: said once, when it is first seen so
        leaving = {v.name: v.leaving for v in views if v.departing}
        for name in leaving.keys() - self._leaving.get(pool_name, set()):
            self.ctx.recorder.emit(
                self.ctx.node_ref(name),
                "Normal",
                "NodeLeaving",
                "Status",
                f"{name} is {leaving[name]}; it gets no reboot slot and is not updated",
            )
        self._leaving[pool_name] = set(leaving)

    def _condition_events(
        self, pool: Obj, old: list[dict[str, Any]] | None, new: list[dict[str, Any]]
    ) -> None:
        for cond in new:
            if cond["type"] not in (c.COND_UP_TO_DATE, c.COND_DEGRADED):
                continue  # Ready, Reconciling, Stalled say the same again (for kstatus)
            before = get_condition(old, cond["type"])
            if before is not None and (before.get("status"), before.get("reason")) == (
                cond["status"],
                cond["reason"],
            ):
                continue
            if before is None and cond["type"] == c.COND_DEGRADED and cond["status"] == "False":
                continue  # a new pool starting healthy is not news
            if cond["reason"] == c.REASON_PENDING:
                continue  # a spec not yet acted on is not news; what follows is
            warning = cond["type"] == c.COND_DEGRADED and cond["status"] == "True"
            reason = {
                (c.COND_UP_TO_DATE, c.REASON_ALL_UPDATED): "RolloutComplete",
                (c.COND_DEGRADED, c.REASON_HEALTHY): "Recovered",
            }.get((cond["type"], cond["reason"]), cond["reason"])
            if (before or {}).get("reason") == c.REASON_AWAITING_MAINTENANCE_WINDOW and (
                cond["reason"] != c.REASON_ALL_UPDATED
            ):
                reason = "MaintenanceWindowOpened"  # the rollout resumes
            note = f"{cond['type']}={cond['status']} ({cond['reason']}): {cond['message']}"
            self.ctx.recorder.emit(
                pool_ref(pool),
                "Warning" if warning else "Normal",
                reason,
                "Status",
                note,
            )
            log.info(
                "pool condition changed",
                extra={"pool": pool["metadata"]["name"], "condition": note},
            )
