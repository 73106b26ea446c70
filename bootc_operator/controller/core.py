"""The parts of one controller process and the leader-only work they do.

``Controller`` builds the shared informers (pools, BootcNodes, Nodes, each
transformed to what the reconcilers read), the ``Context`` they share, the
reconcilers, and one ``Loop`` per reconciler: its rate-limited queue, its
reconcile and its worker count. Six loops are keyed by pool name
(membership, rollout, status, tags, signatures, alerts), one by Node name (placement:
strips the daemon's placement label from Nodes without a BootcNode) and one
has a single key (the watches of the pull Secrets pools reference). Which
queues an event wakes is ``routing``'s; when this runs is ``lifecycle``'s.

As leader only, ``run_workers`` starts the Event recorder and every loop's
workers. ``stop_writing`` (leadership lost) cancels every drain and reconcile
at once; ``shutdown`` (a graceful stop) lets queues drain, then stops drains,
pod and Secret watches, Events and the registry and Prometheus clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bootc_operator.controller.caches import BOOTC_NODE_TRANSFORM, NODE_TRANSFORM
from bootc_operator.controller.routing import SECRET_WATCHES, Router
from bootc_operator.gates.alertgate import AlertReconciler, GateStates
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.informers import SharedInformerFactory
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES
from bootc_operator.policy.nodescope import DEFAULT_POLICY
from bootc_operator.policy.ownership import POOL_INDEX, index_by_pool
from bootc_operator.reconcilers.context import Context, Obj
from bootc_operator.reconcilers.knowledge import PoolKnowledge
from bootc_operator.reconcilers.loops.membership import MembershipReconciler
from bootc_operator.reconcilers.loops.placement import PlacementReconciler
from bootc_operator.reconcilers.loops.rollout import RolloutReconciler
from bootc_operator.reconcilers.loops.signatures import (
    SignatureReconciler,
    TrustedKeys,
    key_secret_refs,
)
from bootc_operator.reconcilers.loops.status import StatusReconciler
from bootc_operator.reconcilers.loops.tags import TagReconciler
from bootc_operator.reconcilers.watchers.drain import DrainManager
from bootc_operator.reconcilers.watchers.healthpods import HealthPods
from bootc_operator.reconcilers.watchers.nodescope import NodeScopeWatcher
from bootc_operator.reconcilers.watchers.pullsecrets import Ref, SecretState, SecretWatcher, ref_of
from bootc_operator.registry import RegistryClient, RegistryOptions
from bootc_operator.runtime.events import EventRecorder
from bootc_operator.workqueue import Clock, RateLimitingQueue, run_workers

if TYPE_CHECKING:
    from bootc_operator.gates.prometheus import PrometheusClient, PrometheusOptions

log = logging.getLogger("controller")

POOL_QUEUES = ("membership", "rollout", "status", "tags", "signatures", "alerts")


@dataclass(frozen=True, slots=True)
class Loop:
    """One reconciler as the leader runs it: its queue, its reconcile, its workers."""

    name: str
    queue: RateLimitingQueue[str]
    reconcile: Callable[[str], Awaitable[float | None]]
    workers: int


class Controller:
    def __init__(
        self,
        api: Any,
        *,
        identity: str,
        workers: int = 4,
        tag_resolution_interval: float = 300.0,
        registry: RegistryOptions | None = None,
        watch_api: Any = None,
        clock: Clock | None = None,
        prometheus: PrometheusOptions | None = None,
        alert_check_interval: float = 30.0,
        node_events: str = "summary",
        node_scope_policy: str = DEFAULT_POLICY,
        seal_without_node_scope: bool = False,
    ) -> None:
        """``api`` makes requests; ``watch_api`` (default ``api``) carries every watch;
        ``clock`` drives the workqueues' delays (tests pass a fake one). Built in this
        order: the informers, the clients, the queues and their router, the pools'
        knowledge and the context every loop shares, the watchers, the loops, and
        their table (``_loop_table``). ``node_scope_policy`` names the daemons'
        admission policy, without which no pull secret is sealed unless
        ``seal_without_node_scope`` (``watchers.nodescope``)."""
        self.api = api
        self.watch_api = watch_api if watch_api is not None else api
        self.identity = identity
        self.workers = workers
        self._informers()
        self.recorder = EventRecorder(api, instance=identity)
        self.prometheus: PrometheusClient | None = None
        if prometheus is not None:  # the query client is loaded only when asked for
            from bootc_operator.gates.prometheus import PrometheusClient  # noqa: PLC0415

            self.prometheus = PrometheusClient(prometheus)
        self.registry = RegistryClient(registry)
        self._make_queues(clock)
        self._secret_watchers(node_scope_policy, seal_without_node_scope)
        self._pool_knowledge(prometheus)
        self.ctx = Context(
            api,
            self.pools,
            self.bootc_nodes,
            self.nodes,
            self.recorder,
            self.watch_api,
            knowledge=self.knowledge,
        )
        self._watchers(alert_check_interval)
        self._reconcilers(
            tag_resolution_interval, alert_check_interval, self.gate_states.url, node_events
        )
        self.loops = self._loop_table()
        self.router.register()

    def _secret_watchers(self, node_scope_policy: str, allow_unscoped: bool) -> None:
        """The Secrets' watcher (trusted keys, pull secrets) and the daemons' admission
        policy's: built before the knowledge, which reads keys through the first."""
        self.secrets = SecretWatcher(self.watch_api, on_change=self.router.secret_changed)
        self.node_scope = NodeScopeWatcher(
            self.watch_api,
            on_change=self._node_scope_changed,
            name=node_scope_policy,
            allow_unscoped=allow_unscoped,
        )

    def _pool_knowledge(self, prometheus: PrometheusOptions | None) -> None:
        """What the loops learn of each pool beyond its objects (tag resolutions,
        verified digests, the Prometheus gates): built before them, read by all."""
        url = prometheus.url if prometheus is not None else ""
        self.gate_states = GateStates(prometheus=prometheus is not None, url=url)
        self.trusted_keys = TrustedKeys(self.secrets.read)
        self.knowledge = PoolKnowledge(gates=self.gate_states, keys=self.trusted_keys)

    def _informers(self) -> None:
        """The shared informers: pools, BootcNodes (indexed by pool), Nodes."""
        self.factory = SharedInformerFactory(self.watch_api)
        self.pools = self.factory.informer(BOOTC_NODE_POOLS)
        # One BootcNode and one Node per node: only what the reconcilers read (caches.py).
        self.bootc_nodes = self.factory.informer(
            BOOTC_NODES, indexers={POOL_INDEX: index_by_pool}, transform=BOOTC_NODE_TRANSFORM
        )
        self.nodes = self.factory.informer(NODES, transform=NODE_TRANSFORM)

    def _make_queues(self, clock: Clock | None) -> None:
        """One rate-limited queue per loop, and the router that feeds them."""
        self.queues = {name: RateLimitingQueue[str](name, clock=clock) for name in POOL_QUEUES}
        self.secret_watch_queue = RateLimitingQueue[str]("pullsecrets", clock=clock)
        # Keyed by Node name: Nodes labelled for the daemon without a BootcNode.
        self.placement_queue = RateLimitingQueue[str]("placement", clock=clock)
        self.router = Router(
            self.pools,
            self.bootc_nodes,
            self.nodes,
            self.queues,
            self.secret_watch_queue,
            self.placement_queue,
        )
        self.enqueue = self.router.enqueue
        self.notify = self.router.notify
        self.member_changed = self.router.member_changed

    def _watchers(self, alert_check_interval: float) -> None:
        """The tasks rollout starts and status reads; each wakes rollout and status
        (``member_changed``) when what it watches moves on."""

        def wake(_node: str, pool: str) -> None:
            self.member_changed(pool, membership=False)

        # A drain runs in its own task; when it finishes (or is blocked) rollout must
        # look again, and status reports it.
        self.drains = DrainManager(self.ctx, on_change=wake)
        # Pods on nodes under a health check (spec.health.pods): a pod turning Ready
        # may pass the gate.
        self.health_pods = HealthPods(self.ctx, on_change=wake)
        # Prometheus polls of nodes under a health check with spec.health.queries: a
        # query that starts or stops holding may pass the gate.
        self.health_queries = HealthQueries(
            self.prometheus, interval=alert_check_interval, on_change=wake, now=self.ctx.now
        )

    def _reconcilers(
        self, tag_interval: float, alert_interval: float, url: str, node_events: str
    ) -> None:
        """The loops; one that learned something the others read wakes them (``notify``)."""
        ctx = self.ctx
        self.placement = PlacementReconciler(ctx)
        self.membership = MembershipReconciler(
            ctx,
            cancel_drain=self.drains.cancel,
            secret_state=self.secret_state,
            may_seal=lambda: self.node_scope.state().may_seal,
            on_processed=self.queues["status"].add,
            # a leaving member's Node is given back by rollout (one writer of the slot)
            on_departures=self.queues["rollout"].add,
        )
        self.rollout = RolloutReconciler(
            ctx,
            self.drains,
            self.health_pods,
            verbose_node_events=node_events == "verbose",
            health_queries=self.health_queries,
            on_problem=self.queues["status"].add,
            on_departed=self.queues["membership"].add,
        )
        self.tags = TagReconciler(
            ctx,
            self.registry.digest,
            interval=tag_interval,
            secret_state=self.secret_state,
            on_target_changed=lambda pool: self.notify(pool, source="tags"),
        )
        self.signatures = SignatureReconciler(
            ctx,
            lambda ref, creds: self.registry.signature(ref, dockerconfigjson=creds),
            keys=self.trusted_keys,
            pull_secret=self.secret_state,
            on_change=lambda pool: self.notify(pool, source="signatures"),
        )
        self.alerts = AlertReconciler(
            ctx.pool,
            self.prometheus,
            interval=alert_interval,
            url=url,
            on_change=lambda pool: self.notify(pool, source="alerts"),
            states=self.gate_states,
        )
        self.status = StatusReconciler(
            ctx,
            self.drains,
            self.health_pods,
            extra_problems=lambda pool: {
                **self.tags.problems(pool),
                **self.signatures.problems(pool),
                **self.rollout.problems(pool),
                **self.node_scope.problems(pool),
            },
            secret_state=self.secret_state,
            membership=self.membership.progress,
            health_queries=self.health_queries,
        )

    def _loop_table(self) -> tuple[Loop, ...]:
        """Every loop the leader runs, one row each: its name (the queue's and the
        ``controller`` label of its metrics), its queue, its reconcile, its workers."""
        q, n = self.queues, self.workers
        return (
            Loop("membership", q["membership"], self.membership.reconcile, n),
            Loop("rollout", q["rollout"], self.rollout.reconcile, n),
            Loop("status", q["status"], self.status.reconcile, n),
            Loop("tags", q["tags"], self.tags.reconcile, n),
            Loop("signatures", q["signatures"], self.signatures.reconcile, n),
            Loop("alerts", q["alerts"], self.alerts.reconcile, n),
            Loop("placement", self.placement_queue, self.placement.reconcile, 1),
            Loop("pullsecrets", self.secret_watch_queue, self.reconcile_secret_watches, 1),
        )

    def _node_scope_changed(self) -> None:
        """The admission policy appeared, changed or went: pools with a pull secret
        (re)seal, or say why they do not."""
        for pool in self.pools.list():
            if ref_of(pool) is not None:
                self.member_changed(pool["metadata"]["name"], membership=True)

    def secret_state(self, pool: Obj) -> SecretState | None:
        ref = ref_of(pool)
        return None if ref is None else self.secrets.state(ref)

    async def reconcile_secret_watches(self, _key: str = SECRET_WATCHES) -> None:
        """Watch exactly the Secrets some pool references, pull secrets and key Secrets
        (one informer each)."""
        refs: set[Ref] = set()
        for pool in self.pools.list():
            if (ref := ref_of(pool)) is not None:
                refs.add(ref)
            refs |= key_secret_refs(pool)
        await self.secrets.sync(refs)

    # ---------------------------------------------------------------- running

    def ready(self) -> bool | str:
        return True if self.factory.has_synced else "caches not synced"

    async def run_workers(self) -> None:
        """Leader-only work: the recorder, the reconcilers' workers, the Secret watches."""
        self.recorder.start()
        self.node_scope.start()
        self.secret_watch_queue.add(SECRET_WATCHES)
        for pool in self.pools.list():
            self.enqueue(pool["metadata"]["name"])
        async with asyncio.TaskGroup() as tg:
            for loop in self.loops:
                tg.create_task(
                    run_workers(
                        loop.queue, loop.reconcile, loop.workers, controller=loop.name, log=log
                    ),
                    name=f"{loop.name}-workers",
                )

    def _queues(self) -> list[RateLimitingQueue[str]]:
        return [loop.queue for loop in self.loops]

    async def stop_writing(self, work: asyncio.Task[None]) -> None:
        """Leadership is gone: cancel every drain and every reconcile now, no grace.

        The cancellations are all issued before the first ``await``, so no other
        task of this process runs (and writes) in between.
        """
        for queue in self._queues():
            queue.shut_down()
        drains = self.drains.cancel_all()
        work.cancel()
        events = self.recorder.discard_pending()
        await asyncio.wait([work, *drains, *events])

    async def shutdown(self, grace: float = 10.0) -> None:
        """Stop intake, let in-flight reconciles finish (bounded), stop drains and Events."""
        queues = self._queues()
        for queue in queues:
            queue.shut_down()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                for queue in queues:
                    await queue.shut_down_with_drain()
        await self.drains.stop()
        await self.health_pods.stop()
        await self.health_queries.stop()
        await self.secrets.stop()
        await self.node_scope.stop()
        await self.recorder.stop()
        await self.registry.close()
        if self.prometheus is not None:
            await self.prometheus.close()
