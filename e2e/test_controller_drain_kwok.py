"""Drains with real pods: kwok runs the pods, the scheduler and controllers move them.

A dedicated control plane runs kube-scheduler, kwok and kube-controller-manager
with the deployment, replicaset, daemonset, disruption and node-lifecycle
controllers, so evictions, PodDisruptionBudgets and rescheduling are real.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, PODS
from bootc_operator.kube import NODES as NODE_RES
from bootc_operator.kube.rest import list_objects, patch_object, request_json
from e2e.controllerenv import create_pool, get_pool
from e2e.helpers import condition, digest, image, wait_for
from hack.testenv import ControlPlane, api_client
from hack.testenv.controller import running_controller
from hack.testenv.controlplane import DEFAULT_CONTROLLERS, KWOK_CONTROLLERS
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body

CONTROLLERS = (
    *DEFAULT_CONTROLLERS,
    *KWOK_CONTROLLERS,
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "disruption-controller",
)
NS = "default"
NODES = [f"kwok-{i}" for i in range(3)]


@pytest.fixture(scope="module")
def kwok_plane() -> Iterator[ControlPlane]:
    # kwok's heartbeats can lag on a loaded 2-core machine; the node-lifecycle
    # controller would then mark every pod NotReady for good (no kubelet re-marks
    # them), and PodDisruptionBudgets would block every eviction.
    with ControlPlane(
        controllers=CONTROLLERS,
        scheduler=True,
        controller_manager_args=["--node-monitor-grace-period=10m"],
    ) as cp:
        cp.start_kwok(node_label_selector="type=kwok")
        yield cp


@pytest.fixture
async def kapi(kwok_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    client = await api_client(kwok_plane.kubeconfig)
    async with client:
        yield client


def workload() -> list[tuple[str, dict[str, Any]]]:
    labels = {"app": "web"}
    pod_spec = {
        "containers": [{"name": "web", "image": "registry.example.com/web:1"}],
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
    }
    return [
        (
            f"/apis/apps/v1/namespaces/{NS}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            **pod_spec,
                            "topologySpreadConstraints": [
                                {
                                    "maxSkew": 1,
                                    "topologyKey": "kubernetes.io/hostname",
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": labels},
                                }
                            ],
                        },
                    },
                },
            },
        ),
        (
            f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
            },
        ),
        (
            f"/apis/apps/v1/namespaces/{NS}/daemonsets",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent"},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "agent"}},
                        "spec": {
                            "containers": [{"name": "a", "image": "registry.example.com/a:1"}],
                            "tolerations": [{"operator": "Exists"}],
                        },
                    },
                },
            },
        ),
    ]


def ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or ()
    )


async def test_real_pods_are_evicted_pdb_respected_daemonset_pods_left(kapi: ApiClient) -> None:
    api = kapi
    fleet = Fleet(api, stage_delay=0.1, reboot_delay=0.5, manage_ready=False)
    await fleet.start()
    for name in NODES:
        await fleet.add_node(
            name,
            image(1),
            {"type": "kwok", "pool": "kwok", "kubernetes.io/hostname": name},
        )
    for path, body in workload():
        await request_json(api, "POST", path, body=body)

    async def pods(selector: str) -> list[dict[str, Any]]:
        items, _ = await list_objects(api, PODS, NS, label_selector=selector)
        return items

    async def settled() -> bool:
        web, agents = await pods("app=web"), await pods("app=agent")
        return (
            sum(map(ready, web)) == 2
            and len({p["spec"].get("nodeName") for p in web}) == 2
            and sum(map(ready, agents)) == len(NODES)
        )

    await wait_for(settled, 90, "2 web pods on 2 nodes and an agent pod per node, all Ready")
    agent_uids = {p["metadata"]["uid"] for p in await pods("app=agent")}
    web_before = {p["metadata"]["uid"] for p in await pods("app=web")}

    # Safety monitor: web pods Ready at every observed moment; evicted pods' nodes.
    min_ready: list[int] = []
    watch = Informer(api, PODS, namespace=NS, label_selector="app=web")

    def observe(*_: Any) -> None:
        min_ready.append(sum(1 for p in watch.list() if ready(p)))

    watch.add_event_handler(EventHandler(on_add=observe, on_update=observe, on_delete=observe))
    watch.start()
    await watch.wait_for_sync()
    monitor = await SafetyMonitor(api, "kwok", 1).start()
    try:
        async with running_controller(api):
            await create_pool(api, pool_body("kwok", {"pool": "kwok"}, image(1)))

            async def on(n: int) -> bool:
                p = await get_pool(api, "kwok")
                s = p.get("status") or {}
                return (
                    condition(p, "UpToDate").get("status") == "True"
                    and s.get("targetDigest") == digest(n)
                    and s.get("updatedCount") == len(NODES)
                )

            await wait_for(lambda: on(1), 60, "pool on image 1")
            await patch_object(
                api, BOOTC_NODE_POOLS, "kwok", {"spec": {"image": {"ref": image(2)}}}
            )
            try:
                await wait_for(lambda: on(2), 180, "every node drained, rebooted and updated")
            except AssertionError:
                await dump(api)
                raise
        await monitor.final_check(digest(2))
    finally:
        summary = await monitor.stop()
        await watch.stop()
        await fleet.stop()
    print("safety monitor:", summary)
    assert summary.violations == [], summary.violations
    assert summary.max_slots == 1 and summary.reboots == len(NODES)
    assert sorted(n for n, _ in fleet.reboots) == NODES
    # DaemonSet pods were never evicted
    assert {p["metadata"]["uid"] for p in await pods("app=agent")} == agent_uids
    # web pods were evicted and rescheduled (new pods), and the PDB always held
    assert not web_before & {p["metadata"]["uid"] for p in await pods("app=web")}
    assert min_ready and min(min_ready[len(min_ready) // 100 :]) >= 1, min_ready


async def dump(api: ApiClient) -> None:
    """Print what the rollout was waiting for (attached to the failure report)."""

    pool = await get_pool(api, "kwok")
    print("pool status:", pool.get("status"))
    bns, _ = await list_objects(api, BOOTC_NODES)
    for b in bns:
        print(
            "bn",
            b["metadata"]["name"],
            b["metadata"].get("annotations"),
            b.get("spec"),
            [(c["type"], c["reason"]) for c in (b.get("status") or {}).get("conditions", [])],
        )
    nodes, _ = await list_objects(api, NODE_RES)
    for n in nodes:
        print(
            "node",
            n["metadata"]["name"],
            n["spec"],
            [(c["type"], c["status"]) for c in n["status"].get("conditions", [])],
        )
    pdb = await request_json(
        api, "GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web"
    )
    print("pdb status:", pdb.get("status"))
    pods, _ = await list_objects(api, PODS, NS)
    for p in pods:
        print(
            "pod",
            p["metadata"]["name"],
            p["spec"].get("nodeName"),
            p["status"].get("phase"),
            p["metadata"].get("deletionTimestamp"),
            p["status"].get("conditions"),
        )
