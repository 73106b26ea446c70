"""A drain whose first look at the node's pods fails (issue 25), on the real apiserver.

A drain's first look is one consistent pod LIST (``reconcilers.watchers.drain``). Here the
controller reaches kube-apiserver through the kit's fault proxy
(``hack.testenv.faultproxy``), which answers ``503`` to exactly that LIST — the
read of ``/api/v1/pods`` field-selected to one node — while every other request
of the controller gets through. The drain must retry it, the node must keep its
slot and its cordon and must not be told to reboot (its pod is still on it), the
pool's status and a ``DrainBlocked`` Event must name the reason; once the LIST
answers again the drain evicts the pod and the rollout finishes. The kit's
safety monitor watches throughout.

The proxy also holds a drain's eviction on its way while the pod is replaced
by a namesake elsewhere: the eviction's uid precondition spares the namesake.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES, PODS, ApiError
from bootc_operator.kube.rest import get_object, list_objects, request_json
from e2e.controllerenv import (
    add_nodes,
    create_pod,
    create_pool,
    delete_quietly,
    get_pool,
    pod_exists,
)
from e2e.helpers import condition, digest, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.controlplane import ControlPlane
from hack.testenv.faultproxy import FaultProxy
from hack.testenv.fleet import Fleet
from hack.testenv.kube import api_client
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body

INJECTED = "503 ServiceUnavailable: injected by the fault proxy (retry after 1s)"


async def drain_blocked_events(api: ApiClient, node: str) -> list[dict[str, Any]]:
    events, _ = await list_objects(
        api,
        EVENTS,
        "default",
        field_selector=f"regarding.name={node},reason=DrainBlocked",
    )
    return events


async def test_a_failing_first_pod_list_is_retried_and_the_slot_kept(
    api: ApiClient, fleet: Fleet, control_plane: ControlPlane, tmp_path: Path
) -> None:
    group = unique_name("listfail")
    nodes = await add_nodes(fleet, group, 2, image(1))
    pods = {n: f"app-{n}" for n in nodes}
    for node, pod in pods.items():
        await create_pod(api, pod, node, {"app": group})
    proxy = FaultProxy(control_plane.server, control_plane.pki, seed=0)
    await proxy.listen("controller")
    for node in nodes:  # each node's first LIST; its watches and all else get through
        proxy.refuse("controller", 503, "/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})
    controller_api = await api_client(proxy.kubeconfig("controller", tmp_path / "kubeconfig"))
    monitor = SafetyMonitor(api, group, 1, target=digest(2))
    try:
        async with monitor, running_controller(controller_api):
            await create_pool(api, pool_body(group, {"group": group}, image(2), 1))
            await wait_for(lambda: monitor.takes, 60, "a first slot")
            first = monitor.takes[0][1]
            waiting = f"drain of {first} waiting: could not list the node's pods: {INJECTED}"

            async def retried_and_named() -> dict[str, Any] | None:
                if proxy.counts["refused-503"] < 2:
                    return None
                pool = await get_pool(api, group)
                return pool if waiting in condition(pool, "UpToDate")["message"] else None

            pool = await wait_for(retried_and_named, 60, "the LIST retried and the pool saying why")
            up = condition(pool, "UpToDate")
            assert f"{waiting}; retrying" in up["message"], up
            # the slot is kept, the node stays cordoned, it is not told to reboot
            bn = await get_object(api, BOOTC_NODES, first)
            assert c.IN_REBOOT_SLOT_ANNOTATION in bn["metadata"]["annotations"]
            assert c.REBOOT_REQUESTED_ANNOTATION not in bn["metadata"]["annotations"]
            assert bn["spec"]["desiredImageState"] == "Staged"
            assert (await get_object(api, NODES, first))["spec"]["unschedulable"] is True
            assert monitor.holders() == {first} and fleet.reboots == []
            assert await pod_exists(api, pods[first])
            events = await wait_for(
                lambda: drain_blocked_events(api, first), 30, "a DrainBlocked Event"
            )
            assert events[0]["type"] == "Warning" and waiting in events[0]["note"], events
            attempts = proxy.counts["refused-503"]
            await wait_for(
                lambda: proxy.counts["refused-503"] > attempts, 60, "another attempt (backoff)"
            )
            assert fleet.reboots == [] and monitor.holders() == {first}

            # the LIST answers again: the drain evicts, the rollout finishes
            proxy.unrefuse("controller")

            async def finished() -> bool:
                p = await get_pool(api, group)
                return bool(
                    condition(p, "UpToDate").get("status") == "True"
                    and p["status"].get("updatedCount") == 2
                    and p["status"].get("targetDigest") == digest(2)
                )

            await wait_for(finished, 90, "the rollout finishing")
            for pod in pods.values():
                assert not await pod_exists(api, pod), f"{pod} was not evicted"
            pool = await get_pool(api, group)
            assert "could not list" not in condition(pool, "UpToDate")["message"]
            assert sorted(n for n, _ in fleet.reboots) == sorted(nodes)
    finally:
        await controller_api.close()
        await proxy.close()
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_an_eviction_never_removes_a_namesake_of_the_pod_it_meant(
    api: ApiClient, fleet: Fleet, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Issue 37 §13: the eviction carries the pod's uid as a precondition. The fault
    proxy holds the drain's eviction on its way while the pod is replaced by a
    namesake on another node (what a StatefulSet does); released, the eviction must
    not remove the namesake (409 Conflict: the pod meant is gone), and the drain
    finishes, since the node has nothing left."""
    group = unique_name("evuid")
    nodes = await add_nodes(fleet, group, 1, image(1))
    pod = f"{group}-web-0"
    elsewhere = f"{group}-other-node"
    await create_pod(api, pod, nodes[0], {"app": group})
    proxy = FaultProxy(control_plane.server, control_plane.pki, seed=0)
    await proxy.listen("controller")
    held = proxy.hold("controller", "POST", f"/api/v1/namespaces/default/pods/{pod}/eviction")
    controller_api = await api_client(proxy.kubeconfig("controller", tmp_path / "kubeconfig"))
    monitor = SafetyMonitor(api, group, 1, target=digest(2))
    try:
        async with monitor, running_controller(controller_api):
            await create_pool(api, pool_body(group, {"group": group}, image(2), 1))
            await wait_for(lambda: held.waiting > 0, 60, "the drain's eviction held on its way")
            first = (await get_object(api, PODS, pod, "default"))["metadata"]["uid"]
            await request_json(
                api,
                "DELETE",
                f"/api/v1/namespaces/default/pods/{pod}",
                body={"gracePeriodSeconds": 0},
            )
            await create_pod(api, pod, elsewhere, {"app": group})
            proxy.release("controller")

            async def finished() -> bool:
                p = await get_pool(api, group)
                return bool(
                    condition(p, "UpToDate").get("status") == "True"
                    and p["status"].get("updatedCount") == 1
                )

            await wait_for(finished, 90, "the rollout finishing")
            assert await pod_exists(api, pod), "the namesake was evicted"
            namesake = await get_object(api, PODS, pod, "default")
            assert namesake["metadata"]["uid"] != first
            assert namesake["spec"]["nodeName"] == elsewhere
            assert not namesake["metadata"].get("deletionTimestamp"), "the namesake was evicted"
    finally:
        proxy.release("controller")
        await controller_api.close()
        await proxy.close()
        with contextlib.suppress(ApiError):
            await request_json(
                api,
                "DELETE",
                f"/api/v1/namespaces/default/pods/{pod}",
                body={"gracePeriodSeconds": 0},
            )
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
