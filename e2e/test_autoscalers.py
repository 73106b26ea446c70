"""Rollouts alongside cluster autoscalers (issue 29 §3), on the real API server.

The daemons are simulated (``Fleet``); a node in ``Fleet.never_ready`` stays in its
reboot, so it holds its slot until the test lets it come back:

- a slot holder's Node carries Cluster Autoscaler's ``scale-down-disabled`` and
  Karpenter's ``do-not-disrupt``; when its slot ends the Node gets back exactly
  what it had (the admin's own value, or nothing), also after a controller restart
  mid-slot (the record lives on the BootcNode); removed or changed by someone
  while the slot is held (its node rebooting), they are written again;
- a node deleted while it holds the slot gives it back at once: the next node
  takes it while the deleted one could never have come back;
- a node tainted by an autoscaler that removes it gets no slot and is counted as
  leaving while the others update; with the taint gone it updates too;
- a node that writes 44 KB of control characters into one of those annotations on
  its own Node (sixfold in the slot's JSON record: past the 256 KiB a BootcNode's
  annotations may hold) gets no slot, is named on the pool, and wedges nothing: the
  node that took a slot beside it in the same pass is drained, updated and
  uncordoned, the next one too; a sane value lets it update (issue 37 item 4).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES, ApiError
from bootc_operator.kube.rest import delete_object, get_object, list_objects, patch_object
from bootc_operator.policy.autoscaler import DO_NOT_DISRUPT, PROTECT
from e2e.controllerenv import add_nodes, create_pool, delete_quietly, get_pool
from e2e.helpers import condition, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body

KEYS = tuple(PROTECT)


async def node_annotations(api: ApiClient, name: str) -> dict[str, str]:
    node = await get_object(api, NODES, name)
    return {k: v for k, v in (node["metadata"].get("annotations") or {}).items() if k in KEYS}


async def holders(api: ApiClient, names: list[str]) -> list[str]:
    """The nodes among ``names`` whose BootcNode holds a reboot slot."""
    held = []
    for name in names:
        try:
            bn = await get_object(api, BOOTC_NODES, name)
        except ApiError as err:
            if err.not_found:
                continue
            raise
        if c.IN_REBOOT_SLOT_ANNOTATION in (bn["metadata"].get("annotations") or {}):
            held.append(name)
    return held


async def up_to_date(api: ApiClient, pool: str, n: int, count: int) -> bool:
    p = await get_pool(api, pool)
    s: dict[str, Any] = p.get("status") or {}
    return bool(
        condition(p, "UpToDate").get("status") == "True"
        and s.get("targetDigest") == image(n).split("@")[1]
        and s.get("updatedCount") == count
    )


async def test_slot_holders_carry_the_autoscaler_annotations_and_get_back_what_they_had(
    api: ApiClient, fleet: Fleet
) -> None:
    """Two nodes, one slot: ``a`` had the admin's own ``do-not-disrupt: "false"``, ``b``
    had neither annotation. Each carries both of ours while in its slot, kept there by
    a reboot that does not end; the controller is restarted while the first holds it.
    Once updated, ``a`` has ``do-not-disrupt: "false"`` again (and no scale-down
    annotation), ``b`` has none."""
    group = unique_name("autoscale")
    a, b = await add_nodes(fleet, group, 2, image(1))
    admins = {a: {DO_NOT_DISRUPT: "false"}, b: {}}
    await patch_object(api, NODES, a, {"metadata": {"annotations": admins[a]}})
    fleet.never_ready.update((a, b))
    async with SafetyMonitor(api, group, 1) as monitor:
        async with running_controller(api):
            await create_pool(api, pool_body(group, {"group": group}, image(1)))
            await wait_for(lambda: up_to_date(api, group, 1, 2), 30, "pool UpToDate on image 1")
            await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
            first = (await wait_for(lambda: holders(api, [a, b]), 30, "a slot holder"))[0]
            await wait_for(
                lambda: _equal(node_annotations(api, first), dict(PROTECT)),
                30,
                f"{first} annotated for the autoscalers",
            )
        # a new controller (fresh caches) finishes the slot from the BootcNode's record
        async with running_controller(api):
            fleet.never_ready.discard(first)
            fleet.poke(first)
            second = b if first == a else a
            await wait_for(lambda: _equal(holders(api, [a, b]), [second]), 30, "the next slot")
            assert await node_annotations(api, first) == admins[first], "not restored after restart"
            await wait_for(
                lambda: _equal(node_annotations(api, second), dict(PROTECT)),
                30,
                f"{second} annotated for the autoscalers",
            )
            # someone takes them off (one removed, one changed) while the slot is held:
            # they are written again (the slot's record, and so the restore, unchanged)
            edit = {"metadata": {"annotations": {KEYS[0]: None, KEYS[1]: "false"}}}
            await patch_object(api, NODES, second, edit)
            await wait_for(
                lambda: _equal(node_annotations(api, second), dict(PROTECT)),
                30,
                f"{second}'s autoscaler annotations written again while it holds its slot",
            )
            assert await holders(api, [a, b]) == [second]
            fleet.never_ready.discard(second)
            fleet.poke(second)
            await wait_for(lambda: up_to_date(api, group, 2, 2), 30, "pool UpToDate on image 2")
            for name in (a, b):
                assert await node_annotations(api, name) == admins[name], name
                assert not (await get_object(api, NODES, name))["spec"].get("unschedulable")
    assert monitor.summary.max_slots == 1, monitor.timeline
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def _equal(got: Any, expected: Any) -> bool:
    return bool(await got == expected)


async def _contains(got: Any, item: Any) -> bool:
    return item in await got


async def test_a_node_deleted_in_its_slot_gives_the_slot_back_at_once(
    api: ApiClient, fleet: Fleet
) -> None:
    """Two nodes, one slot, reboots that never end: the first holder's Node is deleted
    mid-reboot; the other node takes the slot (it could not before: the holder never
    comes back), and the pool finishes with one node."""
    group = unique_name("gone")
    a, b = await add_nodes(fleet, group, 2, image(1))
    fleet.never_ready.update((a, b))
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date(api, group, 1, 2), 30, "pool UpToDate on image 1")
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
        first = (await wait_for(lambda: holders(api, [a, b]), 30, "a slot holder"))[0]
        second = b if first == a else a
        await wait_for(
            lambda: _equal(node_annotations(api, first), dict(PROTECT)),
            30,
            f"{first} holds its slot",
        )
        assert await holders(api, [a, b]) == [first]
        fleet.forget(first)
        await delete_object(api, NODES, first)
        await wait_for(lambda: _equal(holders(api, [a, b]), [second]), 30, "the slot passed on")
        fleet.never_ready.discard(second)
        fleet.poke(second)
        await wait_for(lambda: up_to_date(api, group, 2, 1), 30, "pool UpToDate on image 2")
    assert monitor.summary.max_slots == 1, monitor.timeline
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def node_event_reasons(api: ApiClient, name: str) -> list[str]:
    items, _ = await list_objects(
        api, EVENTS, namespace="default", field_selector=f"regarding.name={name}"
    )
    return [e["reason"] for e in items if e["regarding"].get("kind") == "Node"]


async def taint(api: ApiClient, name: str, key: str | None) -> None:
    taints = [{"key": key, "effect": "NoSchedule"}] if key else None
    await patch_object(api, NODES, name, {"spec": {"taints": taints}})


async def test_a_node_an_autoscaler_removes_gets_no_slot_and_is_shown_leaving(
    api: ApiClient, fleet: Fleet
) -> None:
    """Three nodes, one carrying Cluster Autoscaler's ``ToBeDeletedByClusterAutoscaler``
    taint: the other two update while it never takes a slot, and the pool counts it as
    leaving; once the autoscaler changes its mind (the taint goes) it updates too."""
    group = unique_name("leaving")
    names = await add_nodes(fleet, group, 3, image(1))
    going = names[0]  # first by name: it would go first
    await taint(api, going, "ToBeDeletedByClusterAutoscaler")

    async def shown_leaving() -> bool:
        p = await get_pool(api, group)
        message = condition(p, "UpToDate").get("message", "")
        return bool(
            (p.get("status") or {}).get("updatedCount") == 2
            and "2/3 updated; 1 leaving (an autoscaler is removing them)" in message
        )

    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date(api, group, 1, 3), 30, "pool UpToDate on image 1")
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
        await wait_for(shown_leaving, 60, "two nodes updated, one shown leaving")
        assert going not in monitor.takes_between(0), monitor.timeline
        await wait_for(
            lambda: _contains(node_event_reasons(api, going), "NodeLeaving"),
            30,
            f"a NodeLeaving Event on {going}",
        )
        assert await holders(api, names) == []
        await taint(api, going, None)
        await wait_for(lambda: up_to_date(api, group, 2, 3), 60, "pool UpToDate on image 2")
        assert sorted(monitor.takes_between(0)) == sorted(names), monitor.timeline
    assert monitor.summary.max_slots == 1, monitor.timeline
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


FILLER = "example.com/filler"
#: annotations a Node may carry in all (keys and values), the API server's limit
ANNOTATIONS_LIMIT = 256 * 1024


@pytest.mark.parametrize("hostile", ["record-too-long", "node-full"])
async def test_a_node_whose_own_annotations_refuse_its_slot_wedges_nothing(
    api: ApiClient, fleet: Fleet, hostile: str
) -> None:
    """Three nodes, two slots; the first by name sabotages its own Node:

    - ``record-too-long``: ``do-not-disrupt`` set to 44,000 ``\\x01``. Before, its
      take's BootcNode write was refused (422: the record grew past 256 KiB) and that
      aborted every pass, so the node that took the other slot in the same pass stayed
      cordoned and was never drained. Now the record is bounded: no slot, named;
    - ``node-full``: annotations that fill the Node's 256 KiB, so the API server
      refuses the cordon and our annotations (a real 422 on the Node): the slot is
      given straight back, and the other nodes go on.

    Either way the others are drained, updated and uncordoned, the node is named on the
    pool (Degraded NodeDegraded) and in a SlotRefused Event, it is never left cordoned,
    and once its annotations are sane it updates too."""
    group = unique_name("hostile")
    names = await add_nodes(fleet, group, 3, image(1))
    bad, good = names[0], names[1:]
    if hostile == "record-too-long":
        value = "\x01" * 44_000
        annotations = {DO_NOT_DISRUPT: value}
        named = f"{bad}: its Node annotations {DO_NOT_DISRUPT} (44000 characters)"
    else:
        value = "x" * (ANNOTATIONS_LIMIT - len(FILLER) - 60)
        annotations = {FILLER: value}
        named = f"{bad}: the API server refused the write (422)"
    await patch_object(api, NODES, bad, {"metadata": {"annotations": annotations}})

    async def good_ones_updated_and_bad_named() -> bool:
        p = await get_pool(api, group)
        deg = condition(p, "Degraded")
        return bool(
            (p.get("status") or {}).get("updatedCount") == 2
            and deg.get("reason") == "NodeDegraded"
            and named in deg.get("message", "")
        )

    async with SafetyMonitor(api, group, 2) as monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1), 2))
        await wait_for(lambda: up_to_date(api, group, 1, 3), 30, "pool UpToDate on image 1")
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": image(2)}}})
        await wait_for(
            good_ones_updated_and_bad_named, 60, "the two others updated, the hostile one named"
        )
        taken = monitor.takes_between(0)
        assert set(good) <= set(taken), monitor.timeline
        if hostile == "record-too-long":
            assert bad not in taken, monitor.timeline  # refused before any write
        for name in names:  # nobody left cordoned, the hostile value untouched
            assert not (await get_object(api, NODES, name))["spec"].get("unschedulable"), name
        node = await get_object(api, NODES, bad)
        assert {k: node["metadata"]["annotations"].get(k) for k in annotations} == annotations
        await wait_for(
            lambda: _contains(node_event_reasons(api, bad), "SlotRefused"),
            30,
            f"a SlotRefused Event on {bad}",
        )
        # sane annotations: the node takes its slot and updates, and keeps its own value
        sane = {DO_NOT_DISRUPT: "no"} if hostile == "record-too-long" else {FILLER: None}
        await patch_object(api, NODES, bad, {"metadata": {"annotations": sane}})
        await wait_for(lambda: up_to_date(api, group, 2, 3), 60, "pool UpToDate on image 2")
        assert condition(await get_pool(api, group), "Degraded").get("reason") == "Healthy"
        expected = {k: v for k, v in sane.items() if k in KEYS and v is not None}
        assert await node_annotations(api, bad) == expected
        assert sorted(set(monitor.takes_between(0))) == sorted(names), monitor.timeline
    assert monitor.summary.max_slots <= 2, monitor.timeline
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
