"""``hack/sim up --real-bootc 2``: two of the simulated cluster's nodes on real-bootc hosts.

The simulation as a user starts it (``hack/sim up``), three nodes of which the first
two are ``hack.realbootc`` hosts: the real bootc 1.16.9 and libostree on a real ostree
sysroot, booted into the simulation's first image pulled from its registry, their
daemons nsentering into the hosts' PID 1 as on a node. One pool over all three rolls
out a second image (``hack/sim image push``): the real bootc pulls and stages it, the
node simulator reboots the hosts (``ostree admin finalize-staged``, the new deployment
booted), and the kit's safety monitor (``hack.testenv.monitor``, through
``e2e.simenv.PoolRun``) judges the whole rollout, each node rebooting once. Then
``hack/sim down`` leaves no process and no directory. Marked ``realbootc``: it needs
root and the bootc build (``hack/build-bootc.sh``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.hostkit import real_build
from e2e.simenv import PoolRun, digest_of, push, sim_cli
from hack.realbootc.host import Host as RealHost
from hack.simlib import AttachedSim, SimError, SimInfo
from hack.simlib.images import digest_ref
from hack.simlib.reaper import leftovers, teardown
from hack.testenv import api_client

pytestmark = [pytest.mark.slow, pytest.mark.realbootc]


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sim"
    try:
        yield path
    finally:
        teardown(path)  # whatever the test did: no process may outlive it


def real_host(sim: AttachedSim, node: str) -> RealHost:
    host = sim.any_host(node)
    assert isinstance(host, RealHost), f"{node} is not on a real-bootc host"
    return host


def digests(host: RealHost) -> tuple[str | None, str | None]:
    """(booted, rollback) image digests as the real bootc reports them."""
    status = host.status()["status"]

    def digest(slot: str) -> str | None:
        entry = status.get(slot)
        return None if not entry else str(entry["image"]["imageDigest"])

    return digest("booted"), digest("rollback")


async def test_two_real_bootc_nodes_roll_out_beside_a_fake_one(state_dir: Path) -> None:
    real_build()  # without root: skipped; without the build: one line saying why
    started = time.monotonic()
    await asyncio.to_thread(
        sim_cli,
        state_dir,
        "up",
        "--nodes=3",
        "--real-bootc=2",
        "--controllers=1",
        "--reboot-seconds=1",
        "--stage-seconds=0.2",
    )
    print(f"\nhack/sim up --nodes 3 --real-bootc 2: {time.monotonic() - started:.1f} s")
    info = SimInfo.load(state_dir)
    assert info is not None and info.ready
    sim = AttachedSim(info)
    real = info.real_bootc_nodes
    assert real == info.nodes[:2]
    first = digest_ref(info.first_image)
    for node in real:
        assert digests(real_host(sim, node)) == (digest_of(first), None)
    with pytest.raises(SimError, match="real-bootc host"):
        sim.host(real[0])

    async with await api_client(info.kubeconfig) as api:
        run = PoolRun(api, sim, "realbootc", info.nodes, 2, once_per_node=True)
        async with run:
            await run.create(first)
            await run.wait_up_to_date(digest_of(first))
            second = await push(sim, "os:v2")
            started = time.monotonic()
            await run.set_image(second)
            await run.wait_up_to_date(digest_of(second), timeout=240)
            print(f"rollout over 2 real-bootc and 1 fake node: {time.monotonic() - started:.1f} s")
            summary = await run.finish(digest_of(second))
        assert summary.reboots == 3, summary

    for node in real:
        host = real_host(sim, node)
        assert digests(host) == (digest_of(second), digest_of(first)), node
        assert host.switch_calls() == [["switch", "--", second]], node
        assert host.config()["boots"] == 2, node
    assert sim.booted_image(info.nodes[2]) == second
    assert sorted(r["node"] for r in sim.reboots()) == info.nodes
    nodes = json.loads(sim.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    os_images = {n["metadata"]["name"]: n["status"]["nodeInfo"]["osImage"] for n in nodes}
    assert {n for n, text in os_images.items() if text.endswith("(real bootc)")} == set(real)

    await asyncio.to_thread(sim_cli, state_dir, "down")
    assert not await asyncio.to_thread(state_dir.exists)
    assert leftovers(state_dir) == []
