"""The controller against a real API server, with the daemon simulated by ``Fleet``."""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES
from bootc_operator.kube.rest import get_object, patch_object
from e2e.controllerenv import add_nodes, create_pool, delete_quietly, get_pool
from e2e.helpers import condition, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body


async def test_three_nodes_roll_strictly_one_at_a_time(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("one")
    nodes = await add_nodes(fleet, group, 3, image(1))
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        pool = await create_pool(api, pool_body(group, {"group": group}, image(1)))

        async def all_idle_on(n: int) -> bool:
            p = await get_pool(api, group)
            return bool(
                condition(p, "UpToDate").get("status") == "True"
                and p["status"].get("updatedCount") == 3
                and p["status"].get("targetDigest") == image(n).split("@")[1]
            )

        await wait_for(lambda: all_idle_on(1), 30, "pool UpToDate on image 1")
        for name in nodes:
            node = await get_object(api, NODES, name)
            assert node["metadata"]["labels"][c.MANAGED_LABEL] == ""
            bn = await get_object(api, BOOTC_NODES, name)
            assert bn["metadata"]["ownerReferences"][0]["uid"] == pool["metadata"]["uid"]
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
        await wait_for(lambda: all_idle_on(2), 60, "pool UpToDate on image 2")
        p = await get_pool(api, group)
        assert p["status"]["deployedDigest"] == image(2).split("@")[1]
        assert p["status"]["updateAvailable"] is False
    assert monitor.summary.max_slots == 1, monitor.timeline
    assert monitor.summary.max_cordoned_by_us == 1, monitor.timeline
    assert sorted(n for n, _ in fleet.reboots) == nodes
    for name in nodes:
        node = await get_object(api, NODES, name)
        assert not node.get("spec", {}).get("unschedulable")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
