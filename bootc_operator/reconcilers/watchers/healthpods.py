"""Pod watches for the health gate's ``pods`` check: one per node being checked.

Interface (owned by the rollout reconciler; the status reconciler only reads)::

    pods = HealthPods(ctx, on_change=lambda node, pool: enqueue(pool))
    pods.pods(node, pool, selector, namespaces)  # start watching; None until listed
    pods.peek(node, selector, namespaces)        # read only (None if not watched)
    pods.retain(nodes, pool)                     # stop watching the pool's other nodes
    pods.retain((), pool)                        # the pool is gone: stop all of its watches
    pods.open_watches()                          # watches open or still closing
    await pods.stop()

Like a drain, each watch is a Pod informer restricted to the node
(``fieldSelector=spec.nodeName=<node>``, a streaming list: no LIST), so memory is
proportional to the nodes being checked, not to the cluster's pods. The selector
and namespaces are applied here (``selectors.matches``), so a changed
``spec.health.pods`` needs no new watch. Any pod event on the node wakes the pool's
rollout: a pod turning Ready may pass the gate.

A watch lives as long as its node's check: the rollout stops it when the node
passes, leaves the pool or stops being checked, and stops every watch of a pool
that is deleted (or whose spec is invalid or has no target: nothing is gated).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping
from typing import Any

from bootc_operator.api.conditions import get_condition
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.gates.queries import NodeQueries
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import PODS
from bootc_operator.policy.health import (
    GateResult,
    PodHealth,
    arrived,
    gate_results,
    pod_health,
)
from bootc_operator.policy.nodestate import NodeView
from bootc_operator.policy.poolspec import PoolPolicy
from bootc_operator.reconcilers.context import Context, Obj


def slim_pod(pod: Obj) -> Obj:
    """Keep what the pods check reads: identity, labels, phase and the Ready condition
    (its status and lastTransitionTime: Ready from before the reboot does not count)."""
    meta = pod.get("metadata", {})
    status = pod.get("status") or {}
    ready = get_condition(status.get("conditions"), "Ready")
    return {
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp")
            if k in meta
        },
        "status": {
            "phase": status.get("phase"),
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready.get("status"),
                    "lastTransitionTime": ready.get("lastTransitionTime"),
                }
            ]
            if ready
            else [],
        },
    }


class HealthPods:
    def __init__(self, ctx: Context, on_change: Callable[[str, str], None]) -> None:
        self.ctx = ctx
        self._on_change = on_change  # (node, pool) -> enqueue
        self._watches: dict[str, Informer] = {}
        self._pools: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # sync waits and stops under way
        self._stopping: set[asyncio.Task[None]] = set()  # the stops alone

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def pods(
        self, node: str, pool: str, selector: Mapping[str, Any], namespaces: Collection[str]
    ) -> list[PodHealth] | None:
        """The selected pods on ``node``, watching it from now on; None until listed."""
        self._pools[node] = pool
        if node not in self._watches:
            informer = Informer(
                self.ctx.streams, PODS, field_selector=f"spec.nodeName={node}", transform=slim_pod
            )

            def changed(*_: Any, node: str = node) -> None:
                if (owner := self._pools.get(node)) is not None:
                    self._on_change(node, owner)

            informer.add_event_handler(
                EventHandler(on_add=changed, on_update=changed, on_delete=changed)
            )
            # the first list wakes the pool too (on_add per pod; none for an empty node)
            informer.start()
            self._watches[node] = informer
            self._spawn(self._synced(node, informer))
        return self.peek(node, selector, namespaces)

    async def _synced(self, node: str, informer: Informer) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await informer.wait_for_sync()
            if self._watches.get(node) is informer and (pool := self._pools.get(node)):
                self._on_change(node, pool)

    def peek(
        self, node: str, selector: Mapping[str, Any], namespaces: Collection[str]
    ) -> list[PodHealth] | None:
        informer = self._watches.get(node)
        if informer is None or not informer.has_synced:
            return None
        return pod_health(informer.list(), selector, namespaces)

    def watching(self) -> set[str]:
        return set(self._watches)

    def open_watches(self) -> int:
        """The watches running or still closing (a stop ends once its request has)."""
        return len(self._watches) + len(self._stopping)

    def retain(self, nodes: Collection[str], pool: str) -> None:
        """Stop the watches of ``pool``'s nodes not in ``nodes`` (no longer checked)."""
        for node in [n for n, p in self._pools.items() if p == pool and n not in nodes]:
            self._pools.pop(node, None)
            informer = self._watches.pop(node, None)
            if informer is not None:
                stopping = self._spawn(informer.stop())
                self._stopping.add(stopping)
                stopping.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        watches = list(self._watches.values())
        self._watches.clear()
        self._pools.clear()
        for task in list(self._tasks):
            task.cancel()
        for informer in watches:
            await informer.stop()


def health_gates(
    health_pods: HealthPods,
    pool_name: str,
    pool_policy: PoolPolicy,
    views: Iterable[NodeView],
    now: dt.datetime,
    *,
    watch: bool,
    health_queries: HealthQueries | None = None,
) -> dict[str, GateResult]:
    """The health-gate verdicts of the pool's arrived holders; ``watch``: start (and,
    for nodes no longer checked, stop) the pod watches the ``pods`` check reads and
    the Prometheus polls of the ``queries`` check — the rollout does; the status
    reconciler only reads them."""
    policy = pool_policy.health
    views = list(views)
    checked = {v.name for v in views if arrived(v)}
    queries = policy.queries if policy is not None else ()
    if health_queries is not None and watch:
        health_queries.retain(checked if queries else (), pool_name)

    def queries_of(node: str) -> NodeQueries | None:
        if health_queries is None:
            return None
        if watch:
            return health_queries.states(node, pool_name, queries)
        return health_queries.peek(node, queries)

    selector = policy.pods_selector if policy is not None else None
    if policy is None or selector is None:
        if watch:
            health_pods.retain((), pool_name)
        return gate_results(policy, views, now, lambda _n: None, queries_of)
    namespaces = policy.pods_namespaces
    if watch:
        health_pods.retain(checked, pool_name)

        def pods_of(node: str) -> list[PodHealth] | None:
            return health_pods.pods(node, pool_name, selector, namespaces)
    else:

        def pods_of(node: str) -> list[PodHealth] | None:
            return health_pods.peek(node, selector, namespaces)

    return gate_results(policy, views, now, pods_of, queries_of)
