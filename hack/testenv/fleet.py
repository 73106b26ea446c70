"""A simulated fleet: Nodes plus in-process stand-ins for the daemons, for controller tests.

The controller's tests (and the benchmark) need nodes that behave like bootc
hosts without running one daemon process each. ``Fleet`` creates Node objects
(Ready) and watches BootcNodes with the project's informer; for each one it
plays the daemon's part of DESIGN §4 by writing ``BootcNode.status``:

- booted == desired → ``Idle=True/Idle``;
- staged != desired → ``Idle=False/Staging``, after ``stage_delay`` staged =
  desired and ``Idle=False/Staged``;
- ``desiredImageState: Booted`` with the desired image staged →
  ``Idle=False/Rebooting``, the Node turns NotReady for ``reboot_delay``, then
  booted = staged (old booted becomes rollback), Node Ready, ``Idle=True``.

Faults per node: ``fail_stage[node] = "error text"`` (Degraded=True/Error, no
stage), ``never_ready`` (after a reboot the Node stays NotReady and the host
never reports back). ``reboots`` records (node, time) of every reboot.

The daemon's and the kubelet's writes also serve the benchmark (``hack.perf.simfleet``,
``hack.perf.daemons``) and ``e2e.hostsenv``: :func:`watch_bootc_nodes`,
:func:`daemon_status` (the ``BootcNode.status`` a daemon reports),
:func:`ready_condition` / :func:`set_node_ready` (a Node's Ready condition) and
:func:`digest_of`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.kube import BOOTC_NODES, NODES, ApiError, create_object, patch_object

log = logging.getLogger("fleet")


def timestamp() -> str:
    """Now, as the API's conditions spell it (whole seconds, UTC)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    degraded: tuple[str, str, str] = ("False", "Healthy", ""),
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
    return {
        "observedGeneration": bn["metadata"].get("generation"),
        "booted": _info(booted),
        "staged": _info(staged),
        "rollback": _info(rollback),
        "conditions": conditions,
    }


def ready_condition(ready: bool, message: str = "simulated") -> dict[str, str]:
    """A Node's Ready condition as its kubelet writes it (KubeletReady/KubeletNotReady)."""
    stamp = timestamp()
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


async def set_node_ready(
    api: ApiClient, name: str, ready: bool, message: str = "simulated"
) -> None:
    """Patch Node ``name``'s Ready condition (status subresource), as its kubelet would."""
    patch = {"status": {"conditions": [ready_condition(ready, message)]}}
    await patch_object(api, NODES, name, patch, patch_type="strategic", subresource="status")


@dataclass
class Host:
    booted: str
    staged: str | None = None
    rollback: str | None = None
    down: bool = False
    busy: bool = False


class Fleet:
    def __init__(
        self,
        api: ApiClient,
        *,
        stage_delay: float = 0.2,
        reboot_delay: float = 0.5,
        manage_ready: bool = True,
    ) -> None:
        self.api = api
        # False when kwok owns the Nodes' status (it keeps them Ready).
        self.manage_ready = manage_ready
        self.stage_delay = stage_delay
        self.reboot_delay = reboot_delay
        self.hosts: dict[str, Host] = {}
        self.fail_stage: dict[str, str] = {}
        self.never_ready: set[str] = set()
        self.reboots: list[tuple[str, float]] = []
        self.informer = watch_bootc_nodes(api, self._changed)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: dict[str, asyncio.Event] = {}

    # ------------------------------------------------------------ nodes

    async def add_node(self, name: str, booted: str, labels: dict[str, str] | None = None) -> None:
        """Create a Ready Node whose host runs ``booted`` (repo@digest)."""
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"conditions": [ready_condition(True)]} if self.manage_ready else {},
        }
        await create_object(self.api, NODES, body)
        await self._set_ready(name, True)
        self.hosts[name] = Host(booted=booted)
        self._wake[name] = asyncio.Event()
        self._spawn(self._host_loop(name))

    async def _set_ready(self, name: str, ready: bool) -> None:
        if not self.manage_ready:
            return
        with contextlib.suppress(ApiError):
            await set_node_ready(self.api, name, ready)

    # ------------------------------------------------------------ running

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        self.informer.start()
        await self.informer.wait_for_sync()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.informer.stop()

    def _changed(self, obj: Any) -> None:
        name = unwrap(obj)["metadata"]["name"]
        if name in self._wake:
            self._wake[name].set()

    def poke(self, name: str) -> None:
        """Re-evaluate a host (e.g. after clearing a fault)."""
        self._wake[name].set()

    async def _host_loop(self, name: str) -> None:
        wake = self._wake[name]
        while True:
            await wake.wait()
            wake.clear()
            bn = self.informer.get(name)
            if bn is None:
                continue
            try:
                await self._step(name, bn)
            except ApiError as err:
                log.debug("fleet %s: %s", name, err)
                wake.set()
                await asyncio.sleep(0.1)

    async def _write(self, name: str, bn: dict[str, Any], idle: tuple[str, str]) -> None:
        host = self.hosts[name]
        fault = self.fail_stage.get(name)
        degraded = ("True", "Error", fault) if fault else ("False", "Healthy", "")
        status = daemon_status(bn, host.booted, host.staged, host.rollback, idle, degraded)
        await patch_object(self.api, BOOTC_NODES, name, {"status": status}, subresource="status")

    async def _step(self, name: str, bn: dict[str, Any]) -> None:
        host = self.hosts[name]
        if host.down:
            return
        spec = bn.get("spec") or {}
        desired = str(spec.get("desiredImage") or "")
        if name in self.fail_stage and digest_of(host.booted) != digest_of(desired):
            await self._write(name, bn, ("True", "Idle"))
            return
        if digest_of(host.booted) == digest_of(desired):
            host.staged = None
            await self._write(name, bn, ("True", "Idle"))
            return
        if host.staged != desired:
            await self._write(name, bn, ("False", "Staging"))
            await asyncio.sleep(self.stage_delay)
            host.staged = desired
            latest = self.informer.get(name) or bn
            await self._write(name, latest, ("False", "Staged"))
            self._wake[name].set()  # desiredImageState may already be Booted
            return
        if spec.get("desiredImageState") == "Booted":
            await self._write(name, bn, ("False", "Rebooting"))
            host.down = True
            self.reboots.append((name, time.monotonic()))
            await self._set_ready(name, False)
            await asyncio.sleep(self.reboot_delay)
            if name in self.never_ready:
                return
            host.rollback, host.booted, host.staged = host.booted, desired, None
            host.down = False
            await self._set_ready(name, True)
            latest = self.informer.get(name) or bn
            await self._write(name, latest, ("True", "Idle"))
            return
        await self._write(name, bn, ("False", "Staged"))
