"""Two controller processes with leader election: one writes, the other takes over."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, LEASES, NODES
from bootc_operator.kube.rest import get_object, patch_object
from e2e.controllerenv import (
    LEASE,
    NAMESPACE,
    ControllerProcess,
    create_pool,
    delete_quietly,
    get_pool,
    holder,
)
from e2e.helpers import condition, digest, ensure_namespace, image, unique_name, wait_for
from hack.testenv import ControlPlane
from hack.testenv.fleet import Fleet
from hack.testenv.pools import pool_body


@pytest.fixture
def controllers(control_plane: ControlPlane, tmp_path: Path) -> Iterator[list[ControllerProcess]]:
    procs = [ControllerProcess(n, control_plane.kubeconfig, tmp_path) for n in ("ctl-a", "ctl-b")]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.log.close()
        for p in procs:
            sys.stderr.write(f"--- {p.name} log tail ---\n")
            sys.stderr.write("".join(p.log_path.read_text().splitlines(True)[-20:]))


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_only_the_leader_writes_and_a_standby_takes_over(
    api: ApiClient, controllers: list[ControllerProcess]
) -> None:
    await ensure_namespace(api, NAMESPACE)
    fleet = Fleet(api, stage_delay=0.1, reboot_delay=0.3)
    await fleet.start()
    group = unique_name("le")
    nodes = [f"{group}-n{i}" for i in range(3)]
    try:
        for name in nodes:
            await fleet.add_node(name, image(1), {"group": group})
        for p in controllers:
            await wait_for(
                _probe(p),
                60,
                f"{p.name} /readyz (caches synced)",
                ignore=(OSError,),
            )
        leader_id = await wait_for(lambda: holder(api), 30, "a leader")
        leader = next(p for p in controllers if leader_id.startswith(p.name + "_"))
        standby = next(p for p in controllers if p is not leader)
        await create_pool(api, pool_body(group, {"group": group}, image(1)))

        async def on(n: int) -> bool:
            p = await get_pool(api, group)
            s = p.get("status") or {}
            return (
                condition(p, "UpToDate").get("status") == "True"
                and s.get("targetDigest") == digest(n)
                and s.get("updatedCount") == 3
            )

        await wait_for(lambda: on(1), 60, "pool converges under the first leader")
        _, leader_metrics = await leader.get("/metrics")
        _, standby_metrics = await standby.get("/metrics")
        assert metric(leader_metrics, "bootc_operator_leader") == 1
        assert metric(standby_metrics, "bootc_operator_leader") == 0
        assert metric(leader_metrics, "controller_runtime_reconcile_total") > 0
        assert metric(standby_metrics, "controller_runtime_reconcile_total") == 0
        assert f'bootc_operator_pool_nodes{{pool="{group}",state="UpToDate"}} 3.0' in leader_metrics
        # the leader dies hard; the standby must take over and finish the next rollout
        leader.kill()
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
        await wait_for(
            lambda: _startswith(holder(api), standby.name + "_"), 30, "standby takes the lease"
        )
        await wait_for(lambda: on(2), 90, "rollout completes under the new leader")
        _, new_metrics = await standby.get("/metrics")
        assert metric(new_metrics, "controller_runtime_reconcile_total") > 0
        for name in nodes:
            assert not (await get_object(api, NODES, name))["spec"].get("unschedulable")
        # graceful stop releases the lease at once
        assert standby.stop() == 0
        lease = await get_object(api, LEASES, LEASE, NAMESPACE)
        assert not lease["spec"].get("holderIdentity")
    finally:
        await fleet.stop()
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        for name in nodes:
            await delete_quietly(api, NODES, name)


def _probe(p: ControllerProcess) -> Callable[[], Awaitable[bool]]:
    async def ok() -> bool:
        status, _ = await p.get("/readyz", p.probe_port)
        healthy, _ = await p.get("/healthz", p.probe_port)
        return status == 200 and healthy == 200

    return ok


async def _startswith(value: object, prefix: str) -> bool:
    return str(await value).startswith(prefix)  # type: ignore[misc]
