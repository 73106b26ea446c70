"""Reaction time of the precondition gate (not a test): ``hack/bench-queries``.

How long after a metric flips does the rollout stop taking new reboot slots, and
how long after it flips back does the next slot start? Everything real but the
hosts: a throw-away control plane (or ``--kubeconfig``), the real controller in
this process with ``--prometheus-url`` and ``--alert-check-interval``, a real
Prometheus (scrape and evaluation every ``--scrape-interval``) scraping a
loopback ``/metrics`` whose gauge ``bench_gate_open`` this script sets
(``hack.testenv.prometheus.Gauges``), and simulated daemons
(``hack.testenv.fleet.Fleet``), watched by the safety monitor. The pool
(``maxUnavailable: 1``) has one precondition, ``bench_gate_open == 1``.

Each round, while a node holds a slot: the gauge goes to 0 (the *stop*), the
holder finishes, then the gauge goes to 1 (the *resume*), each flip after a random
pause of up to one scrape or check interval (so it falls at any phase of both
cycles). Times from the flip:

- ``prom``: Prometheus reports the new value (the scrape's share);
- ``gate``: the controller's gate verdict changed (``AlertReconciler.gate``);
- ``status``: (stop) the pool's ``UpToDate`` says ``PreconditionNotMet``, as read
  from the controller's cache; (resume) the next slot was taken (the safety
  monitor saw its BootcNode's ``bootc.dev/in-reboot-slot`` annotation).

Slots taken while the gate was closed are counted (must be 0), and so are the
slots taken after a stop's flip but before the gate closed (what the reaction
time costs: with a simulated reboot of ``--reboot-seconds`` a slot frees often). The expected
reaction is about one scrape plus up to one check interval; the figures say what
it is here. Printed as a table; ``--json`` prints them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
sys.path.insert(0, str(SCRIPT.parents[1]))

from bootc_operator.api import constants as c  # noqa: E402
from bootc_operator.api.conditions import get_condition  # noqa: E402
from bootc_operator.controller import Controller  # noqa: E402
from bootc_operator.gates.prometheus import PrometheusOptions  # noqa: E402
from bootc_operator.kube import BOOTC_NODE_POOLS, load_api_client  # noqa: E402
from bootc_operator.kube.rest import create_object, delete_object  # noqa: E402
from hack.testenv import ControlPlane  # noqa: E402
from hack.testenv.controller import running_controller  # noqa: E402
from hack.testenv.fleet import Fleet  # noqa: E402
from hack.testenv.monitor import SafetyMonitor  # noqa: E402
from hack.testenv.pools import pool_body  # noqa: E402
from hack.testenv.prometheus import Gauges, Prometheus, Target, parse_duration  # noqa: E402

METRIC = "bench_gate_open"
IMAGE = "registry.example.com/os@sha256:"
POLL = 0.005  # seconds between looks at in-process state (cheap)
PROM_POLL = 0.05  # between queries to Prometheus
DEADLINE = 120.0


async def until(check: Callable[[], Awaitable[bool] | bool], what: str) -> float:
    """Seconds (monotonic) at which ``check`` first held; polls (a benchmark, not a test)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return time.monotonic()
        await asyncio.sleep(POLL)
    raise TimeoutError(f"{what} not within {DEADLINE:g}s")


class Bench:
    def __init__(
        self, api: Any, prom: Prometheus, gauges: Gauges, ctl: Controller, monitor: SafetyMonitor
    ) -> None:
        self.api, self.prom, self.gauges, self.ctl = api, prom, gauges, ctl
        self.monitor = monitor  # sees every slot taken (``takes``, monitor time)
        self.group = monitor.pool
        self.period = 1.0  # the longer of the scrape and check intervals (set by bench)

    def holders(self) -> int:
        return len(self.monitor.holders())

    def gate_blocked(self) -> bool:
        pool = self.ctl.pools.get(self.group)
        gate = self.ctl.alerts.gate(pool) if pool is not None else None
        return gate is not None and gate.blocked

    def reason(self) -> str:
        pool = self.ctl.pools.get(self.group) or {}
        up = get_condition((pool.get("status") or {}).get("conditions"), c.COND_UP_TO_DATE)
        return str((up or {}).get("reason") or "")

    async def prom_says(self, value: float) -> bool:
        got = await asyncio.to_thread(self.prom.value, METRIC)
        if got != value:
            await asyncio.sleep(PROM_POLL)
        return got == value

    async def flip(self, value: float, then: Callable[[], bool], what: str) -> dict[str, float]:
        # at a random phase of the scrape and check cycles: right after the last
        # measurement the flip would always fall at the same point of both
        await asyncio.sleep(random.uniform(0.0, self.period))
        t0, at = time.monotonic(), self.monitor.now()
        self.gauges.set(METRIC, value)
        prom, gate, status = await asyncio.gather(
            until(lambda: self.prom_says(value), f"Prometheus reporting {METRIC}={value}"),
            until(lambda: self.gate_blocked() is (value == 0), "the gate's verdict"),
            until(then, what),
        )
        return {"prom": prom - t0, "gate": gate - t0, "status": status - t0, "at": at}

    async def run(self, rounds: int, nodes: int, fleet: Fleet) -> dict[str, Any]:
        # one node per resume, and more: slots go on being taken until the gate closes
        names = [f"{self.group}-n{i}" for i in range(nodes)]
        for name in names:
            await fleet.add_node(name, IMAGE + "1" * 64, {"group": self.group})
        self.gauges.set(METRIC, 1)
        await until(lambda: self.prom_says(1), "Prometheus scraping the gauge")
        body = pool_body(self.group, {"group": self.group}, IMAGE + "2" * 64, 1)
        body["spec"]["rollout"]["preconditions"] = [{"name": "gate", "expr": f"{METRIC} == 1"}]
        await create_object(self.api, BOOTC_NODE_POOLS, body)
        stops: list[dict[str, float]] = []
        resumes: list[dict[str, float]] = []
        taken_while_closed = 0
        taken_before_closing: list[int] = []  # slots taken between a stop's flip and the gate
        for _ in range(rounds):
            await until(lambda: self.holders() == 1, "a slot holder")
            stop = await self.flip(
                0, lambda: self.reason() == c.REASON_PRECONDITION_NOT_MET, "PreconditionNotMet"
            )
            stops.append(stop)
            await until(lambda: self.holders() == 0, "the holder finishing")
            resume = await self.flip(1, lambda: self.holders() == 1, "the next slot")
            closed = stop["at"] + stop["gate"]
            taken_before_closing.append(len(self.monitor.takes_between(stop["at"], closed)))
            taken_while_closed += len(self.monitor.takes_between(closed, resume["at"]))
            resumes.append(resume)
        with contextlib.suppress(Exception):
            await delete_object(self.api, BOOTC_NODE_POOLS, self.group)
        return {
            "stops": stops,
            "resumes": resumes,
            "taken_while_closed": taken_while_closed,
            "taken_before_closing": taken_before_closing,
            "violations": self.monitor.violations,
        }


async def bench(kubeconfig: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    api = await load_api_client(kubeconfig)
    gauges = Gauges().start()
    prom = Prometheus(
        tmp / "prometheus", targets={"bench": [Target(gauges.address)]}, interval=args.scrape
    )
    await asyncio.to_thread(prom.start)
    fleet = Fleet(api, stage_delay=0.1, reboot_delay=args.reboot_seconds)
    await fleet.start()
    options = PrometheusOptions(url=prom.url)
    monitor = SafetyMonitor(api, f"bench-q-{uuid.uuid4().hex[:6]}", 1)
    try:
        async with (
            monitor,
            running_controller(
                api, prometheus=options, alert_check_interval=args.check_interval
            ) as ctl,
        ):
            bench = Bench(api, prom, gauges, ctl, monitor)
            bench.period = max(parse_duration(args.scrape), args.check_interval)
            result = await bench.run(args.rounds, args.nodes or 10 * args.rounds + 2, fleet)
    finally:
        await fleet.stop()
        await asyncio.to_thread(prom.close)
        gauges.close()
        await api.close()
    result["settings"] = {
        "scrape_interval": args.scrape,
        "check_interval": args.check_interval,
        "rounds": args.rounds,
    }
    return result


def summary(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        f"precondition gate reaction (scrape/evaluation {s['scrape_interval']}, "
        f"--alert-check-interval {s['check_interval']:g}s, {s['rounds']} rounds), seconds "
        "from the metric's flip:",
        f"{'':<28}{'median':>9}{'max':>8}",
    ]
    for kind, label in (("stops", "stop"), ("resumes", "resume")):
        last = "PreconditionNotMet" if kind == "stops" else "next slot"
        for key, name in (("prom", "Prometheus"), ("gate", "gate"), ("status", last)):
            values = [r[key] for r in result[kind]]
            lines.append(
                f"{label:<8}{name:>20}{statistics.median(values):>9.2f}{max(values):>8.2f}"
            )
    lines.append(
        "slots taken after a stop's flip, before the gate closed (per round): "
        + ", ".join(str(n) for n in result["taken_before_closing"])
    )
    lines.append(f"slots taken while the gate was closed: {result['taken_while_closed']}")
    lines.append(f"safety monitor violations: {len(result['violations'])}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--check-interval", type=float, default=1.0, help="--alert-check-interval")
    p.add_argument("--scrape", default="1s", help="Prometheus' scrape and evaluation interval")
    p.add_argument("--nodes", type=int, default=0, help="default: 10 per round + 2")
    p.add_argument("--reboot-seconds", type=float, default=1.0, help="a simulated reboot")
    p.add_argument("--kubeconfig", help="use this cluster instead of a throw-away control plane")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-queries-") as tmp:
        if args.kubeconfig:
            result = asyncio.run(bench(args.kubeconfig, args, Path(tmp)))
        else:
            with ControlPlane(controller_manager=False) as cp:
                result = asyncio.run(bench(str(cp.kubeconfig), args, Path(tmp)))
    print(json.dumps(result, indent=1) if args.json else summary(result))


if __name__ == "__main__":
    main()
