"""Node drains: one asyncio task per draining node, evicting through policy/v1 Eviction.

Interface (owned by the rollout reconciler; membership may ``cancel``)::

    drains = DrainManager(ctx, on_change=lambda node: enqueue(pool_of(node)))
    drains.ensure(node, pool)     # start if not running and not finished
    drains.result(node)           # DrainResult: running / done / blocked message
    drains.cancel(node)           # stop now (target moved, node left the pool)
    drains.poke(node)             # a pod on the node changed: look again now

A drain task first LISTs the node's pods (``fieldSelector=spec.nodeName=<node>``,
after the cordon, so the answer includes every pod bound before or racing it):
a consistent read, which kube-apiserver serves from its watch cache by the
pods' nodeName index (ConsistentListFromCache, on by default since 1.31), over
the request client's kept-alive connections. Most nodes have nothing to evict
and are done after that one request: no watch, no new TLS connection (a
500-slot wave used to open 500 watches, at most 64 at once). Only a node with
pods to evict opens its own Pod informer restricted to the node, started from
that list (its first request is the WATCH from the list's resourceVersion: the
pods are read once), so memory stays proportional to the nodes being drained
rather than to the cluster's pods. That watch runs on the
context's stream client (``Context.streams``), not the request client: with
more drains open than the request client has connections (maxUnavailable in
the hundreds, drains held by PodDisruptionBudgets), the evictions, cordons and
status writes would otherwise wait behind the watches for good.
If that LIST fails (any error: a 5xx, a 429, a refused connection, a body cut
short), it is retried with capped backoff (1 s doubling to 30 s) and nothing else
happens meanwhile: the node keeps its slot and its cordon, it is not told to
reboot, and the drain says why it waits (``DrainResult.error``: the pool's
status names it, as for a blocked eviction, and one ``DrainBlocked`` Warning per
drain); the first success clears it.
Pods that must leave (``drainplan``) are evicted; every eviction and Force
DELETE carries the pod's uid as a precondition, so a pod recreated under the
same name meanwhile (elsewhere, by its controller) is never the one removed
(409 Conflict: the pod meant is gone); 429 (a PodDisruptionBudget
says no) and other refusals are remembered with the server's message. A pod a
PodDisruptionBudget refused waits for that budget (``budgets.BudgetWatch``: the
PDBs, watched from the first such refusal): the drain tries again as soon as a
PDB covering it allows a disruption, changes its selector or goes away, with a
retry every ``budget_fallback`` seconds (30) only as a safety net. Refusals with
no PDB to wait for (none covers the pod, the PDBs cannot be listed, an
admission check denied it) are retried with capped backoff (1 s doubling to
30 s). Otherwise the task waits for pod events on its node rather than polling.
When nothing is left it reports done. Timeouts are the reconciler's business (it
knows when the slot was taken, which survives restarts; the task does not); past
one, ``onTimeout: Force`` makes the reconciler call ``force(node)``: from then on
the task DELETEs each pod left (no Eviction, so no PodDisruptionBudget is asked),
with one ``PodForceDeleted`` Warning per pod. An eviction refused otherwise than
by a PodDisruptionBudget (an admission webhook or ValidatingAdmissionPolicy
denies it) is retried with backoff and counted
(``drain_outcomes_total{outcome=Denied}``, once per pod and drain). Under
``deleteEmptyDirData: false`` a pod with emptyDir data is held, never evicted
nor deleted (``drainplan``): the drain is blocked by it, named with the reason
``EmptyDirData`` in a DrainBlocked Warning and the pool's status, counted
(``drain_outcomes_total{outcome=EmptyDirData}``),
and goes on as soon as the pod goes or the pool's setting lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from bootc_operator.informers import Backoff, EventHandler, Informer
from bootc_operator.kube import PODS, ApiError, list_objects
from bootc_operator.policy.drainplan import (
    EMPTYDIR_REASON,
    MIRROR_ANNOTATION,
    blocking_message,
    budget_covers,
    drain_state,
    emptydir_volumes,
    pod_key,
    refusal_kind,
    unblocked,
)
from bootc_operator.reconcilers.context import Context, Obj
from bootc_operator.reconcilers.metrics import DRAIN_DURATION, DRAIN_OUTCOMES
from bootc_operator.reconcilers.watchers.budgets import BudgetWatch
from bootc_operator.runtime.events import ObjectRef

log = logging.getLogger("drain")

SYNC_CONCURRENCY: Final = 64  # drains reading their first pod list at the same time
#: seconds between tries of an eviction a PodDisruptionBudget refused, if no change
#: of the budget woke the drain first (a safety net: the PDB watch wakes it)
BUDGET_FALLBACK: Final = 30.0


@dataclass
class DrainResult:
    pool: str
    started: float = field(default_factory=time.monotonic)
    done: bool = False
    remaining: tuple[str, ...] = ()
    blocked_by: dict[str, str] = field(default_factory=dict)
    reported_blocked: bool = False
    #: why the drain cannot go on (its pods could not be read); "" when it can
    error: str = ""
    reported_error: bool = False
    evicted: int = 0
    seconds: float = 0.0  # how long the drain took, once done
    #: the seconds each evicted (or force-deleted) pod is given; None: its own
    grace_period: int | None = None
    #: spec.rollout.drain.deleteEmptyDirData (False holds pods with emptyDir data)
    delete_emptydir_data: bool | None = None
    #: past its timeout under onTimeout Force: delete the pods left, no Eviction
    force: bool = False
    forced: int = 0  # pods deleted that way
    #: past its timeout under onTimeout Halt (its Event and metric are sent once)
    halted: bool = False
    denied: set[str] = field(default_factory=set)  # pods an admission check refused
    #: pods a PodDisruptionBudget refused that one covers: key -> (namespace, labels)
    budget_waits: dict[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)  # pods held for their emptyDir data

    @property
    def blocked(self) -> bool:
        return bool(self.blocked_by or self.error) and not self.done

    def message(self, node: str) -> str:
        if self.error:
            return f"drain of {node} waiting: {self.error}; retrying"
        return blocking_message(node, self.remaining, self.blocked_by)

    def summary(self) -> str:
        """How the finished drain went, for the node's RebootRequested Event."""
        pods = "1 pod" if self.evicted == 1 else f"{self.evicted} pods"
        forced = f", {self.forced} force-deleted" if self.forced else ""
        return f"{pods} evicted{forced} in {self.seconds:.0f}s"


def describe(err: BaseException) -> str:
    """``ServerDisconnectedError: Server disconnected`` (the type alone when it says nothing)."""
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def slim_pod(pod: Obj) -> Obj:
    """Keep only what a drain reads: identity, owners, mirror mark, deletion, node."""
    meta = pod.get("metadata", {})
    annotations = meta.get("annotations") or {}
    slim_meta: Obj = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
        if k in meta
    }
    owners = [
        {"kind": r.get("kind"), "name": r.get("name"), "controller": r.get("controller")}
        for r in meta.get("ownerReferences") or ()
    ]
    if owners:
        slim_meta["ownerReferences"] = owners
    if MIRROR_ANNOTATION in annotations:
        slim_meta["annotations"] = {MIRROR_ANNOTATION: annotations[MIRROR_ANNOTATION]}
    if meta.get("labels"):  # which PodDisruptionBudgets cover it
        slim_meta["labels"] = meta["labels"]
    spec = pod.get("spec", {})
    slim_spec: Obj = {"nodeName": spec.get("nodeName")}
    # deleteEmptyDirData reads which volumes are emptyDir (their names, nothing else)
    volumes = [{"name": name, "emptyDir": {}} for name in emptydir_volumes(pod)]
    if volumes:
        slim_spec["volumes"] = volumes
    return {
        "metadata": slim_meta,
        "spec": slim_spec,
        "status": {"phase": pod.get("status", {}).get("phase")},
    }


class DrainManager:
    def __init__(self, ctx: Context, on_change: Callable[[str, str], None]) -> None:
        self.ctx = ctx
        self._on_change = on_change  # (node, pool) -> enqueue
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._results: dict[str, DrainResult] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        # A wave of hundreds of slots starts hundreds of drains at once; most nodes
        # are empty and finish as soon as their pod list arrives. Bounding how many
        # drains open their watch and wait for that list at the same time bounds
        # the connections (and memory) of such a wave; a drain that must wait for
        # evictions holds its watch, not a permit.
        self._syncing = asyncio.Semaphore(SYNC_CONCURRENCY)
        self.budgets = BudgetWatch(ctx.streams, on_change=self._budget_changed)
        self.budget_fallback = BUDGET_FALLBACK

    def result(self, node: str) -> DrainResult | None:
        return self._results.get(node)

    def running(self, node: str) -> bool:
        task = self._tasks.get(node)
        return task is not None and not task.done()

    def ensure(
        self,
        node: str,
        pool: str,
        grace_period: int | None = None,
        delete_emptydir_data: bool | None = None,
    ) -> DrainResult:
        res = self._results.get(node)
        if res is not None and (res.done or self.running(node)):
            if res.delete_emptydir_data != delete_emptydir_data:
                # the pool's setting changed mid-drain: held pods may go now (or stay)
                res.delete_emptydir_data = delete_emptydir_data
                self.poke(node)
            return res
        res = DrainResult(
            pool=pool, grace_period=grace_period, delete_emptydir_data=delete_emptydir_data
        )
        self._results[node] = res
        self._wakeups[node] = asyncio.Event()
        self._tasks[node] = asyncio.create_task(self._drain(node, res), name=f"drain-{node}")
        return res

    def forget(self, node: str) -> None:
        """Drop a finished result (after the node got desiredImageState Booted)."""
        self.cancel(node)

    def cancel(self, node: str) -> None:
        task = self._tasks.pop(node, None)
        if task is not None and not task.done():
            task.cancel()
            log.info("drain cancelled", extra={"node": node})
        self._results.pop(node, None)
        self._wakeups.pop(node, None)

    def changed(self, node: str) -> None:
        """Something about the drain changed that the pool's status tells (a timeout)."""
        res = self._results.get(node)
        if res is not None:
            self._on_change(node, res.pool)

    def force(self, node: str) -> None:
        """Past the timeout with onTimeout Force: delete the pods left (module doc)."""
        res = self._results.get(node)
        if res is not None and not res.force:
            res.force = True
            self.poke(node)

    def poke(self, node: str) -> None:
        event = self._wakeups.get(node)
        if event is not None:
            event.set()

    def _budget_changed(self, pdb: Obj) -> None:
        """A PDB allows a disruption, changed its selector or went away: the drains
        waiting on a pod it covers try again now."""
        for node, res in list(self._results.items()):
            if any(budget_covers(pdb, ns, labels) for ns, labels in res.budget_waits.values()):
                self.poke(node)

    def blocked(self) -> dict[str, DrainResult]:
        return {n: r for n, r in self._results.items() if r.blocked}

    def cancel_all(self) -> list[asyncio.Task[None]]:
        """Cancel every drain now (evictions in flight included); the tasks to await."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        self._tasks.clear()
        return tasks

    async def stop(self) -> None:
        for task in self.cancel_all():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.budgets.stop()

    # ---------------------------------------------------------------- the task

    async def _drain(self, node: str, res: DrainResult) -> None:
        listed = await self._first_list(node, res)
        if not drain_state(listed[0], res.delete_emptydir_data).remaining:
            self._finish(node, res)
            return
        await self._watch_and_evict(node, res, listed)

    async def _first_list(self, node: str, res: DrainResult) -> tuple[list[Obj], str]:
        """The node's pods now and the list's resourceVersion, retried until read."""
        backoff = Backoff(initial=1.0, cap=30.0, jitter=0.2)
        while True:
            try:
                async with self._syncing:
                    listed = await list_objects(
                        self.ctx.api,
                        PODS,
                        field_selector=f"spec.nodeName={node}",
                        transform=slim_pod,
                    )
            except Exception as err:  # any failure to read: retry (a cancel is not one)
                delay = backoff.next()
                self._list_failed(node, res, err, delay)
                await asyncio.sleep(delay)
                continue
            if res.error:
                log.info(
                    f"listed the pods to drain after {backoff.failures} failed attempts",
                    extra={"node": node, "pool": res.pool},
                )
                res.error = ""
                self._on_change(node, res.pool)
            return listed

    def _list_failed(self, node: str, res: DrainResult, err: Exception, delay: float) -> None:
        why = str(err) if isinstance(err, ApiError) else describe(err)
        first = not res.error
        res.error = f"could not list the node's pods: {why}"
        log.warning(
            f"{res.error}; retrying in {delay:.1f}s", extra={"node": node, "pool": res.pool}
        )
        if not res.reported_error:
            res.reported_error = True
            self.ctx.recorder.emit(
                self.ctx.node_ref(node), "Warning", "DrainBlocked", "Drain", res.message(node)
            )
        if first:
            self._on_change(node, res.pool)  # the pool's status says why the drain waits

    def _finish(self, node: str, res: DrainResult) -> None:
        res.done, res.remaining, res.blocked_by = True, (), {}
        res.seconds = time.monotonic() - res.started
        DRAIN_DURATION.observe(res.seconds)
        log.info("drain done", extra={"node": node, "pool": res.pool})
        self._on_change(node, res.pool)

    async def _watch_and_evict(
        self, node: str, res: DrainResult, listed: tuple[list[Obj], str]
    ) -> None:
        wake = self._wakeups[node]
        pods = Informer(
            self.ctx.streams, PODS, field_selector=f"spec.nodeName={node}", transform=slim_pod
        )
        pods.add_event_handler(
            EventHandler(
                on_add=lambda _: wake.set(),
                on_update=lambda _o, _n: wake.set(),
                on_delete=lambda _: wake.set(),
            )
        )
        try:
            # From the first list: straight to the WATCH from its resourceVersion, no
            # second read of the same pods.
            async with self._syncing:
                pods.start(listed=listed)
                await pods.wait_for_sync()
            await self._evict_until_empty(node, res, pods, wake)
        finally:
            await pods.stop()

    async def _evict_until_empty(
        self, node: str, res: DrainResult, pods: Informer, wake: asyncio.Event
    ) -> None:
        backoff = Backoff(initial=1.0, cap=30.0, jitter=0.2)
        while True:
            # Cleared before reading the cache: a pod event arriving while we evict
            # (kwok deletes an evicted pod within milliseconds) must wake the wait below.
            wake.clear()
            state = drain_state(pods.list(), res.delete_emptydir_data)
            if not state.remaining:
                self._finish(node, res)
                return
            res.remaining = state.remaining
            # pods gone, going (evicted: terminating) or let go since block no more;
            # the pool's status stops naming them
            freed = unblocked(res.blocked_by, state, res.held)
            for key in freed:
                res.blocked_by.pop(key, None)
            if freed:
                self._on_change(node, res.pool)
            self._hold(node, res, state.held)
            refusals, by_budget = await self._evict(node, res, state.evict, pods.list())
            if res.blocked_by and not res.reported_blocked:
                res.reported_blocked = True
                message = res.message(node)
                log.warning(message, extra={"node": node, "pool": res.pool})
                self.ctx.recorder.emit(
                    self.ctx.node_ref(node), "Warning", "DrainBlocked", "Drain", message
                )
                self._on_change(node, res.pool)
            delay = backoff.next() if refusals else 30.0
            res.budget_waits = {}
            # every refusal a budget's, and a PDB covers each pod: wait for those PDBs
            if refusals and len(by_budget) == refusals and await self._covered(by_budget):
                res.budget_waits = by_budget
                delay = self.budget_fallback
            if res.force and refusals:
                delay = min(delay, 5.0)
            if not refusals:
                backoff.reset()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await wake.wait()

    async def _evict(
        self, node: str, res: DrainResult, keys: Iterable[str], listed: Iterable[Obj]
    ) -> tuple[int, dict[str, tuple[str, Mapping[str, str]]]]:
        """Evict (Force: delete) each pod of ``keys``, one pass; how many were refused,
        and of those, the ones a PodDisruptionBudget refused (namespace and labels)."""
        refusals = 0
        by_budget: dict[str, tuple[str, Mapping[str, str]]] = {}
        cached = {pod_key(p): p for p in listed}
        uids = {key: p["metadata"].get("uid", "") for key, p in cached.items()}
        for key in keys:
            namespace, name = key.split("/", 1)
            try:
                if res.force:
                    await self._force_delete(node, res, key, uids.get(key, ""))
                else:
                    await self.ctx.evict(namespace, name, uids.get(key, ""), res.grace_period)
                    res.evicted += 1
                res.blocked_by.pop(key, None)
            except ApiError as err:
                if err.not_found or err.status == 409:
                    # gone, or (409: its uid precondition failed) replaced by a
                    # namesake, which the node's pod watch shows if it is ours
                    res.blocked_by.pop(key, None)
                    continue
                refusals += 1
                res.blocked_by[key] = err.message or str(err)
                if refusal_kind(err.status) == "pdb":
                    labels = (cached.get(key) or {}).get("metadata", {}).get("labels") or {}
                    by_budget[key] = (namespace, labels)
                elif key not in res.denied:
                    res.denied.add(key)
                    DRAIN_OUTCOMES.labels(res.pool, "Denied").inc()
            except (OSError, TimeoutError) as err:
                refusals += 1
                res.blocked_by[key] = str(err)
        return refusals, by_budget

    async def _covered(self, pods: Mapping[str, tuple[str, Mapping[str, str]]]) -> bool:
        """Whether a PodDisruptionBudget covers each of ``pods`` (False: unknown)."""
        for namespace, labels in pods.values():
            if not await self.budgets.covering(namespace, labels):
                return False
        return True

    def _hold(self, node: str, res: DrainResult, held: Mapping[str, str]) -> None:
        """Name the pods kept for their emptyDir data as what blocks the drain; each
        counted once per drain (``drain_outcomes_total{outcome=EmptyDirData}``) and
        told in a DrainBlocked Warning (the drain's first one, or one of its own for
        a pod held after that)."""
        for key, why in held.items():
            res.blocked_by[key] = why
            if key in res.held:
                continue
            DRAIN_OUTCOMES.labels(res.pool, EMPTYDIR_REASON).inc()
            if res.reported_blocked:
                message = blocking_message(node, (), {key: why})
                log.warning(message, extra={"node": node, "pool": res.pool})
                self.ctx.recorder.emit(
                    self.ctx.node_ref(node), "Warning", "DrainBlocked", "Drain", message
                )
                self._on_change(node, res.pool)
        res.held = set(held)

    async def _force_delete(self, node: str, res: DrainResult, key: str, uid: str) -> None:
        """DELETE one pod (no Eviction, no PodDisruptionBudget), with its Warning."""
        namespace, name = key.split("/", 1)
        await self.ctx.force_delete_pod(namespace, name, uid, res.grace_period)
        res.forced += 1
        DRAIN_OUTCOMES.labels(res.pool, "ForcedPod").inc()
        message = (
            f"pod {key} deleted without the Eviction API (PodDisruptionBudgets bypassed): "
            f"the drain of {node} ran out of time (onTimeout: Force)"
        )
        log.warning(message, extra={"node": node, "pool": res.pool})
        ref = ObjectRef(api_version="v1", kind="Pod", name=name, namespace=namespace, uid=uid)
        self.ctx.recorder.emit(ref, "Warning", "PodForceDeleted", "Drain", message)
