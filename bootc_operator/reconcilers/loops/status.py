"""Status: the pool's status subresource, its gauges, and an Event per condition change.

``reconcile(pool_name)`` recomputes everything from the caches (pure helpers in
``poolstatus``, ``slots``, ``membership_plan``, ``poolspec``) and writes
``status`` only when something other than a timestamp changed:

- counts (node, updated, updating, degraded), targetDigest (the digest the ref
  names or its tag resolved to, from ``PoolKnowledge``: this loop is its one
  writer; the previous value until a changed tag resolves), deployedDigest (the
  target once every node runs it; the previous value until then),
  updateAvailable, observedGeneration;
- ``UpToDate``: AllUpdated / Paused / RolloutInProgress with the progress message;
- ``Degraded``: the highest-precedence problem of InvalidSpec, NodeConflict,
  RolloutHalted, NodeDegraded (and TagResolutionError, SignatureVerificationFailed,
  SignatureRegistryError, PullSecretError, and NodeDegraded naming the nodes whose
  rollout writes were refused, fed by ``extra_problems``), else Healthy;
- ``Ready``, and ``Reconciling`` or ``Stalled`` while True: the same in kstatus's
  terms, for Flux and ``kubectl wait --for=condition=Ready``
  (``poolstatus.pool_kstatus``).

Every transition of UpToDate's or Degraded's status or reason is also an Event on the
pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import (
    conditions_equal_ignoring_time,
    get_condition,
    set_condition,
)
from bootc_operator.api.kstatus import set_kstatus
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.kube import ApiError
from bootc_operator.policy.health import GateResult
from bootc_operator.policy.membership_plan import assign_nodes, claims
from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.policy.poolstatus import member_states
from bootc_operator.policy.poolsummary import PoolInputs, PoolSummary, summarize
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
        """Gather the pool's inputs, summarize them (``poolsummary``), write what changed."""
        ctx = self.ctx
        pool = ctx.pool(pool_name)
        if pool is None:
            m.forget_pool(pool_name)
            ctx.forget_policy(pool_name)
            return None
        if pool["metadata"].get("deletionTimestamp"):
            return None
        inputs = self._gather(pool)
        self._node_events(pool_name, inputs.views)
        summary = summarize(inputs)
        self._selects_all_warning(pool, summary.selects_all)
        self._gauges(pool_name, inputs, summary)
        old_status: dict[str, Any] = pool.get("status") or {}
        generation = pool["metadata"].get("generation")
        up = set_condition(
            old_status.get("conditions"),
            c.COND_UP_TO_DATE,
            *summary.up,
            observed_generation=generation,
        )
        conditions = set_condition(
            up, c.COND_DEGRADED, *summary.degraded, observed_generation=generation
        )
        conditions = set_kstatus(conditions, summary.kstatus, observed_generation=generation)
        new_status = summary.fields
        changed = any(old_status.get(k) != new_status.get(k) for k in STATUS_FIELDS)
        if not changed and conditions_equal_ignoring_time(old_status.get("conditions"), conditions):
            return summary.requeue
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
        return summary.requeue

    def _gather(self, pool: Obj) -> PoolInputs:
        """What the summary reads, from the caches and the other loops' knowledge."""
        ctx, pool_name = self.ctx, pool["metadata"]["name"]
        policy = ctx.policy(pool)
        # Until a changed tag resolves, count against the previous target: the nodes
        # still run it and nothing is rolled back.
        previous = (pool.get("status") or {}).get("targetDigest")
        targets = policy.targets or (frozenset({previous}) if previous else frozenset())
        views = [ctx.view(bn, targets) for bn in ctx.bootc_nodes_of(pool_name)]
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
        progress = self._membership(pool_name)
        secret = self._secret_state(pool)
        return PoolInputs(
            pool=pool,
            policy=policy,
            views=views,
            now=now,
            gates=gates,
            without_bootc_node=len(matched - {v.name for v in views}),
            conflict=conflict,
            extra_problems=self._extra_problems(pool),
            membership_generation=progress.generation,
            membership_problem=progress.problem,
            secret_problem=(secret.problem or "") if secret is not None else "",
            secret_pending=secret is not None and secret.pending,
            alert_gate=ctx.knowledge.gate(pool) if policy.valid and policy.targets else None,
            drain_message=self._drain_message,
            blocked_drains=[
                r.message(n) for n, r in self.drains.blocked().items() if r.pool == pool_name
            ],
        )

    def _drain_message(self, node: str) -> str | None:
        """The node's drain as it stands (which pod blocks it, and why)."""
        result = self.drains.result(node)
        return result.message(node) if result is not None else None

    def _gauges(self, pool_name: str, inputs: PoolInputs, summary: PoolSummary) -> None:
        m.DRAIN_BLOCKED.labels(pool_name).set(len(inputs.blocked_drains))
        m.set_pool_gauges(
            pool_name,
            members=member_states(inputs.views, checking=summary.checking).items(),
            up_to_date=summary.up[0],
            degraded_reasons={r for r, message in summary.problems.items() if message},
            slots_in_use=sum(1 for v in inputs.views if v.in_slot),
            max_unavailable=summary.max_unavailable,
        )
        m.POOL_PAUSED.labels(pool_name).set(1 if inputs.policy.paused else 0)

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

    def _node_events(self, pool_name: str, views: Sequence[NodeView]) -> None:
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
