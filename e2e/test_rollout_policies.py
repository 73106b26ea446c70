"""The rollout policies of ``spec.rollout`` end to end (issue 15).

Each scenario runs the real controller against the session's kube-apiserver, with
real daemons on simulated bootc hosts (``hosted``) pulling from a real registry,
and is watched by the safety monitor with the invariants of the policy it shows
(``hack.testenv.monitor``: the budget counting outside causes, no slot outside a
maintenance window, never more than stageAhead nodes on their way):

- a maintenance window days away, then moved to open within the minute: nodes
  stage at once but take slots only inside it, the pool says when it opens; a node
  in its slot at closing finishes, no slot after;
- stageAhead 1 of 6 nodes: at most one node on its way at a time, and the
  rollout completes; without it every node is told at once;
- a node cordoned by someone else uses maxUnavailable: it goes first, then the
  rest wait with the pool naming it, until it is uncordoned;
- maxUnhealthy 1: the first slot holder whose host does not come back halts the
  rollout, named; it resumes when the host is back.

Reboots are held (``HostedNodes.hold``) where a scenario needs a node to stay in
its reboot: a slow reboot, or a host that fails to come back.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any
from zoneinfo import ZoneInfo

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES, ApiError
from bootc_operator.kube.rest import get_object, list_objects, patch_object
from bootc_operator.policy.windows import parse_windows
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from hack.testenv.controller import running_controller
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

#: a zone 5 h 45 min ahead of UTC: local and UTC wall times differ in hours and minutes
ZONE = "Asia/Kathmandu"
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


# ------------------------------------------------------------------ helpers


async def setup_hosts(
    hosted: HostedNodes, registry: Registry, group: str, n: int, images: int = 2, **host: Any
) -> tuple[list[str], str, list[str]]:
    """``n`` hosted nodes ``GROUP-i`` labelled ``group=GROUP``, booted into the first of
    ``images`` images pushed to ``registry``; returns (names, repo, digests)."""
    repo = unique_name("os")
    digests = [await push(registry, registry.ref(repo, f"v{i}"), f"os {i}") for i in range(images)]
    names = [f"{group}-{i}" for i in range(n)]
    for name in names:
        await hosted.add(name, registry.ref(repo, digest=digests[0]), {"group": group}, **host)
    return names, repo, digests


async def booted(api: ApiClient, name: str) -> str | None:
    bn = await get_object(api, BOOTC_NODES, name)
    return ((bn.get("status") or {}).get("booted") or {}).get("imageDigest")


async def idle_reason(api: ApiClient, name: str) -> str | None:
    return condition(await get_object(api, BOOTC_NODES, name), c.COND_IDLE).get("reason")


async def ready(api: ApiClient, name: str) -> bool:
    return condition(await get_object(api, NODES, name), "Ready").get("status") == "True"


async def cordoned(api: ApiClient, name: str) -> bool:
    return bool((await get_object(api, NODES, name)).get("spec", {}).get("unschedulable"))


async def up_to_date_on(api: ApiClient, pool: str, target: str, count: int) -> bool:
    p = await get_pool(api, pool)
    s = p.get("status") or {}
    return bool(
        condition(p, "UpToDate").get("status") == "True"
        and s.get("observedGeneration") == p["metadata"]["generation"]
        and s.get("targetDigest") == target
        and s.get("updatedCount") == count
    )


async def pool_event_reasons(api: ApiClient, pool: str) -> list[str]:
    items, _ = await list_objects(
        api, EVENTS, namespace="default", field_selector=f"regarding.name={pool}"
    )
    return [e["reason"] for e in items]


def next_whole_minute(after: dt.datetime) -> dt.datetime:
    start = after.replace(second=0, microsecond=0)
    return start if start >= after else start + dt.timedelta(minutes=1)


def opening_text(at: dt.datetime) -> str:
    """How the pool names an opening: in the window's zone, minute precision."""
    local = at.astimezone(ZoneInfo(ZONE))
    return f"opens {WEEKDAYS[local.weekday()]} {local:%Y-%m-%d %H:%M} {ZONE}"


def report(name: str, started: float) -> None:
    print(f"\n{name}: {time.monotonic() - started:.0f}s wall time")


# ------------------------------------------------------------------ maintenance windows


async def test_slots_are_taken_only_inside_the_window_and_a_reboot_at_closing_finishes(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """3 nodes, maxUnavailable 1, reboots held so that the second node is still in its
    reboot when the window closes, windows in a zone that is not UTC. With a window
    three days away every node stages but none takes a slot, and the pool says when it
    opens. Moved to open within the minute for 2 minutes, the pool names the new
    opening and, inside it, two slots are taken; the node rebooting at closing
    finishes, the third never gets a slot and the pool names the next opening, a week
    later. (Staging under the far window first: the near one opens as soon as the
    minute allows, not a minute of margin later for staging.)"""
    started = time.monotonic()
    group = unique_name("window")
    names, repo, (v1, v2) = await setup_hosts(hosted, registry, group, 3)
    hosted.hold(*names)

    def window_at(opens: dt.datetime) -> dict[str, Any]:
        local = opens.astimezone(ZoneInfo(ZONE))
        return {
            "days": [WEEKDAYS[local.weekday()]],
            "start": f"{local:%H:%M}",
            "duration": "2m",
            "timeZone": ZONE,
        }

    far = next_whole_minute(dt.datetime.now(dt.UTC)) + dt.timedelta(days=3)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["rollout"]["maintenanceWindows"] = [window_at(far)]
    monitor = SafetyMonitor(api, group, 1, outside_causes=True, windows=[window_at(far)], target=v2)
    async with monitor, running_controller(api, registry=registry.options()):
        await create_pool(api, body)

        # ---- before the opening: staging is not restricted, slots are
        async def staged_and_waiting(opens: dt.datetime) -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            reasons = [await idle_reason(api, n) for n in names]
            nxt = pool.get("status", {}).get("nextMaintenanceWindow")
            if (
                up.get("reason") == c.REASON_AWAITING_MAINTENANCE_WINDOW
                and reasons == [c.REASON_STAGED] * len(names)
                and nxt is not None
                and dt.datetime.fromisoformat(nxt) == opens
            ):
                return pool
            return None

        pool = await wait_for(
            lambda: staged_and_waiting(far),
            90,
            "every node staged and the pool awaiting the window",
            ignore=(ApiError,),
        )
        up = condition(pool, "UpToDate")
        assert up["status"] == "False", up
        assert opening_text(far) in up["message"], (up, opening_text(far))
        assert pool["status"]["phase"] == c.PHASE_AWAITING_WINDOW
        assert monitor.takes == []

        # ---- the window moved to the next whole minute at least 20 s away (the
        # controller's time to see it): still staged and waiting, naming the opening
        opens = next_whole_minute(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=20))
        closes = opens + dt.timedelta(minutes=2)
        window = window_at(opens)
        monitor.windows, _ = parse_windows([window])
        await patch_object(
            api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"maintenanceWindows": [window]}}}
        )
        seconds_to_opening = (opens - dt.datetime.now(dt.UTC)).total_seconds()
        pool = await wait_for(
            lambda: staged_and_waiting(opens),
            seconds_to_opening - 1,
            "the pool awaiting the moved window",
            ignore=(ApiError,),
        )
        assert dt.datetime.now(dt.UTC) < opens
        up = condition(pool, "UpToDate")
        assert opening_text(opens) in up["message"], (up, opening_text(opens))
        assert pool["status"]["phase"] == c.PHASE_AWAITING_WINDOW
        assert monitor.takes == []

        # ---- inside: the first slot at the opening; its reboot completes
        seconds_to_opening = (opens - dt.datetime.now(dt.UTC)).total_seconds()
        await wait_for(lambda: monitor.takes, seconds_to_opening + 30, "a slot at the opening")
        first = monitor.takes[0][1]
        assert monitor.wall(monitor.takes[0][0]) >= opens
        await wait_for(lambda: not_ready(api, first), 60, f"{first} rebooting")
        hosted.unhold(first)

        # ---- the second slot; its reboot lasts past the closing
        await wait_for(lambda: len(monitor.takes) >= 2, 60, "a second slot in the window")
        second = monitor.takes[1][1]
        assert await booted(api, first) == v2 and not await cordoned(api, first)
        await wait_for(lambda: not_ready(api, second), 60, f"{second} rebooting")

        async def closed() -> bool:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            return (
                up.get("reason") == c.REASON_AWAITING_MAINTENANCE_WINDOW
                and pool["status"].get("nextMaintenanceWindow") is not None
                and dt.datetime.fromisoformat(pool["status"]["nextMaintenanceWindow"])
                == opens + dt.timedelta(days=7)
            )

        seconds_to_closing = (closes - dt.datetime.now(dt.UTC)).total_seconds()
        await wait_for(closed, seconds_to_closing + 30, "the pool awaiting next week's window")
        assert dt.datetime.now(dt.UTC) >= closes
        assert monitor.holders() == {second}, monitor.holders()
        up = condition(await get_pool(api, group), "UpToDate")
        assert opening_text(opens + dt.timedelta(days=7)) in up["message"], up

        # ---- after the closing: the node in its reboot finishes, no new slot
        hosted.unhold(second)

        async def second_done() -> bool:
            pool = await get_pool(api, group)
            return (
                pool["status"].get("updatedCount") == 2
                and await booted(api, second) == v2
                and not await cordoned(api, second)
                and not monitor.holders()
            )

        await wait_for(second_done, 60, f"{second} finishing after the window closed")
        (third,) = set(names) - {first, second}
        assert [n for _, n in monitor.takes] == [first, second]
        assert await idle_reason(api, third) == c.REASON_STAGED
        assert await booted(api, third) == v1
        pool = await get_pool(api, group)
        assert condition(pool, "UpToDate")["reason"] == c.REASON_AWAITING_MAINTENANCE_WINDOW
        assert pool["status"]["phase"] == c.PHASE_AWAITING_WINDOW
        reasons = await pool_event_reasons(api, group)
        assert c.REASON_AWAITING_MAINTENANCE_WINDOW in reasons, reasons
        assert "MaintenanceWindowOpened" in reasons, reasons
    assert monitor.violations == [], monitor.violations
    assert all(opens <= monitor.wall(t) < closes for t, _ in monitor.takes), monitor.takes
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("maintenance window", started)


async def not_ready(api: ApiClient, name: str) -> bool:
    return not await ready(api, name)


# ------------------------------------------------------------------ stageAhead


async def test_stage_ahead_keeps_one_node_on_its_way_and_the_rollout_completes(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """6 nodes, maxUnavailable 1, stageAhead 1, pulls of 1 s: never more than one node
    on its way to the target (told it, not yet running it, without a slot), at most
    one staging at a time, and the rollout completes. Then, without stageAhead (and
    paused, so nothing reboots), every node is told a new target at once."""
    started = time.monotonic()
    group = unique_name("ahead")
    names, repo, (v1, v2, v3) = await setup_hosts(
        hosted, registry, group, 6, images=3, stage_delay=1.0
    )
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v1), 1, stageAhead=1)
    async with running_controller(api, registry=registry.options()):
        await create_pool(api, body)
        await wait_for(lambda: up_to_date_on(api, group, v1, 6), 60, "the pool on v1")
        monitor = SafetyMonitor(api, group, 1, outside_causes=True, stage_ahead=1, target=v2)
        async with monitor:
            rollout = time.monotonic()
            patch = {"spec": {"image": {"ref": registry.ref(repo, digest=v2)}}}
            await patch_object(api, BOOTC_NODE_POOLS, group, patch)
            await wait_for(lambda: up_to_date_on(api, group, v2, 6), 240, "the pool on v2")
            rollout_seconds = time.monotonic() - rollout
            assert await monitor.final_check(v2) == []
        assert monitor.violations == [], monitor.violations
        summary = monitor.summary
        assert summary.max_on_the_way == 1, summary
        assert summary.max_staging == 1, summary  # seen staging, never two at once
        assert sorted(hosted.reboots) == sorted(names)

        # for comparison: stageAhead unset tells every node at once (paused: no reboots)
        unlimited = SafetyMonitor(api, group, 1, target=v3)
        async with unlimited:
            unset: dict[str, Any] = {
                "spec": {
                    "image": {"ref": registry.ref(repo, digest=v3)},
                    "rollout": {"stageAhead": None, "paused": True},
                }
            }
            await patch_object(api, BOOTC_NODE_POOLS, group, unset)

            async def all_staged() -> bool:
                return [await idle_reason(api, n) for n in names] == [c.REASON_STAGED] * 6 and (
                    unlimited.summary.max_on_the_way == 6
                )

            await wait_for(all_staged, 60, "every node staging v3 at once")
        assert unlimited.violations == [], unlimited.violations
        assert unlimited.summary.slots_taken == 0
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    print(
        f"\nstageAhead 1 of 6: rollout {rollout_seconds:.0f}s, peak on their way "
        f"{summary.max_on_the_way}, peak staging {summary.max_staging}; unset: peak on "
        f"their way {unlimited.summary.max_on_the_way}, peak staging "
        f"{unlimited.summary.max_staging}"
    )
    report("stageAhead", started)


# ------------------------------------------------------------------ outside causes


async def test_a_node_cordoned_by_someone_else_goes_first_then_the_rest_wait_for_it(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """maxUnavailable 1 and a node an admin keeps cordoned: updating it costs no
    capacity, so it goes first; then it still uses the budget, so the others wait with
    the pool naming it; once uncordoned, they follow."""
    started = time.monotonic()
    group = unique_name("outside")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 3)
    admin_cordoned = names[-1]  # last by name: it goes first only because it is cordoned
    await patch_object(api, NODES, admin_cordoned, {"spec": {"unschedulable": True}})
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    monitor = SafetyMonitor(api, group, 1, outside_causes=True, target=v2)
    async with monitor, running_controller(api, registry=registry.options()):
        await create_pool(api, body)

        async def waiting_on_it() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            staged = [await idle_reason(api, n) for n in names[:-1]]
            ok = (
                up.get("reason") == c.REASON_ROLLOUT_BLOCKED
                and f"waiting: {admin_cordoned} cordoned by someone else" in up.get("message", "")
                and staged == [c.REASON_STAGED] * len(staged)
                # (it says so as well while the cordoned node is still staging)
                and await booted(api, admin_cordoned) == v2
                and not monitor.holders()
                # the pool's own count: its status is written after the slot's release
                and (pool.get("status") or {}).get("updatedCount") == 1
            )
            return pool if ok else None

        pool = await wait_for(
            waiting_on_it,
            90,
            "the cordoned node updated, the others waiting, the pool naming it",
            ignore=(ApiError,),
        )
        assert [n for _, n in monitor.takes] == [admin_cordoned]
        assert await cordoned(api, admin_cordoned)  # left as the admin wants it
        assert pool["status"]["phase"] == c.PHASE_BLOCKED

        await patch_object(api, NODES, admin_cordoned, {"spec": {"unschedulable": None}})
        await wait_for(lambda: up_to_date_on(api, group, v2, 3), 120, "the pool on v2")
        assert await monitor.final_check(v2) == []
    assert monitor.violations == [], monitor.violations
    assert monitor.takes[0][1] == admin_cordoned
    assert sorted(n for _, n in monitor.takes) == sorted(names)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("outside causes", started)


# ------------------------------------------------------------------ maxUnhealthy


async def test_max_unhealthy_one_halts_at_the_first_host_that_does_not_come_back(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """4 nodes, maxUnavailable 2, maxUnhealthy 1: of the two first slot holders one host
    does not come back. Once its reboot timed out the rollout halts, naming it (alone)
    and the threshold, and no slot is taken while halted; when the host is back the
    rollout resumes and completes. (rebootTimeoutSeconds 30: a restarted daemon may take
    10 s to report on a loaded machine, and only the stuck node may time out.)"""
    started = time.monotonic()
    group = unique_name("unhealthy")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 4)
    hosted.hold(*names)
    body = pool_body(
        group,
        {"group": group},
        registry.ref(repo, digest=v2),
        2,
        maxUnhealthy=1,
        rebootTimeoutSeconds=30,
    )
    monitor = SafetyMonitor(api, group, 2, outside_causes=True, target=v2)
    async with monitor, running_controller(api, registry=registry.options()):
        await create_pool(api, body)

        async def two_rebooting() -> list[str]:
            holders = sorted(monitor.holders())
            if len(holders) == 2 and not any([await ready(api, n) for n in holders]):
                return holders
            return []

        stuck, other = await wait_for(two_rebooting, 90, "two slot holders rebooting")
        # the other holder comes back; the next one to take a slot stays down too, so
        # nothing moves on before the stuck one's reboot times out
        hosted.unhold(other)

        async def halted() -> str:
            deg = condition(await get_pool(api, group), c.COND_DEGRADED)
            if deg.get("reason") == c.REASON_ROLLOUT_HALTED:
                return str(deg["message"])
            return ""

        message = await wait_for(halted, 90, "the rollout halted")
        assert f"({stuck}; maxUnhealthy is 1)" in message, message
        pool = await get_pool(api, group)
        assert pool["status"]["phase"] == c.PHASE_HALTED
        assert condition(pool, "UpToDate")["reason"] == c.REASON_ROLLOUT_HALTED
        hosted.unhold(*(set(names) - {stuck}))

        # the healthy holders finish; their slots are not handed out while halted
        async def only_stuck_holds() -> bool:
            pool = await get_pool(api, group)
            waiting = [n for n in names if await idle_reason(api, n) == c.REASON_STAGED]
            return (
                monitor.holders() == {stuck}
                and bool(waiting)
                and pool["status"]["phase"] == c.PHASE_HALTED
                and pool["status"]["updatedCount"] == len(names) - 1 - len(waiting)
            )

        await wait_for(only_stuck_holds, 60, f"only {stuck} holding a slot, the rest waiting")
        assert not await ready(api, stuck)

        # (the pool's halt ends a little after the rollout sees the node recover: judge
        # the takes until the host is let back up)
        back = monitor.now()
        hosted.unhold(stuck)
        await wait_for(lambda: up_to_date_on(api, group, v2, 4), 120, "the pool on v2")
        assert await monitor.final_check(v2) == []
    assert monitor.violations == [], monitor.violations
    assert monitor.halts and monitor.halts[0][1] is not None, monitor.halts
    assert monitor.takes_between(monitor.halts[0][0], back) == [], (monitor.halts, monitor.takes)
    assert all("maxUnhealthy is 1" in m for m in monitor.halt_messages), monitor.halt_messages
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("maxUnhealthy", started)
