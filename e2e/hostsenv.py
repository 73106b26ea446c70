"""Nodes backed by real daemon processes on simulated bootc hosts, with simulated reboots.

``HostedNodes`` creates, per node: a Node object (Ready), a simulated host
(``hack.fakebootc``) booted into a given image and trusting the test registries'
CAs, and a ``bootc-operator daemon`` process (``e2e.daemonenv.Daemons``). A
background *reboot simulator* plays the machine: when a host records a reboot
request (the daemon ran ``systemctl reboot``, or applied the update with a soft
reboot) it stops that daemon, marks the Node NotReady, performs the host's reboot
(staged → booted; full or soft, as the host says), marks it Ready, reports the
node's Ready pods Ready again as of now (``kubelet.report_pods_after_boot``) and
starts the daemon again — what a real node does, minus the firmware
(``hack.testenv.machine``, the same as the sim's node simulator). ``reboots``
lists the rebooted nodes in order, ``records`` each reboot's ``machine.Reboot``
(kind "soft" or "full", times, boot ID).

Knobs of the simulated machines: ``reboot_seconds`` (how long a Node stays down
in a full reboot, default 0), ``soft_reboot_seconds`` (in a soft one; default: a
quarter of ``reboot_seconds``) and ``hold(*names)`` / ``unhold(*names)``: a held node
that reboots stays down (daemon stopped, Node NotReady) until unheld — a slow
reboot, or a host that fails to come back. ``hold_pod_reports(*names)`` /
``release_pod_reports(*names)``: a held node comes back (Node Ready, daemon
started) but its kubelet has not reported its pods again yet, so their Ready is
still the one from before the reboot, until released; ``pod_reports`` lists
``(node, pods re-reported, wall-clock time)`` in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import NODES, ApiError, create_object
from bootc_operator.kube.rest import delete_object
from e2e.daemonenv import Daemon, Daemons
from hack.fakebootc import Host, make_host
from hack.testenv.kubelet import ready_condition, report_pods_after_boot, set_node_ready
from hack.testenv.machine import Reboot, reboot, simulate_reboots


class HostedNodes:
    def __init__(self, api: ApiClient, daemons: Daemons, root: Path) -> None:
        self.api = api
        self.daemons = daemons
        self.root = root
        self.hosts: dict[str, Host] = {}
        self.running: dict[str, Daemon] = {}
        self.reboots: list[str] = []
        self.records: list[Reboot] = []
        self._task: asyncio.Task[None] | None = None
        self._trust: list[tuple[str, Path]] = []
        self.reboot_seconds = 0.0
        self.soft_reboot_seconds: float | None = None
        self.holding: set[str] = set()
        self.pod_reports: list[tuple[str, list[str], float]] = []
        self._pods_held: dict[str, asyncio.Event] = {}
        self._reporting: set[asyncio.Task[None]] = set()

    def hold(self, *names: str) -> None:
        """A reboot of these nodes does not complete until ``unhold``."""
        self.holding.update(names)

    def unhold(self, *names: str) -> None:
        self.holding.difference_update(names)

    def hold_pod_reports(self, *names: str) -> None:
        """After a reboot these nodes' kubelets report their pods only once released."""
        for name in names:
            self._pods_held.setdefault(name, asyncio.Event())

    def release_pod_reports(self, *names: str) -> None:
        for name in names:
            held = self._pods_held.pop(name, None)
            if held is not None:
                held.set()

    async def _report_pods(self, name: str) -> None:
        held = self._pods_held.get(name)
        if held is None:
            await self._report_pods_now(name)
            return

        async def later(held: asyncio.Event) -> None:
            await held.wait()
            await self._report_pods_now(name)

        # the node and its daemon come back meanwhile; only the pods' reports wait
        task = asyncio.create_task(later(held), name=f"pod-reports-{name}")
        self._reporting.add(task)
        task.add_done_callback(self._reporting.discard)

    async def _report_pods_now(self, name: str) -> None:
        with contextlib.suppress(ApiError):  # a test that tore its pods down
            pods = await report_pods_after_boot(self.api, name)
            self.pod_reports.append((name, pods, time.time()))

    def trust(self, registry_host: str, ca_file: Path) -> None:
        """Every host (present and future) trusts ``ca_file`` for ``registry_host``."""
        self._trust.append((registry_host, ca_file))
        for host in self.hosts.values():
            host.trust_registry_ca(registry_host, ca_file)

    async def add(self, name: str, booted: str, labels: dict[str, str], **host: Any) -> Host:
        h = await asyncio.to_thread(make_host, self.root / name, booted=booted, **host)
        for registry, ca in self._trust:
            h.trust_registry_ca(registry, ca)
        self.hosts[name] = h
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [ready_condition(True)]},
        }
        await create_object(self.api, NODES, body)
        await self._set_ready(name, True)
        self.running[name] = self.daemons.start(name, h, backoff_initial="1s", backoff_max="3s")
        return h

    async def _set_ready(self, name: str, ready: bool) -> None:
        with contextlib.suppress(ApiError):
            await set_node_ready(self.api, name, ready)

    async def __aenter__(self) -> HostedNodes:
        self._task = asyncio.create_task(
            simulate_reboots(self.hosts.items, self._reboot), name="reboot-simulator"
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._reporting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.daemons.stop_all()
        for name in self.hosts:
            with contextlib.suppress(ApiError):
                await delete_object(self.api, NODES, name)

    async def _reboot(self, name: str, host: Host) -> None:
        # The machine side of the simulation polls the hosts like firmware would
        # notice a reboot; tests themselves only ever wait on API state.
        async def start() -> None:
            self.running[name] = self.daemons.start(
                name, host, backoff_initial="1s", backoff_max="3s"
            )

        done = await reboot(
            name,
            host,
            stop_daemon=self.running[name].stop,
            set_ready=lambda ready: self._set_ready(name, ready),
            start_daemon=start,
            report_pods=lambda: self._report_pods(name),
            down_seconds=self.reboot_seconds,
            soft_down_seconds=self.soft_reboot_seconds,
            held=lambda: name in self.holding,
        )
        self.records.append(done)
        self.reboots.append(name)
