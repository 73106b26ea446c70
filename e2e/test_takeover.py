"""Taking over mid-rollout (issue 25, section 3): from our own controller, and from the Go one.

Real controller processes (``bootc-operator controller --leader-elect``) against the
session's kube-apiserver, real daemons on simulated bootc hosts (``hosted``) pulling
from a real registry, an evictable pod on every node, and the kit's safety monitor
watching from before the takeover to the end (never more than maxUnavailable in
reboot slots, cordoned by us or unavailable; no node reboots while an evictable pod
is bound to it, i.e. undrained). Each scenario then checks, from the simulated
hosts' reboot records, that every node rebooted exactly once (a node already on the
target: never), that the node an admin had cordoned before is still cordoned at the
end and no other is, and what the Events told the admin.

(a) **Upgrade mid-rollout.** The controller is stopped (SIGTERM, as a Deployment
    rollout does) while two nodes hold reboot slots: one rebooting (its reboot held
    by the simulated machine), one draining (a PodDisruptionBudget blocks it; an
    admin had cordoned it before). A fresh controller process starts, resumes both
    from the BootcNode annotations and finishes. Nothing is "adopted": the slots
    carry this controller's own protocol.
(b) **From the Go bootc-operator.** The Go operator's state on the wire, built on the
    apiserver for 6 nodes with 3 Go slots (maxUnavailable 3): BootcNodes with only a
    controller ownerReference (no labels), slot annotations ``in-reboot-slot`` with an
    *empty* value and ``was-cordoned``, never ``reboot-requested``; a drained slot
    holder on ``Booted``; two holders still draining (one cordoned by an admin before
    its slot: ``was-cordoned: "true"``); a finished node left on ``Booted``; the pool
    carrying the Go operator's finalizer. Our daemons start first: the drained Go
    holder on ``Booted`` is refused its reboot (no ``reboot-requested``) without
    being called Degraded. Then our controller starts: it adopts the three slots
    (one Normal ``SlotAdopted`` Event each, saying what it found), puts the Go
    holder's ``Booted`` back to ``Staged``, drains it again and only then lets it
    reboot; no Warning at all. Deleting the pool afterwards also clears the Go
    finalizer.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES, PODS, ApiError
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    list_objects,
    patch_object,
    request_json,
)
from bootc_operator.policy.ownership import owner_reference
from e2e.controllerenv import (
    LEASE,
    NAMESPACE,
    PATIENT_LEASE,
    ControllerProcess,
    create_blocking_pdb,
    create_pod,
    create_pool,
    delete_quietly,
    holder,
)
from e2e.helpers import condition, ensure_namespace, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from e2e.test_rollout_policies import booted, report, up_to_date_on
from hack.testenv import ControlPlane
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

ROLLOUT = 180.0


class Takeover:
    """One scenario's parts: the hosted nodes, the registry, controller processes started
    one after another (each a fresh process) and the pool, removed afterwards whatever
    finalizers it still carries (a failed test)."""

    def __init__(
        self, api: ApiClient, hosted: HostedNodes, registry: Registry, kubeconfig: Path, logs: Path
    ) -> None:
        self.api = api
        self.hosted = hosted
        self.registry = registry
        self.kubeconfig = kubeconfig
        self.logs = logs
        self.procs: list[ControllerProcess] = []
        self.pools: list[str] = []
        self.started = time.monotonic()

    async def begin(self, prefix: str, n: int) -> tuple[str, list[str], str, str, str]:
        """(pool name, ``n`` node names, repo, v0, v1): two images pushed to the registry."""
        group = unique_name(prefix)
        self.pools.append(group)
        repo = unique_name("os")
        v0 = await push(self.registry, self.registry.ref(repo, "v0"), "os 0")
        v1 = await push(self.registry, self.registry.ref(repo, "v1"), "os 1")
        return group, [f"{group}-{i}" for i in range(n)], repo, v0, v1

    def start(self) -> ControllerProcess:
        # one controller at a time, each stopped gracefully (releasing its Lease): no
        # standby would take over from one that lost its Lease to a slow apiserver
        proc = ControllerProcess(
            f"ctl-{len(self.procs)}", self.kubeconfig, self.logs, lease=PATIENT_LEASE
        )
        self.procs.append(proc)
        return proc

    async def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.log.close()
            sys.stderr.write(f"--- {p.name} log tail ---\n")
            sys.stderr.write("".join(p.log_path.read_text().splitlines(True)[-30:]))
        for name in self.pools:
            try:
                body = {"metadata": {"finalizers": None}}
                await patch_object(self.api, BOOTC_NODE_POOLS, name, body)
            except ApiError:
                continue
            await delete_quietly(self.api, BOOTC_NODE_POOLS, name)


@pytest.fixture
async def takeover(
    api: ApiClient,
    hosted: HostedNodes,
    registry: Registry,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> AsyncIterator[Takeover]:
    await ensure_namespace(api, NAMESPACE)  # the controllers' Lease lives there
    parts = Takeover(api, hosted, registry, control_plane.kubeconfig, tmp_path)
    try:
        yield parts
    finally:
        await parts.close()


async def leading(api: ApiClient, proc: ControllerProcess) -> None:
    async def holds() -> bool:
        return (await holder(api)).startswith(proc.name + "_")

    await wait_for(holds, 60, f"{proc.name} to hold the Lease {LEASE}")


async def cordon(api: ApiClient, name: str, on: bool = True) -> None:
    await patch_object(api, NODES, name, {"spec": {"unschedulable": on}})


async def cordoned(api: ApiClient) -> dict[str, bool]:
    items, _ = await list_objects(api, NODES)
    return {n["metadata"]["name"]: bool(n["spec"].get("unschedulable")) for n in items}


async def node_events(api: ApiClient, names: list[str]) -> list[dict[str, Any]]:
    items, _ = await list_objects(api, EVENTS, "default")
    return [e for e in items if (e.get("regarding") or {}).get("name") in names]


async def pods_on(api: ApiClient, group: str) -> set[str]:
    items, _ = await list_objects(api, PODS, "default", label_selector=f"group={group}")
    return {p["spec"]["nodeName"] for p in items}


def reboots(hosted: HostedNodes, names: list[str]) -> dict[str, int]:
    return dict(collections.Counter(r.node for r in hosted.records if r.node in names))


async def holders(api: ApiClient, names: list[str]) -> list[str]:
    found = []
    for name in names:
        bn = await get_object(api, BOOTC_NODES, name)
        if c.IN_REBOOT_SLOT_ANNOTATION in (bn["metadata"].get("annotations") or {}):
            found.append(name)
    return found


async def delete_pdb(api: ApiClient, name: str) -> None:
    path = f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{name}"
    try:
        await request_json(api, "DELETE", path)
    except ApiError as err:
        if not err.not_found:
            raise


async def delete_pool_and_wait(api: ApiClient, name: str) -> None:
    """Delete the pool; it must go (every finalizer it carries cleared)."""
    await delete_object(api, BOOTC_NODE_POOLS, name)

    async def gone() -> bool:
        try:
            await get_object(api, BOOTC_NODE_POOLS, name)
        except ApiError as err:
            return err.not_found
        return False

    await wait_for(gone, 60, f"pool {name} deleted (finalizers cleared)")


# ------------------------------------------------------------------ (a)


async def test_a_controller_upgraded_mid_rollout_resumes_and_finishes(
    api: ApiClient, takeover: Takeover
) -> None:
    hosted, registry = takeover.hosted, takeover.registry
    group, names, repo, v0, v1 = await takeover.begin("upg", 5)
    admin = names[4]  # cordoned by an admin before the rollout: takes a slot first
    for name in names:
        await hosted.add(name, registry.ref(repo, digest=v0), {"group": group})
        await create_pod(api, f"app-{name}", name, {"group": group, "node": name})
        await create_blocking_pdb(api, f"pdb-{name}", {"node": name})
    await cordon(api, admin)
    hosted.hold(*names)  # every reboot stays down until released
    monitor = SafetyMonitor(api, group, 2, target=v1, once_per_node=True)
    old = takeover.start()
    async with monitor:
        await leading(api, old)
        await create_pool(api, pool_body(group, {"group": group}, registry.ref(repo, digest=v1), 2))

        async def two_holders() -> list[str] | None:
            found = await holders(api, names)
            return found if len(found) == 2 else None

        slotted = await wait_for(
            two_holders, ROLLOUT, "two slots taken (drains blocked)", ignore=(ApiError,)
        )
        assert slotted is not None and admin in slotted, slotted
        (rebooting,) = [n for n in slotted if n != admin]
        await delete_pdb(api, f"pdb-{rebooting}")

        async def down() -> bool:
            bn = await get_object(api, BOOTC_NODES, rebooting)
            node = await get_object(api, NODES, rebooting)
            return (
                condition(bn, c.COND_IDLE).get("reason") == c.REASON_REBOOTING
                and condition(node, "Ready").get("status") != "True"
            )

        await wait_for(down, ROLLOUT, f"{rebooting} drained and rebooting (held)")
        # the upgrade: the old controller goes mid-rollout, a new process takes over
        assert old.stop() == 0
        state = await cordoned(api)
        assert await holders(api, names) == sorted(slotted)
        assert state[admin] and state[rebooting]
        new = takeover.start()
        await leading(api, new)
        for name in names:
            await delete_pdb(api, f"pdb-{name}")
        hosted.unhold(*names)
        await wait_for(lambda: up_to_date_on(api, group, v1, 5), ROLLOUT, "the new controller")
        await monitor.final_check(v1)
    assert monitor.violations == [], monitor.violations
    print(f"safety monitor: {monitor.summary}")
    assert monitor.summary.max_slots == 2
    assert reboots(hosted, names) == dict.fromkeys(names, 1)
    for name in names:
        assert await booted(api, name) == v1
    state = await cordoned(api)
    assert [n for n in names if state[n]] == [admin], "only the admin's cordon is left"
    assert await pods_on(api, group) == set(), "every node was drained"
    reasons = {e["reason"] for e in await node_events(api, names)}
    assert "NodeUpdated" in reasons
    assert not reasons & {"SlotAdopted", "UnsafeBootedRestored", "NodeDegraded"}, reasons
    await delete_pool_and_wait(api, group)
    assert new.stop() == 0
    report("upgrade mid-rollout", takeover.started)


# ------------------------------------------------------------------ (b)


def go_bootc_node(
    pool: dict[str, Any], name: str, image: str, state: str, slot: str | None
) -> dict[str, Any]:
    """A BootcNode as the Go operator writes it: no labels, a controller ownerReference;
    a slot is ``in-reboot-slot: ""`` and ``was-cordoned`` (``slot`` = its value)."""
    # the same controller ownerReference as ours: the Go operator's SetControllerReference
    meta: dict[str, Any] = {"name": name, "ownerReferences": [owner_reference(pool)]}
    if slot is not None:
        meta["annotations"] = {c.IN_REBOOT_SLOT_ANNOTATION: "", c.WAS_CORDONED_ANNOTATION: slot}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": meta,
        "spec": {"desiredImage": image, "desiredImageState": state},
    }


async def test_b_a_rollout_taken_over_from_the_go_operator(
    api: ApiClient, takeover: Takeover
) -> None:
    hosted, registry = takeover.hosted, takeover.registry
    group, names, repo, v0, v1 = await takeover.begin("go", 6)
    target = registry.ref(repo, digest=v1)
    finished, drained, draining, admin = names[:4]  # the rest: staged, waiting for a slot
    body = pool_body(group, {"group": group}, target, 3)
    body["metadata"]["finalizers"] = [c.GO_POOL_FINALIZER]
    pool = await create_pool(api, body)
    go_state = {
        finished: ("Booted", None),
        drained: ("Booted", "false"),
        draining: ("Staged", "false"),
        admin: ("Staged", "true"),
    }
    for name in names:
        want, slot = go_state.get(name, ("Staged", None))
        await create_object(api, BOOTC_NODES, go_bootc_node(pool, name, target, want, slot))
    # our daemons replace the Go ones on the hosts
    for name in names:
        boots = v1 if name == finished else v0
        labels = {"group": group, c.MANAGED_LABEL: ""}
        await hosted.add(name, registry.ref(repo, digest=boots), labels)
        if name != drained:  # a drained node has no pod left
            await create_pod(api, f"app-{name}", name, {"group": group})
    for name in (drained, draining, admin):
        await cordon(api, name)

    async def settled() -> bool:
        for name in names:
            bn = await get_object(api, BOOTC_NODES, name)
            reason = condition(bn, c.COND_IDLE).get("reason")
            if reason != (c.REASON_IDLE if name == finished else c.REASON_STAGED):
                return False
        return True

    await wait_for(settled, ROLLOUT, "every daemon reporting (the Go state staged)")
    # the Go holder on Booted: no reboot without reboot-requested, and no fault of the node
    bn = await get_object(api, BOOTC_NODES, drained)
    assert condition(bn, c.COND_DEGRADED).get("status") == "False", bn["status"]
    assert "its drain is not confirmed" in condition(bn, c.COND_IDLE)["message"]
    assert reboots(hosted, names) == {}

    monitor = SafetyMonitor(api, group, 3, target=v1)
    async with monitor:
        ctl = takeover.start()
        await wait_for(lambda: up_to_date_on(api, group, v1, 6), ROLLOUT, "taken over, finished")
        await monitor.final_check(v1)
    assert monitor.violations == [], monitor.violations
    print(f"safety monitor: {monitor.summary}")
    assert monitor.summary.max_slots == 3
    assert reboots(hosted, names) == {n: 1 for n in names if n != finished}
    for name in names:
        assert await booted(api, name) == v1
        bn = await get_object(api, BOOTC_NODES, name)
        assert bn["metadata"]["labels"][c.POOL_LABEL] == group
        assert bn["spec"]["desiredImageState"] == "Staged"
    state = await cordoned(api)
    assert [n for n in names if state[n]] == [admin], "only the admin's cordon is left"
    assert await pods_on(api, group) == {finished}, "drained everywhere it rebooted"

    async def adopted() -> dict[str, str]:
        events = await node_events(api, names)
        found = {
            e["regarding"]["name"]: str(e.get("note"))
            for e in events
            if e["reason"] == "SlotAdopted" and e["type"] == "Normal"
        }
        return found if len(found) == 3 else {}

    notes = await wait_for(adopted, 30, "a SlotAdopted Event on each Go slot holder")
    print("SlotAdopted:", *notes.values(), sep="\n  ")
    assert sorted(notes) == sorted([drained, draining, admin])
    assert notes[drained] == (
        f"{drained}: adopted reboot slot from a previous controller (desiredImageState Booted "
        "without a reboot-requested annotation): found it was drained and told to reboot, "
        "cordoned for its slot; desiredImageState set back to Staged; it is drained again "
        "and then told to reboot"
    )
    assert "(no time on its in-reboot-slot annotation)" in notes[draining]
    assert "cordoned by someone else before" in notes[admin]
    warnings = [
        (e["reason"], e["regarding"]["name"], e.get("note"))
        for e in await node_events(api, [*names, group])
        if e["type"] == "Warning"
    ]
    assert warnings == [], warnings
    # the pool goes: the Go operator's finalizer is cleared with ours
    await delete_pool_and_wait(api, group)
    assert ctl.stop() == 0
    report("taken over from the Go operator", takeover.started)
