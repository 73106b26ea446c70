"""``make demo`` (``hack/demo``): OS images rolled out to six simulated nodes, live.

Two scenarios (``--scenario``), on the same cluster:

``rollout`` (the default)
    1. ``hack/sim up --nodes 6`` (in ``.cache/sim`` unless ``--dir``), plus the sample
       workload (so drains move real Pods past a PodDisruptionBudget);
    2. a ``BootcNodePool`` over the worker nodes on the first image, ``maxUnavailable: 2``
       (or the pool of ``--pool-file`` and the rollout-policy flags, ``hack.simlib.policy``:
       ``--stage-ahead``, ``--max-unhealthy``, ``--maintenance-window``,
       ``--max-unavailable``; the demo sets the image); wait until it is ``UpToDate``;
    3. push a second image (``os:v2``) to the registry and point the pool at it;
    4. watch the rollout (informers on pools, BootcNodes, Nodes, Pods and
       PodDisruptionBudgets): a progress bar and a per-node table redrawn in place on
       a terminal, one line per change otherwise (``--plain`` forces that); a drain
       a PodDisruptionBudget holds is shown with what it waits for (the budget, the
       Pods it counts as not healthy: ``hack.simlib.view.drain_waits``);
    5. print a summary: duration, reboots, the most nodes unavailable at once
       (cordoned or NotReady, measured at every Node/BootcNode event), the most
       reboot slots held and the most nodes staging at once; then tear everything
       down, unless ``--keep``.

``bad-image`` (issue #16: the health gate, rollback, canaries)
    The same cluster (each boot reaches ``boot-complete.target``
    ``--boot-complete-delay`` seconds after it starts) and pool, plus
    ``spec.health: {bootComplete: true, timeoutSeconds: 60, onFailure: Rollback}``
    and ``spec.rollout.canary: {nodes: 1}`` (what the pool file leaves out); one
    node is labelled ``bootc.dev/canary``. Then:

    1. push ``os:v2`` labelled ``fakebootc.boot-assessment: fail`` (every boot of it
       fails its boot assessment on the simulated hosts) and point the pool at it: the
       canary stages, reboots into it, its health check is pending then fails, the
       controller points it back at its rollback deployment, its daemon runs ``bootc
       rollback`` and reboots it, it is released on v1; the pool halts
       (``Degraded/HealthCheckFailed``) and nobody else reboots;
    2. push a good ``os:v3`` and point the pool at it: the new target clears the hold,
       the canary goes first and passes, then every other node updates;
    3. the summary says what happened in each step (the canary, its rollback, reboots
       per node, the most nodes unavailable at once) and checks it: a node other
       than the canary rebooted for v2, or more nodes unavailable than
       ``maxUnavailable``, make the exit code 1.

The decisions (when a step is finished, what the reboots say) are pure functions
below (``pool_done``, ``rollback_finished``, ``bad_image_problems`` ...); the rest is
the thin async shell that drives the cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    PODS,
    create_object,
    patch_object,
)
from bootc_operator.kubectl.table import ROLLED_BACK, Screen, digest_of, short
from bootc_operator.policy.poolspec import PoolPolicy, check_pool
from bootc_operator.policy.windows import describe_opening, window_state
from bootc_operator.wording import counted
from hack.simlib.cli import clean, interrupt_on_sigterm, start_detached
from hack.simlib.common import DEFAULT_DIR, SimConfig
from hack.simlib.images import digest_ref, failing_boot
from hack.simlib.policy import PolicyError, add_pool_arguments, describe_rollout, pool_manifest
from hack.simlib.sim import AttachedSim
from hack.simlib.view import Snapshot, changes, render, snapshot
from hack.testenv.kube import api_client
from hack.testenv.monitor import PDBS

DEFAULT_MAX_UNAVAILABLE = 2
SECOND_IMAGE = "os:v2"
THIRD_IMAGE = "os:v3"
ROLLOUT_TIMEOUT = 900.0
SCENARIOS = ("rollout", "bad-image")
#: what the bad-image scenario adds to the pool (unless the pool file sets it)
BAD_IMAGE_HEALTH: dict[str, Any] = {
    "bootComplete": True,
    "timeoutSeconds": 60,
    "onFailure": "Rollback",
}
BAD_IMAGE_NEEDS: dict[str, Any] = {"bootComplete": True, "onFailure": "Rollback"}
BAD_IMAGE_CANARY: dict[str, Any] = {"nodes": 1}
#: seconds from a boot to boot-complete.target in the bad-image scenario (the health
#: check is seen pending first)
BAD_IMAGE_BOOT_COMPLETE_DELAY = 2.0

Reboot = Mapping[str, Any]  # a line of reboots.jsonl (``SimOps.reboots``)
Finished = Callable[[dict[str, Any] | None, Snapshot], bool]


def say(msg: str = "") -> None:
    print(msg, flush=True)


class Watch:
    """Informers on the pool, its BootcNodes and Nodes, and the measurements; on Pods
    and PodDisruptionBudgets too, to say what a drain held by a budget waits for."""

    def __init__(self, api: ApiClient, names: list[str], pool: str) -> None:
        self.names = names
        self.pool = pool
        self.pools = Informer(api, BOOTC_NODE_POOLS, field_selector=f"metadata.name={pool}")
        self.bootc_nodes = Informer(api, BOOTC_NODES)
        self.nodes = Informer(api, NODES)
        self.pods = Informer(api, PODS)
        self.pdbs = Informer(api, PDBS)
        self.changed = asyncio.Event()
        self.measuring = False
        self.target: str | None = None  # the digest being rolled out
        self.max_unavailable = 0
        self.max_slots = 0
        self.max_staging = 0
        for informer in self.informers:
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
        return snapshot(
            self.pools.get(self.pool),
            bns,
            nodes,
            self.names,
            self.target,
            pods=self.pods.list(),
            pdbs=self.pdbs.list(),
        )

    def start_measuring(self, target: str) -> None:
        """Measure afresh (the most nodes unavailable, in slots, staging) for ``target``."""
        self.measuring = True
        self.target = target
        self.max_unavailable = self.snap().unavailable
        self.max_slots = 0
        self.max_staging = 0

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (self.pools, self.bootc_nodes, self.nodes, self.pods, self.pdbs)

    def _event(self) -> None:
        if self.measuring:
            snap = self.snap()
            self.max_unavailable = max(self.max_unavailable, snap.unavailable)
            self.max_slots = max(self.max_slots, snap.in_slots)
            self.max_staging = max(self.max_staging, snap.staging)
        self.changed.set()

    async def __aenter__(self) -> Watch:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            await informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for informer in self.informers:
            await informer.stop()


def _status_current(pool: Mapping[str, Any], digest: str) -> bool:
    status = pool.get("status") or {}
    return (
        status.get("observedGeneration") == pool["metadata"].get("generation")
        and status.get("targetDigest") == digest
    )


def pool_done(pool: Mapping[str, Any] | None, digest: str, total: int) -> bool:
    if not pool:
        return False
    status = pool.get("status") or {}
    up = any(
        cond.get("type") == c.COND_UP_TO_DATE and cond.get("status") == "True"
        for cond in status.get("conditions") or ()
    )
    return up and _status_current(pool, digest) and status.get("updatedCount") == total


def rollback_finished(pool: Mapping[str, Any] | None, snap: Snapshot, bad: str) -> bool:
    """The end of the bad image's rollout: the pool halted on ``bad`` (Degraded
    HealthCheckFailed), a node rolled back from it, every node settled (out of its
    slot, uncordoned, Ready, not rebooting) and the pool's message saying so ("<node>
    failed its health check on <bad> and was rolled back": the status follows the
    BootcNodes a moment later)."""
    if not pool or not _status_current(pool, bad):
        return False
    back = [r.name for r in snap.rows if r.state == ROLLED_BACK and r.failed_on == bad]
    return (
        snap.degraded_reason == c.REASON_HEALTH_CHECK_FAILED
        and bool(back)
        and not any(r.in_slot or r.unavailable or r.state == c.REASON_REBOOTING for r in snap.rows)
        and all(
            f"{name} failed its health check on {bad} and was rolled back" in snap.degraded
            for name in back
        )
    )


def reboots_per_node(reboots: Sequence[Reboot]) -> Counter[str]:
    return Counter(str(r["node"]) for r in reboots)


def bad_image_problems(
    reboots: Sequence[Reboot], rolled_back: Sequence[str], bad_ref: str, old_ref: str
) -> list[str]:
    """What went wrong while the bad image rolled out (``reboots`` in that time;
    ``rolled_back``: the nodes the pool marked so; refs ``repo@digest``): a rolled-back
    node must have booted the bad image then the old one, nobody else may reboot."""
    problems = []
    if not rolled_back:
        problems.append("no node was rolled back")
    for node in rolled_back:
        booted = [r.get("booted") for r in reboots if r["node"] == node]
        if booted[-2:] != [bad_ref, old_ref]:
            problems.append(f"{node} booted {booted}, not the bad image then the old one")
    others = sorted({str(r["node"]) for r in reboots} - set(rolled_back))
    if others:
        problems.append(f"nodes other than the canary rebooted for the bad image: {others}")
    return problems


def canaries_first(reboots: Sequence[Reboot], canaries: Sequence[str]) -> bool:
    """Every canary was back up before any other node's reboot was requested."""
    ups = [float(r["up"]) for r in reboots if r["node"] in canaries]
    others = [float(r["requested"]) for r in reboots if r["node"] not in canaries]
    return bool(ups) and (not others or max(ups) <= min(others))


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
    finished: Finished,
    labels: dict[str, str],
    *,
    tty: bool,
    color: bool,
    limit: float = ROLLOUT_TIMEOUT,
) -> tuple[float, Snapshot]:
    """Show the rollout until ``finished(pool, snapshot)``; returns (duration, last)."""
    started = time.monotonic()
    reboots_before = len(sim.reboots())
    screen = Screen() if tty else None
    previous: Snapshot | None = None
    last_draw = 0.0
    while True:
        snap = watch.snap()
        done = finished(watch.pools.get(watch.pool), snap)
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


@dataclass
class Step:
    """One image rolled out: how long, the last view, the reboots and the peaks."""

    duration: float
    last: Snapshot
    reboots: list[dict[str, Any]] = field(default_factory=list)
    max_unavailable: int = 0
    max_slots: int = 0
    max_staging: int = 0


@dataclass
class Demo:
    """The running demo: cluster, API, watch, display settings."""

    api: ApiClient
    sim: AttachedSim
    watch: Watch
    pool: str
    labels: dict[str, str]
    tty: bool
    color: bool

    async def roll_out(self, ref: str, finished: Finished, limit: float = ROLLOUT_TIMEOUT) -> Step:
        """Point the pool at ``ref`` and show it live until ``finished``."""
        watch = self.watch
        watch.start_measuring(digest_of(ref))
        reboots_before = len(self.sim.reboots())
        await patch_object(self.api, BOOTC_NODE_POOLS, self.pool, {"spec": {"image": {"ref": ref}}})
        duration, last = await live(
            watch, self.sim, finished, self.labels, tty=self.tty, color=self.color, limit=limit
        )
        return Step(
            duration,
            last,
            self.sim.reboots()[reboots_before:],
            watch.max_unavailable,
            watch.max_slots,
            watch.max_staging,
        )


async def demo(args: argparse.Namespace) -> int:
    tty = sys.stdout.isatty() and not args.plain
    color = tty and not os.environ.get("NO_COLOR")
    bad_image = args.scenario == "bad-image"
    delay = args.boot_complete_delay
    if delay is None:
        delay = BAD_IMAGE_BOOT_COMPLETE_DELAY if bad_image else 0.0
    config = SimConfig(
        nodes=args.nodes,
        reboot_seconds=args.reboot_seconds,
        stage_seconds=args.stage_seconds,
        boot_complete_delay=delay,
        controllers=2,
    )
    say(f"== Starting a simulated cluster: {args.nodes} bootc nodes ({args.dir})")
    t0 = time.monotonic()
    info = await asyncio.to_thread(start_detached, args.dir, config)
    up_seconds = time.monotonic() - t0
    sim = AttachedSim(info)
    say(
        f"   up in {up_seconds:.1f}s: control plane, registry {info.registry}, "
        f"{counted(config.controllers, 'controller')}, {counted(len(info.nodes), 'daemon')}"
    )
    for created in await asyncio.to_thread(sim.deploy_workload):
        say(f"   applied {created} (kwok runs its Pods)")

    first = info.first_image
    labels = {digest_of(first): "v1"}
    pool = demo_pool(args, first)
    name = pool["metadata"]["name"]
    rollout = pool["spec"].get("rollout") or {}
    policy = check_pool(pool)  # the controller's own reading of the spec
    budget = policy.budgets(len(info.nodes)).max_unavailable
    async with await api_client(info.kubeconfig) as api, Watch(api, info.nodes, name) as watch:
        say(
            f"== Pool {name}: every worker node, {describe_rollout(rollout)}, "
            f"image {first.rsplit('@', 1)[0]} ({short(digest_of(first))})"
        )
        if bad_image:
            canary = canary_node(info.nodes)
            await patch_object(api, NODES, canary, {"metadata": {"labels": {c.CANARY_LABEL: ""}}})
            say(f"   {health_story(pool['spec'])}; {canary} is labelled {c.CANARY_LABEL}")
        await create_object(api, BOOTC_NODE_POOLS, pool)
        await wait_pool(watch, digest_of(first), 180.0)
        say(f"   UpToDate: {len(info.nodes)}/{len(info.nodes)} nodes run v1")
        run = Demo(api, sim, watch, name, labels, tty, color)
        if bad_image:
            canaries = rollout["canary"].get("nodes")
            return await bad_image_scenario(run, first, budget, up_seconds, canaries == 1)
        return await rollout_scenario(run, rollout, policy, budget, up_seconds)


async def rollout_scenario(
    run: Demo, rollout: dict[str, Any], policy: PoolPolicy, budget: int, up_seconds: float
) -> int:
    second = await asyncio.to_thread(run.sim.push_image, SECOND_IMAGE)
    run.labels[digest_of(second)] = "v2"
    say(f"== Pushed {second}")
    say(f"== Rolling out v2 ({short(digest_of(second))}): {rollout_story(rollout, budget)}")
    timeout = ROLLOUT_TIMEOUT
    state = window_state(policy.windows, dt.datetime.now(dt.UTC))
    if not state.open and state.next_opening is not None:
        wait = (state.next_opening - dt.datetime.now(dt.UTC)).total_seconds()
        timeout += max(0.0, wait)
        say(f"   outside every maintenance window: {describe_opening(state)} (Ctrl-C stops)")
    say()
    step = await run.roll_out(second, updated_on(run.watch, second), timeout)

    say()
    say(f"== Rollout of v2 finished in {step.duration:.1f}s")
    say(
        f"   nodes updated           {step.last.updated}/{step.last.total} (every node runs "
        f"{short(digest_of(second))})"
    )
    say(f"   reboots                 {len(step.reboots)} (each node NotReady ~{downtime(step)})")
    say(
        f"   max unavailable at once {counted(step.max_unavailable, 'node')} "
        f"(cordoned or NotReady; maxUnavailable {budget})"
    )
    say(f"   max reboot slots held   {step.max_slots}")
    ahead = rollout.get("stageAhead")
    say(
        f"   max staging at once     {counted(step.max_staging, 'node')} "
        f"(stageAhead {'unset: all at once' if ahead is None else ahead})"
    )
    say(f"   cluster start-up        {up_seconds:.1f}s")
    if step.max_unavailable > budget:
        say("   !! more nodes were unavailable at once than maxUnavailable allows")
        return 1
    return 0


def updated_on(watch: Watch, ref: str) -> Finished:
    """Finished when the pool is UpToDate on ``ref`` and every node has settled."""
    digest, total = digest_of(ref), len(watch.names)
    return lambda pool, snap: snap.settled and pool_done(pool, digest, total)


def downtime(step: Step) -> str:
    spans = [float(r["up"]) - float(r["down"]) for r in step.reboots]
    return f"{sum(spans) / len(spans) if spans else 0.0:.1f}s"


async def bad_image_scenario(
    run: Demo, first: str, budget: int, up_seconds: float, one_canary: bool
) -> int:
    """Roll out a bad image, then a good one (the module docstring); ``one_canary``:
    the labelled node is the only canary, whose going first is checked."""
    sim = run.sim
    bad = await asyncio.to_thread(sim.push_image, SECOND_IMAGE, failing_boot())
    bad_digest = digest_of(bad)
    run.labels[bad_digest] = "v2"
    say(f"== Pushed {bad}")
    say("   labelled fakebootc.boot-assessment=fail: no boot of it reaches boot-complete.target")
    say(
        f"== Rolling out v2 ({short(bad_digest)}): the canary first, alone; its health "
        "check fails, so it is rolled back and the rollout halts"
    )
    say()
    halted = await run.roll_out(
        bad, lambda pool, snap: rollback_finished(pool, snap, bad_digest), limit=300.0
    )
    rolled_back = [r.name for r in halted.last.rows if r.failed_on == bad_digest]

    good = await asyncio.to_thread(sim.push_image, THIRD_IMAGE)
    run.labels[digest_of(good)] = "v3"
    say()
    say(f"== v2 halted after {halted.duration:.1f}s: {', '.join(rolled_back)} rolled back")
    say(f"   {halted.last.degraded}")
    say(f"== Pushed {good} (a good image)")
    say(
        f"== Rolling out v3 ({short(digest_of(good))}): a new target clears the hold; "
        "the canary goes first, then the rest"
    )
    say()
    fixed = await run.roll_out(good, updated_on(run.watch, good))
    lines, problems = bad_image_report(
        BadImageRun(
            names=run.watch.names,
            halted=halted,
            fixed=fixed,
            bad_ref=digest_ref(bad),
            old_ref=digest_ref(first),
            budget=budget,
            one_canary=one_canary,
        )
    )
    say()
    say("== Summary")
    for line in [*lines, f"cluster start-up        {up_seconds:.1f}s"]:
        say(f"   {line}")
    for problem in problems:
        say(f"   !! {problem}")
    return 1 if problems else 0


@dataclass(frozen=True)
class BadImageRun:
    """What the bad-image scenario saw: the bad image's step (``halted``), the good
    one's (``fixed``), the images (``repo@digest``) and the pool's budget."""

    names: Sequence[str]
    halted: Step
    fixed: Step
    bad_ref: str
    old_ref: str
    budget: int
    one_canary: bool = True


def bad_image_report(run: BadImageRun) -> tuple[list[str], list[str]]:
    """The summary lines and the problems (each makes the demo fail) of a bad-image run."""
    halted, fixed = run.halted, run.fixed
    bad = digest_of(run.bad_ref)
    rows = {r.name: r for r in halted.last.rows}
    rolled_back = [r.name for r in halted.last.rows if r.failed_on == bad]
    problems = bad_image_problems(halted.reboots, rolled_back, run.bad_ref, run.old_ref)
    canaries = [r.name for r in fixed.last.rows if r.canary]
    first_ok = canaries_first(fixed.reboots, canaries)
    if run.one_canary and not first_ok:
        problems.append(f"another node rebooted for v3 before the canary {canaries} was back up")
    if fixed.last.updated != fixed.last.total:
        problems.append(f"only {fixed.last.updated}/{fixed.last.total} nodes run v3")
    worst = max(halted.max_unavailable, fixed.max_unavailable)
    if worst > run.budget:
        problems.append("more nodes were unavailable at once than maxUnavailable allows")

    others = len(run.names) - len(rolled_back)
    staged = sum(r.state == c.REASON_STAGED for r in halted.last.rows)
    rebooted = len(set(reboots_per_node(halted.reboots)) - set(rolled_back))
    who = ", ".join(rolled_back) or "no node"
    lines = [
        f"v2 (bad image)          {who} (the canary) rebooted into it, failed its health "
        f"check, was rolled back (bootc rollback, reboot) and released on v1: "
        f"{halted.duration:.1f}s",
        *(f"  {name}: {rows[name].message}" for name in rolled_back if rows[name].message),
        f"                        the other {counted(others, 'node')}: {staged} staged v2, "
        f"{rebooted} rebooted",
        f"pool                    halted: {halted.last.degraded.removeprefix('Degraded=True ')}",
        f"v3 (good image)         {fixed.last.updated}/{fixed.last.total} nodes updated in "
        f"{fixed.duration:.1f}s; "
        + (
            f"the canary {', '.join(canaries)} first, healthy before any other node rebooted"
            if canaries and first_ok
            else "canaries not checked"
            if not run.one_canary
            else "NOT canary first"
        ),
    ]
    total = reboots_per_node([*halted.reboots, *fixed.reboots])
    lines += [
        "reboots per node        "
        + ", ".join(f"{n} {total.get(n, 0)}" for n in run.names)
        + f" ({sum(total.values())} in all, each NotReady ~{downtime(fixed)})",
        f"max unavailable at once {counted(worst, 'node')} (cordoned or NotReady; maxUnavailable "
        f"{run.budget})",
        f"max reboot slots held   {max(halted.max_slots, fixed.max_slots)}",
    ]
    return lines, problems


def canary_node(names: Sequence[str]) -> str:
    """The node the bad-image scenario labels ``bootc.dev/canary``: one in the middle,
    so that the label, not the name order, is seen to choose it."""
    return names[len(names) // 2]


def demo_pool(args: argparse.Namespace, image: str) -> dict[str, Any]:
    """The demo's pool: ``--pool-file`` and the flags over the worker nodes, ``maxUnavailable``
    2 unless told; the demo sets the image (v1 here, v2 for the rollout). The bad-image
    scenario adds ``spec.health`` and ``spec.rollout.canary`` where the file leaves them out
    (``bootComplete`` and ``onFailure: Rollback`` always: the story needs them)."""
    pool = pool_manifest(args, image=image, defaults={"maxUnavailable": DEFAULT_MAX_UNAVAILABLE})
    if pool["spec"]["image"].get("ref") != image:
        say(f"   (the demo rolls out its own images: {pool['spec']['image']['ref']} is not used)")
        pool["spec"]["image"]["ref"] = image
    if getattr(args, "scenario", "rollout") == "bad-image":
        # the file may tune the gate and the canaries; what the story needs wins
        spec = pool["spec"]
        spec["health"] = {**BAD_IMAGE_HEALTH, **(spec.get("health") or {}), **BAD_IMAGE_NEEDS}
        spec["rollout"]["canary"] = {**BAD_IMAGE_CANARY, **(spec["rollout"].get("canary") or {})}
    return pool


def health_story(spec: Mapping[str, Any]) -> str:
    """``spec.health`` and the canaries in one line, e.g. "health: bootComplete, timeout
    60s, onFailure Rollback; canary: 1 node"."""
    health = spec.get("health") or {}
    checks = [k for k in ("bootComplete",) if health.get(k)]
    if health.get("minReadySeconds"):
        checks.append(f"minReadySeconds {health['minReadySeconds']}")
    if health.get("pods"):
        checks.append("pods")
    text = (
        f"health: {', '.join(checks) or 'Ready'}, timeout {health.get('timeoutSeconds', 600)}s, "
        f"onFailure {health.get('onFailure', 'Halt')}"
    )
    canary = (spec.get("rollout") or {}).get("canary")
    if canary is not None:
        count = canary.get("nodes", 1)
        text += f"; canary: {counted(count, 'node')}"
        if canary.get("requireApproval"):
            text += " (requires approval)"
    return text


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
            "   hack/sim image push os:v4      # then point the pool at the printed ref:",
            f"   {info.kubectl} patch bnp {pool} --type=merge "
            '-p \'{"spec":{"image":{"ref":"REF@sha256:..."}}}\'',
            "   hack/sim pool --image REF@sha256:... --stage-ahead 1   # the same, with a policy",
            "   hack/sim image push os:v5 --label fakebootc.boot-assessment=fail   # boots fail",
            "   hack/sim status",
            "   hack/sim down                  # stop it and remove the state directory",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hack/demo", description="Roll new OS images out to simulated bootc nodes, live."
    )
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="rollout",
        help="rollout: one new image to every node (default); bad-image: a canary fails its "
        "health check on a bad image and is rolled back, then a good image goes everywhere",
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--nodes", type=int, default=6, help="(default: %(default)s)")
    parser.add_argument(
        "--reboot-seconds", type=float, default=4.0, help="NotReady time per reboot"
    )
    parser.add_argument(
        "--stage-seconds", type=float, default=2.0, help="time to stage an image per node"
    )
    parser.add_argument(
        "--boot-complete-delay",
        type=float,
        default=None,
        help="seconds from a boot to boot-complete.target (or a failed boot assessment) "
        f"(default: {BAD_IMAGE_BOOT_COMPLETE_DELAY} with bad-image, else 0)",
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
