"""Benchmark of the informer against a real kube-apiserver (not a test): ``hack/bench-informer``.

1. Start a throw-away control plane (etcd + kube-apiserver; or use
   ``--kubeconfig``) and create ``--nodes`` kubelet-like Nodes concurrently
   (``--concurrency`` requests in flight).
2. In a fresh child process (so its peak RSS is the informer's alone) time the
   informer's LIST (pages of 500) until it has synced, and read the memory it
   took: VmRSS growth and VmHWM from /proc/self/status.
3. While the child watches, the parent patches a label on every Node; the
   child counts the updates, reporting events/s observed, the lag behind the
   writer and the child's CPU time per event (its capacity on this machine).

Figures go to stdout as a readable summary; ``--json`` prints them as JSON.
``--transform`` picks the informer's transform (e.g. also drop ``status.images``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bootc_operator.informers import (  # noqa: E402
    EventHandler,
    Informer,
    Transform,
    chain,
    drop_paths,
    intern_strings,
    strip_bulk,
)
from bootc_operator.kube import (  # noqa: E402
    NODES,
    ApiError,
    create_object,
    delete_object,
    load_api_client,
    patch_object,
)
from hack.perf.nodes import bounded, kubelet_node  # noqa: E402
from hack.testenv import ControlPlane  # noqa: E402

Obj = dict[str, Any]
BENCH_LABEL = "bench.bootc.dev/run"
GEN_LABEL = "bench.bootc.dev/gen"
NO_IMAGES = drop_paths(("status", "images"))
TRANSFORMS: dict[str, Transform] = {
    "default": strip_bulk,
    "no-images": chain(strip_bulk, NO_IMAGES),
    "interned": chain(strip_bulk, intern_strings),
    "no-images+interned": chain(strip_bulk, NO_IMAGES, intern_strings),
}


# ---------------------------------------------------------------- shared


def proc_status_kib(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def node_body(i: int, run: str) -> Obj:
    """Node ``bench-<run>-<i>``: a detailed kubelet-like Node, labelled for this run."""
    labels = {
        BENCH_LABEL: run,
        "bootc.dev/managed": "",
        "topology.kubernetes.io/region": "region-1",
        "topology.kubernetes.io/zone": f"region-1{'abc'[i % 3]}",
    }
    return kubelet_node(i, f"bench-{run}-{i:05d}", labels, detailed=True)


# ---------------------------------------------------------------- child: the informer


async def measure(kubeconfig: str, run: str, nodes: int, transform: str) -> None:
    api = await load_api_client(kubeconfig)
    async with api:
        updated: set[str] = set()
        first_update = last_update = 0.0
        all_updated = asyncio.Event()

        def on_update(old: Obj, new: Obj) -> None:
            nonlocal first_update, last_update
            if new["metadata"]["labels"].get(GEN_LABEL) != "1":
                return
            now = time.monotonic()  # compared with the parent's clock
            if not updated:
                first_update = now
            updated.add(new["metadata"]["name"])
            last_update = now
            if len(updated) == nodes:
                all_updated.set()

        inf = Informer(
            api, NODES, label_selector=f"{BENCH_LABEL}={run}", transform=TRANSFORMS[transform]
        )
        inf.add_event_handler(EventHandler(on_update=on_update))
        gc.collect()
        rss0, cpu0 = proc_status_kib("VmRSS"), cpu_seconds()
        t0 = time.perf_counter()
        inf.start()
        await inf.wait_for_sync()
        sync_s = time.perf_counter() - t0
        sync_cpu = cpu_seconds() - cpu0
        rss_peak_sync = proc_status_kib("VmHWM")
        gc.collect()
        rss1 = proc_status_kib("VmRSS")
        report = {
            "phase": "synced",
            "cached": len(inf.store),
            "sync_seconds": sync_s,
            "sync_cpu_seconds": sync_cpu,
            "rss_before_kib": rss0,
            "rss_after_kib": rss1,
            "vm_hwm_kib": rss_peak_sync,
        }
        print(json.dumps(report), flush=True)

        cpu1 = cpu_seconds()
        await all_updated.wait()
        events_cpu = cpu_seconds() - cpu1
        report = {
            "phase": "events",
            "updates": len(updated),
            "first_update_monotonic": first_update,
            "last_update_monotonic": last_update,
            "events_cpu_seconds": events_cpu,
            "vm_hwm_end_kib": proc_status_kib("VmHWM"),
            "lists": inf.stats.lists,
            "watches": inf.stats.watches,
            "errors": inf.stats.errors,
        }
        print(json.dumps(report), flush=True)
        await inf.stop()


# ---------------------------------------------------------------- parent: the driver


async def drive(kubeconfig: str, nodes: int, concurrency: int, transform: str) -> dict[str, Any]:
    run = f"{int(time.time()) % 100000:05d}"
    out: dict[str, Any] = {"nodes": nodes, "concurrency": concurrency, "transform": transform}
    api = await load_api_client(kubeconfig)
    async with api:

        async def create(i: int) -> None:
            await create_object(api, NODES, node_body(i, run))

        out["create_seconds"] = await bounded(nodes, concurrency, create)
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(SCRIPT), "--measure",
            "--kubeconfig", kubeconfig, "--run", run, "--nodes", str(nodes),
            "--transform", transform,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert child.stdout is not None
        try:
            synced = json.loads(await child.stdout.readline())
            out.update({k: v for k, v in synced.items() if k != "phase"})

            async def patch(i: int) -> None:
                name = f"bench-{run}-{i:05d}"
                await patch_object(api, NODES, name, {"metadata": {"labels": {GEN_LABEL: "1"}}})

            out["patch_seconds"] = await bounded(nodes, concurrency, patch)
            patch_ended = time.monotonic()
            events = json.loads(await child.stdout.readline())
            out.update({k: v for k, v in events.items() if k != "phase"})
            out["events_lag_seconds"] = events["last_update_monotonic"] - patch_ended
            await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()

        async def delete(i: int) -> None:
            with contextlib.suppress(ApiError):
                await delete_object(api, NODES, f"bench-{run}-{i:05d}")

        out["delete_seconds"] = await bounded(nodes, concurrency, delete)
    return out


def summary(r: dict[str, Any]) -> str:
    n = r["nodes"]
    grown_mib = (r["rss_after_kib"] - r["rss_before_kib"]) / 1024
    span = r["last_update_monotonic"] - r["first_update_monotonic"]
    lines = [
        f"nodes: {n} (created in {r['create_seconds']:.1f}s, "
        f"{n / r['create_seconds']:.0f}/s with {r['concurrency']} in flight)",
        f"list+cache (transform {r['transform']}): "
        f"{r['sync_seconds']:.2f}s wall, {r['sync_cpu_seconds']:.2f}s CPU, "
        f"{r['cached']} objects cached",
        f"memory: RSS {r['rss_before_kib'] / 1024:.1f} -> {r['rss_after_kib'] / 1024:.1f} MiB "
        f"(+{grown_mib:.1f} MiB, {grown_mib * 1024 * 1024 / n / 1024:.1f} KiB/node); "
        f"peak RSS (VmHWM) {r['vm_hwm_kib'] / 1024:.1f} MiB after sync, "
        f"{r['vm_hwm_end_kib'] / 1024:.1f} MiB after the updates",
        f"events: {r['updates']} updates written in {r['patch_seconds']:.2f}s "
        f"({n / r['patch_seconds']:.0f}/s), observed over {span:.2f}s "
        f"({r['updates'] / span:.0f} events/s), last one {r['events_lag_seconds']:+.3f}s "
        "after the last write returned",
        f"informer CPU: {r['events_cpu_seconds']:.2f}s for {r['updates']} events = "
        f"{r['events_cpu_seconds'] / r['updates'] * 1e6:.0f} us/event "
        f"(capacity ~{r['updates'] / max(r['events_cpu_seconds'], 1e-9):.0f} events/s per core)",
        f"requests by the informer: {r['lists']} LIST, {r['watches']} WATCH, {r['errors']} errors",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hack/bench-informer", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--kubeconfig", help="use this cluster instead of a throw-away control plane")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument(
        "--transform",
        choices=sorted(TRANSFORMS),
        default="default",
        help="the informer's transform: strip_bulk, plus optionally drop_paths(status.images) "
        "and/or intern_strings",
    )
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.measure:
        asyncio.run(measure(args.kubeconfig, args.run, args.nodes, args.transform))
        return 0

    if args.kubeconfig:
        result = asyncio.run(drive(args.kubeconfig, args.nodes, args.concurrency, args.transform))
    else:
        print("bench-informer: starting etcd + kube-apiserver ...", file=sys.stderr)
        with ControlPlane(controller_manager=False) as cp:
            result = asyncio.run(
                drive(str(cp.kubeconfig), args.nodes, args.concurrency, args.transform)
            )
    print(json.dumps(result, indent=2) if args.json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
