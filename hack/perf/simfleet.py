"""A lean simulated fleet for the benchmark: N daemons in one process, as a child process.

``hack.testenv.fleet.Fleet`` runs one task per node and rewrites status on every
BootcNode event; that is fine for a dozen nodes in a test, but at 5,000 the
benchmark must not measure its own fleet. This one is a small controller: one
BootcNode informer, a deduplicating delaying workqueue keyed by node name and a
bounded pool of workers, and it writes a BootcNode's status only when what it
reports changed (as the real daemon does). Behaviour per node, as DESIGN §4:

- booted == desired → ``Idle=True/Idle``;
- staged != desired → ``Idle=False/Staging``; ``stage_delay`` later staged = desired
  and ``Idle=False/Staged``;
- ``desiredImageState: Booted`` with the desired image staged → ``Idle=False/Rebooting``,
  the Node NotReady; ``reboot_delay`` later booted = staged, the Node Ready,
  ``Idle=True``.

Nodes are created by the harness; the fleet gets their names (``--prefix``,
``--count``) and the image they boot. It starts *held*: it watches but writes
nothing until told ``go`` (so a membership measurement sees the controller's
writes alone).

Protocol: one JSON object per line. stdout: ``{"ready": true}`` once the informer
synced, then one answer per command. stdin: ``go``, ``stats`` (CPU, writes by
kind, queue waits, requests by verb), ``stop``.

    python -m hack.perf.simfleet --kubeconfig K --prefix bench- --count 100 --booted REF
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from bootc_operator.informers import unwrap
from bootc_operator.kube import BOOTC_NODES, ApiError, load_api_client, patch_object
from bootc_operator.kube.rest import API_REQUESTS
from bootc_operator.workqueue import DelayingQueue, ShutDown
from hack.perf.procinfo import self_cpu
from hack.testenv.fleet import daemon_status, digest_of, set_node_ready, watch_bootc_nodes

log = logging.getLogger("simfleet")


@dataclass
class SimHost:
    booted: str
    staged: str | None = None
    rollback: str | None = None
    staging: str | None = None  # the image being staged
    stage_until: float = 0.0
    reboot_until: float | None = None
    reported: tuple[Any, ...] | None = None  # what the last status write said
    uid: str = ""


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class SimFleet:
    def __init__(
        self,
        api: Any,
        names: list[str],
        booted: str,
        *,
        stage_delay: float,
        reboot_delay: float,
        workers: int,
    ) -> None:
        self.api = api
        self.hosts = {n: SimHost(booted=booted) for n in names}
        self.stage_delay = stage_delay
        self.reboot_delay = reboot_delay
        self.workers = workers
        self.queue: DelayingQueue[str] = DelayingQueue("simfleet")
        self.informer = watch_bootc_nodes(api, self._changed)
        self.enqueued: dict[str, float] = {}
        self.waits: list[float] = []  # event -> worker picked the node up
        self.writes: dict[str, int] = {}
        self.errors = 0
        self.reboots = 0
        self.max_depth = 0
        self.cpu_at_go = 0.0
        self._workers: asyncio.Task[None] | None = None

    def _changed(self, obj: Any) -> None:
        name = unwrap(obj)["metadata"]["name"]
        if name in self.hosts:
            self.enqueued.setdefault(name, time.monotonic())
            self.queue.add(name)
            self.max_depth = max(self.max_depth, len(self.queue))

    async def start(self) -> None:
        self.informer.start()
        await self.informer.wait_for_sync()

    def go(self) -> None:
        if self._workers is None:
            self.cpu_at_go = self_cpu()
            now = time.monotonic()  # queue waits count from here, not from the hold
            self.enqueued = dict.fromkeys(self.enqueued, now)
            self._workers = asyncio.create_task(self._run())

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

    async def stop(self) -> None:
        self.queue.shut_down()
        if self._workers is not None:
            self._workers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._workers
        await self.informer.stop()

    # ------------------------------------------------------------ one node

    def _count(self, kind: str) -> None:
        self.writes[kind] = self.writes.get(kind, 0) + 1

    async def _set_ready(self, name: str, ready: bool) -> None:
        await set_node_ready(self.api, name, ready)
        self._count("node-ready" if ready else "node-notready")

    async def _report(self, name: str, bn: dict[str, Any], idle: tuple[str, str]) -> None:
        host = self.hosts[name]
        uid = bn["metadata"].get("uid", "")
        if uid != host.uid:
            host.uid, host.reported = uid, None
        what = (idle, host.booted, host.staged, host.rollback)
        if what == host.reported:
            return
        status = daemon_status(bn, host.booted, host.staged, host.rollback, idle)
        await patch_object(self.api, BOOTC_NODES, name, {"status": status}, subresource="status")
        host.reported = what
        self._count(idle[1])

    async def _step(self, name: str) -> None:
        bn = self.informer.get(name)
        if bn is None:
            return
        host = self.hosts[name]
        now = time.monotonic()
        if host.reboot_until is not None:
            if now < host.reboot_until:
                return  # still down; a delayed add brings us back
            host.rollback, host.booted, host.staged = host.booted, host.staged or host.booted, None
            host.reboot_until = None
            await self._set_ready(name, True)
        spec = bn.get("spec") or {}
        desired = str(spec.get("desiredImage") or "")
        if digest_of(desired) == digest_of(host.booted):
            host.staged = host.staging = None
            await self._report(name, bn, ("True", "Idle"))
            return
        if host.staged == desired:
            if spec.get("desiredImageState") == "Booted":
                await self._report(name, bn, ("False", "Rebooting"))
                await self._set_ready(name, False)
                host.reboot_until = now + self.reboot_delay
                self.reboots += 1
                self.queue.add_after(name, self.reboot_delay)
                return
            await self._report(name, bn, ("False", "Staged"))
            return
        if host.staging != desired:
            host.staging, host.stage_until = desired, now + self.stage_delay
            self.queue.add_after(name, self.stage_delay)
            await self._report(name, bn, ("False", "Staging"))
            return
        if now < host.stage_until:
            return
        host.staged, host.staging = desired, None
        await self._report(name, bn, ("False", "Staged"))
        if spec.get("desiredImageState") == "Booted":
            self.queue.add(name)

    # ------------------------------------------------------------ report

    def stats(self) -> dict[str, Any]:
        requests: dict[str, float] = {}
        for metric in API_REQUESTS.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    key = f"{sample.labels['verb']} {sample.labels['resource']}"
                    requests[key] = requests.get(key, 0) + sample.value
        return {
            "cpu_seconds": self_cpu(),
            "cpu_seconds_since_go": self_cpu() - self.cpu_at_go,
            "writes": dict(self.writes),
            "errors": self.errors,
            "reboots": self.reboots,
            "events_handled": len(self.waits),
            "queue_wait_p50": percentile(self.waits, 0.5),
            "queue_wait_p99": percentile(self.waits, 0.99),
            "queue_wait_max": max(self.waits, default=None),
            "max_queue_depth": self.max_depth,
            "requests": requests,
        }


async def main_async(args: argparse.Namespace) -> None:
    names = [f"{args.prefix}{i:05d}" for i in range(args.count)]
    api = await load_api_client(args.kubeconfig, max_connections=args.workers + 10)
    fleet = SimFleet(
        api,
        names,
        args.booted,
        stage_delay=args.stage_delay,
        reboot_delay=args.reboot_delay,
        workers=args.workers,
    )
    try:
        await fleet.start()
        print(json.dumps({"ready": True}), flush=True)
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            command = line.strip()
            if command in ("", "stop"):
                break
            if command == "go":
                fleet.go()
                print(json.dumps({"go": True}), flush=True)
            elif command == "stats":
                print(json.dumps(fleet.stats()), flush=True)
            else:
                print(json.dumps({"error": f"unknown command {command!r}"}), flush=True)
    finally:
        await fleet.stop()
        await api.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hack.perf.simfleet")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--booted", required=True, help="the image every host boots (repo@digest)")
    p.add_argument("--stage-delay", type=float, default=1.0)
    p.add_argument("--reboot-delay", type=float, default=3.0)
    p.add_argument("--workers", type=int, default=32)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
