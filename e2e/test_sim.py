"""The whole system on ``hack/sim``: real control plane, registry, controllers and daemons.

Only the hosts (``hack.fakebootc``) and kubelets (the node simulator, kwok) are
simulated. The first test drives the ``hack/sim`` command the way a user does
(``up``, ``image push``, ``down``) and rolls a pool out to a second image through
real daemon processes and simulated reboots; the next one has ``up`` and ``pool``
apply a pool from a pool file and rollout-policy flags; the others check that no
process outlives a simulation, even when its supervisor is SIGKILLed, and the
in-process ``Sim`` API that later whole-system tests build on. The last one runs
``hack/demo --scenario bad-image`` (plain output) and checks from the hosts and the
reboot log that what its summary claims happened. The fault test gives one
simulation each ``hack/sim fault`` in turn and checks that its gate catches it,
then that clearing them lets a rollout finish.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS
from bootc_operator.kube.rest import create_object, get_object, list_objects, patch_object
from bootc_operator.kubectl.table import node_row
from e2e.helpers import condition, unique_name, wait_for
from e2e.simenv import run_sim_cli, sim_cli
from hack.simlib import AttachedSim, Sim, SimConfig, SimInfo, faults
from hack.simlib.demo import canary_node
from hack.simlib.images import digest_ref
from hack.simlib.reaper import leftovers, teardown
from hack.testenv import api_client
from hack.testenv.controlplane import REPO_ROOT
from hack.testenv.pools import pool_body

# each test runs a simulation of its own: parallel workers take them one by one
pytestmark = [pytest.mark.slow, pytest.mark.spread]

MAX_UNAVAILABLE = 2


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sim"
    try:
        yield path
    finally:
        teardown(path)  # whatever the test did: no process may outlive it


def up_to_date_on(pool: dict[str, Any], digest: str, total: int) -> bool:
    status = pool.get("status") or {}
    up = any(
        cond["type"] == c.COND_UP_TO_DATE and cond["status"] == "True"
        for cond in status.get("conditions") or ()
    )
    return (
        up
        and status.get("targetDigest") == digest
        and status.get("updatedCount") == total
        and status.get("observedGeneration") == pool["metadata"]["generation"]
    )


async def test_rollout_through_real_daemons_and_down_leaves_nothing(state_dir: Path) -> None:
    out = await asyncio.to_thread(
        sim_cli,
        state_dir,
        "up",
        "--nodes=3",
        "--reboot-seconds=1",
        "--stage-seconds=0.2",
    )
    assert "export KUBECONFIG=" in out and "export SIM_IMAGE=" in out
    info = SimInfo.load(state_dir)
    assert info is not None and info.ready and len(info.nodes) == 3
    first = info.first_image
    first_digest = first.rsplit("@", 1)[1]

    async with await api_client(info.kubeconfig) as api:
        nodes, _ = await list_objects(api, NODES)
        assert sorted(n["metadata"]["name"] for n in nodes) == info.nodes
        for obj in nodes:
            labels = obj["metadata"]["labels"]
            assert labels["node-role.kubernetes.io/worker"] == ""
            assert labels["topology.kubernetes.io/zone"].startswith("zone-")

        # Safety log: slot holders and unavailable (cordoned or NotReady) nodes at every event.
        peaks = {"slots": 0, "unavailable": 0}
        bns = Informer(api, BOOTC_NODES)
        node_inf = Informer(api, NODES)

        def observe(*_: Any) -> None:
            rows = [node_row(n, node_inf.get(n), bns.get(n)) for n in info.nodes if bns.get(n)]
            peaks["slots"] = max(peaks["slots"], sum(r.in_slot for r in rows))
            peaks["unavailable"] = max(peaks["unavailable"], sum(r.unavailable for r in rows))

        for inf in (bns, node_inf):
            inf.add_event_handler(EventHandler(on_add=observe, on_update=observe))
            inf.start()
        try:
            for inf in (bns, node_inf):
                await inf.wait_for_sync()
            pool = unique_name("workers")
            await create_object(
                api,
                BOOTC_NODE_POOLS,
                pool_body(pool, {"node-role.kubernetes.io/worker": ""}, first, MAX_UNAVAILABLE),
            )

            async def on(digest: str) -> bool:
                obj = await get_object(api, BOOTC_NODE_POOLS, pool)
                return up_to_date_on(obj, digest, 3)

            await wait_for(lambda: on(first_digest), 90, "the pool UpToDate on the first image")

            second = await asyncio.to_thread(sim_cli, state_dir, "image", "push", "os:v2")
            second = second.strip()
            assert second.startswith(f"{info.registry}/os:v2@sha256:")
            second_digest = second.rsplit("@", 1)[1]
            assert second_digest != first_digest
            await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"image": {"ref": second}}})
            await wait_for(lambda: on(second_digest), 150, "the rollout of the second image")

            async def settled() -> bool:
                items, _ = await list_objects(api, NODES)
                return all(not (n.get("spec") or {}).get("unschedulable") for n in items)

            await wait_for(settled, 30, "every node uncordoned")
        finally:
            for inf in (bns, node_inf):
                await inf.stop()

    # Every host really rebooted into the pushed image, once; never more than
    # maxUnavailable nodes were in slots or unavailable at once.
    sim = AttachedSim(info)
    for node in info.nodes:
        state = sim.host(node).state()
        assert state.booted is not None and state.booted.image == digest_ref(second), node
        assert state.rollback is not None and state.rollback.image == digest_ref(first), node
    assert sorted(r["node"] for r in sim.reboots()) == info.nodes
    assert 1 <= peaks["slots"] <= MAX_UNAVAILABLE, peaks
    assert 1 <= peaks["unavailable"] <= MAX_UNAVAILABLE, peaks

    await asyncio.to_thread(sim_cli, state_dir, "down")
    assert not await asyncio.to_thread(state_dir.exists)
    assert leftovers(state_dir) == []


async def test_up_and_pool_apply_a_pool_file_and_policy_flags(
    state_dir: Path, tmp_path: Path
) -> None:
    pool_file = tmp_path / "pool.yaml"
    pool_file.write_text(
        "metadata: {name: edge}\n"
        "spec:\n"
        "  rollout: {maxUnavailable: 1, maxUnhealthy: 3}\n"
        "  disruption: {rebootPolicy: AllowSoftReboot}\n"
    )
    window = "Mon-Fri 22:00 4h Europe/Berlin"
    await asyncio.to_thread(
        sim_cli,
        state_dir,
        "up",
        "--nodes=1",
        "--controllers=1",
        f"--pool-file={pool_file}",
        "--stage-ahead=1",
        "--max-unhealthy=50%",
        f"--maintenance-window={window}",
    )
    info = SimInfo.load(state_dir)
    assert info is not None and info.ready
    async with await api_client(info.kubeconfig) as api:
        pool = await get_object(api, BOOTC_NODE_POOLS, "edge")
        spec = pool["spec"]
        assert spec["image"] == {"ref": info.first_image}, "filled in: the first image"
        assert spec["nodeSelector"] == {"matchLabels": {"node-role.kubernetes.io/worker": ""}}
        assert spec["disruption"] == {"rebootPolicy": "AllowSoftReboot"}, "kept from the file"
        rollout = spec["rollout"]
        assert (rollout["maxUnavailable"], rollout["maxUnhealthy"], rollout["stageAhead"]) == (
            1,
            "50%",
            1,
        ), "a flag beats the file"
        assert rollout["maintenanceWindows"] == [
            {
                "days": ["Mon", "Tue", "Wed", "Thu", "Fri"],
                "start": "22:00",
                "duration": "4h",
                "timeZone": "Europe/Berlin",
            }
        ]

        async def accepted() -> bool:  # the controller took the spec (no InvalidSpec)
            obj = await get_object(api, BOOTC_NODE_POOLS, "edge")
            return up_to_date_on(obj, info.first_image.rsplit("@", 1)[1], 1)

        await wait_for(accepted, 60, "the pool UpToDate on the first image")

        # `pool` re-applies: the new flags, the pool's image kept, dropped fields gone
        await asyncio.to_thread(
            sim_cli, state_dir, "pool", f"--pool-file={pool_file}", "--stage-ahead=2"
        )
        spec = (await get_object(api, BOOTC_NODE_POOLS, "edge"))["spec"]
        assert spec["image"] == {"ref": info.first_image}
        assert spec["rollout"]["stageAhead"] == 2
        assert spec["rollout"]["maxUnhealthy"] == 3, "the file's value again"
        assert "maintenanceWindows" not in spec["rollout"]

    # A bad window fails before anything starts: the running simulation is untouched.
    res = await asyncio.to_thread(
        run_sim_cli, state_dir, "up", "--maintenance-window=22:00 4h Mars/Olympus"
    )
    assert res.returncode == 1 and "Mars/Olympus" in res.stderr, res.stderr
    again = SimInfo.load(state_dir)
    assert again is not None and again.pids == info.pids

    await asyncio.to_thread(sim_cli, state_dir, "down")
    assert leftovers(state_dir) == []


async def test_a_killed_supervisor_takes_every_process_with_it(state_dir: Path) -> None:
    await asyncio.to_thread(sim_cli, state_dir, "up", "--nodes=1", "--controllers=1")
    info = SimInfo.load(state_dir)
    assert info is not None
    running = leftovers(state_dir)
    # etcd, apiserver, KCM, scheduler, kwok, registry, supervisor, nodesim, controller, daemon
    assert len(running) >= 10, running
    os.kill(info.pids["supervisor"], signal.SIGKILL)
    await wait_for(lambda: leftovers(state_dir) == [], 30, "every process gone")
    await asyncio.to_thread(sim_cli, state_dir, "down")
    assert not await asyncio.to_thread(state_dir.exists)


def node_ready(sim: Sim, node: str) -> str:
    return sim.kubectl(
        "get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
    ).stdout


def test_in_process_sim_restarts_killed_daemons_and_holds_nodes_down(tmp_path: Path) -> None:
    async def until(predicate: Any, what: str) -> None:
        await wait_for(predicate, 30, what, interval=0.2)

    with Sim(SimConfig(nodes=1, controllers=1, reboot_seconds=0.5), tmp_path / "sim") as sim:
        node = sim.nodes[0]
        daemon = f"daemon/{node}"
        first = sim.processes()[daemon]
        sim.kill(daemon)

        def restarted() -> bool:
            proc = sim.processes()[daemon]
            return bool(proc["pid"] and proc["pid"] != first["pid"] and proc["restarts"] == 1)

        asyncio.run(until(restarted, "the killed daemon restarted"))
        # on fresh ports: the old ones may have been taken since (they are not reserved)
        again = sim.processes()[daemon]
        assert (again["metrics_port"], again["probe_port"]) != (
            first["metrics_port"],
            first["probe_port"],
        )
        assert sim.leader().startswith("controller-1_")

        # A held node stays down after a reboot until released.
        sim.hold(node)
        assert sim.host(node).run("systemctl", "reboot").returncode == 0
        down = time.monotonic()
        asyncio.run(until(lambda: node_ready(sim, node) == "False", "the node NotReady"))
        asyncio.run(
            until(
                lambda: (
                    sim.nodesim_state().get("down") == [node]
                    and sim.processes()[daemon]["pid"] is None
                ),
                "the node down, without its daemon",
            )
        )
        while time.monotonic() < down + 2.0:  # 4x reboot_seconds
            time.sleep(0.2)
        assert node_ready(sim, node) == "False", "held: still down after reboot_seconds"
        sim.hold(node, held=False)
        asyncio.run(until(lambda: node_ready(sim, node) == "True", "the node Ready again"))
        asyncio.run(until(lambda: sim.processes()[daemon]["pid"], "its daemon started"))
        assert [r["node"] for r in sim.reboots()] == [node]
        assert sim.host(node).state().boots == 2
        state_dir = sim.state_dir
    assert not state_dir.exists()
    assert leftovers(state_dir) == []


def test_a_not_ready_fault_holds_the_node_across_a_restart_of_the_node_simulator(
    tmp_path: Path,
) -> None:
    """``hack/sim fault not-ready``: the host reboots and its daemon starts, the Node stays
    NotReady; a node simulator that crashed and was restarted keeps holding it; cleared,
    the Node turns Ready."""

    async def until(predicate: Any, what: str) -> None:
        await wait_for(predicate, 30, what, interval=0.2)

    def ready(sim: Sim, node: str) -> tuple[str, str]:
        res = sim.kubectl("get", "node", node, "-o", "json")
        cond = condition({"status": json.loads(res.stdout)["status"]}, "Ready")
        return str(cond.get("status")), str(cond.get("message"))

    with Sim(SimConfig(nodes=1, controllers=0, reboot_seconds=0.5), tmp_path / "sim") as sim:
        node = sim.nodes[0]
        faults.apply(sim, faults.Fault(faults.NOT_READY, node))
        assert ready(sim, node)[0] == "True", "only from its next reboot on"
        assert sim.host(node).run("systemctl", "reboot").returncode == 0
        asyncio.run(until(lambda: len(sim.reboots()) == 1, "the reboot done"))
        status, message = ready(sim, node)
        assert status == "False" and "hack/sim fault not-ready" in message, message
        assert sim.processes()[f"daemon/{node}"]["pid"], "its daemon runs"
        assert sim.nodesim_state()["not_ready"] == [node]

        assert sim.nodesim is not None
        old = sim.nodesim.pid
        os.killpg(old, signal.SIGKILL)
        asyncio.run(until(sim.ensure_nodesim, "the node simulator restarted"))
        asyncio.run(
            until(
                lambda: (
                    (st := sim.nodesim_state()).get("pid") not in (None, old)
                    and st.get("not_ready") == [node]
                ),
                "the new node simulator's state",
            )
        )
        assert ready(sim, node)[0] == "False", "still held after the restart"

        assert [f.name for f in faults.clear(sim, faults.NOT_READY)] == [f"not-ready {node}"]
        asyncio.run(until(lambda: ready(sim, node)[0] == "True", "Ready once cleared"))
        assert sim.nodesim_state()["not_ready"] == []


def test_in_process_sim_sets_a_pod_marked_not_ready_ready_again(tmp_path: Path) -> None:
    """The node simulator plays a kubelet's status sync. The node-lifecycle controller
    marks a Pod NotReady (Ready=False, nothing else) when it believes the Pod's Node is
    NotReady, which it does for up to 5 s after a reboot; kwok sets Ready only when a
    Pod starts, so such a Pod stayed NotReady and held the workload's
    PodDisruptionBudget at 0 disruptions allowed: every later drain waited forever
    (the demo's stall). Here a running Pod is marked so; it gets Ready=True back."""

    async def scenario(sim: Sim) -> None:
        name, node = unique_name("web"), sim.nodes[0]
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "web", "image": "registry.example.com/web:1"}],
            },
        }

        async with await api_client(str(sim.kubeconfig)) as api:

            async def ready() -> str:
                pod = await get_object(api, PODS, name, "default")
                conds = (pod.get("status") or {}).get("conditions") or ()
                return next((c["status"] for c in conds if c["type"] == "Ready"), "")

            await create_object(api, PODS, body, "default")
            assert await wait_for(ready, 30, "kwok to run the Pod", interval=0.2) == "True"
            marked = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
            await patch_object(
                api, PODS, name, marked, "default", patch_type="strategic", subresource="status"
            )

            async def ready_again() -> bool:
                return await ready() == "True"

            await wait_for(ready_again, 30, "the node simulator to report it Ready", interval=0.2)
        # by the node simulator (kwok alone leaves it NotReady)
        log = (sim.state_dir / "logs" / "nodesim.log").read_text()
        assert f"default/{name} on {node}: marked NotReady" in log, log[-3000:]

    with Sim(SimConfig(nodes=1, controllers=0), tmp_path / "sim") as sim:
        asyncio.run(scenario(sim))


def test_demo_bad_image_rolls_the_canary_back_then_updates_everyone(state_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    argv = [sys.executable, "-m", "hack.simlib.demo", "--scenario=bad-image", "--plain"]
    argv += ["--keep", f"--dir={state_dir}", "--reboot-seconds=1", "--stage-seconds=0.5"]
    argv += ["--boot-complete-delay=0.5"]
    started = time.monotonic()
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=480, env=env, cwd=REPO_ROOT, check=False
    )
    took = time.monotonic() - started
    out = res.stdout
    assert res.returncode == 0, f"demo failed ({took:.0f}s):\n{out[-6000:]}\n{res.stderr[-3000:]}"
    assert "!!" not in out, out

    info = SimInfo.load(state_dir)  # --keep: the cluster is still there to inspect
    assert info is not None
    sim = AttachedSim(info)
    canary = canary_node(info.nodes)
    # The live lines showed the canary rolling back and rolled back; the pool halted.
    mine = [
        line.split(f"  {canary}: ", 1)[1] for line in out.splitlines() if f"  {canary}: " in line
    ]
    assert any("-> RollingBack on v2" in line for line in mine), mine
    assert any("-> RolledBack on v1" in line for line in mine), mine
    assert "Degraded=True HealthCheckFailed" in out, out
    assert f"{canary} (the canary) rebooted into it" in out, out

    # From the hosts and the reboot log: the canary booted v2, then v1 by `bootc rollback`
    # (no pull), then v3; every other node rebooted exactly once, into v3, after the canary.
    reboots = sim.reboots()
    by_node = {
        n: [r["booted"].rsplit("@", 1)[1] for r in reboots if r["node"] == n] for n in info.nodes
    }
    v1 = info.first_image.rsplit("@", 1)[1]
    v2, v3 = by_node[canary][0], by_node[canary][-1]
    assert len({v1, v2, v3}) == 3 and by_node[canary] == [v2, v1, v3], by_node
    for node in info.nodes:
        host = sim.host(node)
        state = host.state()
        assert state.booted is not None and state.booted.image.endswith(f"@{v3}"), node
        if node == canary:
            assert len(host.bootc_calls("rollback")) == 1, "the canary: one bootc rollback"
            pulls = host.pulls()
            assert any(v2 in pull for pull in pulls), pulls
            assert not any(v1 in pull for pull in pulls), "v1 was still on disk: no pull"
        else:
            assert by_node[node] == [v3], (node, by_node)
            assert host.bootc_calls("rollback") == [], node
    canary_up = max(r["up"] for r in reboots if r["node"] == canary)
    assert canary_up <= min(r["requested"] for r in reboots if r["node"] != canary)
    print(f"demo --scenario bad-image took {took:.1f}s")
    down = run_sim_cli(state_dir, "down")
    assert down.returncode == 0, down.stderr
    assert leftovers(state_dir) == []


FAULT_POOL = """\
metadata: {name: workers}
spec:
  health: {bootComplete: true, timeoutSeconds: 15, onFailure: Rollback}
  rollout: {maxUnavailable: 1, canary: {nodes: 1}}
"""


async def test_each_fault_is_caught_by_its_gate_and_cleared(
    state_dir: Path, tmp_path: Path
) -> None:
    """``hack/sim fault``, one simulation for every kind, seen as an admin sees it: the
    registry down (TagResolutionError naming it, pushes refused), an alert (the pool
    BlockedByAlerts naming it), a drain held by the fault's budget (the pool names the
    pod), a canary that stays NotReady after its reboot (HealthCheckFailed, rolled back,
    still NotReady until cleared), a canary whose boots fail their assessment
    (HealthCheckFailed on bootComplete), a node an autoscaler removes (its taint: shown
    as leaving, no slot while the others update); then, every fault cleared, a rollout
    to the end. The canary (worker-1, first by name) is the only node that may reboot
    before the rollout of os:v4."""
    pool_file = tmp_path / "pool.yaml"
    pool_file.write_text(FAULT_POOL)
    await asyncio.to_thread(
        sim_cli,
        state_dir,
        "up",
        "--nodes=3",
        "--controllers=1",
        "--reboot-seconds=1",
        "--stage-seconds=0.2",
        "--tag-resolution-interval=2s",
        "--prometheus",
    )
    info = SimInfo.load(state_dir)
    assert info is not None and info.ready and info.prometheus
    sim = AttachedSim(info)
    canary = info.nodes[0]

    async def cli(*args: str) -> str:
        return await asyncio.to_thread(sim_cli, state_dir, *args)

    def tag(version: str) -> str:
        return f"{info.registry}/os:{version}"

    async def pool(version: str) -> None:
        """docs/simulation.md's ``pool VERSION``: pool file, blocking alert, tag os:VERSION."""
        blocking = '--blocking-alert=severity="critical"'
        await cli("pool", f"--pool-file={pool_file}", blocking, f"--image={tag(version)}")

    async def push_and_pool(version: str) -> str:
        """``hack/sim image push os:VERSION && pool VERSION``; returns the pushed digest."""
        pushed = (await cli("image", "push", f"os:{version}")).strip()
        await pool(version)
        return pushed.rsplit("@", 1)[1]

    async with await api_client(info.kubeconfig) as api:

        async def pool_condition(ctype: str, *parts: str, status: str = "") -> dict[str, Any]:
            """The pool's ``ctype`` condition once its message has every one of ``parts``."""
            cond = condition(await get_object(api, BOOTC_NODE_POOLS, "workers"), ctype)
            message = str(cond.get("message", ""))
            ok = all(p in message for p in parts) and (not status or cond["status"] == status)
            return cond if ok else {}

        async def node_ready(node: str) -> tuple[str, str]:
            ready = condition(await get_object(api, NODES, node), "Ready")
            return str(ready.get("status")), str(ready.get("message"))

        def booted(node: str) -> str:
            state = sim.host(node).state()
            return state.booted.image.rsplit("@", 1)[1] if state.booted else ""

        await pool("v1")
        v1 = info.first_image.rsplit("@", 1)[1]
        done = await wait_for(
            lambda: pool_condition(c.COND_UP_TO_DATE, "3/3 updated", status="True"),
            90,
            "the pool UpToDate on os:v1",
        )
        assert done["reason"] == "AllUpdated"

        # The registry down: tag resolution names it; a push is refused in one line.
        await cli("fault", "registry-down")
        degraded = await wait_for(
            lambda: pool_condition(c.COND_DEGRADED, info.registry, "cannot connect"),
            60,
            "Degraded naming the unreachable registry",
        )
        assert (degraded["status"], degraded["reason"]) == ("True", "TagResolutionError")
        res = await asyncio.to_thread(run_sim_cli, state_dir, "image", "push", "os:v2")
        assert res.returncode == 1 and "the registry is down" in res.stderr, res.stderr
        await cli("fault", "clear", "registry-down")
        await wait_for(
            lambda: pool_condition(c.COND_DEGRADED, status="False"),
            60,
            "the tag resolved again: Degraded=False",
        )

        # An alert blocks the rollout; cleared, the canary's drain waits on the budget.
        await cli("fault", "alert")
        await cli("fault", "drain-block", canary)
        v2 = await push_and_pool("v2")
        blocked = await wait_for(
            lambda: pool_condition(c.COND_UP_TO_DATE, 'SimulatedIncident{severity="critical"}'),
            60,
            "the pool BlockedByAlerts naming the alert",
        )
        assert blocked["reason"] == "BlockedByAlerts", blocked
        await cli("fault", "clear", "alert")
        await wait_for(
            lambda: pool_condition(
                c.COND_UP_TO_DATE,
                f"drain of {canary} blocked by default/sim-drain-block-{canary}",
                "disruption budget",
            ),
            60,
            "the canary's drain blocked by the fault's budget",
        )
        assert sim.reboots() == [], "nothing rebooted before its drain"

        # The canary comes back NotReady: the health gate fails it, it is rolled back and
        # stays NotReady (the fault holds) until cleared.
        await cli("fault", "not-ready", canary)
        await cli("fault", "clear", "drain-block", canary)
        await wait_for(
            lambda: pool_condition(
                c.COND_DEGRADED, canary, v2, "the Node is not Ready", status="True"
            ),
            90,
            "HealthCheckFailed: the canary not Ready",
        )
        await wait_for(
            lambda: [r["booted"].rsplit("@", 1)[1] for r in sim.reboots()] == [v2, v1],
            60,
            "the canary rebooted into v2, then rolled back to v1",
        )
        status, message = await node_ready(canary)
        assert status == "False" and "hack/sim fault not-ready" in message, message
        listed = await cli("fault", "list")
        assert f"not-ready {canary}" in listed and "[NotReady now]" in listed, listed
        await cli("fault", "clear", "not-ready")
        await wait_for(
            lambda: pool_condition(c.COND_DEGRADED, canary, "was rolled back", status="True"),
            60,
            "the rolled-back canary released once Ready",
        )
        assert (await node_ready(canary))[0] == "True"

        # Its boots fail their assessment: HealthCheckFailed on bootComplete, rolled back.
        await cli("fault", "boot-fail", canary)
        v3 = await push_and_pool("v3")
        failed = await wait_for(
            lambda: pool_condition(
                c.COND_DEGRADED, canary, v3, "was rolled back", "bootComplete", status="True"
            ),
            90,
            "HealthCheckFailed: the canary's boot assessment failed",
        )
        assert failed["reason"] == "HealthCheckFailed"
        assert booted(canary) == v1
        assert {r["node"] for r in sim.reboots()} == {canary}, "only the canary rebooted"

        # An autoscaler removing the last node: shown as leaving, it gets no slot while
        # the others update.
        leaver = info.nodes[-1]
        await cli("fault", "autoscaler", leaver)
        await cli("fault", "clear", "boot-fail")
        v4 = await push_and_pool("v4")
        await wait_for(
            lambda: pool_condition(
                c.COND_UP_TO_DATE, "2/3 updated", "1 leaving (an autoscaler is removing them)"
            ),
            150,
            f"os:v4 on every node but {leaver}, shown as leaving",
        )
        assert booted(leaver) == v1 and leaver not in {r["node"] for r in sim.reboots()}
        marks = (await get_object(api, BOOTC_NODES, leaver))["metadata"].get("annotations")
        assert c.IN_REBOOT_SLOT_ANNOTATION not in (marks or {}), marks
        listed = await cli("fault", "list")
        assert f"autoscaler {leaver}: the Node carries the ToBeDeletedByClusterAutoscaler" in (
            listed
        ), listed

        # Every fault cleared: the taint goes and the image reaches every node.
        await cli("fault", "clear")
        assert (
            "no faults" in (await asyncio.to_thread(run_sim_cli, state_dir, "fault", "list")).stderr
        )
        taints = (await get_object(api, NODES, leaver))["spec"].get("taints") or []
        assert not [t for t in taints if t["key"] == "ToBeDeletedByClusterAutoscaler"], taints
        await wait_for(
            lambda: pool_condition(c.COND_UP_TO_DATE, "3/3 updated", status="True"),
            150,
            "the rollout of os:v4 to every node",
        )
        assert all(booted(n) == v4 for n in info.nodes)
        nodes, _ = await list_objects(api, NODES)
        assert not any((n.get("spec") or {}).get("unschedulable") for n in nodes)

    await asyncio.to_thread(sim_cli, state_dir, "down")
    assert leftovers(state_dir) == []
