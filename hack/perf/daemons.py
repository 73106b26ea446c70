"""Figure 5: what the real daemon costs, with N real ``bootc-operator daemon`` processes.

Each daemon runs on a simulated bootc host (``hack.fakebootc``) with the
production defaults (poll every 5 minutes, inotify on ``/ostree/bootc``), against
a fresh etcd + kube-apiserver, with the controller process driving a pool.

1. **idle**: every node reports Idle on image A; then over ``idle_seconds`` the
   daemons' own CPU (utime + stime; children such as the fake ``bootc`` are not
   counted: a real bootc's cost is not the daemon's) and RSS. No poll falls in
   the window, so a poll's cost is measured apart: ``rereads`` touches of
   ``/ostree/bootc`` (inotify → the same status re-read a poll does).
   CPU per hour idle = window rate * 3600 + 12 polls * one re-read.
2. **rollout**: retarget the pool to image B (maxUnavailable 10 %). When a host
   asks for a reboot the harness does what the machine would
   (``hack.testenv.machine``): the daemon stops (its request counters are read
   first), the Node turns NotReady, ``reboot_seconds`` later the host boots the
   staged image, the Node is Ready again and a new daemon starts. API requests
   per node per rollout = every daemon process's
   ``bootc_operator_api_requests_total`` summed over both lives / N.
   **Start-up** of each daemon started after a reboot: process start (its spawn) to
   the first status write of the new life (the observer's first event with the
   new booted image), median and max: the daemon's imports, the host commands it
   runs before the write (on these simulated hosts each is a Python shim) and its
   first requests.
3. **soft rollout** (unless ``soft_rollout=False``): the same pool retargeted to image
   C with ``rebootPolicy: AllowSoftReboot``. The images share the simulated hosts'
   default kernel, so the real daemons soft-reboot (``bootc upgrade --from-downloaded
   --apply --soft-reboot=required``) and the machine keeps each Node down
   ``soft_reboot_seconds`` (default a quarter of ``reboot_seconds``,
   ``hack.testenv.machine``) instead of ``reboot_seconds``. Its time against the full
   rollout's is the soft/full figure; the reboots are counted by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    NODES,
    create_object,
    load_api_client,
    patch_object,
)
from hack.fakebootc import Host, make_host
from hack.perf import components as comp
from hack.perf.images import digest, image
from hack.perf.nodes import bounded
from hack.perf.observer import BnFacts, Observer
from hack.perf.procinfo import proc_mem
from hack.perf.scale import PREFIX, bench_pool, log, node_body
from hack.testenv import ControlPlane
from hack.testenv.controlplane import free_port
from hack.testenv.kubelet import set_node_ready
from hack.testenv.machine import SOFT_DOWN_FRACTION, reboot, simulate_reboots
from hack.testenv.procs import Process, spawn


@dataclass
class DaemonProc:
    index: int
    node: str
    host: Host
    process: Process
    metrics_port: int

    async def requests(self) -> comp.Requests:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as resp,
        ):
            return comp.client_requests(await resp.text())


@dataclass
class DaemonFleet:
    kubeconfig: Path
    log_dir: Path
    running: dict[str, DaemonProc] = field(default_factory=dict)
    lives: int = 0
    spawned: dict[str, float] = field(default_factory=dict)  # node -> monotonic, last life

    async def start(self, index: int, node: str, host: Host) -> DaemonProc:
        """Start a daemon and wait for its /metrics; again on new ports if one was taken."""
        for attempt in range(3):
            daemon = self._spawn(index, node, host)
            for _ in range(300):
                if not daemon.process.alive():
                    break
                try:
                    await daemon.requests()
                    return daemon
                except (aiohttp.ClientError, OSError, TimeoutError):
                    await asyncio.sleep(0.1)
            daemon.process.stop(grace=5)
            if attempt == 2 or "address already in use" not in daemon.process.tail():
                raise RuntimeError(f"daemon {node} did not start:\n{daemon.process.tail()}")
        raise AssertionError("unreachable")

    def _spawn(self, index: int, node: str, host: Host) -> DaemonProc:
        metrics_port = free_port()
        argv, env = host.daemon_command(node, self.kubeconfig, metrics_port, free_port())
        self.lives += 1
        self.spawned[node] = time.monotonic()
        process = spawn(f"daemon-{node}", argv, self.log_dir / f"daemon-{node}.log", env=env)
        daemon = DaemonProc(index, node, host, process, metrics_port)
        self.running[node] = daemon
        return daemon

    def stop_all(self) -> None:
        for daemon in self.running.values():
            daemon.process.stop(grace=10)


def _stat_cpu(pid: int) -> tuple[float, float]:
    """(own CPU seconds, waited-for children's CPU seconds) of ``pid``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return 0.0, 0.0
    tck = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tck, (int(fields[13]) + int(fields[14])) / tck


async def run_daemons(
    cp: ControlPlane,
    n: int,
    *,
    idle_seconds: float,
    reboot_seconds: float,
    rereads: int,
    log_dir: Path,
    work_dir: Path,
    soft_reboot_seconds: float | None = None,
    soft_rollout: bool = True,
) -> dict[str, Any]:
    m = max(1, math.ceil(n * 0.10))
    result: dict[str, Any] = {"daemons": n, "max_unavailable": m}
    api = await load_api_client(cp.kubeconfig)
    daemons = DaemonFleet(cp.kubeconfig, log_dir)
    observer = Observer(api, PREFIX)
    controller: comp.Controller | None = None
    try:
        names = [f"{PREFIX}{i:05d}" for i in range(n)]
        hosts = [
            await asyncio.to_thread(make_host, work_dir / name, booted=image(1), version="1")
            for name in names
        ]

        async def create_node(i: int) -> None:
            await create_object(api, NODES, node_body(i))

        await bounded(n, 8, create_node)
        await observer.start()
        controller, _ = await comp.run_controller(cp.kubeconfig, log_dir)
        await asyncio.gather(*(daemons.start(i, names[i], hosts[i]) for i in range(n)))
        await create_object(api, BOOTC_NODE_POOLS, bench_pool(image(1), m))
        await observer.wait(
            lambda: observer.count(("idle-on", digest(1))) >= n and observer.pool_up_to_date,
            300,
            "every daemon reporting Idle on A",
        )
        log(f"daemons: {n} daemons idle; measuring {idle_seconds:.0f}s")
        await asyncio.sleep(5.0)  # past start-up work

        # ---------------------------------------------------------- idle
        procs = list(daemons.running.values())
        before = [_stat_cpu(d.process.pid) for d in procs]
        await asyncio.sleep(idle_seconds)
        after = [_stat_cpu(d.process.pid) for d in procs]
        own = [a[0] - b[0] for a, b in zip(after, before, strict=True)]
        rss = [proc_mem(d.process.pid).get("VmRSS", 0.0) for d in procs]
        hwm = [proc_mem(d.process.pid).get("VmHWM", 0.0) for d in procs]
        # one status re-read per touch (inotify IN_ATTRIB, what a poll also does)
        before = [_stat_cpu(d.process.pid) for d in procs]
        for _ in range(rereads):
            for d in procs:
                os.utime(d.host.paths.ostree_bootc)
            await asyncio.sleep(1.0)
        await asyncio.sleep(1.0)
        after = [_stat_cpu(d.process.pid) for d in procs]
        reread_own = sum(a[0] - b[0] for a, b in zip(after, before, strict=True)) / (n * rereads)
        reread_child = sum(a[1] - b[1] for a, b in zip(after, before, strict=True)) / (n * rereads)
        base_rate = sum(own) / n / idle_seconds  # CPU s per s per daemon
        polls_per_hour = 3600 / 300
        result["idle"] = {
            "window_seconds": idle_seconds,
            "rss_mib_mean": round(sum(rss) / n, 1),
            "rss_mib_max": round(max(rss), 1),
            "peak_rss_mib_max": round(max(hwm), 1),
            "cpu_seconds_in_window_mean": round(sum(own) / n, 3),
            "reread_cpu_ms": round(reread_own * 1000, 1),
            "reread_children_cpu_ms": round(reread_child * 1000, 1),
            "cpu_seconds_per_hour": round(base_rate * 3600 + polls_per_hour * reread_own, 2),
        }
        log(f"daemons: idle {result['idle']}")

        # ---------------------------------------------------------- rollout
        # Counters are per process: sum every life's final counts, minus the
        # counts the first lives had before the rollout.
        baseline: comp.Requests = comp.Requests()
        for d in procs:
            baseline.update(await d.requests())
        requests: comp.Requests = comp.Requests()
        t0 = time.monotonic()
        await patch_object(api, BOOTC_NODE_POOLS, "bench", {"spec": {"image": {"ref": image(2)}}})

        async def reboot_one(node: str, host: Host) -> None:
            d = daemons.running[node]
            requests.update(await d.requests())  # this life's counts, before it ends
            await reboot(
                node,
                host,
                stop_daemon=lambda: asyncio.to_thread(d.process.stop, 10),
                set_ready=lambda ready: set_node_ready(api, node, ready, "simulated reboot"),
                start_daemon=lambda: daemons.start(d.index, node, host),
                down_seconds=reboot_seconds,
            )

        def done() -> bool:
            return (
                observer.count(("idle-on", digest(2))) >= n
                and observer.count("slot") == 0
                and observer.count("cordoned") == 0
            )

        machines = asyncio.create_task(
            simulate_reboots(
                lambda: [(d.node, d.host) for d in daemons.running.values()], reboot_one
            )
        )
        try:
            await observer.wait(done, 600, "the daemons' rollout")
        finally:
            machines.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await machines
        rollout_s = time.monotonic() - t0
        for d in daemons.running.values():
            requests.update(await d.requests())
        per_rollout = comp.delta(requests, baseline)
        result["rollout"] = {
            "seconds": round(rollout_s, 1),
            "daemon_processes_started": daemons.lives,
            "requests_per_node": round(sum(per_rollout.values()) / n, 1),
            "requests_per_node_by_verb": {
                k: round(v / n, 2) for k, v in comp.by_verb(per_rollout).items()
            },
            "requests": comp.flat(per_rollout),
        }
        result["rollout"]["startup_seconds"] = startup_figures(
            observer.bn_log, daemons.spawned, since=t0, booted=digest(2)
        )
        per_node = result["rollout"]["requests_per_node"]
        log(f"daemons: rollout in {rollout_s:.0f}s, {per_node} requests per node")
        if soft_rollout:
            soft_s = (
                reboot_seconds * SOFT_DOWN_FRACTION
                if soft_reboot_seconds is None
                else soft_reboot_seconds
            )
            result["soft_rollout"] = await soft_rollout_figure(
                api, observer, daemons, n, rollout_s, reboot_seconds, soft_s
            )
        return result
    finally:
        if controller is not None:
            controller.stop()
        await asyncio.to_thread(daemons.stop_all)
        await observer.stop()
        await api.close()


async def soft_rollout_figure(
    api: Any,
    observer: Observer,
    daemons: DaemonFleet,
    n: int,
    full_seconds: float,
    reboot_seconds: float,
    soft_seconds: float,
) -> dict[str, Any]:
    """Roll the pool out once more, to image C with ``AllowSoftReboot`` (module docstring)."""
    kinds: Counter[str] = Counter()
    t0 = time.monotonic()
    patch = {
        "spec": {"image": {"ref": image(3)}, "disruption": {"rebootPolicy": "AllowSoftReboot"}}
    }
    await patch_object(api, BOOTC_NODE_POOLS, "bench", patch)

    async def reboot_one(node: str, host: Host) -> None:
        d = daemons.running[node]
        done = await reboot(
            node,
            host,
            stop_daemon=lambda: asyncio.to_thread(d.process.stop, 10),
            set_ready=lambda ready: set_node_ready(api, node, ready, "simulated reboot"),
            start_daemon=lambda: daemons.start(d.index, node, host),
            down_seconds=reboot_seconds,
            soft_down_seconds=soft_seconds,
        )
        kinds[done.kind] += 1

    def done() -> bool:
        return (
            observer.count(("idle-on", digest(3))) >= n
            and observer.count("slot") == 0
            and observer.count("cordoned") == 0
        )

    machines = asyncio.create_task(
        simulate_reboots(lambda: [(d.node, d.host) for d in daemons.running.values()], reboot_one)
    )
    try:
        await observer.wait(done, 600, "the daemons' soft rollout")
    finally:
        machines.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await machines
    seconds = time.monotonic() - t0
    figure = {
        "seconds": round(seconds, 1),
        "full_seconds": round(full_seconds, 1),
        "reboot_seconds": reboot_seconds,
        "soft_reboot_seconds": soft_seconds,
        "reboots": dict(kinds),
        "soft_over_full": round(seconds / full_seconds, 2) if full_seconds else None,
    }
    log(f"daemons: soft rollout in {seconds:.0f}s ({dict(kinds)}), full {full_seconds:.0f}s")
    return figure


def startup_figures(
    bn_log: Iterable[tuple[float, str, BnFacts]],
    spawned: dict[str, float],
    *,
    since: float,
    booted: str,
) -> dict[str, float | int]:
    """Median and max of spawn -> first status write with ``booted`` of the lives started
    after ``since``, from the observer's BootcNode log (it timestamps the write's event)."""
    first: dict[str, float] = {}
    for t, name, facts in bn_log:
        start = spawned.get(name)
        if start is not None and start > since and t >= start and facts.booted == booted:
            first.setdefault(name, t - start)
    values = sorted(first.values())
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median": round(statistics.median(values), 3),
        "max": round(values[-1], 3),
    }


def run(
    n: int,
    *,
    idle_seconds: float,
    reboot_seconds: float,
    rereads: int = 5,
    log_dir: Path,
    soft_reboot_seconds: float | None = None,
    soft_rollout: bool = True,
) -> dict[str, Any]:
    log_dir.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-hosts-") as work,
        ControlPlane(controller_manager=False) as cp,
    ):
        return asyncio.run(
            run_daemons(
                cp,
                n,
                idle_seconds=idle_seconds,
                reboot_seconds=reboot_seconds,
                rereads=rereads,
                log_dir=log_dir,
                work_dir=Path(work),
                soft_reboot_seconds=soft_reboot_seconds,
                soft_rollout=soft_rollout,
            )
        )
