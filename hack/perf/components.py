"""The processes a benchmark run drives: the controller, the simulated fleet, metrics.

- :func:`start_controller` runs ``bootc-operator controller`` (the venv's console
  script) as its own process, logging to a file; :class:`Controller` waits for
  ``/readyz`` and scrapes ``/metrics``. With ``go_binary`` it runs the Go
  bootc-operator's controller instead (hack/build-go-operator.sh): no metrics of
  ours; ready once its ``/readyz`` answers *and* its workers started (its log's
  "Starting workers": caches synced, what our ``/readyz`` means).
- :class:`FleetProcess` runs ``hack.perf.simfleet`` and speaks its line protocol.
- :func:`apiserver_requests`: kube-apiserver's ``apiserver_request_total`` by
  (verb, resource[/subresource]), read with the admin client.
- :func:`client_requests`: the same shape from a ``bootc_operator_api_requests_total``
  exposition (the controller's) or from this process's own counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bootc_operator.kube.rest import API_REQUESTS, request_bytes
from hack.perf.procinfo import counters, proc_cpu, proc_mem
from hack.testenv.controlplane import free_port
from hack.testenv.procs import Process, spawn

REPO = Path(__file__).resolve().parents[2]
OPERATOR_BIN = Path(sys.executable).with_name("bootc-operator")

Requests = Counter[tuple[str, str]]  # (verb, resource) -> count


@dataclass
class Controller:
    process: Process
    metrics_port: int
    probe_port: int
    go: bool = False  # the Go bootc-operator: no metrics of ours

    def _go_workers_started(self) -> bool:
        # controller-runtime logs this once its caches synced (its /readyz is a ping).
        try:
            return b"Starting workers" in self.process.log_path.read_bytes()
        except OSError:
            return False

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _get(self, port: int, path: str) -> tuple[int, str]:
        timeout = aiohttp.ClientTimeout(total=10)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"http://127.0.0.1:{port}{path}") as resp,
        ):
            return resp.status, await resp.text()

    async def wait_ready(self, within: float = 300.0) -> float:
        """Seconds until /readyz answered 200 (caches synced)."""
        started = time.monotonic()
        while True:
            if not self.process.alive():
                raise RuntimeError(f"controller died:\n{self.process.tail(40)}")
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                status, _ = await self._get(self.probe_port, "/readyz")
                if status == 200 and (not self.go or self._go_workers_started()):
                    return time.monotonic() - started
            if time.monotonic() - started > within:
                raise TimeoutError(f"controller not ready after {within}s")
            await asyncio.sleep(0.1)

    async def metrics(self) -> str:
        if self.go:
            return ""  # none of ours: its requests are the apiserver's count less the others'
        status, text = await self._get(self.metrics_port, "/metrics")
        if status != 200:
            raise RuntimeError(f"controller /metrics answered {status}")
        return text

    def cpu(self) -> float:
        return proc_cpu(self.pid)

    def mem(self) -> dict[str, float]:
        return proc_mem(self.pid)

    def stop(self) -> None:
        self.process.stop(grace=15)


def start_controller(
    kubeconfig: Path,
    log_dir: Path,
    *,
    workers: int = 4,
    name: str = "controller",
    source: Path | None = None,
    go_binary: Path | None = None,
) -> Controller:
    """``source``: run the ``bootc_operator`` package found there (e.g. a git worktree of
    an older commit, to measure "before" figures) instead of the installed one.
    ``go_binary``: run the Go bootc-operator's controller (its cmd/controller) instead."""
    metrics_port, probe_port = free_port(), free_port()
    if go_binary is not None:
        # Its only flags: probe address, leader election (off by default), zap's; the
        # kubeconfig from $KUBECONFIG; its metrics server is fixed at :8080.
        # Logs at info, as ours does (its own default is zap's development mode: debug).
        go_argv = [
            str(go_binary),
            "--health-probe-bind-address",
            f"127.0.0.1:{probe_port}",
            "--zap-log-level=info",
        ]
        go_env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        process = spawn(name, go_argv, log_dir / f"{name}-go.log", env=go_env)
        return Controller(process, metrics_port, probe_port, go=True)
    argv = [
        str(OPERATOR_BIN),
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{probe_port}",
        "--workers",
        str(workers),
    ]
    # Read by the benchmark itself, on loopback: plain HTTP (a "before" source older
    # than the flag serves plain HTTP anyway and would refuse it).
    if source is None or "--metrics-secure" in (source / "bootc_operator" / "cli.py").read_text():
        argv.append("--metrics-secure=false")
    env = None
    if source is not None:
        env = {**os.environ, "PYTHONPATH": str(source)}
    process = spawn(name, argv, log_dir / f"{name}.log", env=env)
    return Controller(process, metrics_port, probe_port)


async def run_controller(
    kubeconfig: Path,
    log_dir: Path,
    *,
    workers: int = 4,
    source: Path | None = None,
    go_binary: Path | None = None,
    attempts: int = 3,
) -> tuple[Controller, float]:
    """Start the controller and wait until ready: (controller, seconds to ready).

    Ports are picked free but other processes on the machine may take one
    before the controller binds it; then it is started again on new ones.
    """
    for attempt in range(attempts):
        controller = start_controller(
            kubeconfig, log_dir, workers=workers, source=source, go_binary=go_binary
        )
        try:
            return controller, await controller.wait_ready()
        except RuntimeError:
            controller.stop()
            if attempt == attempts - 1 or "address already in use" not in controller.process.tail():
                raise
    raise AssertionError("unreachable")


class FleetProcess:
    """``hack.perf.simfleet`` as a child process (JSON lines over stdin/stdout)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(
        cls,
        kubeconfig: Path,
        prefix: str,
        count: int,
        booted: str,
        *,
        stage_delay: float,
        reboot_delay: float,
        workers: int,
        log_path: Path,
    ) -> FleetProcess:
        log = log_path.open("ab")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "hack.perf.simfleet",
                "--kubeconfig", str(kubeconfig), "--prefix", prefix, "--count", str(count),
                "--booted", booted, "--stage-delay", str(stage_delay),
                "--reboot-delay", str(reboot_delay), "--workers", str(workers),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=str(REPO),
            )  # fmt: skip
        finally:
            log.close()
        fleet = cls(proc)
        ready = await fleet._read(120.0)
        if not ready.get("ready"):
            raise RuntimeError(f"fleet did not start: {ready}")
        return fleet

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _read(self, within: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(within):
            line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("fleet process exited")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def command(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        return await self._read()

    def cpu(self) -> float:
        return proc_cpu(self.pid)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"stop\n")
                await self.proc.stdin.drain()
                self.proc.stdin.close()
            try:
                async with asyncio.timeout(15):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


# ---------------------------------------------------------------- request counters


async def apiserver_requests(api: Any) -> Requests:
    raw = await request_bytes(api, "GET", "/metrics", request_timeout=60)
    wanted = "\n".join(
        line
        for line in raw.decode().splitlines()
        if line.startswith(("apiserver_request_total{", "# TYPE apiserver_request_total"))
    )
    out: Requests = Counter()
    by = ("verb", "resource", "subresource")
    for (verb, resource, sub), value in counters(wanted, "apiserver_request_total", by).items():
        if resource:
            out[(verb, f"{resource}/{sub}" if sub else resource)] += int(value)
    return out


def client_requests(text: str) -> Requests:
    """Requests by (verb, resource) from a ``bootc_operator_api_requests_total`` exposition."""
    out: Requests = Counter()
    found = counters(text, "bootc_operator_api_requests_total", ("verb", "resource"))
    for (verb, resource), value in found.items():
        out[(verb, resource)] += int(value)
    return out


def own_requests() -> Requests:
    out: Requests = Counter()
    for metric in API_REQUESTS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                out[(sample.labels["verb"], sample.labels["resource"])] += int(sample.value)
    return out


def fleet_requests(stats: dict[str, Any]) -> Requests:
    out: Requests = Counter()
    for key, value in (stats.get("requests") or {}).items():
        verb, _, resource = key.partition(" ")
        out[(verb, resource)] += int(value)
    return out


def delta(after: Requests, before: Requests) -> Requests:
    out: Requests = Counter()
    for key in set(after) | set(before):
        value = after.get(key, 0) - before.get(key, 0)
        if value:
            out[key] = value
    return out


def by_verb(requests: Requests) -> dict[str, int]:
    out: Counter[str] = Counter()
    for (verb, _), value in requests.items():
        out[verb] += value
    return dict(sorted(out.items()))


def flat(requests: Requests) -> dict[str, int]:
    return {f"{verb} {resource}": v for (verb, resource), v in sorted(requests.items())}
