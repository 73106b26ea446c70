"""Chaos: 12 simulated nodes, maxUnavailable 3, things break mid-rollout; the invariants hold.

One ``hack/sim`` for the module: 12 nodes, each with a real ``bootc-operator
daemon`` process on a simulated host, two leader-elected controller processes, a
real control plane and registry. Every scenario is a fresh rollout of all 12 nodes
to a newly pushed image (its own pool, ``e2e.simenv.PoolRun``), watched from start
to end by the safety monitor (never more than 3 nodes in reboot slots, cordoned by
us or NotReady; no reboot with a pod still bound; no PDB broken; at the end every
node on the target, none cordoned, the pool UpToDate), whose summary is printed:

(a) the leading controller is SIGKILLed each time a new leader has moved the rollout
    on (a slot taken or released), all through the rollout;
(b) kube-apiserver is stopped and restarted mid-rollout;
(c) daemons are SIGKILLed while their nodes stage;
(d) the registry is down while the nodes start staging, then comes back;
(e) one node fails to stage, permanently: the rollout goes around it and the pool
    says which node and why;
(f) two nodes never come back Ready from their reboot: with ``rebootTimeoutSeconds``
    the pool reports RolloutHalted naming them and no slot is handed out while
    halted; once they come back the rollout finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import LEASES, ApiError
from bootc_operator.kube.rest import get_object
from e2e.helpers import condition, unique_name, wait_for
from e2e.simenv import PoolRun, digest_of, push, reboots_since
from hack.simlib import Sim, SimConfig, SimError
from hack.simlib.common import LEASE_NAME
from hack.simlib.common import NAMESPACE as SIM_NAMESPACE
from hack.testenv import api_client

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

#: four waves of maxUnavailable: enough for every fault to meet a slot taken, a slot
#: freed and nodes still waiting (20 nodes took about twice the CPU, asserting the same)
NODES = 12
MAX_UNAVAILABLE = 3
ROLLOUT = 300.0  # deadline for a whole rollout under chaos on a loaded 2-core machine


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    config = SimConfig(nodes=NODES, reboot_seconds=1.0, stage_seconds=2.0, controllers=2)
    with Sim(config, tmp_path_factory.mktemp("chaos") / "sim") as s:
        yield s


@pytest.fixture
async def api(sim: Sim) -> AsyncIterator[ApiClient]:
    async with await api_client(sim.kubeconfig) as client:
        yield client


def in_state(run: PoolRun, reason: str) -> list[str]:
    """Pool nodes whose BootcNode (in the monitor's cache) reports ``Idle=False/<reason>``."""
    return sorted(
        bn["metadata"]["name"]
        for bn in run.monitor.members()
        if condition(bn, c.COND_IDLE).get("reason") == reason
    )


def check_rollout(sim: Sim, run: PoolRun, skip: tuple[str, ...] = ()) -> None:
    """Every node (but ``skip``) rebooted exactly once during the scenario."""
    counts = reboots_since(sim, run.started)
    expected = {n: 1 for n in run.nodes if n not in skip}
    assert counts == expected, f"reboots per node: {counts}"


# ------------------------------------------------------------------ (a)


async def lease_holder(api: ApiClient) -> str:
    try:
        lease = await get_object(api, LEASES, LEASE_NAME, SIM_NAMESPACE)
    except ApiError:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def kill_leaders(api: ApiClient, sim: Sim, run: PoolRun, done: asyncio.Event) -> list[str]:
    """SIGKILL every new leader once it moved the rollout on; returns who was killed."""
    killed: list[str] = []

    def progress() -> int:
        return len(run.monitor.takes) + len(run.monitor.releases)

    async def pause() -> None:  # poll interval, cut short when the rollout is done
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 0.2)

    while not done.is_set():
        holder = await lease_holder(api)
        if not holder or holder in killed:
            await pause()
            continue
        seen = progress()
        while progress() == seen and not done.is_set():
            await pause()
        if done.is_set():
            break
        if await lease_holder(api) != holder:
            continue  # it lost the lease meanwhile
        name = holder.split("_", 1)[0]  # controller-N_<suffix>
        try:
            sim.kill(name)
        except (SimError, ProcessLookupError) as exc:  # it may be restarting right now
            print(f"could not kill {name}: {exc}")
            continue
        killed.append(holder)
    return killed


async def test_a_leader_sigkilled_all_through_the_rollout(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-a")
    async with PoolRun(api, sim, unique_name("chaos-a"), sim.nodes, MAX_UNAVAILABLE) as run:
        done = asyncio.Event()
        killer = asyncio.create_task(kill_leaders(api, sim, run, done))
        try:
            await run.create(image)
            await run.wait_up_to_date(digest_of(image), ROLLOUT)
        finally:
            done.set()
            killed = await killer
        print(f"leaders killed: {len(killed)}: {killed}")
        assert len(killed) >= 3, killed
        await run.finish(digest_of(image))
    check_rollout(sim, run)


# ------------------------------------------------------------------ (b)


async def test_b_apiserver_restarted_mid_rollout(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-b")
    cp = sim.control_plane
    assert cp is not None
    async with PoolRun(api, sim, unique_name("chaos-b"), sim.nodes, MAX_UNAVAILABLE) as run:
        await run.create(image)
        await wait_for(lambda: len(run.monitor.takes) >= 4, ROLLOUT, "the rollout under way")
        stopped = time.monotonic()
        await asyncio.to_thread(cp.stop_apiserver)
        await asyncio.to_thread(cp.start_apiserver)
        print(f"kube-apiserver down for {time.monotonic() - stopped:.1f}s")
        await run.wait_up_to_date(digest_of(image), ROLLOUT)
        await run.finish(digest_of(image))
    check_rollout(sim, run)


# ------------------------------------------------------------------ (c)


async def test_c_daemons_sigkilled_while_staging(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-c")
    async with PoolRun(api, sim, unique_name("chaos-c"), sim.nodes, MAX_UNAVAILABLE) as run:
        await run.create(image)

        def several_staging() -> list[str]:
            nodes = in_state(run, c.REASON_STAGING)
            return nodes[:8] if len(nodes) >= 5 else []

        staging = await wait_for(several_staging, 60, "nodes staging", interval=0.05)
        before = sim.processes()
        for node in staging:
            sim.kill(f"daemon/{node}")
        print(f"SIGKILLed the daemons of {staging} while staging")

        def restarted() -> bool:
            now = sim.processes()
            return all(
                now[f"daemon/{n}"]["restarts"] > before[f"daemon/{n}"]["restarts"]
                and now[f"daemon/{n}"]["pid"]
                for n in staging
            )

        await wait_for(restarted, 60, "the killed daemons restarted")
        await run.wait_up_to_date(digest_of(image), ROLLOUT)
        await run.finish(digest_of(image))
    check_rollout(sim, run)


# ------------------------------------------------------------------ (d)


async def test_d_registry_down_while_staging(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-d")
    registry = sim.registry
    assert registry is not None
    try:
        async with PoolRun(api, sim, unique_name("chaos-d"), sim.nodes, MAX_UNAVAILABLE) as run:
            await asyncio.to_thread(registry.stop)
            await run.create(image)
            pool = await run.wait(
                lambda p: (
                    (p.get("status") or {}).get("degradedCount", 0) >= NODES // 2
                    and condition(p, c.COND_DEGRADED).get("reason") == c.REASON_NODE_DEGRADED
                    and "pinging container registry" in condition(p, c.COND_DEGRADED)["message"]
                ),
                90,
                "nodes failing to pull while the registry is down",
            )
            print("while down:", condition(pool, c.COND_DEGRADED)["message"][:300])
            assert run.monitor.takes == [], "nothing staged, so no slot"
            await asyncio.to_thread(registry.start)
            await run.wait_up_to_date(digest_of(image), ROLLOUT)
            await run.wait(
                lambda p: condition(p, c.COND_DEGRADED).get("status") == "False", 60, "healthy"
            )
            await run.finish(digest_of(image))
        check_rollout(sim, run)
    finally:
        if not registry.running:
            await asyncio.to_thread(registry.start)


# ------------------------------------------------------------------ (e)


async def test_e_one_node_never_stages(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-e")
    broken = sim.nodes[6]
    message = "Switching: Pulling: Importing: layer sha256:0bad: disk quota exceeded"
    host = sim.host(broken)
    host.set_fault("switch-fail", message=message)
    try:
        async with PoolRun(api, sim, unique_name("chaos-e"), sim.nodes, MAX_UNAVAILABLE) as run:
            await run.create(image)

            def around(p: dict[str, Any]) -> bool:
                status = p.get("status") or {}
                deg = condition(p, c.COND_DEGRADED)
                return (
                    status.get("updatedCount") == NODES - 1
                    and status.get("degradedCount") == 1
                    and deg.get("reason") == c.REASON_NODE_DEGRADED
                    and f"{broken}: bootc switch" in deg.get("message", "")
                    and message in deg.get("message", "")
                )

            pool = await run.wait(around, ROLLOUT, f"every node but {broken} updated")
            print("pool Degraded:", condition(pool, c.COND_DEGRADED)["message"])
            up = condition(pool, c.COND_UP_TO_DATE)
            assert up["status"] == "False" and "1 degraded" in up["message"], up
            assert broken not in {n for _, n in run.monitor.takes}, "never given a slot"
            assert host.state().staged is None
            await run.finish(digest_of(image), exclude=(broken,))
        check_rollout(sim, run, skip=(broken,))
    finally:
        host.clear_faults()


# ------------------------------------------------------------------ (f)


async def test_f_two_nodes_never_back_halt_the_rollout(api: ApiClient, sim: Sim) -> None:
    image = await push(sim, "os:chaos-f")
    held = sim.nodes[:2]  # the first two slots go to them (all staged, taken by name)
    for node in held:
        sim.hold(node)
    try:
        async with PoolRun(api, sim, unique_name("chaos-f"), sim.nodes, MAX_UNAVAILABLE) as run:
            # paused until every node is staged, so the first slots are taken by name
            await run.create(image, paused=True, rebootTimeoutSeconds=15)
            await wait_for(
                lambda: len(in_state(run, c.REASON_STAGED)) == NODES, 90, "every node staged"
            )
            await run.patch({"rollout": {"paused": False}})
            halted = await run.wait_degraded(c.REASON_ROLLOUT_HALTED, tuple(held), ROLLOUT)
            print("halted:", condition(halted, c.COND_DEGRADED)["message"])
            halt_start = run.monitor.halts[0][0] if run.monitor.halts else run.monitor.now()
            # the other slot holders finish: a slot is free, yet none is taken
            await wait_for(
                lambda: run.monitor.holders() == set(held), 60, "only the held nodes in slots"
            )
            # make every reconciler look again while halted
            gen = (await run.patch({"rollout": {"drainTimeoutSeconds": 600}}))["metadata"][
                "generation"
            ]
            await run.wait(
                lambda p: (
                    p["status"].get("observedGeneration") == gen
                    and condition(p, c.COND_DEGRADED).get("reason") == c.REASON_ROLLOUT_HALTED
                ),
                60,
                "still halted after a fresh look",
            )
            released = run.monitor.now()
            for node in held:
                sim.hold(node, held=False)
            taken = run.monitor.takes_between(halt_start, released)
            assert taken == [], f"slots taken while halted: {taken}"
            await run.wait_up_to_date(digest_of(image), ROLLOUT)
            print("halt periods:", run.monitor.halts, run.monitor.halt_messages)
            for text in run.monitor.halt_messages:
                named = {n for n in sim.nodes if n in text.split("(", 1)[-1]}
                assert named == set(held), f"a halt blamed other nodes: {text}"
            await run.finish(digest_of(image))
        check_rollout(sim, run)
    finally:
        for node in held:
            sim.hold(node, held=False)
