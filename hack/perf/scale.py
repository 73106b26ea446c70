"""Figures 1-4 for one cluster size N, on a fresh etcd + kube-apiserver.

Sequence (every wait is on the observer's watch, with a deadline):

1. create N kubelet-like Nodes (bounded concurrency), all booting image A;
   start the observer, the simulated fleet (*held*: it writes nothing yet) and
   the controller process; wait for its ``/readyz`` (caches synced).
2. **membership**: create the pool (image A, maxUnavailable M = 10 % of N) →
   every BootcNode exists and every Node carries ``bootc.dev/managed``.
3. release the fleet: every node reports Idle on A; the pool turns UpToDate.
4. **staging beforehand**: retarget the pool to image B *paused* → every
   BootcNode names B (the controller's N spec writes), then every node Staged.
5. **rollout**: unpause → every node booted B, no slot held, nothing cordoned.
   ideal = ceil(N/M) * R; efficiency = ideal / actual.
6. **stage-ahead** (``Options.stage_ahead_compare``): two more rollouts that stage
   *during* the rollout (image C, then D, unpaused): ``stageAhead`` unset, then
   ``stageAhead: M``; for each its time (new image → every node booted it, no
   slot held, nothing cordoned) and the most nodes staging at once. Run after
   figure 4's final scrape, so the controller's whole-run figures do not include
   them.
7. stop the controller and the fleet; **bare client**: the same kind of writes
   as membership (N BootcNode creates + N Node label patches) by a plain client,
   one at a time and with ``concurrency`` in flight.

Controller cost comes from /proc (CPU, peak RSS) and its ``/metrics``; request
counts are cross-checked against kube-apiserver's ``apiserver_request_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    PODS,
    create_object,
    get_object,
    load_api_client,
    patch_object,
    request_json,
)
from bootc_operator.policy.ownership import member_body
from hack.perf import components as comp
from hack.perf.analysis import peak_staging, percentiles, rollout_figures, wave_chain
from hack.perf.images import digest, image
from hack.perf.nodes import bounded, kubelet_node
from hack.perf.observer import Observer
from hack.perf.procinfo import MachineCpu, counters, loadavg, proc_cpu
from hack.perf.sidebyside import controller_requests
from hack.testenv import ControlPlane
from hack.testenv.pools import pool_body

POOL = "bench"
PREFIX = "bench-"
BENCH_LABEL = "bench.bootc.dev/fleet"
OURS = {"nodes", "bootcnodes", "bootcnodepools", "events", "pods"}  # resources we count


@dataclass
class Options:
    reboot_seconds: float = 3.0
    stage_seconds: float = 1.0
    workers: int = 4
    fleet_workers: int = 32
    concurrency: int = 32  # bare client and node creation
    bare_sequential: int = 200  # how many (create, label) pairs the one-at-a-time client does
    bare_concurrent: int = 2000  # ... and the concurrent one (its time is scaled to N)
    timeout: float = 900.0
    profile: Path | None = None  # py-spy the controller into this directory
    controller_source: Path | None = None  # run the controller from this checkout
    go_binary: Path | None = None  # run the Go bootc-operator's controller instead
    stage_ahead_compare: bool = False  # also roll out with stageAhead = M vs unset


def node_body(i: int) -> dict[str, Any]:
    """Node ``bench-<i>``: a kubelet-like Node of the fleet, in one of three zones."""
    labels = {BENCH_LABEL: "yes", "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}"}
    return kubelet_node(i, f"{PREFIX}{i:05d}", labels)


def bench_pool(ref: str, max_unavailable: int) -> dict[str, Any]:
    """The benchmark's pool: every fleet Node."""
    return pool_body(POOL, {BENCH_LABEL: "yes"}, ref, max_unavailable)


def log(msg: str) -> None:
    print(f"bench: {msg}", flush=True)


class Cpu:
    """CPU seconds of the processes of a run, read at named checkpoints."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.marks: dict[str, dict[str, float]] = {}

    def mark(self, name: str) -> None:
        self.marks[name] = {k: proc_cpu(pid) for k, pid in self.pids.items()}

    def between(self, a: str, b: str) -> dict[str, float]:
        return {k: round(self.marks[b][k] - self.marks[a].get(k, 0.0), 2) for k in self.marks[b]}


async def run_size(cp: ControlPlane, n: int, opts: Options, log_dir: Path) -> dict[str, Any]:
    m = max(1, math.ceil(n * 0.10))
    r = opts.reboot_seconds
    result: dict[str, Any] = {
        "nodes": n,
        "max_unavailable": m,
        "reboot_seconds": r,
        "stage_seconds": opts.stage_seconds,
    }
    result["load_before"] = [round(x, 2) for x in loadavg()]
    async with contextlib.AsyncExitStack() as stack:
        api = await load_api_client(cp.kubeconfig, max_connections=opts.concurrency + 16)
        stack.push_async_callback(api.close)

        # ---------------------------------------------------------- set-up
        async def create_node(i: int) -> None:
            await create_object(api, NODES, node_body(i))

        seconds = await bounded(n, opts.concurrency, create_node)
        result["node_create"] = {"seconds": round(seconds, 2), "per_second": round(n / seconds)}
        log(f"N={n}: {n} Nodes created in {seconds:.1f}s")
        observer = Observer(api, PREFIX)
        await observer.start()
        stack.push_async_callback(observer.stop)
        fleet = await comp.FleetProcess.start(
            cp.kubeconfig,
            PREFIX,
            n,
            image(1),
            stage_delay=opts.stage_seconds,
            reboot_delay=r,
            workers=opts.fleet_workers,
            log_path=log_dir / "simfleet.log",
        )
        stack.push_async_callback(fleet.stop)
        controller, ready_s = await comp.run_controller(
            cp.kubeconfig,
            log_dir,
            workers=opts.workers,
            source=opts.controller_source,
            go_binary=opts.go_binary,
        )
        stack.callback(controller.stop)
        if opts.profile is not None:
            stack.push_async_callback(profile_until_exit(controller.pid, opts.profile / f"n{n}"))
        pids = {"controller": controller.pid, "fleet": fleet.pid, "harness": os.getpid()}
        for name in ("kube-apiserver", "etcd"):
            pids[name] = cp.processes[name].pid
        cpu = Cpu(pids)
        cpu.mark("ready")

        def pool_up_to_date() -> bool:
            # The Go bootc-operator declares the pool's UpToDate condition but never sets it.
            return controller.go or observer.pool_up_to_date

        result["controller_start"] = {
            "seconds_to_ready": round(ready_s, 2),
            "cpu_seconds": round(controller.cpu(), 2),
            "rss_mib": round(controller.mem().get("VmRSS", 0), 1),
        }
        await asyncio.sleep(1.0)  # let the controller settle before the baseline scrape
        ctl_req0 = comp.client_requests(await controller.metrics())
        api_req0 = await comp.apiserver_requests(api)
        own_req0 = comp.own_requests()
        fleet_req0 = comp.fleet_requests(await fleet.command("stats"))
        cpu.mark("start")
        machine1 = MachineCpu.read()

        try:
            # ---------------------------------------------------------- 1. membership
            t0 = time.monotonic()
            await create_object(api, BOOTC_NODE_POOLS, bench_pool(image(1), m))
            t_done = await observer.wait(
                lambda: observer.count("owned") >= n and observer.count("managed") >= n,
                opts.timeout,
                "every BootcNode created and every Node labelled",
            )
            first_bn = next((t for t, _, f in observer.bn_log if f.exists and t >= t0), t_done)
            membership_s = t_done - t0
            cpu.mark("membership")
            result["membership"] = {
                "seconds": round(membership_s, 2),
                "first_bootcnode_after": round(first_bn - t0, 3),
                "writes": 2 * n,
                "writes_per_second": round(2 * n / membership_s, 1),
                "cpu": cpu.between("start", "membership"),
            }
            log(f"N={n}: membership converged in {membership_s:.1f}s")

            # ---------------------------------------------------------- fleet reports Idle
            t0 = time.monotonic()
            await fleet.command("go")
            await observer.wait(
                lambda: observer.count(("idle-on", digest(1))) >= n and pool_up_to_date(),
                opts.timeout,
                "every node Idle on A and the pool UpToDate",
            )
            result["initial_status"] = {"seconds": round(time.monotonic() - t0, 2)}
            cpu.mark("idle")

            # ---------------------------------------------------------- staging beforehand
            t0 = time.monotonic()
            await patch_object(
                api,
                BOOTC_NODE_POOLS,
                POOL,
                {"spec": {"image": {"ref": image(2)}, "rollout": {"paused": True}}},
            )
            t_retarget = await observer.wait(
                lambda: observer.count(("desired", digest(2))) >= n,
                opts.timeout,
                "every BootcNode retargeted to B",
            )
            t_staged = await observer.wait(
                lambda: observer.count(("staged-on", digest(2))) >= n,
                opts.timeout,
                "every node Staged on B",
            )
            result["staging"] = {
                "retarget_seconds": round(t_retarget - t0, 2),
                "all_staged_seconds": round(t_staged - t0, 2),
            }
            cpu.mark("staged")
            log(f"N={n}: retargeted in {t_retarget - t0:.1f}s, staged in {t_staged - t0:.1f}s")
            await asyncio.sleep(1.0)

            # ---------------------------------------------------------- 2. rollout
            api_roll0 = await comp.apiserver_requests(api)
            t0 = time.monotonic()
            await patch_object(
                api, BOOTC_NODE_POOLS, POOL, {"spec": {"rollout": {"paused": False}}}
            )
            t_done = await observer.wait(
                rolled_out(observer, digest(2), n),
                opts.timeout,
                "every node booted B, no slot held, nothing cordoned",
            )
            t_pool = await observer.wait(pool_up_to_date, opts.timeout, "the pool UpToDate on B")
            actual = t_done - t0
            ideal = math.ceil(n / m) * r
            cpu.mark("rollout")
            rollout_requests = sum(
                v
                for (verb, res), v in comp.delta(
                    await comp.apiserver_requests(api), api_roll0
                ).items()
                if verb != "WATCH" and res.split("/")[0] in OURS
            )
            figures = rollout_figures(observer.bn_log, observer.node_log, t0, t_done, m)
            result["rollout"] = {
                "ideal_seconds": ideal,
                "actual_seconds": round(actual, 2),
                "efficiency": round(ideal / actual, 3),
                "pool_up_to_date_after": None if controller.go else round(t_pool - t0, 2),
                "apiserver_requests": rollout_requests,
                "cpu": cpu.between("staged", "rollout"),
                **figures,
                "chain": wave_chain(observer.bn_log, observer.node_log, t0, t_done, m, r),
            }
            log(f"N={n}: rollout took {actual:.1f}s (ideal {ideal:.0f}s)")

            # ---------------------------------------------------------- 4. controller cost
            await asyncio.sleep(2.0)  # let queued Events flush before the final scrape
            ctl_text = await controller.metrics()
            ctl_req1 = comp.client_requests(ctl_text)
            api_req1 = await comp.apiserver_requests(api)
            # Events may still be flushing: the apiserver's count must lie between two scrapes.
            ctl_req1b = comp.client_requests(await controller.metrics())
            own_req1 = comp.own_requests()
            fleet_stats = await fleet.command("stats")
            fleet_req1 = comp.fleet_requests(fleet_stats)
            cpu.mark("end")
            machine2 = MachineCpu.read()
            ctl_delta = comp.delta(ctl_req1, ctl_req0)
            others = comp.delta(fleet_req1, fleet_req0)
            others.update(comp.delta(own_req1, own_req0))
            server = comp.delta(api_req1, api_req0)
            by_apiserver = controller_requests(server, others, OURS)
            if controller.go:  # no count of its own: the apiserver's less the others'
                ctl_delta = ctl_req1b = by_apiserver
            clients = others + ctl_delta
            clients_late = others + comp.delta(ctl_req1b, ctl_req0)
            keys = {k for k in set(clients) | set(server) if k[1].split("/")[0] in OURS}
            crosscheck = {
                f"{verb} {res}": {
                    "clients": clients.get((verb, res), 0),
                    "apiserver": server.get((verb, res), 0),
                }
                for verb, res in sorted(keys)
            }
            # Open watches are counted by the apiserver only when they end: WATCH may differ.
            mismatches = {
                f"{verb} {res}": crosscheck[f"{verb} {res}"]
                for verb, res in sorted(keys)
                if verb != "WATCH"
                and not clients.get((verb, res), 0)
                <= server.get((verb, res), 0)
                <= clients_late.get((verb, res), 0)
            }
            lists_after_sync = {res: v for (verb, res), v in ctl_delta.items() if verb == "LIST"}
            mem = controller.mem()
            window = machine2.since(machine1)
            ours_cpu = sum(cpu.between("start", "end").values())
            result["controller"] = {
                "kind": "go" if controller.go else "python",
                "requests_counted_by": (
                    "apiserver less fleet and harness" if controller.go else "its own metric"
                ),
                "requests_by_apiserver": comp.flat(by_apiserver),
                "peak_rss_mib": round(mem.get("VmHWM", 0), 1),
                "rss_mib_end": round(mem.get("VmRSS", 0), 1),
                "cpu_seconds": cpu.between("start", "end")["controller"],
                "cpu_seconds_total": round(cpu.marks["end"]["controller"], 2),
                "requests_by_verb": comp.by_verb(ctl_delta),
                "requests": comp.flat(ctl_delta),
                "requests_total": sum(ctl_delta.values()),
                "reconciles": {
                    f"{name} {result}": int(v)
                    for (name, result), v in sorted(
                        counters(
                            ctl_text, "controller_runtime_reconcile_total", ("controller", "result")
                        ).items()
                    )
                },
                "events_dropped": int(
                    sum(counters(ctl_text, "bootc_operator_events_dropped_total", ()).values())
                ),
                "lists_after_sync": lists_after_sync,
                "crosscheck_mismatches": mismatches,
                "crosscheck": crosscheck,
            }
            result["fleet"] = {
                k: fleet_stats[k]
                for k in (
                    "cpu_seconds_since_go",
                    "writes",
                    "errors",
                    "queue_wait_p50",
                    "queue_wait_p99",
                    "queue_wait_max",
                    "max_queue_depth",
                )
            }
            result["cpu_by_process"] = cpu.between("start", "end")
            result["machine_window"] = {
                "wall_seconds": round(window.total / (os.cpu_count() or 1), 1),
                "busy_cpu_seconds": round(window.busy, 1),
                "ours_cpu_seconds": round(ours_cpu, 1),
                "others_cpu_seconds": round(max(0.0, window.busy - ours_cpu), 1),
            }

        except TimeoutError as err:
            # A run that cannot finish (e.g. an old controller at a large N) still
            # reports how far it got and what it cost until then.
            log(f"N={n}: {err}")
            result["timed_out"] = {
                "error": str(err),
                "observer": observer.summary(),
                "bootc_nodes": observer.count("owned"),
                "labelled": observer.count("managed"),
                "updated": observer.count(("idle-on", digest(2))),
                "controller_cpu_seconds": round(controller.cpu(), 2),
                "controller_peak_rss_mib": round(controller.mem().get("VmHWM", 0), 1),
            }
            result["load_after"] = [round(x, 2) for x in loadavg()]
            return result

        # ---------------------------------------------------------- stage-ahead
        if opts.stage_ahead_compare:
            result["stage_ahead"] = await stage_ahead_rollouts(api, observer, cpu, n, m, opts)

        # ---------------------------------------------------------- bare client
        controller.stop()
        await fleet.stop()
        await observer.stop()
        pool = await get_object(api, BOOTC_NODE_POOLS, POOL)
        result["bare_client"] = await bare_client(api, n, pool, opts)
        result["consistent_read"] = await consistent_read_wait(api)
        b = result["bare_client"]
        result["membership"]["overhead_vs_concurrent"] = round(
            membership_s / b["concurrent"]["seconds"], 2
        )
        result["membership"]["overhead_vs_sequential"] = round(
            membership_s / (b["sequential"]["seconds_per_write"] * 2 * n), 2
        )
        # The apiserver's throughput bounds a rollout too: its requests / the bare rate.
        rate = b["concurrent"]["writes_per_second"] or b["sequential"]["writes_per_second"]
        bound = rollout_requests / rate
        result["rollout"]["apiserver_bound_seconds"] = round(bound, 1)
        result["rollout"]["efficiency_vs_bound"] = round(max(ideal, bound) / actual, 3)
        result["load_after"] = [round(x, 2) for x in loadavg()]
        return result


def rolled_out(observer: Observer, target: str, n: int) -> Callable[[], bool]:
    """Every node booted ``target`` and is Idle, no slot held, nothing cordoned."""
    return lambda: (
        observer.count(("idle-on", target)) >= n
        and observer.count("slot") == 0
        and observer.count("cordoned") == 0
    )


async def stage_ahead_rollouts(
    api: Any, observer: Observer, cpu: Cpu, n: int, m: int, opts: Options
) -> dict[str, Any]:
    """Two rollouts that stage as they go: ``stageAhead`` unset (image C), then
    ``stageAhead: M`` (image D). A phase that times out is reported as such; the
    size's other figures stand."""
    out: dict[str, Any] = {
        "stage_ahead": m,
        "ideal_seconds": math.ceil(n / m) * opts.reboot_seconds,
    }
    for key, img, rollout in (("unset", 3, {}), ("set", 4, {"stageAhead": m})):
        cpu.mark(f"{key}-start")
        t0 = time.monotonic()
        await patch_object(
            api,
            BOOTC_NODE_POOLS,
            POOL,
            {"spec": {"image": {"ref": image(img)}, "rollout": rollout}},
        )
        try:
            t_done = await observer.wait(
                rolled_out(observer, digest(img), n),
                opts.timeout,
                f"every node booted image {img} (stageAhead {rollout.get('stageAhead', 'unset')})",
            )
            await observer.wait(lambda: observer.pool_up_to_date, opts.timeout, "the pool UpToDate")
        except TimeoutError as err:
            log(f"N={n}: {err}")
            out[key] = {
                "error": str(err),
                "peak_staging": peak_staging(observer.bn_log, t0, time.monotonic()),
            }
            return out
        cpu.mark(f"{key}-end")
        out[key] = {
            "seconds": round(t_done - t0, 2),
            "peak_staging": peak_staging(observer.bn_log, t0, t_done),
            "controller_cpu_seconds": cpu.between(f"{key}-start", f"{key}-end")["controller"],
        }
        log(
            f"N={n}: rollout with staging, stageAhead {rollout.get('stageAhead', 'unset')}: "
            f"{t_done - t0:.1f}s, at most {out[key]['peak_staging']} nodes staging at once"
        )
    return out


def profile_until_exit(pid: int, out: Path) -> Callable[[], Awaitable[None]]:
    """Sample ``pid`` with py-spy (raw collapsed stacks) until it exits; returns the waiter."""
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("py-spy")),
            "record", "--pid", str(pid), "--rate", "50", "--nonblocking",
            "--format", "raw", "--output", f"{out}.txt",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(out.parent / f"{out.name}.py-spy.log").open("wb"),
    )  # fmt: skip

    async def wait() -> None:
        for _ in range(300):
            if spy.poll() is not None:
                return
            await asyncio.sleep(0.1)
        spy.terminate()

    return wait


async def bare_client(api: Any, n: int, pool: dict[str, Any], opts: Options) -> dict[str, Any]:
    """The membership writes without a controller: create a BootcNode, label its Node."""
    spec = {"desiredImage": image(3), "desiredImageState": "Staged"}

    async def pair(i: int) -> None:
        node = f"{PREFIX}{i:05d}"
        # exactly what membership creates (the controller's own builder)
        await create_object(api, BOOTC_NODES, member_body(pool, f"bare-{node}", spec))
        await patch_object(api, NODES, node, {"metadata": {"labels": {"bench.bootc.dev/bare": ""}}})

    seq = max(1, min(n // 2, opts.bare_sequential))
    seq_s = await bounded(seq, 1, pair)
    rest = min(n - seq, opts.bare_concurrent)

    async def pair_rest(i: int) -> None:
        await pair(seq + i)

    conc_s = await bounded(rest, opts.concurrency, pair_rest) if rest else 0.0
    # The concurrent figure is scaled to N pairs (it did `rest` of them).
    conc_full = conc_s * n / rest if rest else seq_s
    return {
        "sequential": {
            "pairs": seq,
            "seconds": round(seq_s, 2),
            "seconds_per_write": round(seq_s / (2 * seq), 5),
            "writes_per_second": round(2 * seq / seq_s, 1),
        },
        "concurrent": {
            "concurrency": opts.concurrency,
            "pairs": rest,
            "seconds": round(conc_full, 2),
            "writes_per_second": round(2 * rest / conc_s, 1) if rest else None,
        },
    }


async def consistent_read_wait(api: Any, samples: int = 20) -> dict[str, Any]:
    """What a drain's first pod read costs on this apiserver: a consistent LIST of one
    node's pods right after a write (as a drain reads right after its cordon), and the
    same LIST when nothing was written since the previous one.

    A consistent read is served from the watch cache once that cache has caught up
    with etcd; with no pod changing, it catches up only at etcd's next progress
    notification, which kube-apiserver requests every 100 ms while a reader waits.
    Every drain (ours, kubectl's) does one such read after its cordon: once per
    slot, on the rollout's critical path.
    """
    after_write: list[float] = []
    idle: list[float] = []
    query = {"fieldSelector": f"spec.nodeName={PREFIX}00000"}
    for i in range(samples):
        label = {"metadata": {"labels": {"bench.bootc.dev/probe": str(i)}}}
        await patch_object(api, NODES, f"{PREFIX}00000", label)
        t = time.monotonic()
        await request_json(api, "GET", PODS.path(), query=query)
        after_write.append(time.monotonic() - t)
        t = time.monotonic()
        await request_json(api, "GET", PODS.path(), query=query)
        idle.append(time.monotonic() - t)
    return {"after_write": percentiles(after_write), "idle": percentiles(idle)}


def run(n: int, opts: Options, log_dir: Path) -> dict[str, Any]:
    """Start a control plane, run one size, tear everything down."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(controller_manager=False) as cp:
        return asyncio.run(run_size(cp, n, opts, log_dir))
