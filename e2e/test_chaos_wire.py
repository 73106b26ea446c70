"""Chaos with faults on the wire: every component reaches the apiserver through a proxy
that breaks requests, from a printed seed; the safety monitor checks every event.

One ``hack/sim`` for the module (``NODES`` nodes, two leader-elected controllers,
the apiserver's audit log on), with each controller and each daemon given a
listener of its own on a ``hack.testenv.faultproxy.FaultProxy`` in this process.
Each seed is one rollout of every node to a new image:

1. the proxy is reseeded (``Profile.from_seed``: fault rate and mix) and injects
   faults on every listener from the pool's creation on: resets before and after
   forwarding, watches reset mid-stream, cut bodies, cut JSON with 2xx, delays,
   429/500/503 with Retry-After;
2. once a drawn number of slots were taken, the leading controller's listener is
   partitioned for a drawn time, in a drawn mode: ``reset`` (it reaches nothing),
   ``hang`` (its requests go unanswered until the heal) or ``lease`` (only its
   Lease requests fail: it can still write everything else, the case where a
   leader that does not stop at once writes beside the new one);
3. a drawn time after the partition healed, the faults stop; the pool must then
   converge within ``CONVERGE`` seconds.

The monitor (``hack.testenv.monitor.SafetyMonitor``) checks, at every event:
never more than maxUnavailable in slots / cordoned / unavailable, no reboot with a
pod bound, no node rebooting twice, at most one controller writing (from the
audit log), convergence in time; at the end every node on the target, none
cordoned, each rebooted once (also from the simulator's own record).

Seeds: ``BOOTC_CHAOS_SEEDS=1,2,3`` runs those (a failing seed reproduces its
faults' schedule: the same profile, the same draws per component, the same
partition); otherwise ``BOOTC_CHAOS_COUNT`` (default 2) fresh random seeds, each
printed. ``BOOTC_CHAOS_REPORT=FILE`` appends one JSON line per seed (seed, faults
by kind, most controllers writing at once, leader handovers, violations): what
``hack/chaos-soak`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import LEASES, ApiError
from bootc_operator.kube.rest import get_object
from e2e.helpers import unique_name, wait_for
from e2e.simenv import PoolRun, digest_of, push, reboots_since
from hack.pytest_parallel import collection_random
from hack.simlib import Sim, SimConfig, SimError
from hack.simlib.common import LEASE_NAME
from hack.simlib.common import NAMESPACE as SIM_NAMESPACE
from hack.testenv.controlplane import ControlPlane
from hack.testenv.faultproxy import PARTITION_MODES, ProxyThread
from hack.testenv.kube import api_client
from hack.testenv.procs import log_tail

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

NODES = 12
MAX_UNAVAILABLE = 3
LEASE_DURATION = 4.0  # the simulation's --lease-duration
#: deadline for the pool to converge once the faults stop (a loaded 2-core machine)
CONVERGE = 240.0
#: deadline for the rollout to reach the partition point, faults on
UNDER_WAY = 240.0


def chosen_seeds() -> list[int]:
    given = os.environ.get("BOOTC_CHAOS_SEEDS", "").strip()
    if given:
        return [int(s) for s in given.replace(",", " ").split()]
    count = int(os.environ.get("BOOTC_CHAOS_COUNT", "2"))
    # the same fresh seeds in every parallel worker: each collects the tests, and
    # they must agree on the parameters
    rng = collection_random()
    return [rng.randrange(1, 2**31) for _ in range(count)]


SEEDS = chosen_seeds()


@dataclass
class Wire:
    sim: Sim
    proxy: ProxyThread


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    holder: list[ProxyThread] = []
    kube_dir = tmp_path_factory.mktemp("kubeconfigs")

    def through_proxy(cp: ControlPlane, processes: list[str]) -> Mapping[str, Path]:
        proxy = ProxyThread(cp.server, cp.pki, seed=0)
        holder.append(proxy)
        paths = {}
        for name in processes:
            proxy.call(proxy.proxy.listen, name)
            path = kube_dir / f"{name.replace('/', '-')}.kubeconfig"
            paths[name] = proxy.do(proxy.proxy.kubeconfig, name, path)
        return paths

    config = SimConfig(
        nodes=NODES, reboot_seconds=1.0, stage_seconds=2.0, controllers=2, audit=True
    )
    try:
        with Sim(config, tmp_path_factory.mktemp("wire") / "sim", kubeconfigs=through_proxy) as s:
            yield Wire(s, holder[0])
    finally:
        for proxy in holder:
            proxy.close()


@pytest.fixture
async def api(wire: Wire) -> AsyncIterator[ApiClient]:
    async with await api_client(wire.sim.kubeconfig) as client:
        yield client


async def leader_listener(api: ApiClient, *, identity: bool = False) -> str:
    """The listener of the controller holding the Lease (``controller-N``; with
    ``identity`` its whole holder identity), "" if none."""
    try:
        lease = await get_object(api, LEASES, LEASE_NAME, SIM_NAMESPACE)
    except ApiError:
        return ""
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    return holder if identity else holder.split("_", 1)[0]


async def fresh_controllers(api: ApiClient, sim: Sim) -> None:
    """Restart both controllers (SIGTERM: they hand the Lease back) and wait for a new
    leader, so a seed starts the same whatever the seed before it left behind."""
    before = sim.processes()
    names = [n for n in before if n.startswith("controller-")]
    old = await leader_listener(api, identity=True)
    for name in names:
        with contextlib.suppress(SimError, ProcessLookupError):
            sim.kill(name, signal.SIGTERM)

    async def restarted() -> bool:
        now = sim.processes()
        fresh = all(now[n]["pid"] and now[n]["restarts"] > before[n]["restarts"] for n in names)
        return fresh and (await leader_listener(api, identity=True)) not in ("", old)

    await wait_for(restarted, 90, "both controllers restarted and one leading")


@dataclass(frozen=True)
class Plan:
    """What a seed does besides the per-request faults (drawn from the seed)."""

    partition_after_takes: int
    partition_mode: str
    partition_seconds: float
    faults_after_heal: float

    @classmethod
    def from_seed(cls, seed: int) -> Plan:
        rng = random.Random(f"plan/{seed}")
        short = rng.random() < 0.25  # shorter than the renew deadline: no handover needed
        return cls(
            partition_after_takes=rng.randint(1, NODES // 3),
            partition_mode=rng.choice(PARTITION_MODES),
            partition_seconds=round(
                rng.uniform(1.0, 2.5) if short else rng.uniform(LEASE_DURATION + 2, 14.0), 1
            ),
            faults_after_heal=round(rng.uniform(1.0, 8.0), 1),
        )


def report(path: str, doc: dict[str, Any]) -> None:
    if path:
        with Path(path).open("a") as f:
            f.write(json.dumps(doc, sort_keys=True) + "\n")


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed={s}" for s in SEEDS])
async def test_a_rollout_through_faults_on_the_wire(api: ApiClient, wire: Wire, seed: int) -> None:
    sim, proxy = wire.sim, wire.proxy
    plan = Plan.from_seed(seed)
    proxy.do(proxy.proxy.reseed, seed)
    print(f"\n=== chaos seed {seed} (reproduce: BOOTC_CHAOS_SEEDS={seed})")
    print(f"faults: {proxy.proxy.profile.describe()}")
    print(f"plan: {plan}")
    started = time.monotonic()
    await fresh_controllers(api, sim)
    restarts_before = {n: p["restarts"] for n, p in sim.processes().items()}
    image = await push(sim, f"os:wire-{seed}")
    target = digest_of(image)
    doc: dict[str, Any] = {"seed": seed, "plan": plan.__dict__, "violations": ["unfinished"]}
    run = PoolRun(
        api,
        sim,
        unique_name("wire"),
        sim.nodes,
        MAX_UNAVAILABLE,
        target=target,
        audit_log=Path(sim.info.audit_log),
        lease_name=LEASE_NAME,
        once_per_node=True,
        converge_within=CONVERGE,
    )
    try:
        async with run:
            proxy.do(proxy.proxy.start_faults)
            await run.create(image)
            await wait_for(
                lambda: len(run.monitor.takes) >= plan.partition_after_takes,
                UNDER_WAY,
                f"{plan.partition_after_takes} slots taken",
            )
            leader = await wait_for(lambda: leader_listener(api), 60, "a leader")
            proxy.do(proxy.proxy.partition, leader, plan.partition_mode)
            print(f"t={run.monitor.now():.1f}s partitioned {leader} ({plan.partition_mode})")
            await asyncio.sleep(plan.partition_seconds)  # the fault's length, not a sync
            proxy.do(proxy.proxy.heal, leader)
            print(f"t={run.monitor.now():.1f}s healed {leader}")
            await asyncio.sleep(plan.faults_after_heal)  # the fault's length, not a sync
            proxy.do(proxy.proxy.stop_faults)
            run.monitor.faults_stopped()
            print(f"t={run.monitor.now():.1f}s faults stopped")
            await run.wait_up_to_date(target, CONVERGE)
            try:
                await run.finish(target)
            finally:
                doc.update(outcome(run, proxy, started))
                doc["restarts"] = {
                    n: p["restarts"] - restarts_before.get(n, 0)
                    for n, p in sim.processes().items()
                    if p["restarts"] > restarts_before.get(n, 0)
                }
                print_outcome(doc)
                print(f"processes that exited on their own: {doc['restarts'] or 'none'}")
                for name in doc["restarts"]:
                    if name.startswith("daemon/"):
                        log = sim.state_dir / "logs" / f"daemon-{name.split('/', 1)[1]}.log"
                        print(f"  {name}'s log:\n{log_tail(log, 25)}")
                print_leadership(sim)
        counts = reboots_since(sim, run.started)
        assert counts == dict.fromkeys(run.nodes, 1), f"reboots per node: {counts}"
    finally:
        if doc.get("violations") == ["unfinished"]:
            doc.update(outcome(run, proxy, started))
            doc["violations"] = [*doc["violations"], "unfinished"]
            print_outcome(doc)
        report(os.environ.get("BOOTC_CHAOS_REPORT", ""), doc)


def outcome(run: PoolRun, proxy: ProxyThread, started: float) -> dict[str, Any]:
    m = run.monitor
    return {
        "faults": proxy.do(proxy.proxy.faults),
        "requests": proxy.proxy.requests,
        "max_writers": m.summary.max_writers,
        "controller_writes": m.writers.writes,
        "handovers": m.writers.report(),
        "handover_figures": [h.figures() for h in m.writers.handovers if h.old is not None],
        "converged_after": m.summary.converged_after,
        "violations": list(m.violations),
        "seconds": round(time.monotonic() - started, 1),
    }


def print_leadership(sim: Sim, lines: int = 6) -> None:
    """The controllers' last log lines about the Lease."""
    for name in ("controller-1", "controller-2"):
        path = sim.state_dir / "logs" / f"{name}.log"
        with contextlib.suppress(FileNotFoundError):
            found = [
                t for t in path.read_text().splitlines() if "lead" in t or "lease" in t.lower()
            ]
            for text in found[-lines:]:
                print(f"  {name}: {text[:220]}")


def print_outcome(doc: dict[str, Any]) -> None:
    print(f"seed {doc['seed']}: faults injected {doc['faults']} ({doc['requests']} requests)")
    print(f"most controllers writing at once: {doc['max_writers']}")
    for line in doc["handovers"]:
        print(f"  handover: {line}")
    print(f"converged {doc['converged_after']}s after the faults stopped")
    violations = doc["violations"]
    print(f"violations: {len(violations)}")
    for text in violations[:10]:
        print(f"  {text}")
    if len(violations) > 10:
        print(f"  ... and {len(violations) - 10} more")
