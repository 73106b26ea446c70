"""``bootc-operator controller``: one asyncio runtime wiring informers, queues and reconcilers.

Start-up: API clients (one for requests, one with an unbounded connection pool
for watches, so open drains never starve requests) → shared informers (pools,
BootcNodes, Nodes) → probe and metrics server → caches synced (``/readyz``
turns ready) → leader election (if enabled) → as leader only: the Event
recorder and N workers on each of the five rate-limited queues (membership,
rollout, status, tags, alerts), all keyed by pool name, plus one worker that starts
and stops the watches of the pull Secrets pools reference, and one (keyed by
Node name) that strips the daemon's placement label from Nodes without a
BootcNode (``placement``).
A standby keeps warm caches and does no writes. The workers start only once
``acquire()`` has returned cleanly. Losing the lease (a renewal that failed
in any way for the renew deadline, or a renew task that died) stops writing at
once, with no grace: every drain (evictions in flight) and every reconcile is
cancelled before anything else, pending Events are dropped, and the process
exits with code 1 so it restarts as a standby, like controller-runtime.

Who wakes whom: informer event handlers only enqueue (``triggers`` says which
queues an event concerns). A reconciler that learned something the others
need (a tag resolved or failed) wakes the *other* reconcilers through
``notify``, never its own queue: re-adding a key while it is being processed
makes the workqueue run it again at once, which would defeat the delay the
reconcile returned (a failing tag hit the registry in a tight loop). A
reconciler's own next run is its return value. Drains are background tasks,
event sources like the informers: a drain that finishes or gets blocked wakes
rollout and status once.

Shutdown (SIGTERM/SIGINT): queues drain (in-flight reconciles finish), drain
tasks are cancelled (their state lives in annotations), Events are flushed,
the lease is released, informers stop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import uuid
from typing import Any

from bootc_operator.alerts import PrometheusClient, PrometheusOptions
from bootc_operator.informers import (
    EventHandler,
    SharedInformerFactory,
    chain,
    drop_paths,
    intern_strings,
    strip_bulk,
    unwrap,
)
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, load_api_client
from bootc_operator.policy.ownership import POOL_INDEX, index_by_pool, pool_of
from bootc_operator.policy.placement_plan import wants_look
from bootc_operator.reconcilers import metrics as m
from bootc_operator.reconcilers.alertgate import AlertReconciler
from bootc_operator.reconcilers.context import Context, Obj
from bootc_operator.reconcilers.drain import DrainManager
from bootc_operator.reconcilers.healthpods import HealthPods
from bootc_operator.reconcilers.membership import MembershipReconciler
from bootc_operator.reconcilers.placement import PlacementReconciler
from bootc_operator.reconcilers.pullsecrets import SecretState, SecretWatcher, ref_of
from bootc_operator.reconcilers.rollout import RolloutReconciler
from bootc_operator.reconcilers.status import StatusReconciler
from bootc_operator.reconcilers.tags import TagReconciler
from bootc_operator.reconcilers.triggers import (
    membership_changed,
    node_changed,
    node_membership_changed,
    pool_changed,
    pools_selecting,
)
from bootc_operator.registry import RegistryClient, RegistryOptions
from bootc_operator.runtime.events import EventRecorder
from bootc_operator.runtime.leaderelection import LeaderElector
from bootc_operator.runtime.process import serve, unless_stopped, wait_first
from bootc_operator.workqueue import Clock, RateLimitingQueue, run_workers

log = logging.getLogger("controller")

# Pool status is recomputed at most this often for node-level changes. A status
# pass classifies every node of the pool (O(nodes)); run on every BootcNode/Node
# event it dominated the controller's CPU during large rollouts.
STATUS_COALESCE = 1.0
POOL_QUEUES = ("membership", "rollout", "status", "tags", "alerts")
# The one key of the pull-secret watch queue: the set of watched Secrets is one
# piece of state, derived from every pool.
SECRET_WATCHES = "pull-secret-watches"


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
    ) -> None:
        """``api`` makes requests; ``watch_api`` (default ``api``) carries every watch;
        ``clock`` drives the workqueues' delays (tests pass a fake one)."""
        self.api = api
        self.watch_api = watch_api if watch_api is not None else api
        self.identity = identity
        self.workers = workers
        self.factory = SharedInformerFactory(self.watch_api)
        self.pools = self.factory.informer(BOOTC_NODE_POOLS)
        # One BootcNode per node, repeating the same keys, digests, reasons and messages;
        # the sealed pull secret's ciphertext is never read back (its keyID is).
        self.bootc_nodes = self.factory.informer(
            BOOTC_NODES,
            indexers={POOL_INDEX: index_by_pool},
            transform=chain(
                strip_bulk, drop_paths(("spec", "sealedPullSecret", "data")), intern_strings
            ),
        )
        # Node objects are large (image lists) and numerous: keep only what we read.
        self.nodes = self.factory.informer(
            NODES, transform=chain(strip_bulk, drop_paths(("status", "images")), intern_strings)
        )
        self.recorder = EventRecorder(api, instance=identity)
        self.ctx = Context(
            api, self.pools, self.bootc_nodes, self.nodes, self.recorder, self.watch_api
        )
        self.queues = {name: RateLimitingQueue[str](name, clock=clock) for name in POOL_QUEUES}
        self.secret_watch_queue = RateLimitingQueue[str]("pullsecrets", clock=clock)
        # Keyed by Node name: Nodes labelled for the daemon without a BootcNode.
        self.placement_queue = RateLimitingQueue[str]("placement", clock=clock)
        # A drain runs in its own task, started by rollout; when it finishes (or is
        # blocked) rollout must look again, and status reports it.
        self.drains = DrainManager(
            self.ctx, on_change=lambda _node, pool: self.member_changed(pool, membership=False)
        )
        # Pods on nodes under a health check (spec.health.pods): a pod turning Ready
        # may pass the gate, so rollout and status look again.
        self.health_pods = HealthPods(
            self.ctx, on_change=lambda _node, pool: self.member_changed(pool, membership=False)
        )
        self.secrets = SecretWatcher(self.watch_api, on_change=self._secret_changed)
        self.placement = PlacementReconciler(self.ctx)
        self.membership = MembershipReconciler(
            self.ctx,
            cancel_drain=self.drains.cancel,
            secret_state=self.secret_state,
            on_processed=self.queues["status"].add,
        )
        self.rollout = RolloutReconciler(
            self.ctx,
            self.drains,
            self.health_pods,
            verbose_node_events=node_events == "verbose",
        )
        self.registry = RegistryClient(registry)
        self.tags = TagReconciler(
            self.ctx,
            self.registry.digest,
            interval=tag_resolution_interval,
            secret_state=self.secret_state,
            on_target_changed=lambda pool: self.notify(pool, source="tags"),
        )
        self.ctx.resolved_tag = self.tags.target
        self.prometheus = PrometheusClient(prometheus) if prometheus is not None else None
        self.alerts = AlertReconciler(
            self.ctx.pool,
            self.prometheus,
            interval=alert_check_interval,
            url=prometheus.url if prometheus is not None else "",
            on_change=lambda pool: self.notify(pool, source="alerts"),
        )
        self.ctx.alert_gate = self.alerts.gate
        self.status = StatusReconciler(
            self.ctx,
            self.drains,
            self.health_pods,
            extra_problems=self.tags.problems,
            secret_state=self.secret_state,
            membership=self.membership.progress,
        )
        self._register_handlers()

    # ---------------------------------------------------------------- event mapping

    def enqueue(self, pool: str | None) -> None:
        """An event concerns ``pool`` as a whole: every reconciler looks (handlers only)."""
        if pool:
            for queue in self.queues.values():
                queue.add(pool)

    def notify(self, pool: str, *, source: str) -> None:
        """Reconciler ``source`` changed what the others see of ``pool``: wake them.

        Never ``source``'s own queue: its next run is the delay it returns.
        """
        for name, queue in self.queues.items():
            if name != source:
                queue.add(pool)

    def member_changed(self, pool: str | None, *, membership: bool) -> None:
        """A BootcNode or Node of ``pool`` changed (or a drain moved on).

        Rollout looks at once; membership only when ``membership`` (see
        ``triggers.membership_changed``); status within ``STATUS_COALESCE``
        seconds, however many changes arrive meanwhile. Tag resolution does
        not depend on nodes.
        """
        if not pool:
            return
        if membership:
            self.queues["membership"].add(pool)
        self.queues["rollout"].add(pool)
        self.queues["status"].add_after(pool, STATUS_COALESCE)

    def secret_state(self, pool: Obj) -> SecretState | None:
        ref = ref_of(pool)
        return None if ref is None else self.secrets.state(ref)

    def _secret_changed(self, ref: tuple[str, str]) -> None:
        """A watched pull Secret changed (or its watch synced): its pools look again."""
        for pool in self.pools.list():
            if ref_of(pool) == ref:
                self.enqueue(pool["metadata"]["name"])

    async def reconcile_secret_watches(self, _key: str = SECRET_WATCHES) -> None:
        """Watch exactly the pull Secrets some pool references (one informer each)."""
        await self.secrets.sync({r for p in self.pools.list() if (r := ref_of(p)) is not None})

    def _register_handlers(self) -> None:
        def pool_event(obj: Any) -> None:
            self.secret_watch_queue.add(SECRET_WATCHES)
            self.enqueue(unwrap(obj)["metadata"]["name"])
            self._check_all_placements()

        def pool_update(old: Any, new: Any) -> None:
            name = new["metadata"]["name"]
            if ref_of(old) != ref_of(new):
                self.secret_watch_queue.add(SECRET_WATCHES)
            if pool_changed(_without_status(old), _without_status(new)):
                self.enqueue(name)  # spec, deletion, finalizers or labels
                self._check_all_placements()  # a selector may have let go of a Node
            elif pool_changed(old, new):
                # status.targetDigest moved: written by tag resolution, which already
                # knows; the others act on it (membership writes the new desiredImage).
                self.notify(name, source="tags")
            else:  # only status moved (mostly our own writes)
                self.queues["status"].add_after(name, STATUS_COALESCE)

        self.pools.add_event_handler(
            EventHandler(on_add=pool_event, on_update=pool_update, on_delete=pool_event)
        )

        def bn_added(obj: Any) -> None:
            self.member_changed(pool_of(unwrap(obj)), membership=True)

        def bn_updated(old: Any, new: Any) -> None:
            self.member_changed(pool_of(new), membership=membership_changed(old, new))

        def bn_deleted(obj: Any) -> None:
            # A released node may now go to another pool that was waiting for it.
            bn = unwrap(obj)
            self.member_changed(pool_of(bn), membership=True)
            node = self.nodes.get(bn["metadata"]["name"])
            self._check_placement(node)
            if node is not None:
                for pool in pools_selecting(self.pools.list(), node["metadata"].get("labels")):
                    self.member_changed(pool, membership=True)

        self.bootc_nodes.add_event_handler(
            EventHandler(on_add=bn_added, on_update=bn_updated, on_delete=bn_deleted)
        )

        def node_added(obj: Any) -> None:
            self._check_placement(unwrap(obj))
            node_pools(obj)

        def node_pools(*nodes: Any, membership: bool = True) -> None:
            labels = [unwrap(n)["metadata"].get("labels") for n in nodes]
            targets = pools_selecting(self.pools.list(), *labels)
            bn = self.bootc_nodes.get(unwrap(nodes[-1])["metadata"]["name"])
            if bn is not None and (owner := pool_of(bn)):
                targets.add(owner)
            for pool in targets:
                self.member_changed(pool, membership=membership)

        def node_updated(old: Any, new: Any) -> None:
            if node_changed(old, new):
                self._check_placement(new)
                node_pools(old, new, membership=node_membership_changed(old, new))

        self.nodes.add_event_handler(
            EventHandler(on_add=node_added, on_update=node_updated, on_delete=node_pools)
        )

    def _check_all_placements(self) -> None:
        for node in self.nodes.list():
            self._check_placement(node)

    def _check_placement(self, node: Any) -> None:
        """A Node labelled for the daemon but without a BootcNode: placement strips it."""
        if node is None:
            return
        name = node["metadata"]["name"]
        if wants_look(node, self.bootc_nodes.get(name) is not None):
            self.placement_queue.add(name)

    # ---------------------------------------------------------------- running

    def ready(self) -> bool | str:
        return True if self.factory.has_synced else "caches not synced"

    async def run_workers(self) -> None:
        """Leader-only work: the recorder, the reconcilers' workers, the Secret watches."""
        self.recorder.start()
        self.secret_watch_queue.add(SECRET_WATCHES)
        for pool in self.pools.list():
            self.enqueue(pool["metadata"]["name"])
        reconcilers = {
            "membership": self.membership.reconcile,
            "rollout": self.rollout.reconcile,
            "status": self.status.reconcile,
            "tags": self.tags.reconcile,
            "alerts": self.alerts.reconcile,
        }
        async with asyncio.TaskGroup() as tg:
            for name, reconcile in reconcilers.items():
                tg.create_task(
                    run_workers(
                        self.queues[name], reconcile, self.workers, controller=name, log=log
                    ),
                    name=f"{name}-workers",
                )
            tg.create_task(
                run_workers(
                    self.placement_queue,
                    self.placement.reconcile,
                    1,
                    controller="placement",
                    log=log,
                ),
                name="placement-workers",
            )
            tg.create_task(
                run_workers(
                    self.secret_watch_queue,
                    self.reconcile_secret_watches,
                    1,
                    controller="pullsecrets",
                    log=log,
                ),
                name="pullsecrets-workers",
            )

    def _queues(self) -> list[RateLimitingQueue[str]]:
        return [*self.queues.values(), self.secret_watch_queue, self.placement_queue]

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
        await self.secrets.stop()
        await self.recorder.stop()
        await self.registry.close()
        if self.prometheus is not None:
            await self.prometheus.close()


def _without_status(pool: Any) -> dict[str, Any]:
    return {"metadata": pool.get("metadata") or {}}


async def run(args: argparse.Namespace) -> int:
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    api = await load_api_client(args.kubeconfig)
    # Watches hold a connection each for as long as they run (one per open drain):
    # they get their own, unbounded pool so requests never queue behind them.
    watch_api = await load_api_client(args.kubeconfig, max_connections=0)
    controller = Controller(
        api,
        watch_api=watch_api,
        identity=identity,
        workers=args.workers,
        tag_resolution_interval=args.tag_resolution_interval,
        registry=RegistryOptions(
            ca_file=args.registry_ca_file or None,
            insecure_registries=frozenset(args.insecure_registry or ()),
        ),
        prometheus=PrometheusOptions(
            url=args.prometheus_url,
            ca_file=args.prometheus_ca_file or None,
            bearer_token_file=args.prometheus_bearer_token_file or None,
            insecure_skip_verify=args.prometheus_insecure_skip_verify,
        )
        if args.prometheus_url
        else None,
        alert_check_interval=args.alert_check_interval,
        node_events=args.node_events,
    )

    async def work(stop: asyncio.Event) -> int:
        try:
            controller.factory.start()
            log.info("waiting for caches to sync")
            sync = asyncio.create_task(controller.factory.wait_for_cache_sync())
            if not await unless_stopped(sync, stop):
                return 0
            log.info("caches synced", extra={"identity": identity})
            elector = None
            if args.leader_elect:
                elector = LeaderElector(
                    api,
                    args.leader_election_namespace,
                    args.leader_election_id,
                    identity,
                    lease_duration=args.lease_duration,
                    renew_deadline=args.renew_deadline,
                    retry_period=args.retry_period,
                )
            return await _lead_and_work(controller, elector, stop)
        finally:
            await controller.shutdown()
            await controller.factory.stop()
            m.IS_LEADER.set(0)

    return await serve(args, work, ready=controller.ready, close=(api.close, watch_api.close))


async def _lead_and_work(
    controller: Controller, elector: LeaderElector | None, stop: asyncio.Event
) -> int:
    if elector is None:
        m.IS_LEADER.set(1)
        return await _work_until(controller, stop, None)
    try:
        acquiring = asyncio.create_task(elector.acquire(), name="acquire")
        if not await unless_stopped(acquiring, stop):
            return 0
        # Leading is proven, not assumed: only an acquire that returned cleanly counts.
        if acquiring.exception() is not None or not elector.is_leader:
            log.error(
                "leader election failed; not starting any work",
                exc_info=acquiring.exception(),
            )
            return 1
        elector.start_renewing()
        m.IS_LEADER.set(1)
        return await _work_until(controller, stop, elector)
    finally:
        m.IS_LEADER.set(0)
        await elector.release_and_stop()


async def _work_until(
    controller: Controller, stop: asyncio.Event, elector: LeaderElector | None
) -> int:
    work = asyncio.create_task(controller.run_workers(), name="workers")
    lost = asyncio.create_task(elector.lost.wait(), name="lease-lost") if elector else None
    try:
        await wait_first(stop, work, *([lost] if lost is not None else []))
        if lost is None or not lost.done():
            # A graceful stop (or the workers failed): in-flight reconciles may
            # finish, but only while the lease is still ours.
            graceful = asyncio.create_task(controller.shutdown(), name="graceful-shutdown")
            await asyncio.wait(
                [graceful, *([lost] if lost is not None else [])],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not graceful.done():
                graceful.cancel()
                await asyncio.wait([graceful])
        if lost is not None and lost.done():
            await controller.stop_writing(work)
            log.error(
                "leadership lost: reconciles and drains cancelled, no more writes; "
                "exiting so a standby can take over"
            )
            return 1
        if work.done() and not work.cancelled() and work.exception() is not None:
            log.error("workers failed", exc_info=work.exception())
            return 1
        return 0
    finally:
        work.cancel()
        await asyncio.wait([work])
        if lost is not None:
            lost.cancel()
