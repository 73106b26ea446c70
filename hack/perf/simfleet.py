"""The benchmark's simulated fleet in a child process: ``hack.testenv.fleet.Fleet`` for N nodes.

The fleet (one informer, a deduplicating delaying workqueue, bounded workers,
status written only when it changed) runs here in its own process, so the
benchmark measures the controller, not its fleet. Nodes are created by the
harness; the fleet gets their names (``--prefix``, ``--count``) and the image they
boot. It starts *held*: it watches but writes nothing until told ``go`` (so a
membership measurement sees the controller's writes alone).

Protocol: one JSON object per line. stdout: ``{"ready": true}`` once the informer
synced, then one answer per command. stdin: ``go``, ``stats`` (CPU, writes by
kind, queue waits, requests by verb), ``stop``.

    python -m hack.perf.simfleet --kubeconfig K --prefix bench- --count 100 --booted REF
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

from bootc_operator.kube import load_api_client
from bootc_operator.kube.rest import API_REQUESTS
from hack.perf.procinfo import self_cpu
from hack.testenv.fleet import Fleet


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def stats(fleet: Fleet, cpu_at_go: float) -> dict[str, Any]:
    """What the benchmark reads of its fleet: CPU, writes, queue waits, API requests."""
    requests: dict[str, float] = {}
    for metric in API_REQUESTS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                key = f"{sample.labels['verb']} {sample.labels['resource']}"
                requests[key] = requests.get(key, 0) + sample.value
    return {
        "cpu_seconds": self_cpu(),
        "cpu_seconds_since_go": self_cpu() - cpu_at_go,
        "writes": dict(fleet.writes),
        "errors": fleet.errors,
        "reboots": len(fleet.reboots),
        "events_handled": len(fleet.waits),
        "queue_wait_p50": percentile(fleet.waits, 0.5),
        "queue_wait_p99": percentile(fleet.waits, 0.99),
        "queue_wait_max": max(fleet.waits, default=None),
        "max_queue_depth": fleet.max_depth,
        "requests": requests,
    }


async def main_async(args: argparse.Namespace) -> None:
    names = [f"{args.prefix}{i:05d}" for i in range(args.count)]
    api = await load_api_client(args.kubeconfig, max_connections=args.workers + 10)
    fleet = Fleet(
        api, stage_delay=args.stage_delay, reboot_delay=args.reboot_delay, workers=args.workers
    )
    fleet.adopt(names, args.booted)
    cpu_at_go: float | None = None
    try:
        await fleet.start(hold=True)
        print(json.dumps({"ready": True}), flush=True)
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            command = line.strip()
            if command in ("", "stop"):
                break
            if command == "go":
                if cpu_at_go is None:
                    cpu_at_go = self_cpu()
                fleet.go()
                print(json.dumps({"go": True}), flush=True)
            elif command == "stats":
                print(json.dumps(stats(fleet, cpu_at_go or 0.0)), flush=True)
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
