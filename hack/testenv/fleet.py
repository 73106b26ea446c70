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
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.kube import BOOTC_NODES, NODES, ApiError, create_object, patch_object

log = logging.getLogger("fleet")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(ref: str | None) -> str | None:
    return ref.split("@", 1)[1] if ref and "@" in ref else None


def _info(ref: str | None) -> dict[str, Any] | None:
    if not ref:
        return None
    return {"image": ref, "imageDigest": _digest(ref), "architecture": "amd64"}


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
        self.informer = Informer(api, BOOTC_NODES)
        self.informer.add_event_handler(
            EventHandler(
                on_add=self._changed,
                on_update=lambda _old, new: self._changed(new),
                on_delete=lambda _obj: None,
            )
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: dict[str, asyncio.Event] = {}

    # ------------------------------------------------------------ nodes

    async def add_node(self, name: str, booted: str, labels: dict[str, str] | None = None) -> None:
        """Create a Ready Node whose host runs ``booted`` (repo@digest)."""
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"conditions": [self._ready_condition(True)]},
        }
        if not self.manage_ready:
            body["status"] = {}
        await create_object(self.api, NODES, body)
        await self._set_ready(name, True)
        self.hosts[name] = Host(booted=booted)
        self._wake[name] = asyncio.Event()
        self._spawn(self._host_loop(name))

    @staticmethod
    def _ready_condition(ready: bool) -> dict[str, str]:
        return {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "simulated",
            "lastHeartbeatTime": _now(),
            "lastTransitionTime": _now(),
        }

    async def _set_ready(self, name: str, ready: bool) -> None:
        if not self.manage_ready:
            return
        patch = {"status": {"conditions": [self._ready_condition(ready)]}}
        with contextlib.suppress(ApiError):
            await patch_object(
                self.api, NODES, name, patch, patch_type="strategic", subresource="status"
            )

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
        previous = {
            cond.get("type"): cond for cond in (bn.get("status") or {}).get("conditions") or ()
        }
        conditions = []
        for ctype, (cstatus, reason, message) in (
            ("Idle", (idle[0], idle[1], "")),
            ("Degraded", ("True", "Error", fault) if fault else ("False", "Healthy", "")),
        ):
            before = previous.get(ctype)
            since = (
                before["lastTransitionTime"]
                if before is not None and before.get("status") == cstatus
                else _now()
            )
            conditions.append(
                {
                    "type": ctype,
                    "status": cstatus,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": since,
                }
            )
        status = {
            "observedGeneration": bn["metadata"].get("generation"),
            "booted": _info(host.booted),
            "staged": _info(host.staged),
            "rollback": _info(host.rollback),
            "conditions": conditions,
        }
        await patch_object(self.api, BOOTC_NODES, name, {"status": status}, subresource="status")

    async def _step(self, name: str, bn: dict[str, Any]) -> None:
        host = self.hosts[name]
        if host.down:
            return
        spec = bn.get("spec") or {}
        desired = str(spec.get("desiredImage") or "")
        if name in self.fail_stage and _digest(host.booted) != _digest(desired):
            await self._write(name, bn, ("True", "Idle"))
            return
        if _digest(host.booted) == _digest(desired):
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
