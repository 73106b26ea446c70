"""``make demo`` (``hack/demo``): a rollout of a new OS image to six simulated nodes, live.

1. ``hack/sim up --nodes 6`` (in ``.cache/sim`` unless ``--dir``), plus the sample
   workload (so drains move real Pods past a PodDisruptionBudget);
2. a ``BootcNodePool`` over the worker nodes on the first image, ``maxUnavailable: 2``;
   wait until it is ``UpToDate``;
3. push a second image (``os:v2``) to the registry and point the pool at it;
4. watch the rollout (informers on pools, BootcNodes and Nodes): a progress bar
   and a per-node table redrawn in place on a terminal, one line per change
   otherwise (``--plain`` forces that);
5. print a summary: duration, reboots, the most nodes unavailable at once
   (cordoned or NotReady, measured at every Node/BootcNode event) and the most
   reboot slots held at once; then tear everything down, unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, create_object, patch_object
from hack.simlib.cli import clean, interrupt_on_sigterm, start_detached
from hack.simlib.common import DEFAULT_DIR, WORKER_LABEL, SimConfig
from hack.simlib.sim import AttachedSim
from hack.simlib.view import Screen, Snapshot, changes, digest_of, render, short, snapshot
from hack.testenv.kube import api_client
from hack.testenv.pools import pool_body

POOL = "workers"
SECOND_IMAGE = "os:v2"
ROLLOUT_TIMEOUT = 900.0


def say(msg: str = "") -> None:
    print(msg, flush=True)


class Watch:
    """Informers on the pool, its BootcNodes and Nodes, and the measurements."""

    def __init__(self, api: ApiClient, names: list[str]) -> None:
        self.names = names
        self.pools = Informer(api, BOOTC_NODE_POOLS, field_selector=f"metadata.name={POOL}")
        self.bootc_nodes = Informer(api, BOOTC_NODES)
        self.nodes = Informer(api, NODES)
        self.changed = asyncio.Event()
        self.measuring = False
        self.target: str | None = None  # the digest being rolled out
        self.max_unavailable = 0
        self.max_slots = 0
        for informer in (self.pools, self.bootc_nodes, self.nodes):
            informer.add_event_handler(
                EventHandler(
                    on_add=lambda _o: self._event(),
                    on_update=lambda _o, _n: self._event(),
                    on_delete=lambda _o: self._event(),
                )
            )

    def snap(self) -> Snapshot:
        bns = {o["metadata"]["name"]: o for o in self.bootc_nodes.list()}
        nodes = {o["metadata"]["name"]: o for o in self.nodes.list()}
        return snapshot(self.pools.get(POOL), bns, nodes, self.names, self.target)

    def _event(self) -> None:
        if self.measuring:
            snap = self.snap()
            self.max_unavailable = max(self.max_unavailable, snap.unavailable)
            self.max_slots = max(self.max_slots, snap.in_slots)
        self.changed.set()

    async def __aenter__(self) -> Watch:
        for informer in (self.pools, self.bootc_nodes, self.nodes):
            informer.start()
        for informer in (self.pools, self.bootc_nodes, self.nodes):
            await informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for informer in (self.pools, self.bootc_nodes, self.nodes):
            await informer.stop()


def pool_done(pool: dict[str, Any] | None, digest: str, total: int) -> bool:
    if not pool:
        return False
    status = pool.get("status") or {}
    up = any(
        cond.get("type") == c.COND_UP_TO_DATE and cond.get("status") == "True"
        for cond in status.get("conditions") or ()
    )
    return (
        up
        and status.get("observedGeneration") == pool["metadata"].get("generation")
        and status.get("targetDigest") == digest
        and status.get("updatedCount") == total
    )


async def wait_pool(watch: Watch, digest: str, timeout: float) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not pool_done(watch.pools.get(POOL), digest, len(watch.names)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"pool {POOL} not UpToDate on {digest} after {timeout:.0f}s")
        watch.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(remaining, 1.0)):
                await watch.changed.wait()


async def live(
    watch: Watch,
    sim: AttachedSim,
    digest: str,
    labels: dict[str, str],
    *,
    tty: bool,
    color: bool,
) -> tuple[float, Snapshot]:
    """Show the rollout until the pool is UpToDate on ``digest``; returns (duration, last)."""
    started = time.monotonic()
    reboots_before = len(sim.reboots())
    screen = Screen() if tty else None
    previous: Snapshot | None = None
    last_draw = 0.0
    while True:
        snap = watch.snap()
        done = snap.settled and pool_done(watch.pools.get(POOL), digest, len(watch.names))
        elapsed = time.monotonic() - started
        if screen is not None:
            if done or time.monotonic() - last_draw >= 0.2:
                reboots = len(sim.reboots()) - reboots_before
                screen.draw(
                    render(
                        snap,
                        elapsed=elapsed,
                        labels=labels,
                        max_unavailable=watch.max_unavailable,
                        reboots=reboots,
                        color=color,
                    )
                )
                last_draw = time.monotonic()
        else:
            for line in changes(previous, snap, labels):
                say(f"  {elapsed:6.1f}s  {line}")
        previous = snap
        if done:
            return elapsed, snap
        if elapsed > ROLLOUT_TIMEOUT:
            raise TimeoutError(f"the rollout did not finish within {ROLLOUT_TIMEOUT:.0f}s")
        watch.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.25 if tty else 1.0):
                await watch.changed.wait()


async def demo(args: argparse.Namespace) -> int:
    tty = sys.stdout.isatty() and not args.plain
    color = tty and not os.environ.get("NO_COLOR")
    config = SimConfig(
        nodes=args.nodes,
        reboot_seconds=args.reboot_seconds,
        stage_seconds=args.stage_seconds,
        controllers=2,
    )
    say(f"== Starting a simulated cluster: {args.nodes} bootc nodes ({args.dir})")
    t0 = time.monotonic()
    info = await asyncio.to_thread(start_detached, args.dir, config)
    up_seconds = time.monotonic() - t0
    sim = AttachedSim(info)
    say(
        f"   up in {up_seconds:.1f}s: control plane, registry {info.registry}, "
        f"{config.controllers} controllers, {len(info.nodes)} daemons"
    )
    for created in await asyncio.to_thread(sim.deploy_workload):
        say(f"   applied {created} (kwok runs its Pods)")

    first = info.first_image
    labels = {digest_of(first): "v1"}
    async with await api_client(info.kubeconfig) as api, Watch(api, info.nodes) as watch:
        say(
            f"== Pool {POOL}: every worker node, maxUnavailable {args.max_unavailable}, "
            f"image {first.rsplit('@', 1)[0]} ({short(digest_of(first))})"
        )
        await create_object(
            api, BOOTC_NODE_POOLS, pool_body(POOL, {WORKER_LABEL: ""}, first, args.max_unavailable)
        )
        await wait_pool(watch, digest_of(first), 180.0)
        say(f"   UpToDate: {len(info.nodes)}/{len(info.nodes)} nodes run v1")

        second = await asyncio.to_thread(sim.push_image, SECOND_IMAGE)
        labels[digest_of(second)] = "v2"
        say(f"== Pushed {second}")
        say(
            f"== Rolling out v2 ({short(digest_of(second))}): stage everywhere, then cordon, "
            f"drain, reboot, uncordon, {args.max_unavailable} at a time"
        )
        say()
        watch.measuring = True
        watch.target = digest_of(second)
        watch.max_unavailable = watch.snap().unavailable
        reboots_before = len(sim.reboots())
        await patch_object(api, BOOTC_NODE_POOLS, POOL, {"spec": {"image": {"ref": second}}})
        duration, last = await live(watch, sim, digest_of(second), labels, tty=tty, color=color)
        reboots = sim.reboots()[reboots_before:]

    say()
    say(f"== Rollout of v2 finished in {duration:.1f}s")
    say(
        f"   nodes updated           {last.updated}/{last.total} (every node runs "
        f"{short(digest_of(second))})"
    )
    downtime = [r["up"] - r["down"] for r in reboots]
    avg = sum(downtime) / len(downtime) if downtime else 0.0
    say(f"   reboots                 {len(reboots)} (each node NotReady ~{avg:.1f}s)")
    say(
        f"   max unavailable at once {watch.max_unavailable} nodes (cordoned or NotReady; "
        f"maxUnavailable {args.max_unavailable})"
    )
    say(f"   max reboot slots held   {watch.max_slots}")
    say(f"   cluster start-up        {up_seconds:.1f}s")
    if watch.max_unavailable > args.max_unavailable:
        say("   !! more nodes were unavailable at once than maxUnavailable allows")
        return 1
    return 0


def keep_message(state_dir: Path) -> str:
    sim = AttachedSim.open(state_dir)
    info = sim.info
    return "\n".join(
        [
            "",
            f"== The cluster keeps running (state in {state_dir}). Try:",
            f"   export KUBECONFIG={info.kubeconfig}",
            f"   {info.kubectl} get bnp,bn -w",
            "   hack/sim image push os:v3      # then point the pool at the printed ref:",
            f"   {info.kubectl} patch bnp {POOL} --type=merge "
            '-p \'{"spec":{"image":{"ref":"REF@sha256:..."}}}\'',
            "   hack/sim status",
            "   hack/sim down                  # stop it and remove the state directory",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hack/demo", description="Roll a new OS image out to simulated bootc nodes, live."
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--nodes", type=int, default=6, help="(default: %(default)s)")
    parser.add_argument("--max-unavailable", type=int, default=2, help="(default: %(default)s)")
    parser.add_argument(
        "--reboot-seconds", type=float, default=4.0, help="NotReady time per reboot"
    )
    parser.add_argument(
        "--stage-seconds", type=float, default=2.0, help="time to stage an image per node"
    )
    parser.add_argument("--plain", action="store_true", help="a line per change, no redrawing")
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"state directory (default: {DEFAULT_DIR})"
    )
    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    interrupt_on_sigterm()
    rc = 1
    try:
        rc = asyncio.run(demo(args))
    except KeyboardInterrupt:
        say("\ndemo: interrupted")
        rc = 130
    except Exception as exc:
        say(f"\ndemo: error: {exc}")
    finally:
        if args.keep and (args.dir / "sim.json").exists():
            say(keep_message(args.dir))
        else:
            say("== Tearing down")
            clean(args.dir, quiet=True)
            say("   done")
    return rc


if __name__ == "__main__":
    sys.exit(main())
