"""``make demo`` (``hack/demo``): a rollout of a new OS image to six simulated nodes, live.

1. ``hack/sim up --nodes 6`` (in ``.cache/sim`` unless ``--dir``), plus the sample
   workload (so drains move real Pods past a PodDisruptionBudget);
2. a ``BootcNodePool`` over the worker nodes on the first image, ``maxUnavailable: 2``
   (or the pool of ``--pool-file`` and the rollout-policy flags, ``hack.simlib.policy``:
   ``--stage-ahead``, ``--max-unhealthy``, ``--maintenance-window``, ``--max-unavailable``;
   the demo sets the image); wait until it is ``UpToDate``;
3. push a second image (``os:v2``) to the registry and point the pool at it;
4. watch the rollout (informers on pools, BootcNodes and Nodes): a progress bar
   and a per-node table redrawn in place on a terminal, one line per change
   otherwise (``--plain`` forces that);
5. print a summary: duration, reboots, the most nodes unavailable at once
   (cordoned or NotReady, measured at every Node/BootcNode event), the most
   reboot slots held and the most nodes staging at once; then tear everything
   down, unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.api.intstr import resolve_max_unavailable
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, create_object, patch_object
from bootc_operator.reconcilers.windows import describe_opening, parse_windows, window_state
from hack.simlib.cli import clean, interrupt_on_sigterm, start_detached
from hack.simlib.common import DEFAULT_DIR, SimConfig
from hack.simlib.policy import PolicyError, add_pool_arguments, describe_rollout, pool_manifest
from hack.simlib.sim import AttachedSim
from hack.simlib.view import Screen, Snapshot, changes, digest_of, render, short, snapshot
from hack.testenv.kube import api_client

DEFAULT_MAX_UNAVAILABLE = 2
SECOND_IMAGE = "os:v2"
ROLLOUT_TIMEOUT = 900.0


def say(msg: str = "") -> None:
    print(msg, flush=True)


class Watch:
    """Informers on the pool, its BootcNodes and Nodes, and the measurements."""

    def __init__(self, api: ApiClient, names: list[str], pool: str) -> None:
        self.names = names
        self.pool = pool
        self.pools = Informer(api, BOOTC_NODE_POOLS, field_selector=f"metadata.name={pool}")
        self.bootc_nodes = Informer(api, BOOTC_NODES)
        self.nodes = Informer(api, NODES)
        self.changed = asyncio.Event()
        self.measuring = False
        self.target: str | None = None  # the digest being rolled out
        self.max_unavailable = 0
        self.max_slots = 0
        self.max_staging = 0
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
        return snapshot(self.pools.get(self.pool), bns, nodes, self.names, self.target)

    def _event(self) -> None:
        if self.measuring:
            snap = self.snap()
            self.max_unavailable = max(self.max_unavailable, snap.unavailable)
            self.max_slots = max(self.max_slots, snap.in_slots)
            self.max_staging = max(self.max_staging, snap.staging)
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
    while not pool_done(watch.pools.get(watch.pool), digest, len(watch.names)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"pool {watch.pool} not UpToDate on {digest} after {timeout:.0f}s")
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
    limit: float = ROLLOUT_TIMEOUT,
) -> tuple[float, Snapshot]:
    """Show the rollout until the pool is UpToDate on ``digest``; returns (duration, last)."""
    started = time.monotonic()
    reboots_before = len(sim.reboots())
    screen = Screen() if tty else None
    previous: Snapshot | None = None
    last_draw = 0.0
    while True:
        snap = watch.snap()
        done = snap.settled and pool_done(watch.pools.get(watch.pool), digest, len(watch.names))
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
        if elapsed > limit:
            raise TimeoutError(f"the rollout did not finish within {limit:.0f}s")
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
    pool = demo_pool(args, first)
    name = pool["metadata"]["name"]
    rollout = pool["spec"].get("rollout") or {}
    budget = resolve_max_unavailable(rollout.get("maxUnavailable"), len(info.nodes))
    async with await api_client(info.kubeconfig) as api, Watch(api, info.nodes, name) as watch:
        say(
            f"== Pool {name}: every worker node, {describe_rollout(rollout)}, "
            f"image {first.rsplit('@', 1)[0]} ({short(digest_of(first))})"
        )
        await create_object(api, BOOTC_NODE_POOLS, pool)
        await wait_pool(watch, digest_of(first), 180.0)
        say(f"   UpToDate: {len(info.nodes)}/{len(info.nodes)} nodes run v1")

        second = await asyncio.to_thread(sim.push_image, SECOND_IMAGE)
        labels[digest_of(second)] = "v2"
        say(f"== Pushed {second}")
        say(f"== Rolling out v2 ({short(digest_of(second))}): {rollout_story(rollout, budget)}")
        timeout = ROLLOUT_TIMEOUT
        windows, _ = parse_windows(rollout.get("maintenanceWindows"))
        state = window_state(windows, dt.datetime.now(dt.UTC))
        if not state.open and state.next_opening is not None:
            wait = (state.next_opening - dt.datetime.now(dt.UTC)).total_seconds()
            timeout += max(0.0, wait)
            say(f"   outside every maintenance window: {describe_opening(state)} (Ctrl-C stops)")
        say()
        watch.measuring = True
        watch.target = digest_of(second)
        watch.max_unavailable = watch.snap().unavailable
        reboots_before = len(sim.reboots())
        await patch_object(api, BOOTC_NODE_POOLS, name, {"spec": {"image": {"ref": second}}})
        duration, last = await live(
            watch, sim, digest_of(second), labels, tty=tty, color=color, limit=timeout
        )
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
        f"maxUnavailable {budget})"
    )
    say(f"   max reboot slots held   {watch.max_slots}")
    ahead = rollout.get("stageAhead")
    plural = "" if watch.max_staging == 1 else "s"
    say(
        f"   max staging at once     {watch.max_staging} node{plural} "
        f"(stageAhead {'unset: all at once' if ahead is None else ahead})"
    )
    say(f"   cluster start-up        {up_seconds:.1f}s")
    if watch.max_unavailable > budget:
        say("   !! more nodes were unavailable at once than maxUnavailable allows")
        return 1
    return 0


def demo_pool(args: argparse.Namespace, image: str) -> dict[str, Any]:
    """The demo's pool: ``--pool-file`` and the flags over the worker nodes, ``maxUnavailable``
    2 unless told; the demo sets the image (v1 here, v2 for the rollout)."""
    pool = pool_manifest(args, image=image, defaults={"maxUnavailable": DEFAULT_MAX_UNAVAILABLE})
    if pool["spec"]["image"].get("ref") != image:
        say(f"   (the demo rolls out its own images: {pool['spec']['image']['ref']} is not used)")
        pool["spec"]["image"]["ref"] = image
    return pool


def rollout_story(rollout: dict[str, Any], budget: int) -> str:
    """What the rollout will do, e.g. "stage everywhere, then cordon, drain, reboot,
    uncordon, 2 at a time"."""
    ahead = rollout.get("stageAhead")
    stage = "stage everywhere" if ahead is None else f"stage {ahead} ahead of the reboots"
    text = f"{stage}, then cordon, drain, reboot, uncordon, {budget} at a time"
    if rollout.get("maintenanceWindows"):
        text += ", new reboots only inside a maintenance window"
    return text


def keep_message(state_dir: Path, pool: str) -> str:
    sim = AttachedSim.open(state_dir)
    info = sim.info
    return "\n".join(
        [
            "",
            f"== The cluster keeps running (state in {state_dir}). Try:",
            f"   export KUBECONFIG={info.kubeconfig}",
            f"   {info.kubectl} get bnp,bn -w",
            "   hack/sim image push os:v3      # then point the pool at the printed ref:",
            f"   {info.kubectl} patch bnp {pool} --type=merge "
            '-p \'{"spec":{"image":{"ref":"REF@sha256:..."}}}\'',
            "   hack/sim pool --image REF@sha256:... --stage-ahead 1   # the same, with a policy",
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
    add_pool_arguments(parser, max_unavailable_default=DEFAULT_MAX_UNAVAILABLE)
    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    try:  # a bad pool file or flag fails before anything starts
        pool = pool_manifest(args, image="")["metadata"]["name"]
    except PolicyError as exc:
        say(f"demo: error: {exc}")
        return 2
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
            say(keep_message(args.dir, pool))
        else:
            say("== Tearing down")
            clean(args.dir, quiet=True)
            say("   done")
    return rc


if __name__ == "__main__":
    sys.exit(main())
