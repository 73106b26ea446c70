"""Controller scenarios on the real API server (ports of the Go project's envtest suite)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY, generate_latest

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import parse_time
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, load_api_client
from bootc_operator.kube import EVENTS as EVENTS_V1
from bootc_operator.kube.rest import (
    ApiError,
    get_object,
    list_objects,
    patch_object,
    request_json,
)
from bootc_operator.policy.poolsummary import PoolInputs, PoolSummary, summarize
from bootc_operator.reconcilers.loops import status as status_loop
from e2e.controllerenv import (
    WallClock,
    add_nodes,
    create_blocking_pdb,
    create_pod,
    create_pool,
    delete_quietly,
    get_pool,
)
from e2e.helpers import condition, digest, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body


async def pool_status(api: ApiClient, name: str) -> dict[str, Any]:
    return (await get_pool(api, name)).get("status") or {}


async def up_to_date_on(api: ApiClient, name: str, n: int, count: int) -> bool:
    p = await get_pool(api, name)
    s = p.get("status") or {}
    return bool(
        condition(p, "UpToDate").get("status") == "True"
        and s.get("updatedCount") == count
        and s.get("targetDigest") == digest(n)
    )


async def set_image(api: ApiClient, pool: str, n: int) -> None:
    await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"image": {"ref": image(n)}}})


async def set_rollout(api: ApiClient, pool: str, **rollout: Any) -> None:
    await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"rollout": rollout}})


async def bn(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_object(api, BOOTC_NODES, name)


async def node(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_object(api, NODES, name)


async def test_percentage_max_unavailable(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("pct")
    await add_nodes(fleet, group, 5, image(1))
    async with SafetyMonitor(api, group, 2) as monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1), "40%"))
        await wait_for(lambda: up_to_date_on(api, group, 1, 5), 90, "pool on image 1")
        await set_image(api, group, 2)
        await wait_for(lambda: up_to_date_on(api, group, 2, 5), 120, "pool on image 2")
    # 40% of 5 rounds up to 2: two at a time, never three
    assert monitor.summary.max_slots == 2, monitor.timeline
    assert monitor.summary.max_cordoned_by_us <= 2
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_pause_blocks_reboots_but_staging_completes(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("pause")
    nodes = await add_nodes(fleet, group, 3, image(1))
    async with SafetyMonitor(api, group, 3) as monitor, running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1), 3, paused=True))
        await wait_for(lambda: up_to_date_on(api, group, 1, 3), 90, "pool on image 1")
        await set_image(api, group, 2)

        async def all_staged() -> bool:
            objs = [await bn(api, n) for n in nodes]
            return all(
                (o.get("status") or {}).get("staged", {}).get("imageDigest") == digest(2)
                and condition(o, "Idle").get("reason") == "Staged"
                for o in objs
            )

        await wait_for(all_staged, 90, "every node staged while paused")

        async def paused_condition() -> bool:
            p = await get_pool(api, group)
            cond = condition(p, "UpToDate")
            return cond.get("reason") == "Paused" and "3 staged" in cond.get("message", "")

        await wait_for(paused_condition, 90, "UpToDate=False/Paused naming 3 staged")
        assert monitor.summary.max_slots == 0 and not fleet.reboots
        await set_rollout(api, group, paused=False)
        await wait_for(lambda: up_to_date_on(api, group, 2, 3), 120, "resumed rollout done")
    assert monitor.summary.max_slots == 3
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_degraded_node_does_not_stop_the_others(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("deg")
    nodes = await add_nodes(fleet, group, 3, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, group, 1, 3), 90, "pool on image 1")
        fleet.fail_stage[nodes[1]] = "error: pulling image: manifest unknown"
        await set_image(api, group, 2)

        async def two_updated_one_degraded() -> bool:
            p = await get_pool(api, group)
            s = p.get("status") or {}
            deg = condition(p, "Degraded")
            return bool(
                s.get("updatedCount") == 2
                and s.get("degradedCount") == 1
                and deg.get("reason") == "NodeDegraded"
                and nodes[1] in deg.get("message", "")
                and "manifest unknown" in deg.get("message", "")
            )

        await wait_for(two_updated_one_degraded, 120, "2 updated, the failing node degraded")

        async def node_event() -> bool:
            items, _ = await list_objects(
                api, EVENTS_V1, "default", field_selector=f"regarding.name={nodes[1]}"
            )
            return any(e["reason"] == "NodeDegraded" and e["type"] == "Warning" for e in items)

        await wait_for(node_event, 90, "a NodeDegraded Warning on the node")
        del fleet.fail_stage[nodes[1]]
        fleet.poke(nodes[1])
        await wait_for(lambda: up_to_date_on(api, group, 2, 3), 120, "recovered node updated")
        p = await get_pool(api, group)
        assert condition(p, "Degraded")["status"] == "False"
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_two_unhealthy_slot_holders_halt_and_recovery_resumes(
    api: ApiClient, fleet: Fleet
) -> None:
    group = unique_name("halt")
    nodes = await add_nodes(fleet, group, 5, image(1))
    async with SafetyMonitor(api, group, 2) as monitor, running_controller(api):
        # slots by name (spec.rollout.order): without an order they go to the nodes
        # staged longest, and the simulated hosts stamp Idle to the whole second, so
        # five nodes staged across a second boundary gave a slot to a third node, which
        # came back (seen 3 times in 27 runs)
        body = pool_body(
            group, {"group": group}, image(1), 2, rebootTimeoutSeconds=2, order={"by": "Name"}
        )
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, 1, 5), 90, "pool on image 1")
        fleet.never_ready.update(nodes[:2])
        # paused until all five are staged, so the two slots go to the first two by name
        # (otherwise to whichever is staged first, and those come back)
        await patch_object(
            api,
            BOOTC_NODE_POOLS,
            group,
            {"spec": {"image": {"ref": image(2)}, "rollout": {"paused": True}}},
        )

        async def all_staged() -> bool:
            p = await get_pool(api, group)
            return "5 staged" in condition(p, "UpToDate").get("message", "")

        await wait_for(all_staged, 90, "all five nodes staged while paused")
        await set_rollout(api, group, paused=False)

        async def halted() -> bool:
            p = await get_pool(api, group)
            deg = condition(p, "Degraded")
            return deg.get("reason") == "RolloutHalted" and nodes[0] in deg.get("message", "")

        await wait_for(halted, 120, "RolloutHalted naming the unhealthy holders")
        # no further slot was handed out while halted
        assert monitor.summary.max_slots == 2
        assert sorted({n for n, _ in fleet.reboots}) == nodes[:2]
        # the two hosts come back: finish their reboots
        fleet.never_ready.clear()
        for name in nodes[:2]:
            fleet.poke(name)
        await wait_for(lambda: up_to_date_on(api, group, 2, 5), 120, "rollout resumed and done")
    assert monitor.summary.max_slots == 2
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_the_reboot_timeout_counts_from_the_reboot_request_to_the_microsecond(
    api: ApiClient, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37 follow-up (as §6 for the drain): ``bootc.dev/reboot-requested`` is written
    to the microsecond. Told to reboot at hh:mm:ss.9, a holder that does not come back
    is not past ``rebootTimeoutSeconds: 4`` at +3.8 s (a whole-second stamp made that
    +4.7 s: RolloutHalted, with maxUnhealthy 1), and is at +4.1 s. The controller's
    wall clock is the test's, so the status passes that decide are the test's."""
    group = unique_name("rclock")
    (name,) = await add_nodes(fleet, group, 1, image(1))
    requested_at = dt.datetime.now(dt.UTC).replace(microsecond=900_000)
    clock = WallClock(requested_at)
    verdicts: list[tuple[dt.datetime, str]] = []  # (clock, Degraded reason) per status pass

    def judged(inputs: PoolInputs) -> PoolSummary:
        summary = summarize(inputs)
        if inputs.pool["metadata"]["name"] == group:
            verdicts.append((inputs.now, summary.degraded[1]))
        return summary

    monkeypatch.setattr(f"{status_loop.__name__}.summarize", judged)
    body = pool_body(group, {"group": group}, image(1), 1, rebootTimeoutSeconds=4, maxUnhealthy=1)
    async with running_controller(api) as ctl:
        ctl.ctx.now = clock
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, 1, 1), 90, "pool on image 1")
        fleet.never_ready.add(name)
        await set_image(api, group, 2)

        async def requested() -> str | None:
            marks = (await bn(api, name))["metadata"].get("annotations") or {}
            return marks.get(c.REBOOT_REQUESTED_ANNOTATION)

        stamp = await wait_for(requested, 90, f"{name} drained and told to reboot")
        assert parse_time(stamp) == requested_at, stamp

        async def status_pass_at(at: dt.datetime) -> str:
            clock.at = at
            ctl.queues["status"].add(group)
            await wait_for(lambda: any(t == at for t, _ in verdicts), 60, f"a status pass at {at}")
            return next(reason for t, reason in verdicts if t == at)

        assert await status_pass_at(requested_at + dt.timedelta(seconds=3.8)) != "RolloutHalted"
        assert await status_pass_at(requested_at + dt.timedelta(seconds=4.1)) == "RolloutHalted"

        async def halted() -> bool:
            return condition(await get_pool(api, group), "Degraded").get("reason") == (
                "RolloutHalted"
            )

        await wait_for(halted, 60, "the pool says RolloutHalted")
        fleet.never_ready.discard(name)
        fleet.poke(name)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_image_change_mid_drain_resets_in_one_write_and_cancels_drain(
    api: ApiClient, fleet: Fleet
) -> None:
    group = unique_name("mid")
    nodes = await add_nodes(fleet, group, 2, image(1))
    app = {"app": group}
    await create_pod(api, f"{group}-pod", nodes[0], app)
    await create_blocking_pdb(api, group, app)
    seen: list[tuple[str, str]] = []
    watch = Informer(api, BOOTC_NODES)
    watch.add_event_handler(
        EventHandler(
            on_update=lambda _o, n: (
                seen.append((n["spec"]["desiredImage"], n["spec"]["desiredImageState"]))
                if n["metadata"]["name"] == nodes[0]
                else None
            )
        )
    )
    watch.start()
    await watch.wait_for_sync()
    try:
        async with running_controller(api):
            await create_pool(api, pool_body(group, {"group": group}, image(1)))
            await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
            await set_image(api, group, 2)

            async def blocked() -> bool:
                b = await bn(api, nodes[0])
                ann = b["metadata"].get("annotations") or {}
                n = await node(api, nodes[0])
                return c.IN_REBOOT_SLOT_ANNOTATION in ann and bool(n["spec"].get("unschedulable"))

            await wait_for(blocked, 30, f"{nodes[0]} in a slot, cordoned, drain blocked by PDB")

            async def says_blocked() -> bool:
                p = await get_pool(api, group)
                return f"{group}-pod" in condition(p, "UpToDate").get("message", "")

            await wait_for(says_blocked, 90, "pool progress names the blocking pod")
            await set_image(api, group, 3)

            async def released() -> bool:
                b = await bn(api, nodes[0])
                ann = b["metadata"].get("annotations") or {}
                n = await node(api, nodes[0])
                return (
                    b["spec"]["desiredImage"] == image(3)
                    and c.IN_REBOOT_SLOT_ANNOTATION not in ann
                    and not n["spec"].get("unschedulable")
                )

            await wait_for(released, 90, "drain cancelled, slot released, node uncordoned")
        # the blocked node was never told to reboot into image 2
        assert (image(2), "Booted") not in seen
        # every change of desiredImage arrived together with Staged
        prev = image(1)
        for img, state in seen:
            if img != prev:
                assert state == "Staged", seen
            prev = img
    finally:
        await watch.stop()
        await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_node_leaving_mid_drain_is_released(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("leave")
    nodes = await add_nodes(fleet, group, 2, image(1))
    app = {"app": group}
    await create_pod(api, f"{group}-pod", nodes[0], app)
    await create_blocking_pdb(api, group, app)
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
        await set_image(api, group, 2)

        async def cordoned() -> bool:
            return bool((await node(api, nodes[0]))["spec"].get("unschedulable"))

        await wait_for(cordoned, 90, "first node cordoned (drain blocked)")
        await patch_object(api, NODES, nodes[0], {"metadata": {"labels": {"group": "elsewhere"}}})

        async def gone() -> bool:
            n = await node(api, nodes[0])
            try:
                await bn(api, nodes[0])
                return False
            except ApiError as err:
                return (
                    err.not_found
                    and not n["spec"].get("unschedulable")
                    and (c.MANAGED_LABEL not in n["metadata"].get("labels", {}))
                )

        await wait_for(gone, 90, "left node uncordoned, unlabelled, BootcNode deleted")
        await wait_for(lambda: up_to_date_on(api, group, 2, 1), 120, "remaining node updated")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_previously_cordoned_node_stays_cordoned(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("cord")
    nodes = await add_nodes(fleet, group, 2, image(1))
    await patch_object(api, NODES, nodes[1], {"spec": {"unschedulable": True}})
    # verbose: every step of the rollout is an Event on its node
    async with running_controller(api, node_events="verbose"):
        # 2: the node cordoned by someone else counts against maxUnavailable throughout
        await create_pool(api, pool_body(group, {"group": group}, image(1), 2))
        await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
        await set_image(api, group, 2)
        await wait_for(lambda: up_to_date_on(api, group, 2, 2), 120, "pool on image 2")
    assert (await node(api, nodes[1]))["spec"].get("unschedulable") is True
    assert not (await node(api, nodes[0]))["spec"].get("unschedulable")
    # the Events say what really happened to each (we cordoned only the first)
    notes = {}
    for name in nodes:
        items, _ = await list_objects(
            api, EVENTS_V1, namespace="default", field_selector=f"regarding.name={name}"
        )
        notes[name] = {e["reason"]: e.get("note", "") for e in items}
    assert "cordoned; draining" in notes[nodes[0]]["Cordoned"], notes
    assert "Cordoned" not in notes[nodes[1]], notes
    assert "already cordoned by someone else" in notes[nodes[1]]["AlreadyCordoned"], notes
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_node_cordoned_by_someone_else_uses_the_budget_and_is_named(
    api: ApiClient, fleet: Fleet
) -> None:
    """maxUnavailable counts every unavailable member, like a Deployment: with 1 and a
    node an admin keeps cordoned, the cordoned node is updated first (it costs no
    capacity), then the rest wait, named, until the admin uncordons it."""
    group = unique_name("budget")
    a, b, z = await add_nodes(fleet, group, 3, image(1))
    await patch_object(api, NODES, z, {"spec": {"unschedulable": True}})
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1), 1))
        await wait_for(lambda: up_to_date_on(api, group, 1, 3), 90, "pool on image 1")
        await set_image(api, group, 2)

        async def blocked() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            # the message comes while z still stages; z's update counted comes later
            ok = (
                up.get("reason") == "RolloutBlocked"
                and f"waiting: {z} cordoned by someone else" in up.get("message", "")
                and (pool.get("status") or {}).get("updatedCount") == 1
            )
            return pool if ok else None

        pool = await wait_for(blocked, 90, "z updated, the rest waiting, naming the cordoned z")
        booted = {n: (await bn(api, n))["status"]["booted"]["imageDigest"] for n in (a, b, z)}
        assert booted == {a: digest(1), b: digest(1), z: digest(2)}  # z went first
        assert [name for name, _ in fleet.reboots] == [z]
        assert pool["status"]["phase"] == "Blocked"
        await patch_object(api, NODES, z, {"spec": {"unschedulable": None}})
        await wait_for(lambda: up_to_date_on(api, group, 2, 3), 120, "pool on image 2")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_overlapping_pools_conflict_only_on_the_loser(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("ovl")
    nodes = await add_nodes(fleet, group, 2, image(1), zone="a")
    first, second = f"{group}-first", f"{group}-second"
    async with running_controller(api):
        await create_pool(api, pool_body(first, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, first, 1, 2), 90, "first pool owns both")
        await create_pool(api, pool_body(second, {"zone": "a", "group": group}, image(1)))

        async def conflict() -> bool:
            p = await get_pool(api, second)
            deg = condition(p, "Degraded")
            return deg.get("reason") == "NodeConflict" and first in deg.get("message", "")

        await wait_for(conflict, 90, "second pool reports NodeConflict naming the first")
        assert condition(await get_pool(api, first), "Degraded")["status"] == "False"
        for name in nodes:
            assert (await bn(api, name))["metadata"]["labels"][c.POOL_LABEL] == first
        # fix: the second pool selects nothing of the first's any more
        await patch_object(
            api,
            BOOTC_NODE_POOLS,
            second,
            {"spec": {"nodeSelector": {"matchLabels": {"zone": "b", "group": group}}}},
        )

        async def cleared() -> bool:
            return condition(await get_pool(api, second), "Degraded").get("status") == "False"

        await wait_for(cleared, 90, "conflict clears")
    await delete_quietly(api, BOOTC_NODE_POOLS, second)
    await delete_quietly(api, BOOTC_NODE_POOLS, first)


@pytest.mark.parametrize(
    ("spec_patch", "fragment"),
    [
        ({"image": {"ref": "myos:latest"}}, "short name"),
        # a digest the BootcNode CRD (and bootc) would refuse: caught on the pool
        ({"image": {"ref": "quay.io/x/os@md5:" + "0" * 32}}, "only sha256 and sha512"),
        ({"nodeSelector": {"matchLabels": {"bad key!": "x"}}}, "nodeSelector"),
        ({"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "at least one"),
    ],
)
async def test_invalid_spec_is_reported(
    api: ApiClient, fleet: Fleet, spec_patch: dict[str, Any], fragment: str
) -> None:
    group = unique_name("inv")
    await add_nodes(fleet, group, 1, image(1))
    body = pool_body(group, {"group": group}, image(1))
    body["spec"].update(spec_patch)
    async with running_controller(api):
        await create_pool(api, body)

        async def invalid() -> bool:
            deg = condition(await get_pool(api, group), "Degraded")
            return deg.get("reason") == "InvalidSpec" and fragment in deg.get("message", "")

        await wait_for(invalid, 30, f"InvalidSpec mentioning {fragment!r}")
        pool = await get_pool(api, group)
        # not "in progress": UpToDate names what blocks it, counts the matched nodes
        up = condition(pool, "UpToDate")
        assert (up["status"], up["reason"]) == ("False", "InvalidSpec"), up
        assert fragment in up["message"]
        selector_ok = "nodeSelector" not in spec_patch
        assert pool["status"]["nodeCount"] == (1 if selector_ok else 0)
        assert pool["status"]["phase"] == "Degraded"
        # nothing was created that the API server would refuse
        bns, _ = await list_objects(api, BOOTC_NODES, label_selector=f"{c.POOL_LABEL}={group}")
        assert not bns
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_pool_deletion_releases_every_node(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("del")
    nodes = await add_nodes(fleet, group, 2, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
        await delete_quietly(api, BOOTC_NODE_POOLS, group)

        async def released() -> bool:
            items, _ = await list_objects(
                api, BOOTC_NODES, label_selector=f"{c.POOL_LABEL}={group}"
            )
            labels = [(await node(api, n))["metadata"].get("labels", {}) for n in nodes]
            try:
                await get_pool(api, group)
                pool_gone = False
            except ApiError as err:
                pool_gone = err.not_found
            return not items and pool_gone and all(c.MANAGED_LABEL not in lb for lb in labels)

        await wait_for(released, 90, "nodes unlabelled, BootcNodes and pool gone")


async def test_status_events_and_metrics(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("obs")
    await add_nodes(fleet, group, 2, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
        await set_image(api, group, 2)
        await wait_for(lambda: up_to_date_on(api, group, 2, 2), 120, "pool on image 2")
        s = await pool_status(api, group)
        assert s["nodeCount"] == 2 and s["updatingCount"] == 0 and s["degradedCount"] == 0
        assert condition(await get_pool(api, group), "UpToDate")["message"] == "2/2 updated"

        async def events() -> set[str]:
            items, _ = await list_objects(
                api, EVENTS_V1, "default", field_selector=f"regarding.name={group}"
            )
            return {e["reason"] for e in items}

        want = {"NodeJoined", "SlotTaken", "RebootRequested", "NodeUpdated", "RolloutComplete"}
        await wait_for(lambda: _superset(events, want), 30, f"events {want}")
        text = generate_latest(REGISTRY).decode()
        assert f'bootc_operator_pool_up_to_date{{pool="{group}"}} 1.0' in text
        assert f'bootc_operator_pool_nodes{{pool="{group}",state="UpToDate"}} 2.0' in text
        assert f'bootc_operator_reboot_slots_in_use{{pool="{group}"}} 0.0' in text
        assert 'controller_runtime_reconcile_total{controller="rollout",result="success"}' in text
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def _superset(fetch: Any, want: set[str]) -> bool:
    got = await fetch()
    return bool(want <= got)


async def test_membership_follows_labels_deletions_and_resolved_conflicts(
    api: ApiClient, fleet: Fleet
) -> None:
    """Port of the Go suite's membership tests (create, label removal, deletion, conflict)."""
    group = unique_name("mem")
    n1, n2, n3 = f"{group}-1", f"{group}-2", f"{group}-3"
    await fleet.add_node(n1, image(1), {"p1": group})
    await fleet.add_node(n2, image(1), {"p2": group})
    await fleet.add_node(n3, image(1), {"p1": group, "p2": group})
    p1, p2 = f"{group}-p1", f"{group}-p2"

    async def owner(name: str) -> str | None:
        try:
            b = await bn(api, name)
        except ApiError as err:
            if err.not_found:
                return None
            raise
        return str(b["metadata"]["ownerReferences"][0]["name"])

    async with running_controller(api):
        await create_pool(api, pool_body(p1, {"p1": group}, image(1)))
        await wait_for(lambda: _eq(owner(n3), p1), 90, "pool 1 owns the contested node")
        await create_pool(api, pool_body(p2, {"p2": group}, image(2)))
        await wait_for(lambda: _eq(owner(n2), p2), 90, "pool 2 owns its own node")

        async def p2_conflict() -> bool:
            deg = condition(await get_pool(api, p2), "Degraded")
            return deg.get("reason") == "NodeConflict" and p1 in deg.get("message", "")

        await wait_for(p2_conflict, 90, "pool 2 NodeConflict naming pool 1")
        assert condition(await get_pool(api, p1), "Degraded")["status"] == "False"
        b2 = await bn(api, n2)
        assert b2["spec"] == {"desiredImage": image(2), "desiredImageState": "Staged"}
        # resolve: n3 leaves pool 1 and moves to pool 2, which recovers
        await patch_object(api, NODES, n3, {"metadata": {"labels": {"p1": None}}})
        await wait_for(lambda: _eq(owner(n3), p2), 90, "contested node moves to pool 2")

        async def p2_healthy() -> bool:
            return condition(await get_pool(api, p2), "Degraded").get("reason") == "Healthy"

        await wait_for(p2_healthy, 90, "pool 2 healthy again")
        # a deleted Node loses its BootcNode
        await delete_quietly(api, NODES, n1)
        await wait_for(lambda: _eq(owner(n1), None), 90, "deleted node's BootcNode removed")
        # label removal: unmanaged again
        await patch_object(api, NODES, n2, {"metadata": {"labels": {"p2": None}}})

        async def n2_released() -> bool:
            labels = (await node(api, n2))["metadata"].get("labels") or {}
            return await owner(n2) is None and c.MANAGED_LABEL not in labels

        await wait_for(n2_released, 90, "unlabelled node released")
    fleet.forget(n1)
    await delete_quietly(api, BOOTC_NODE_POOLS, p1)
    await delete_quietly(api, BOOTC_NODE_POOLS, p2)


async def test_invalid_image_recovers_when_fixed(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("fix")
    await add_nodes(fleet, group, 1, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, "myos@sha256:bad"))

        async def reason(want: str) -> bool:
            return condition(await get_pool(api, group), "Degraded").get("reason") == want

        await wait_for(lambda: reason("InvalidSpec"), 90, "InvalidSpec for a short name")
        await set_image(api, group, 1)
        await wait_for(lambda: reason("Healthy"), 90, "Healthy once the ref is fixed")
        await wait_for(lambda: up_to_date_on(api, group, 1, 1), 90, "pool converges")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def _eq(value: Any, want: Any) -> bool:
    return bool(await value == want)


async def test_drain_timeout_goes_around_the_node(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("dto")
    nodes = await add_nodes(fleet, group, 2, image(1))
    app = {"app": group}
    pod_name = f"{group}-pod"
    await create_pod(api, pod_name, nodes[0], app)
    await create_blocking_pdb(api, group, app)
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await create_pool(
            api, pool_body(group, {"group": group}, image(1), 1, drainTimeoutSeconds=2)
        )
        await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
        await set_image(api, group, 2)

        async def reported() -> bool:
            p = await get_pool(api, group)
            deg = condition(p, "Degraded")
            msg = deg.get("message", "")
            return (
                deg.get("reason") == "NodeDegraded"
                and nodes[0] in msg
                and pod_name in msg
                and "timed out" in msg
                and (p.get("status") or {}).get("updatedCount") == 1
            )

        await wait_for(reported, 120, "pool names the node and the blocking pod; other node done")
        n0 = await node(api, nodes[0])
        assert not n0["spec"].get("unschedulable"), "timed-out node must be uncordoned"
        b0 = await bn(api, nodes[0])
        assert c.IN_REBOOT_SLOT_ANNOTATION not in (b0["metadata"].get("annotations") or {})
        assert b0["spec"]["desiredImageState"] == "Staged"

        async def timeout_event() -> bool:
            items, _ = await list_objects(
                api, EVENTS_V1, "default", field_selector=f"regarding.name={nodes[0]}"
            )
            return any(e["reason"] == "DrainTimeout" and pod_name in e["note"] for e in items)

        await wait_for(timeout_event, 90, "a DrainTimeout event naming the pod")
    assert monitor.summary.max_slots == 1
    assert nodes[0] not in {n for n, _ in fleet.reboots}
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_open_drains_never_starve_the_controllers_requests(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    """More drains held open by a PDB than the request client has connections.

    Every drain keeps a Pod watch open until it ends. The controller's requests
    get 2 connections here and 4 drains block at once: the evictions, the
    DrainBlocked Events and the status writes must still go through (watches
    run on their own client), and the rollout finishes once the PDB goes.
    """
    group = unique_name("starve")
    nodes = await add_nodes(fleet, group, 4, image(1))
    app = {"app": group}
    for i, name in enumerate(nodes):
        await create_pod(api, f"{group}-pod{i}", name, app)
    await create_blocking_pdb(api, group, app)
    requests = await load_api_client(control_plane.kubeconfig, max_connections=2)
    watches = await load_api_client(control_plane.kubeconfig, max_connections=0)
    try:
        async with (
            SafetyMonitor(api, group, 4) as monitor,
            running_controller(requests, watch_api=watches),
        ):
            await create_pool(api, pool_body(group, {"group": group}, image(1), 4))
            await wait_for(lambda: up_to_date_on(api, group, 1, 4), 90, "pool on image 1")
            await set_image(api, group, 2)

            async def all_blocked() -> bool:
                blocked = set()
                for name in nodes:
                    items, _ = await list_objects(
                        api, EVENTS_V1, "default", field_selector=f"regarding.name={name}"
                    )
                    if any(e["reason"] == "DrainBlocked" for e in items):
                        blocked.add(name)
                return blocked == set(nodes)

            await wait_for(all_blocked, 120, "a DrainBlocked Event on each of the 4 nodes")
            await request_json(
                api, "DELETE", f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{group}"
            )
            await wait_for(lambda: up_to_date_on(api, group, 2, 4), 120, "pool on image 2")
        assert monitor.summary.max_slots == 4
    finally:
        await requests.close()
        await watches.close()
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_restarted_controller_resumes_the_drain_from_annotations(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("rst")
    nodes = await add_nodes(fleet, group, 2, image(1))
    app = {"app": group}
    await create_pod(api, f"{group}-pod", nodes[0], app)
    await create_blocking_pdb(api, group, app)
    async with SafetyMonitor(api, group, 1) as monitor:
        async with running_controller(api):
            await create_pool(api, pool_body(group, {"group": group}, image(1)))
            await wait_for(lambda: up_to_date_on(api, group, 1, 2), 90, "pool on image 1")
            await set_image(api, group, 2)

            async def slotted() -> str:
                ann = (await bn(api, nodes[0]))["metadata"].get("annotations") or {}
                return str(ann.get(c.IN_REBOOT_SLOT_ANNOTATION, ""))

            taken = await wait_for(slotted, 90, "first node holds a slot (drain blocked)")
        # controller gone; the node is still cordoned and slotted, as the API says
        assert (await node(api, nodes[0]))["spec"].get("unschedulable") is True
        control_plane.kubectl("delete", "pdb", group, "-n", "default")
        async with running_controller(api):
            await wait_for(lambda: up_to_date_on(api, group, 2, 2), 120, "new controller finishes")
        # the slot was resumed, not taken twice: one holder at a time throughout
        assert taken
        assert monitor.summary.max_slots == 1
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_kubectl_wait_for_up_to_date(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("kw")
    await add_nodes(fleet, group, 2, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        result = await asyncio.to_thread(
            control_plane.kubectl,
            "wait",
            "--for=condition=UpToDate",
            f"bnp/{group}",
            "--timeout=60s",
        )
        assert "condition met" in result.stdout
        table = await asyncio.to_thread(control_plane.kubectl, "get", "bnp", group)
        assert "True" in table.stdout and group in table.stdout
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
