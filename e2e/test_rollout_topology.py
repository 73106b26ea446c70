"""Zone by zone (``spec.rollout.topology``, issue 29 §1) and the admin's order
(``spec.rollout.order``, §2) against the real apiserver.

The real controller with the daemon simulated by ``Fleet``; the kit's safety
monitor, given the topology key, records at every event it sees the set of
domains with nodes in reboot slots (a violation when more than one) and the
order of the slots. The pool's ``status.currentDomain`` is recorded from the
pool watch at every change.
"""

from __future__ import annotations

import asyncio
import itertools

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS
from bootc_operator.kube.rest import patch_object
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, image, unique_name, wait_for
from hack.testenv import ControlPlane
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
#: nodes per zone (None: without the label)
ZONES: dict[str | None, int] = {"a": 2, "b": 2, "c": 3, None: 1}


async def up_to_date_on(api: ApiClient, pool: str, n: int, count: int) -> bool:
    p = await get_pool(api, pool)
    s = p.get("status") or {}
    return bool(
        condition(p, "UpToDate").get("status") == "True"
        and s.get("observedGeneration") == p["metadata"]["generation"]
        and s.get("targetDigest") == image(n).split("@")[1]
        and s.get("updatedCount") == count
    )


async def test_a_zone_by_zone_rollout_disrupts_one_zone_at_a_time_in_the_stated_order(
    api: ApiClient, fleet: Fleet, control_plane: ControlPlane
) -> None:
    """8 nodes in zones a (2), b (2), c (3) and one without the zone label;
    topology order [c], maxUnavailable 3, maxUnavailablePerDomain 50% (c: 2, the
    others: 1), stageAhead 3 (staging runs ahead across zones). The monitor never
    sees slots in two zones at once, nor more than a zone's own budget; the zones take
    their slots in the order c, a, b, then the unlabelled node, each in one
    stretch. The new image is first set with the rollout paused: the pool shows
    zone c as its current domain (status, progress message, kubectl get -o wide);
    the values it shows while running never go back in the order; unset at the end."""
    group = unique_name("zones")
    zone_of: dict[str, str] = {}
    for zone, count in ZONES.items():
        for i in range(count):
            name = f"{group}-{zone or 'none'}{i}"
            labels = {"group": group} | ({ZONE: zone} if zone else {})
            await fleet.add_node(name, image(1), labels)
            zone_of[name] = zone or "(unlabelled)"
    total = len(zone_of)
    body = pool_body(
        group,
        {"group": group},
        image(1),
        3,
        stageAhead=3,
        topology={"key": ZONE, "order": ["c"], "maxUnavailablePerDomain": "50%"},
    )
    async with running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, 1, total), 60, "the pool on image 1")
        monitor = SafetyMonitor(
            api,
            group,
            3,
            stage_ahead=3,
            target=image(2).split("@")[1],
            topology_key=ZONE,
        )
        async with monitor:
            paused = {"spec": {"image": {"ref": image(2)}, "rollout": {"paused": True}}}
            await patch_object(api, BOOTC_NODE_POOLS, group, paused)

            async def shows_zone_c() -> bool:
                p = await get_pool(api, group)
                return (p.get("status") or {}).get("currentDomain") == "c" and (
                    f"updating {ZONE}=c (1 of 4)" in condition(p, "UpToDate").get("message", "")
                )

            await wait_for(shows_zone_c, 60, "the pool showing zone c as its current domain")
            res = await asyncio.to_thread(control_plane.kubectl, "get", "bnp", group, "-o", "wide")
            header, row = (line.split() for line in res.stdout.splitlines()[:2])
            assert row[header.index("DOMAIN")] == "c", res.stdout
            resume = {"spec": {"rollout": {"paused": False}}}
            await patch_object(api, BOOTC_NODE_POOLS, group, resume)
            await wait_for(lambda: up_to_date_on(api, group, 2, total), 120, "the pool on image 2")
            assert await monitor.final_check(image(2).split("@")[1]) == []
        final = await get_pool(api, group)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)

    assert monitor.violations == [], monitor.violations
    assert monitor.summary.max_domains == 1, monitor.domains
    budgets = {"c": 2, "a": 1, "b": 1, "(unlabelled)": 1}  # 50% of 3, 2, 2, 1, rounded up
    assert all(monitor.max_per_domain[d] <= budgets[d] for d in budgets), monitor.max_per_domain
    expected = ["c", "a", "b", "(unlabelled)"]
    disrupted = [d[0] for _, d in monitor.domains if d]
    stretches = [zone for zone, _ in itertools.groupby(disrupted)]
    assert stretches == expected, monitor.domains
    order = monitor.reboot_order
    assert sorted(order) == sorted(zone_of), order
    assert [z for z, _ in itertools.groupby(zone_of[n] for n in order)] == expected, order
    # the status reconciler may skip a short-lived value, never go back
    shown = [z for z, _ in itertools.groupby(d for d in monitor.current_domains if d)]
    assert shown[0] == "c" and shown == sorted(shown, key=expected.index), shown
    assert "currentDomain" not in final["status"], final["status"]
    timeline = ", ".join(f"{t:.1f}s {'+'.join(d) or '-'}" for t, d in monitor.domains)
    print(
        f"\nzone by zone, {total} nodes, maxUnavailable 3, per domain 50%: reboot order "
        f"{' '.join(f'{n.rsplit(chr(45), 1)[1]}' for n in order)}; domains with slots over "
        f"time: {timeline}; most domains disrupted at once: {monitor.summary.max_domains}; "
        f"most slots at once: {monitor.summary.max_slots}, per domain: {monitor.max_per_domain}"
    )


async def test_an_ordered_rollout_goes_in_the_admins_order_and_shows_it(
    api: ApiClient, fleet: Fleet
) -> None:
    """6 nodes with a rack label (10, 2, 2, 1, none) and one control-plane node (rack 0);
    order {byLabel: rack, by: Name, controlPlane: Last}, maxUnavailable 1. The new
    image is set with the rollout paused until every node has staged it (so every
    node competes from the start): the pool's message shows the order to come; then
    the reboots go exactly in it: rack 1, 2 (by name), 10, the node without the
    label, the control plane last."""
    group = unique_name("order")
    racks = {"r10": "10", "r2b": "2", "r2a": "2", "r1": "1", "norack": None, "cp": "0"}
    names = {}
    for short, rack in racks.items():
        name = f"{group}-{short}"
        names[short] = name
        labels = {"group": group} | ({RACK: rack} if rack is not None else {})
        if short == "cp":
            labels[CONTROL_PLANE] = ""
        await fleet.add_node(name, image(1), labels)
    order = {"byLabel": RACK, "by": "Name", "controlPlane": "Last"}
    body = pool_body(group, {"group": group}, image(1), 1, order=order)
    expected = [names[s] for s in ("r1", "r2a", "r2b", "r10", "norack", "cp")]
    async with running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, 1, 6), 60, "the pool on image 1")
        monitor = SafetyMonitor(api, group, 1, target=image(2).split("@")[1])
        async with monitor:
            paused = {"spec": {"image": {"ref": image(2)}, "rollout": {"paused": True}}}
            await patch_object(api, BOOTC_NODE_POOLS, group, paused)
            shown = f"next (control plane last, by label {RACK}, by name): " + ", ".join(
                expected[:5]
            )

            async def shows_the_order() -> bool:
                p = await get_pool(api, group)
                message = condition(p, "UpToDate").get("message", "")
                return f"{shown} and 1 more" in message

            await wait_for(shows_the_order, 60, f"the pool showing {shown!r}")
            resume = {"spec": {"rollout": {"paused": False}}}
            await patch_object(api, BOOTC_NODE_POOLS, group, resume)
            await wait_for(lambda: up_to_date_on(api, group, 2, 6), 120, "the pool on image 2")
            assert await monitor.final_check(image(2).split("@")[1]) == []
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    assert monitor.violations == [], monitor.violations
    assert monitor.summary.max_slots == 1, monitor.timeline
    assert monitor.reboot_order == expected, monitor.reboot_order
    print(
        "\nordered rollout (controlPlane Last, byLabel rack, by Name): "
        + " ".join(n.removeprefix(f"{group}-") for n in monitor.reboot_order)
    )
