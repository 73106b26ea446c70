"""Scenario helpers for the whole-system tiers (``test_system``, ``test_chaos``) on ``hack/sim``.

A ``PoolRun`` is one scenario's pool on a chosen set of the simulation's nodes:
entering it labels those nodes (``e2e.bootc.dev/scenario=<pool>``, the pool's
selector) and starts a :class:`~hack.testenv.monitor.SafetyMonitor`; ``create`` /
``patch`` / ``wait_*`` drive the pool; ``finish`` runs the monitor's final check,
stops it, prints its summary and asserts that no invariant was broken. Leaving
deletes the pool, waits until the operator has let go of every node (BootcNode
gone, managed label removed) and removes the scenario label, so the next scenario
can use the same nodes. On failure the monitor's timeline (tail) is printed.

``run_sim_cli`` / ``sim_cli`` run the ``hack/sim`` command (its Python entry point)
as a user does. ``push`` pushes a new image to the simulation's registry. ``sim_log_tails`` gives
the last lines of the node simulator's and controllers' logs (the e2e conftest
attaches them to failed reports of tests using a ``sim`` fixture).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, ApiError
from bootc_operator.kube.rest import create_object, delete_object, get_object, patch_object
from e2e.helpers import condition
from hack.simlib import Sim, SimOps
from hack.simlib.images import digest_ref
from hack.testenv.controlplane import REPO_ROOT
from hack.testenv.monitor import SafetyMonitor, Summary
from hack.testenv.pools import pool_body
from hack.testenv.procs import log_tail
from hack.testenv.waiting import wait_for

SCENARIO_LABEL = "e2e.bootc.dev/scenario"
NAMESPACE = "bootc-operator"


def run_sim_cli(
    state_dir: Path, *args: str, timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """Run ``hack/sim --dir STATE_DIR ARGS`` (its Python entry point)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "hack.simlib.cli", "--dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )


def sim_cli(state_dir: Path, *args: str, timeout: float = 300.0) -> str:
    """``run_sim_cli`` that must succeed; returns stdout."""
    res = run_sim_cli(state_dir, *args, timeout=timeout)
    assert res.returncode == 0, f"hack/sim {' '.join(args)} failed:\n{res.stderr[-4000:]}"
    return res.stdout


def digest_of(ref: str) -> str:
    return ref.rsplit("@", 1)[1]


async def push(sim: SimOps, name: str) -> str:
    """Push a new image ``name`` to the sim's registry; ``repo@sha256:...``."""
    return digest_ref(await asyncio.to_thread(sim.push_image, name))


def booted_image(sim: SimOps, node: str) -> str:
    """``repo@sha256:...`` the host of ``node`` runs (a real-bootc host: as ``bootc
    status`` says)."""
    booted = sim.booted_image(node)
    assert booted is not None, f"{node} has no booted deployment"
    return booted


def reboots_since(sim: SimOps, since: float) -> dict[str, int]:
    """Simulated reboots per node requested after ``since`` (``time.time()``)."""
    counts: dict[str, int] = {}
    for record in sim.reboots():
        if record["requested"] >= since:
            counts[record["node"]] = counts.get(record["node"], 0) + 1
    return counts


def up_to_date_on(pool: dict[str, Any], digest: str, count: int) -> bool:
    status = pool.get("status") or {}
    return (
        condition(pool, c.COND_UP_TO_DATE).get("status") == "True"
        and status.get("observedGeneration") == pool["metadata"].get("generation")
        and status.get("targetDigest") == digest
        and status.get("deployedDigest") == digest
        and status.get("updatedCount") == count
        and status.get("nodeCount") == count
    )


def sim_log_tails(sim: Sim, lines: int = 40) -> list[tuple[str, str]]:
    logs = sim.state_dir / "logs"
    names = ["nodesim", *(f"controller-{i}" for i in range(1, sim.config.controllers + 1))]
    return [(f"{name} log", log_tail(logs / f"{name}.log", lines)) for name in names]


class PoolRun:
    """One scenario's pool over ``nodes`` of ``sim``, watched by a SafetyMonitor."""

    def __init__(
        self,
        api: ApiClient,
        sim: SimOps,
        name: str,
        nodes: list[str],
        max_unavailable: int,
        **monitor_options: Any,
    ) -> None:
        """``monitor_options``: the SafetyMonitor's optional invariants."""
        self.api = api
        self.sim = sim
        self.name = name
        self.nodes = sorted(nodes)
        self.max_unavailable = max_unavailable
        self.monitor = SafetyMonitor(api, name, max_unavailable, **monitor_options)
        self.summary: Summary | None = None
        self.started = time.time()
        self._monitoring = False

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> PoolRun:
        await self._label(self.name)
        await self.monitor.start()
        self._monitoring = True
        self.started = time.time()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._monitoring:
            self._monitoring = False
            summary = await self.monitor.stop()
            if exc is not None:
                print(f"safety monitor of {self.name} (unfinished): {summary}")
                for v in summary.violations:
                    print("  violation:", v)
        if exc is not None:
            print(f"timeline of {self.name} (last 60 entries):")
            for at, what in self.monitor.timeline[-60:]:
                print(f"  {at:8.2f}s {what}")
            try:
                await self.cleanup()
            except Exception as cleanup_error:  # keep the scenario's own failure in front
                print(f"cleanup of {self.name} failed too: {cleanup_error!r}")
            return
        await self.cleanup()

    async def cleanup(self) -> None:
        """Delete the pool and wait until the operator released every node."""
        with contextlib.suppress(ApiError):
            await delete_object(self.api, BOOTC_NODE_POOLS, self.name)

        async def released() -> bool:
            for node in self.nodes:
                try:
                    bn = await get_object(self.api, BOOTC_NODES, node)
                except ApiError as err:
                    if not err.not_found:
                        raise
                else:
                    if (bn["metadata"].get("labels") or {}).get(c.POOL_LABEL) == self.name:
                        return False
                obj = await get_object(self.api, NODES, node)
                if c.MANAGED_LABEL in (obj["metadata"].get("labels") or {}):
                    return False
            return True

        await wait_for(released, 120, f"the operator to let go of the nodes of {self.name}")
        await self._label(None)

    async def _label(self, value: str | None) -> None:
        for node in self.nodes:
            body = {"metadata": {"labels": {SCENARIO_LABEL: value}}}
            await patch_object(self.api, NODES, node, body)

    # ------------------------------------------------------------ the pool

    def body(self, ref: str, **rollout: Any) -> dict[str, Any]:
        selector = {SCENARIO_LABEL: self.name}
        return pool_body(self.name, selector, ref, self.max_unavailable, **rollout)

    async def create(
        self, ref: str, *, pull_secret: str | None = None, **rollout: Any
    ) -> dict[str, Any]:
        body = self.body(ref, **rollout)
        if pull_secret:
            body["spec"]["pullSecretRef"] = {"name": pull_secret, "namespace": NAMESPACE}
        return await create_object(self.api, BOOTC_NODE_POOLS, body)

    async def patch(self, spec: dict[str, Any]) -> dict[str, Any]:
        return await patch_object(self.api, BOOTC_NODE_POOLS, self.name, {"spec": spec})

    async def set_image(self, ref: str) -> dict[str, Any]:
        return await self.patch({"image": {"ref": ref}})

    async def get(self) -> dict[str, Any]:
        return await get_object(self.api, BOOTC_NODE_POOLS, self.name)

    async def wait(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float,  # noqa: ASYNC109 (a polling deadline)
        what: str,
    ) -> dict[str, Any]:
        """Wait until ``predicate(pool)``; returns that pool."""

        last: list[dict[str, Any]] = []

        async def check() -> dict[str, Any] | None:
            pool = await self.get()
            last[:] = [pool]
            return pool if predicate(pool) else None

        try:
            found: dict[str, Any] | None = await wait_for(
                check, timeout, f"{self.name}: {what}", interval=0.3
            )
        except AssertionError as exc:
            status = last[0].get("status") if last else None
            raise AssertionError(f"{exc}; the pool's last status: {status}") from None
        assert found is not None
        return found

    async def wait_up_to_date(
        self,
        digest: str,
        timeout: float = 120.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        count = len(self.nodes)
        return await self.wait(
            lambda p: up_to_date_on(p, digest, count), timeout, f"all {count} nodes on {digest}"
        )

    async def wait_degraded(
        self,
        reason: str,
        fragments: tuple[str, ...],
        timeout: float = 90.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        def matches(pool: dict[str, Any]) -> bool:
            deg = condition(pool, c.COND_DEGRADED)
            message = deg.get("message", "")
            return (
                deg.get("status") == "True"
                and deg.get("reason") == reason
                and all(f in message for f in fragments)
            )

        return await self.wait(matches, timeout, f"Degraded/{reason} mentioning {fragments}")

    async def bootc_node(self, node: str) -> dict[str, Any]:
        return await get_object(self.api, BOOTC_NODES, node)

    async def wait_nodes(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        nodes: list[str] | None,
        timeout: float,  # noqa: ASYNC109
        what: str,
    ) -> None:
        """Wait until ``predicate(BootcNode)`` holds for every node of ``nodes`` (default all)."""

        async def check() -> bool:
            for node in nodes or self.nodes:
                if not predicate(await self.bootc_node(node)):
                    return False
            return True

        await wait_for(check, timeout, f"{self.name}: {what}", interval=0.3, ignore=(ApiError,))

    # ------------------------------------------------------------ the end

    async def finish(self, target_digest: str, exclude: tuple[str, ...] = ()) -> Summary:
        """Final invariants, monitor stopped, summary printed; fails on any violation."""
        await self.monitor.final_check(target_digest, exclude)
        self._monitoring = False
        summary = await self.monitor.stop()
        self.summary = summary
        print(f"safety monitor of {self.name}: {summary}")
        assert summary.violations == [], summary.violations
        return summary
