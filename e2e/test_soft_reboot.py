"""Soft reboots end to end (issue 17): ``spec.disruption.rebootPolicy: AllowSoftReboot``.

The real controller against the session's kube-apiserver, real daemons on simulated
bootc hosts (``hosted``) pulling from a real registry, watched by the safety monitor;
every node runs an evictable pod, so each drain has something to evict and the
monitor's "no node reboots while a pod that must be evicted is still bound to it"
means "drained first", soft reboots included (they restart every pod too).

- A pool that allows soft reboots, updated to an image that changes only userspace
  (the images share the simulated hosts' default kernel): every node is soft-rebooted
  (``bootc upgrade --from-downloaded --apply --soft-reboot=required``): the hosts
  record soft reboots and keep their kernel's boot ID, ``status.lastRebootKind`` is
  ``Soft``, the Node Event says "(soft reboot)", and the controller's
  ``bootc_operator_node_reboots_total`` and the daemons' ``..._daemon_reboots_total``
  count them as soft. Then an image with another kernel (image label
  ``fakebootc.kernel``): not ``softRebootCapable``, so every node reboots fully (a new
  boot ID, ``Full``).
- A pool without the policy (``RebootOnly``) updated to a userspace-only image: full
  reboots only, although the staged deployments are soft-reboot capable.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, PODS
from bootc_operator.kube.rest import get_object, list_objects, patch_object
from e2e.controllerenv import create_pod, create_pool, delete_quietly
from e2e.helpers import push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from e2e.test_rollout_policies import booted, report, setup_hosts, up_to_date_on
from hack.fakebootc.state import KERNEL_LABEL
from hack.testenv.controller import running_controller
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

ROLLOUT = 120.0


async def last_reboot_kind(api: ApiClient, name: str) -> str | None:
    bn = await get_object(api, BOOTC_NODES, name)
    return (bn.get("status") or {}).get("lastRebootKind")


def node_reboots(pool: str, kind: str) -> float:
    return (
        REGISTRY.get_sample_value("bootc_operator_node_reboots_total", {"pool": pool, "kind": kind})
        or 0.0
    )


async def daemon_reboots(hosted: HostedNodes, name: str) -> str:
    """The ``reboots_total`` lines of the node's current daemon (started after its reboot)."""
    status, text = await hosted.running[name].get("/metrics")
    assert status == 200
    return "\n".join(
        line for line in text.splitlines() if line.startswith("bootc_operator_daemon_reboots_total")
    )


async def node_updated_notes(api: ApiClient, name: str) -> list[str]:
    items, _ = await list_objects(api, EVENTS, "default", field_selector=f"regarding.name={name}")
    return [str(e.get("note")) for e in items if e.get("reason") == "NodeUpdated"]


async def workload(api: ApiClient, names: list[str], group: str, round_: int) -> None:
    """An evictable pod on every node (a drain must remove it before the reboot)."""
    for name in names:
        await create_pod(api, f"app-{name}-{round_}", name, {"app": group})


async def no_pods_left(api: ApiClient, group: str) -> bool:
    items, _ = await list_objects(api, PODS, "default", label_selector=f"app={group}")
    return not items


async def test_allow_soft_reboot_soft_reboots_userspace_updates_and_falls_back_for_a_kernel(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    hosted.reboot_seconds, hosted.soft_reboot_seconds = 1.0, 0.2
    group = unique_name("soft")
    names, repo, (_v0, v1) = await setup_hosts(hosted, registry, group, 3)
    v2 = await push(
        registry, registry.ref(repo, "v2"), "os 2, new kernel", labels={KERNEL_LABEL: "6.99.0-sim"}
    )
    boot_ids = {name: hosted.hosts[name].boot_id for name in names}
    await workload(api, names, group, 1)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v1), 1)
    body["spec"]["disruption"] = {"rebootPolicy": "AllowSoftReboot"}
    monitor = SafetyMonitor(api, group, 1, target=v1)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, v1, 3), ROLLOUT, "the soft rollout")
        assert await no_pods_left(api, group), "every node was drained"
        soft = [r for r in hosted.records if r.node in names]
        assert sorted(r.node for r in soft) == names, "each node rebooted once"
        for record in soft:
            assert (record.kind, record.by) == ("soft", "bootc upgrade --from-downloaded --apply")
        for name in names:
            host = hosted.hosts[name]
            assert await booted(api, name) == v1
            assert host.boot_id == boot_ids[name], "the kernel kept running"
            assert host.soft_reboots == 1
            assert host.bootc_calls("upgrade") == [
                ["upgrade", "--from-downloaded", "--apply", "--soft-reboot=required"]
            ]
            assert await last_reboot_kind(api, name) == "Soft"
            assert 'kind="soft"} 1.0' in await daemon_reboots(hosted, name)

            async def soft_event(name: str = name) -> bool:
                return any(
                    f"runs {v1} (soft reboot)" in note
                    for note in await node_updated_notes(api, name)
                )

            await wait_for(soft_event, 30, f"{name}'s NodeUpdated saying soft reboot")
        assert (node_reboots(group, "soft"), node_reboots(group, "full")) == (3.0, 0.0)

        # another kernel: not soft-reboot capable, so full reboots despite the policy
        await workload(api, names, group, 2)
        monitor.target = v2
        ref = registry.ref(repo, digest=v2)
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": ref}}})
        await wait_for(lambda: up_to_date_on(api, group, v2, 3), ROLLOUT, "the kernel rollout")
        assert await no_pods_left(api, group)
        full = [r for r in hosted.records if r.node in names][3:]
        assert sorted(r.node for r in full) == names
        assert {r.kind for r in full} == {"full"}
        for name in names:
            host = hosted.hosts[name]
            assert host.boot_id != boot_ids[name], "a new kernel booted"
            assert host.soft_reboots == 0
            state = host.state()
            assert state.booted is not None and state.booted.kernel == "6.99.0-sim"
            assert await last_reboot_kind(api, name) == "Full"
            assert 'kind="full"} 1.0' in await daemon_reboots(hosted, name)
        assert (node_reboots(group, "soft"), node_reboots(group, "full")) == (3.0, 3.0)
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("soft reboot: userspace soft, kernel full", started)


async def test_reboot_only_never_soft_reboots(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    group = unique_name("full")
    names, repo, (_v0, v1) = await setup_hosts(hosted, registry, group, 2)
    await workload(api, names, group, 1)
    monitor = SafetyMonitor(api, group, 1, target=v1)
    async with monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, registry.ref(repo, digest=v1), 1))
        await wait_for(lambda: up_to_date_on(api, group, v1, 2), ROLLOUT, "the rollout")
        assert await no_pods_left(api, group)
        records = [r for r in hosted.records if r.node in names]
        assert sorted(r.node for r in records) == names
        assert {r.kind for r in records} == {"full"}
        for name in names:
            bn: dict[str, Any] = await get_object(api, BOOTC_NODES, name)
            assert "rebootPolicy" not in bn["spec"], "RebootOnly is the unset policy"
            # v0 (now the rollback deployment) and v1 share a kernel: the update could
            # have been soft-rebooted into, the policy said no
            shared = (bn["status"].get("rollback") or {}).get("softRebootCapable")
            assert shared is True, bn["status"]
            assert bn["status"]["lastRebootKind"] == "Full"
            assert hosted.hosts[name].bootc_calls("upgrade") == []
            assert hosted.hosts[name].soft_reboots == 0
        assert (node_reboots(group, "soft"), node_reboots(group, "full")) == (0.0, 2.0)
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("soft reboot: RebootOnly", started)
