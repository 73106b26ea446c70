"""The operator's Events as a cluster admin reads them: through the real ``kubectl``.

``kubectl describe node|bn|bnp NAME`` lists an object's Events only when their
object reference carries its uid, sorts them by ``lastTimestamp`` and prints a
repeated Event as ``AGE (xN over T)``; ``kubectl get events --sort-by`` sorts
by the field it is given. These tests drive a rollout with the real
controller (and its real recorder) on simulated daemons, or write Events with
the recorder at chosen times, and read only what kubectl prints.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, EVENTS, list_objects, patch_object
from bootc_operator.reconcilers.context import pool_ref
from bootc_operator.runtime.events import EventRecorder
from e2e.controllerenv import add_nodes, create_pool, delete_quietly, get_pool
from e2e.helpers import condition, digest, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.pools import pool_body

TIMEOUT = 90.0
COLUMNS = re.compile(r"\s{2,}")  # kubectl's tabwriter pads columns with 2+ spaces


def event_rows(describe_output: str) -> list[dict[str, str]]:
    """The rows of the ``Events:`` table of ``kubectl describe`` output, in print order."""
    lines = describe_output.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Events:"))
    except StopIteration:
        raise AssertionError(f"no Events section in:\n{describe_output}") from None
    rows = []
    for line in lines[start + 3 :]:  # "Events:", the header, the dashes
        if not line.startswith("  ") or not line.strip():
            break
        kind, reason, age, source, message = COLUMNS.split(line.strip(), maxsplit=4)
        rows.append(
            {"type": kind, "reason": reason, "age": age, "from": source, "message": message}
        )
    return rows


async def describe(control_plane: Any, *what: str) -> str:
    res = await asyncio.to_thread(control_plane.kubectl, "describe", *what)
    return str(res.stdout)


async def up_to_date_on(api: ApiClient, name: str, n: int) -> bool:
    p = await get_pool(api, name)
    return bool(
        condition(p, "UpToDate").get("status") == "True"
        and (p.get("status") or {}).get("targetDigest") == digest(n)
    )


async def test_describe_node_and_bn_show_the_operators_events(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    """A rollout over two nodes, one of which cannot stage the new image: the updated
    node's one Event of the rollout, ``NodeUpdated`` with its drain summary (the
    default ``--node-events=summary``), is in ``kubectl describe node``; the failing
    node's ``NodeDegraded`` in ``kubectl describe node`` and ``kubectl describe bn``;
    the pool's Events in ``kubectl describe bnp``, oldest first."""
    group = unique_name("desc")
    ok, failing = await add_nodes(fleet, group, 2, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))
        await wait_for(lambda: up_to_date_on(api, group, 1), TIMEOUT, "pool on image 1")
        fleet.fail_stage[failing] = "error: pulling image: manifest unknown"
        await patch_image(api, group, 2)

        async def node_events_shown() -> bool:
            rows = event_rows(await describe(control_plane, "node", ok))
            ours = [r for r in rows if r["from"] == "bootc.dev/bootc-operator"]
            return [r["reason"] for r in ours] == ["NodeUpdated"] and (
                "drained before its reboot: 0 pods evicted in" in ours[0]["message"]
            )

        await wait_for(
            node_events_shown,
            TIMEOUT,
            f"kubectl describe node {ok} to list one NodeUpdated with the drain summary",
        )

        async def degraded_shown(kind: str) -> bool:
            rows = event_rows(await describe(control_plane, kind, failing))
            return any(
                r["type"] == "Warning"
                and r["reason"] == "NodeDegraded"
                and "manifest unknown" in r["message"]
                and failing in r["message"]
                for r in rows
            )

        await wait_for(
            lambda: degraded_shown("node"), TIMEOUT, f"NodeDegraded in describe node {failing}"
        )
        await wait_for(
            lambda: degraded_shown("bn"), TIMEOUT, f"NodeDegraded in describe bn {failing}"
        )

    rows = event_rows(await describe(control_plane, "bnp", group))
    reasons = [r["reason"] for r in rows]
    assert "SlotTaken" in reasons and "NodeUpdated" in reasons, rows
    # oldest first: the pool's Events from the first rollout (image 1) come before any
    # of the second's; a pool's Events were listed in random order before
    assert reasons.index("SlotTaken") < reasons.index("NodeUpdated"), rows
    ages = [age_seconds(r["age"]) for r in rows]
    assert ages == sorted(ages, reverse=True), rows
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def patch_image(api: ApiClient, pool: str, n: int) -> None:
    await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"image": {"ref": image(n)}}})


def age_seconds(age: str) -> int:
    """Seconds in the first duration of a describe Age (``5m3s``, ``2m (x3 over 7m)``)."""
    first = age.split(" ", 1)[0]
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    total = 0
    for value, unit in re.findall(r"(\d+)([dhms])", first):
        total += int(value) * units[unit]
    if not re.fullmatch(r"(\d+[dhms])+", first):
        raise AssertionError(f"not an age: {age!r}")
    return total


def clock(start: dt.datetime, minutes_ago: list[float]) -> Iterator[dt.datetime]:
    for m in minutes_ago:
        yield start - dt.timedelta(minutes=m)


async def test_describe_bnp_orders_events_by_time_and_counts_repeats(
    api: ApiClient, control_plane: Any
) -> None:
    """Events written at known times (minutes ago, out of name order, one of them three
    times): ``kubectl describe bnp`` and ``kubectl get events --sort-by=.lastTimestamp``
    list them by when they last happened, the repeat as ``(x3 over 8m)``."""
    name = unique_name("desc-order")
    pool = await create_pool(api, pool_body(name, {"group": name}, image(1)))
    ref = pool_ref(pool)
    start = dt.datetime.now(dt.UTC)
    #           reason            type       minutes ago (the repeat: 8, 5 and 1)
    emitted = [
        ("TargetChanged", "Normal", 10),
        ("Halted", "Warning", 8),
        ("SlotTaken", "Normal", 9),
        ("RebootRequested", "Normal", 7),
        ("Halted", "Warning", 5),
        ("NodeUpdated", "Normal", 4),
        ("RolloutComplete", "Normal", 2),
        ("Halted", "Warning", 1),
    ]
    times = clock(start, [m for _, _, m in emitted])
    rec = EventRecorder(api, instance="e2e", now=lambda: next(times))
    rec.start()
    try:
        for reason, kind, _ in emitted:
            rec.emit(ref, kind, reason, "Test", f"{reason} in pool {name}")
    finally:
        await rec.stop()
    expected = [
        "TargetChanged",  # 10 min ago
        "SlotTaken",  # 9
        "RebootRequested",  # 7
        "NodeUpdated",  # 4
        "RolloutComplete",  # 2
        "Halted",  # 8, 5 and 1: last seen 1 min ago
    ]

    rows = event_rows(await describe(control_plane, "bnp", name))
    assert [r["reason"] for r in rows] == expected, rows
    halted = rows[-1]
    assert re.fullmatch(r"\d+s \(x3 over 8m\d*s?\)", halted["age"]), halted
    assert halted["type"] == "Warning" and halted["from"] == "bootc.dev/bootc-operator"
    ages = [age_seconds(r["age"]) for r in rows]
    assert ages == sorted(ages, reverse=True), rows

    res = await asyncio.to_thread(
        control_plane.kubectl,
        "get",
        "events",
        "-n",
        "default",
        f"--field-selector=involvedObject.uid={ref.uid}",
        "--sort-by=.lastTimestamp",
    )
    lines = res.stdout.splitlines()
    header = COLUMNS.split(lines[0].strip())
    listed = [dict(zip(header, COLUMNS.split(line.strip()), strict=False)) for line in lines[1:]]
    assert [row["REASON"] for row in listed] == expected, res.stdout

    # The same objects through events.k8s.io/v1: new and deprecated fields agree.
    items, _ = await list_objects(
        api, EVENTS, "default", field_selector=f"regarding.uid={ref.uid},reason=Halted"
    )
    (event,) = items
    assert event["regarding"]["uid"] == pool["metadata"]["uid"]
    assert event["deprecatedCount"] == 3 and event["series"]["count"] == 3
    first, last = start - dt.timedelta(minutes=8), start - dt.timedelta(minutes=1)
    assert event["deprecatedFirstTimestamp"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert event["deprecatedLastTimestamp"] == last.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert event["eventTime"].startswith(first.strftime("%Y-%m-%dT%H:%M:%S."))
    assert event["series"]["lastObservedTime"].startswith(last.strftime("%Y-%m-%dT%H:%M:%S."))
    await delete_quietly(api, BOOTC_NODE_POOLS, name)
