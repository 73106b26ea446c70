"""The simulated fleet: every node's bootc daemon, played in one process.

The controller's e2e tests and the benchmark (``hack.perf.simfleet`` runs this in
its own process, up to 5,000 nodes) need nodes that behave like bootc hosts
without one daemon process each. ``Fleet`` is a small controller of its own: one
BootcNode informer, a deduplicating delaying workqueue keyed by node name and a
bounded pool of workers; it writes a BootcNode's status only when what it reports
changed (as the real daemon does), so at scale the benchmark does not measure its
own fleet. Per node, as DESIGN §4:

- booted == desired → ``Idle=True/Idle``;
- staged != desired → ``Idle=False/Staging``; ``stage_delay`` later staged = desired
  and ``Idle=False/Staged``;
- ``desiredImageState: Booted`` with the desired image staged → ``Idle=False/Rebooting``,
  the Node NotReady; ``reboot_delay`` later booted = staged (the old booted becomes
  rollback), the Node Ready, ``Idle=True``.

Nodes: :meth:`Fleet.add_node` creates a Ready Node and plays its daemon;
:meth:`Fleet.adopt` plays the daemons of Nodes someone else created (the
benchmark's). With ``manage_ready=False`` someone else (kwok) owns Node status.
:meth:`Fleet.start` with ``hold=True`` watches but writes nothing until
:meth:`Fleet.go` (so a membership measurement sees the controller's writes alone).

Faults per node: ``fail_stage[node] = "error text"`` (``Degraded=True/Error``, no
stage); ``never_ready`` (a reboot does not end: the Node stays NotReady and the host
reports nothing until the node leaves the set and is :meth:`Fleet.poke` d);
:meth:`Fleet.detach` (the daemon stops reporting for good). ``reboots`` records
(node, monotonic time) of every reboot; ``writes`` (by kind), ``errors``,
``waits`` (event → a worker picked the node up) and ``max_depth`` are the
benchmark's figures.

Also the building blocks of every simulated daemon: :func:`daemon_status` (the
``BootcNode.status`` a daemon reports), :func:`watch_bootc_nodes` and
:func:`digest_of`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api.kstatus import set_kstatus
from bootc_operator.daemon.status_report import node_kstatus
from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.kube import BOOTC_NODES, NODES, ApiError, create_object, patch_object
from bootc_operator.workqueue import DelayingQueue, ShutDown
from hack.testenv.kubelet import ready_condition, set_node_ready, timestamp

log = logging.getLogger("fleet")

HEALTHY = ("False", "Healthy", "")
KSTATUS_TYPES = ("Ready", "Reconciling", "Stalled")


def digest_of(ref: str | None) -> str | None:
    """``sha256:...`` of ``repo@sha256:...``; None for a ref without a digest."""
    return ref.split("@", 1)[1] if ref and "@" in ref else None


def _info(ref: str | None) -> dict[str, Any] | None:
    if not ref:
        return None
    return {"image": ref, "imageDigest": digest_of(ref), "architecture": "amd64"}


def watch_bootc_nodes(api: ApiClient, changed: Callable[[Any], None]) -> Informer:
    """A BootcNode informer (not started) that calls ``changed(obj)`` on every add and update."""
    informer = Informer(api, BOOTC_NODES)
    informer.add_event_handler(
        EventHandler(
            on_add=changed,
            on_update=lambda _old, new: changed(new),
            on_delete=lambda _obj: None,
        )
    )
    return informer


def daemon_status(
    bn: dict[str, Any],
    booted: str | None,
    staged: str | None,
    rollback: str | None,
    idle: tuple[str, str],
    degraded: tuple[str, str, str] = HEALTHY,
) -> dict[str, Any]:
    """The ``status`` a daemon writes to BootcNode ``bn``: its images and conditions.

    ``idle`` is Idle's (status, reason), ``degraded`` Degraded's (status, reason,
    message); a condition keeps its ``lastTransitionTime`` while its status holds.
    """
    previous = {cond.get("type"): cond for cond in (bn.get("status") or {}).get("conditions") or ()}
    conditions = []
    for ctype, (cstatus, reason, message) in (("Idle", (*idle, "")), ("Degraded", degraded)):
        before = previous.get(ctype) or {}
        since = timestamp()
        if before.get("status") == cstatus and before.get("lastTransitionTime"):
            since = before["lastTransitionTime"]
        conditions.append(
            {
                "type": ctype,
                "status": cstatus,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since,
            }
        )
    generation = bn["metadata"].get("generation")
    desired_state = (bn.get("spec") or {}).get("desiredImageState")
    # kstatus's conditions as the real daemon derives them (keeping their times)
    conditions = set_kstatus(
        [*conditions, *(previous[t] for t in KSTATUS_TYPES if t in previous)],
        node_kstatus(conditions, desired_state),
        observed_generation=generation,
    )
    return {
        "observedGeneration": generation,
        "booted": _info(booted),
        "staged": _info(staged),
        "rollback": _info(rollback),
        "conditions": conditions,
    }


@dataclass
class SimHost:
    """One simulated host: its images and where its daemon is in staging or a reboot."""

    booted: str
    staged: str | None = None
    rollback: str | None = None
    staging: str | None = None  # the image being staged
    stage_until: float = 0.0
    reboot_until: float | None = None
    reported: tuple[Any, ...] | None = None  # what the last status write said
    uid: str = ""  # of the BootcNode reported to (a new one gets a fresh report)
    detached: bool = False


class Fleet:
    """See the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        *,
        stage_delay: float = 0.2,
        reboot_delay: float = 0.5,
        workers: int = 8,
        manage_ready: bool = True,
    ) -> None:
        self.api = api
        self.stage_delay = stage_delay
        self.reboot_delay = reboot_delay
        self.workers = workers
        # False when kwok owns the Nodes' status (it keeps them Ready).
        self.manage_ready = manage_ready
        self.hosts: dict[str, SimHost] = {}
        self.fail_stage: dict[str, str] = {}
        self.never_ready: set[str] = set()
        self.reboots: list[tuple[str, float]] = []
        self.queue: DelayingQueue[str] = DelayingQueue("fleet")
        self.informer = watch_bootc_nodes(api, self._changed)
        self.enqueued: dict[str, float] = {}
        self.waits: list[float] = []
        self.writes: dict[str, int] = {}
        self.errors = 0
        self.max_depth = 0
        self._workers: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ nodes

    def adopt(self, names: Iterable[str], booted: str) -> None:
        """Play the daemons of existing Nodes ``names``, whose hosts run ``booted``."""
        for name in names:
            self.hosts[name] = SimHost(booted=booted)
            self.poke(name)

    async def add_node(self, name: str, booted: str, labels: dict[str, str] | None = None) -> None:
        """Create a Ready Node whose host runs ``booted`` (repo@digest)."""
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"conditions": [ready_condition(True)]} if self.manage_ready else {},
        }
        await create_object(self.api, NODES, body)
        with contextlib.suppress(ApiError):
            await self._set_ready(name, True)
        self.adopt([name], booted)

    def poke(self, name: str) -> None:
        """Re-evaluate a host (e.g. after clearing a fault)."""
        self._changed({"metadata": {"name": name}})

    def detach(self, name: str) -> None:
        """The daemon of ``name`` stops: from now on it reports nothing."""
        self.hosts[name].detached = True

    def forget(self, name: str) -> None:
        """Stop playing ``name`` (its Node is gone)."""
        self.hosts.pop(name, None)

    # ------------------------------------------------------------ running

    async def start(self, *, hold: bool = False) -> None:
        self.informer.start()
        await self.informer.wait_for_sync()
        if not hold:
            self.go()

    def go(self) -> None:
        """Start writing (the workers), after a ``start(hold=True)``."""
        if self._workers is None:
            now = time.monotonic()  # queue waits count from here, not from the hold
            self.enqueued = dict.fromkeys(self.enqueued, now)
            self._workers = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self.queue.shut_down()
        if self._workers is not None:
            self._workers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._workers
        await self.informer.stop()

    def _changed(self, obj: Any) -> None:
        name = unwrap(obj)["metadata"]["name"]
        if name in self.hosts:
            self.enqueued.setdefault(name, time.monotonic())
            self.queue.add(name)
            self.max_depth = max(self.max_depth, len(self.queue))

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(self.workers):
                tg.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            try:
                name = await self.queue.get()
            except ShutDown:
                return
            try:
                started = self.enqueued.pop(name, None)
                if started is not None:
                    self.waits.append(time.monotonic() - started)
                await self._step(name)
            except ApiError as err:
                self.errors += 1
                log.debug("fleet %s: %s", name, err)
                self.queue.add_after(name, 0.2)
            except Exception:
                self.errors += 1
                log.exception("fleet step failed for %s", name)
                self.queue.add_after(name, 0.5)
            finally:
                self.queue.done(name)

    # ------------------------------------------------------------ one node

    def _count(self, kind: str) -> None:
        self.writes[kind] = self.writes.get(kind, 0) + 1

    async def _set_ready(self, name: str, ready: bool) -> None:
        if not self.manage_ready:
            return
        await set_node_ready(self.api, name, ready)
        self._count("node-ready" if ready else "node-notready")

    async def _report(
        self, name: str, host: SimHost, bn: dict[str, Any], idle: tuple[str, str]
    ) -> None:
        uid = bn["metadata"].get("uid", "")
        if uid != host.uid:
            host.uid, host.reported = uid, None
        fault = self.fail_stage.get(name)
        degraded = ("True", "Error", fault) if fault else HEALTHY
        what = (idle, degraded, host.booted, host.staged, host.rollback)
        if what == host.reported:
            return
        status = daemon_status(bn, host.booted, host.staged, host.rollback, idle, degraded)
        await patch_object(self.api, BOOTC_NODES, name, {"status": status}, subresource="status")
        host.reported = what
        self._count(idle[1])

    async def _step(self, name: str) -> None:
        host = self.hosts.get(name)
        bn = self.informer.get(name)
        if host is None or bn is None or host.detached:
            return
        now = time.monotonic()
        if host.reboot_until is not None:
            if now < host.reboot_until or name in self.never_ready:
                return  # still down; a delayed add (or a poke) brings us back
            host.rollback, host.booted, host.staged = host.booted, host.staged or host.booted, None
            host.reboot_until = None
            await self._set_ready(name, True)
        spec = bn.get("spec") or {}
        desired = str(spec.get("desiredImage") or "")
        if digest_of(desired) == digest_of(host.booted) or name in self.fail_stage:
            if digest_of(desired) == digest_of(host.booted):
                host.staged = host.staging = None
            await self._report(name, host, bn, ("True", "Idle"))
            return
        if host.staged == desired:
            if spec.get("desiredImageState") == "Booted":
                await self._report(name, host, bn, ("False", "Rebooting"))
                await self._set_ready(name, False)
                host.reboot_until = now + self.reboot_delay
                self.reboots.append((name, now))
                self.queue.add_after(name, self.reboot_delay)
                return
            await self._report(name, host, bn, ("False", "Staged"))
            return
        if host.staging != desired:
            host.staging, host.stage_until = desired, now + self.stage_delay
            self.queue.add_after(name, self.stage_delay)
            await self._report(name, host, bn, ("False", "Staging"))
            return
        if now < host.stage_until:
            return
        host.staged, host.staging = desired, None
        await self._report(name, host, bn, ("False", "Staged"))
        if spec.get("desiredImageState") == "Booted":
            self.queue.add(name)
