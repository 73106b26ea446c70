"""The safety monitor's rollout-policy invariants (hack/testenv/monitor.py), fed by hand.

The monitor's informers are driven directly (``Informer.apply``, what a watch
delivers), in the order a test chooses, so each check is shown to fire on the
breach it exists for and to stay quiet on the legitimate interleavings closest
to it (the two watches lagging each other, a window closing while its last slot
is being reported).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from hack.testenv.monitor import SafetyMonitor

POOL = "p"
TARGET = "sha256:" + "b" * 64
OLD = "sha256:" + "a" * 64
MONDAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)  # a Monday


def node(name: str, rv: int, *, cordoned: bool = False, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(rv)},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def bn(
    name: str,
    rv: int,
    *,
    slot: str | None = None,
    was_cordoned: bool = False,
    desired: str = OLD,
    booted: str = OLD,
    conditions: tuple[dict[str, str], ...] = (),
) -> dict[str, Any]:
    annotations = {}
    if slot is not None:
        annotations = {
            c.IN_REBOOT_SLOT_ANNOTATION: slot,
            c.WAS_CORDONED_ANNOTATION: "true" if was_cordoned else "false",
        }
    return {
        "kind": "BootcNode",
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "labels": {c.POOL_LABEL: POOL},
            "annotations": annotations,
        },
        "spec": {"desiredImage": f"quay.io/x/os@{desired}", "desiredImageState": "Staged"},
        "status": {"booted": {"imageDigest": booted}, "conditions": list(conditions)},
    }


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def monitor(max_unavailable: int = 1, **options: Any) -> SafetyMonitor:
    """A monitor whose informers nobody starts: the test applies watch events itself."""
    return SafetyMonitor(cast(ApiClient, None), POOL, max_unavailable, **options)


def seed(m: SafetyMonitor, nodes: list[dict[str, Any]], bns: list[dict[str, Any]]) -> None:
    for obj in nodes:
        m.nodes.apply("ADDED", obj)
    for obj in bns:
        m.bootc_nodes.apply("ADDED", obj)
    m.begin()


STAMP = "2026-11-23T10:00:00Z"

# ------------------------------------------------------------ the budget counts outside causes


def test_a_schedulable_node_taking_the_slot_an_admin_cordoned_node_uses_is_a_violation() -> None:
    m = monitor(outside_causes=True)
    seed(m, [node("a", 1), node("z", 2, cordoned=True)], [bn("a", 3), bn("z", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, slot=STAMP))
    m.nodes.apply("MODIFIED", node("a", 6, cordoned=True))  # the Node watch passes the take
    assert len(m.violations) == 1, m.violations
    assert "a took a reboot slot" in m.violations[0]
    assert "z cordoned" in m.violations[0]


def test_a_not_ready_member_counts_against_the_budget() -> None:
    m = monitor(outside_causes=True)
    seed(m, [node("a", 1), node("b", 2, ready=False)], [bn("a", 3), bn("b", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, slot=STAMP))
    m.nodes.apply("MODIFIED", node("a", 6, cordoned=True))
    took = [v for v in m.violations if "took a reboot slot" in v]
    assert len(took) == 1 and "b NotReady" in took[0], m.violations


def test_a_node_already_cordoned_by_someone_else_may_take_a_slot_whatever_the_others() -> None:
    m = monitor(outside_causes=True)
    seed(
        m,
        [node("y", 1, cordoned=True), node("z", 2, cordoned=True)],
        [bn("y", 3), bn("z", 4)],
    )
    m.bootc_nodes.apply("MODIFIED", bn("z", 5, slot=STAMP, was_cordoned=True))
    m.nodes.apply("MODIFIED", node("z", 6, cordoned=True, ready=False))
    assert m.violations == []


def test_the_check_waits_for_the_node_watch_to_reach_the_take() -> None:
    """x is uncordoned (rv 10) and releases its slot (rv 11), then y takes it (rv 12).
    The BootcNode watch delivers all three before the Node watch delivers x's
    uncordon: judged at once, x would look cordoned by someone else."""
    m = monitor(outside_causes=True)
    seed(
        m,
        [node("x", 1, cordoned=True), node("y", 2)],
        [bn("x", 3, slot=STAMP), bn("y", 4)],
    )
    m.bootc_nodes.apply("MODIFIED", bn("x", 11, booted=TARGET, desired=TARGET))
    m.bootc_nodes.apply("MODIFIED", bn("y", 12, slot=STAMP))
    assert m.violations == []  # nothing judged yet: the Node watch is at revision 2
    m.nodes.apply("MODIFIED", node("x", 10))
    m.nodes.apply("MODIFIED", node("y", 13, cordoned=True))
    assert m.violations == []


def test_a_take_the_node_watch_never_passes_is_judged_at_the_end() -> None:
    m = monitor(outside_causes=True)
    seed(m, [node("a", 1), node("z", 2, cordoned=True)], [bn("a", 3), bn("z", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, slot=STAMP))
    assert m.violations == []
    m.judge_takes(force=True)  # what stop() does
    assert len(m.violations) == 1, m.violations


def test_without_outside_causes_the_budget_check_is_off() -> None:
    m = monitor()
    seed(m, [node("a", 1), node("z", 2, cordoned=True)], [bn("a", 3), bn("z", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, slot=STAMP))
    m.nodes.apply("MODIFIED", node("a", 6, cordoned=True))
    m.judge_takes(force=True)
    assert m.violations == []


def test_slots_held_when_the_monitor_starts_are_not_takes_it_judges() -> None:
    m = monitor(outside_causes=True, windows=[{"start": "03:00", "duration": "1h"}])
    seed(m, [node("a", 1, cordoned=True), node("z", 2, cordoned=True)], [bn("a", 3, slot=STAMP)])
    m.nodes.apply("MODIFIED", node("a", 6, cordoned=True, ready=False))
    m.judge_takes(force=True)
    assert m.violations == [] and m.summary.slots_taken == 1


# ------------------------------------------------------------ maintenance windows

WINDOW = [{"days": ["Mon"], "start": "11:30", "duration": "2m", "timeZone": "Asia/Kathmandu"}]
OPENS = dt.datetime(2026, 11, 23, 5, 45, tzinfo=dt.UTC)  # Mon 11:30 in Kathmandu (+05:45)


def window_monitor(seen: dt.datetime) -> tuple[SafetyMonitor, Clock]:
    clock = Clock(seen)
    m = monitor(2, windows=WINDOW, clock=clock)
    seed(m, [node("a", 1)], [bn("a", 2)])
    return m, clock


def stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_slot_taken_inside_the_window_is_fine() -> None:
    at = OPENS + dt.timedelta(seconds=1)
    m, _ = window_monitor(at + dt.timedelta(seconds=1))
    m.bootc_nodes.apply("MODIFIED", bn("a", 3, slot=stamp(at)))
    assert m.violations == []


def test_a_slot_taken_before_the_window_opens_is_a_violation() -> None:
    at = OPENS - dt.timedelta(seconds=2)
    m, _ = window_monitor(at)
    m.bootc_nodes.apply("MODIFIED", bn("a", 3, slot=stamp(at)))
    assert len(m.violations) == 1 and "outside every maintenance window" in m.violations[0]


def test_a_slot_stamped_after_the_closing_is_a_violation() -> None:
    at = OPENS + dt.timedelta(minutes=2)  # the end is exclusive
    m, _ = window_monitor(at)
    m.bootc_nodes.apply("MODIFIED", bn("a", 3, slot=stamp(at)))
    assert len(m.violations) == 1, m.violations


def test_a_slot_seen_just_after_the_closing_is_not_one_seen_long_after_is() -> None:
    late = OPENS + dt.timedelta(minutes=2, seconds=2)
    m, clock = window_monitor(late)
    m.bootc_nodes.apply("MODIFIED", bn("a", 3, slot="not a time"))
    assert m.violations == []
    clock.now = late + dt.timedelta(seconds=10)
    m.nodes.apply("ADDED", node("b", 4))
    m.bootc_nodes.apply("ADDED", bn("b", 5))
    m.bootc_nodes.apply("MODIFIED", bn("b", 6, slot="not a time"))
    assert len(m.violations) == 1 and "b took a reboot slot seen at" in m.violations[0]


def test_the_window_check_refuses_a_malformed_window() -> None:
    try:
        monitor(windows=[{"start": "25:00", "duration": "2m"}])
    except ValueError as err:
        assert "maintenanceWindows[0].start" in str(err)
    else:
        raise AssertionError("a malformed window was accepted")


# ------------------------------------------------------------ stageAhead

STAGING = {"type": "Idle", "status": "False", "reason": "Staging"}
DEGRADED = {"type": "Degraded", "status": "True", "reason": "StageFailed"}


def test_more_members_on_their_way_than_stage_ahead_is_a_violation() -> None:
    m = monitor(stage_ahead=1, target=TARGET)
    seed(m, [node("a", 1), node("b", 2)], [bn("a", 3), bn("b", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, desired=TARGET, conditions=(STAGING,)))
    assert m.violations == []
    m.bootc_nodes.apply("MODIFIED", bn("b", 6, desired=TARGET))
    assert len(m.violations) == 1 and "2 nodes on their way" in m.violations[0]
    assert m.summary.max_on_the_way == 2 and m.summary.max_staging == 1


def test_slot_holders_nodes_running_the_target_and_degraded_ones_are_not_on_their_way() -> None:
    m = monitor(stage_ahead=1, target=TARGET)
    names = ["a", "b", "d", "w"]
    seed(
        m,
        [node(n, i) for i, n in enumerate(names, 1)],
        [bn(n, 10 + i) for i, n in enumerate(names)],
    )
    m.bootc_nodes.apply("MODIFIED", bn("a", 20, desired=TARGET, slot=STAMP))
    m.bootc_nodes.apply("MODIFIED", bn("b", 21, desired=TARGET, booted=TARGET))
    m.bootc_nodes.apply("MODIFIED", bn("d", 22, desired=TARGET, conditions=(DEGRADED,)))
    m.bootc_nodes.apply("MODIFIED", bn("w", 23, desired=TARGET, conditions=(STAGING,)))
    assert m.violations == [] and m.summary.max_on_the_way == 1


def test_without_stage_ahead_the_bound_is_only_measured() -> None:
    m = monitor(target=TARGET)
    seed(m, [node("a", 1), node("b", 2)], [bn("a", 3), bn("b", 4)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, desired=TARGET))
    m.bootc_nodes.apply("MODIFIED", bn("b", 6, desired=TARGET))
    assert m.violations == [] and m.summary.max_on_the_way == 2
