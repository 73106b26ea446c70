"""Helpers for the daemon's e2e tests: daemon subprocesses on bootc hosts, BootcNodes.

``Daemons`` starts ``bootc-operator daemon`` as a real subprocess (the venv's console
script) for a node, pointed at a host (``e2e.hostkit``): on a fake one
(``hack.fakebootc``) the default ``--host-exec`` nsenter line resolves to the host's
shim because the host's ``bin/`` comes first on ``PATH``; on a real one
(``hack.realbootc``) it is the real nsenter targeting the host's PID 1. Probe and
metrics ports are picked free. ``stop_all()`` (called by the fixture whatever happens)
SIGTERMs every daemon, SIGKILLs it after a grace period, and stops any unit still
running on the hosts.

``NodeLog`` watches one BootcNode with the project's informer and records every
status the API server held, so a test can assert a *sequence* (Staging before
Staged) without racing the daemon.

``Daemons.reboot(daemon)`` is the simulated reboot of a host whose daemon asked for
one (or of any host): the daemon stops as it would at shutdown, the host boots
(``Host.reboot``: a queued rollback or the staged image, and this boot's assessment
decided), a new daemon starts with the same flags.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODES, ApiError, create_object, get_object, patch_object
from bootc_operator.kube.rest import delete_object
from e2e.helpers import condition
from e2e.hostkit import AnyHost
from hack.testenv.controlplane import free_port
from hack.testenv.procs import Process, spawn

SWITCH_UNIT = "bootc-operator-switch.service"


# ------------------------------------------------------------------ daemons


@dataclass
class Daemon:
    node: str
    host: AnyHost
    process: Process
    metrics_port: int
    probe_port: int
    #: the keyword arguments of ``Daemons.start`` (a restart after a reboot reuses them)
    flags: dict[str, Any] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.process.alive()

    def log(self, lines: int = 60) -> str:
        return self.process.tail(lines)

    async def get(self, path: str) -> tuple[int, str]:
        port = self.metrics_port if path == "/metrics" else self.probe_port
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{path}") as resp,
        ):
            return resp.status, await resp.text()

    async def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM (SIGKILL after ``grace``); the exit code (negative: killed by a signal)."""
        await asyncio.to_thread(self.process.stop, grace)
        return self.process.returncode()


@dataclass
class Daemons:
    kubeconfig: Path
    log_dir: Path
    started: list[Daemon] = field(default_factory=list)

    def start(
        self,
        node: str,
        host: AnyHost,
        *,
        poll_interval: str = "1h",
        stage_timeout: str = "5m",
        bootc_timeout: str = "30s",
        backoff_initial: str = "1s",
        backoff_max: str = "2s",
        extra: tuple[str, ...] = (),
        kubeconfig: Path | None = None,
    ) -> Daemon:
        """Start a daemon for ``node`` on ``host`` (``kubeconfig``: other credentials)."""
        flags = {
            "poll_interval": poll_interval,
            "stage_timeout": stage_timeout,
            "bootc_timeout": bootc_timeout,
            "backoff_initial": backoff_initial,
            "backoff_max": backoff_max,
            "extra": extra,
            "kubeconfig": kubeconfig,
        }
        metrics_port, probe_port = free_port(), free_port()
        argv, env = host.daemon_command(
            node, kubeconfig or self.kubeconfig, metrics_port, probe_port
        )
        argv += [
            "--poll-interval",
            poll_interval,
            "--stage-timeout",
            stage_timeout,
            "--bootc-timeout",
            bootc_timeout,
            "--backoff-initial",
            backoff_initial,
            "--backoff-max",
            backoff_max,
            "--log-level",
            "debug",
            *extra,
        ]
        env["PYTHONUNBUFFERED"] = "1"
        index = len(self.started)
        process = spawn(
            f"daemon-{node}", argv, self.log_dir / f"daemon-{index}-{node}.log", env=env
        )
        daemon = Daemon(node, host, process, metrics_port, probe_port, dict(flags))
        self.started.append(daemon)
        return daemon

    async def reboot(self, daemon: Daemon) -> Daemon:
        """Stop ``daemon``, reboot its host, start a new daemon like it (module docstring)."""
        assert await daemon.stop() == 0, daemon.log()
        await asyncio.to_thread(daemon.host.reboot)
        return self.start(daemon.node, daemon.host, **daemon.flags)

    async def stop_all(self) -> None:
        """Stop every daemon and host unit; print the daemons' logs (shown on failure)."""
        for daemon in self.started:
            if daemon.alive():
                await daemon.stop()
            print(f"===== daemon {daemon.node} ({daemon.process.describe_exit()}) =====")
            print(daemon.log(200))
        for host in {d.host.root: d.host for d in self.started}.values():
            with contextlib.suppress(Exception):
                host.clear_faults()
            for unit in host.active_units():
                await asyncio.to_thread(host.run, "systemctl", "stop", unit)


# ------------------------------------------------------------------ BootcNodes


def bootc_node_body(name: str, desired: str, state: str = "Staged", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": {"name": name},
        "spec": {"desiredImage": desired, "desiredImageState": state, **spec},
    }


async def create_bootc_node(
    api: ApiClient, name: str, desired: str, state: str = "Staged", **spec: Any
) -> dict[str, Any]:
    return await create_object(api, BOOTC_NODES, bootc_node_body(name, desired, state, **spec))


async def get_bootc_node(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_object(api, BOOTC_NODES, name)


async def set_spec(api: ApiClient, name: str, **spec: Any) -> dict[str, Any]:
    """Merge-patch ``spec`` (``None`` values remove fields)."""
    return await patch_object(api, BOOTC_NODES, name, {"spec": spec})


async def reboot_node(
    api: ApiClient, name: str, *, drained: bool = True, desired: str | None = None
) -> dict[str, Any]:
    """``desiredImageState: Booted``, with the rollout's slot and reboot-requested
    annotations in the same request as the rollout writes them (``drained``), or by
    hand without them; with ``desired`` also ``desiredImage`` (how the controller rolls
    a node back: its rollback deployment, in the same write)."""
    patch: dict[str, Any] = {"spec": {"desiredImageState": "Booted"}}
    if desired is not None:
        patch["spec"]["desiredImage"] = desired
    if drained:
        now = "2026-01-01T00:00:00Z"
        patch["metadata"] = {
            "annotations": {
                c.IN_REBOOT_SLOT_ANNOTATION: now,
                c.WAS_CORDONED_ANNOTATION: "false",
                c.REBOOT_REQUESTED_ANNOTATION: now,
            }
        }
    return await patch_object(api, BOOTC_NODES, name, patch)


async def delete_bootc_node(api: ApiClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        await delete_object(api, BOOTC_NODES, name)


def idle_reason(obj: dict[str, Any] | None) -> str | None:
    return condition(obj, c.COND_IDLE).get("reason")


def is_degraded(obj: dict[str, Any] | None) -> bool:
    return condition(obj, c.COND_DEGRADED).get("status") == "True"


def degraded_message(obj: dict[str, Any] | None) -> str:
    cond = condition(obj, c.COND_DEGRADED)
    return str(cond.get("message", "")) if cond.get("status") == "True" else ""


def slot_image(obj: dict[str, Any] | None, slot: str) -> str | None:
    info = ((obj or {}).get("status") or {}).get(slot)
    return None if not info else str(info.get("image"))


def boot_assessment(obj: dict[str, Any] | None) -> tuple[str | None, str]:
    """``status.bootAssessment`` as (state, message); (None, "") when there is none."""
    found = ((obj or {}).get("status") or {}).get("bootAssessment") or {}
    return found.get("state"), str(found.get("message") or "")


def settled(obj: dict[str, Any] | None) -> bool:
    """The daemon has reported on the object's current generation."""
    if not obj:
        return False
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") == obj["metadata"].get("generation"))


class NodeLog:
    """Every version of one BootcNode seen through a watch, oldest first."""

    def __init__(self, api: ApiClient, name: str) -> None:
        self.name = name
        self.versions: list[dict[str, Any]] = []
        self.informer = Informer(api, BOOTC_NODES, field_selector=f"metadata.name={name}")
        self.informer.add_event_handler(
            EventHandler(
                on_add=self.versions.append, on_update=lambda _o, n: self.versions.append(n)
            )
        )

    async def __aenter__(self) -> NodeLog:
        self.informer.start()
        await self.informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.informer.stop()

    @property
    def current(self) -> dict[str, Any] | None:
        return self.informer.get(self.name)

    def idle_reasons(self) -> list[str]:
        """Idle reasons in the order they were reported, consecutive repeats collapsed."""
        out: list[str] = []
        for obj in self.versions:
            reason = idle_reason(obj)
            if reason and (not out or out[-1] != reason):
                out.append(reason)
        return out

    def ever(self, predicate: Callable[[dict[str, Any]], bool]) -> bool:
        return any(predicate(obj) for obj in self.versions)
