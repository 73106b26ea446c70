"""The safety monitor's rollout-policy invariants (hack/testenv/monitor.py), fed by hand.

The monitor's informers are driven directly (``Informer.apply``, what a watch
delivers), in the order a test chooses, so each check is shown to fire on the
breach it exists for and to stay quiet on the legitimate interleavings closest
to it (the two watches lagging each other, a window closing while its last slot
is being reported).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from hack.testenv.audit import ApiWrite, parse, writer
from hack.testenv.monitor import SafetyMonitor, WriterCheck

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


# ------------------------------------------------------------ at most one controller writing

LEASE = "bootc-operator-controller"


def write(
    writer: str | None,
    at: float,
    *,
    received: float | None = None,
    holder: str | None = None,
    code: int = 200,
    resource: str = "bootcnodes",
) -> ApiWrite:
    lease = holder is not None
    return ApiWrite(
        received=at - 0.01 if received is None else received,
        completed=at,
        writer=writer,
        verb="update" if lease else "patch",
        resource="leases" if lease else resource,
        namespace="bootc-operator" if lease else "",
        name=LEASE if lease else "worker-1",
        code=code,
        holder=holder,
        lease_duration=4.0 if lease else 0.0,
    )


def writers(*writes: ApiWrite) -> tuple[WriterCheck, list[str]]:
    seen: list[str] = []
    check = WriterCheck(LEASE, seen.append)
    for w in writes:
        check.record(w)
    return check, seen


def test_a_clean_handover_has_one_writer_at_a_time() -> None:
    check, seen = writers(
        write("c1/1", 1.0, holder="c1_a"),
        write("c1/1", 2.0),
        write("c1/1", 3.0, holder="c1_a"),
        write("c1/1", 3.5),
        write("c2/2", 8.0, holder="c2_b"),
        write("c2/2", 8.5),
    )
    assert seen == [] and check.max_writers == 1
    (first, second) = check.handovers
    assert (first.old, first.new) == (None, "c1/1")
    assert (second.old, second.new, second.old_renewed) == ("c1/1", "c2/2", 3.0)
    assert (second.old_last_write, second.new_first_write) == (3.5, 8.5)
    assert "took the Lease 5.00s after c1/1's last renewal" in second.describe()
    assert "-3.50s from its Lease's expiry" in second.describe()
    assert second.figures() == {
        "take_after_renewal": 5.0,
        "last_write_after_renewal": 0.5,
        "last_write_before_expiry": 3.5,
        "new_first_write_after_old_last": 5.0,
    }


def test_the_old_leader_writing_after_the_take_is_split_brain() -> None:
    check, seen = writers(
        write("c1/1", 1.0, holder="c1_a"),
        write("c2/2", 6.0, holder="c2_b"),
        write("c2/2", 6.5),
        write("c1/1", 7.0),
    )
    assert len(seen) == 1 and "controller c1/1 wrote while c2/2 held the Lease" in seen[0]
    assert check.max_writers == 2
    assert check.handovers[-1].old_last_write == 7.0


def test_a_write_that_overlaps_the_take_is_not_judged() -> None:
    check, seen = writers(
        write("c1/1", 1.0, holder="c1_a"),
        write("c2/2", 6.0, holder="c2_b"),
        write("c1/1", 6.2, received=5.9),
    )
    assert seen == [] and check.max_writers == 0


def test_writing_after_a_release_holds_no_lease() -> None:
    _, seen = writers(
        write("c1/1", 1.0, holder="c1_a"),
        write("c1/1", 2.0, holder=""),
        write("c1/1", 3.0),
    )
    assert len(seen) == 1 and "holding no Lease" in seen[0]


def test_failed_writes_and_other_processes_are_not_controllers_writing() -> None:
    check, seen = writers(
        write("c1/1", 1.0, holder="c1_a"),
        write("c2/2", 2.0, code=409),
        write("c2/2", 2.5, holder="c2_b", code=409),
        write(None, 3.0),
    )
    assert seen == [] and check.holder == "c1/1" and check.writes == 0


def test_the_monitor_judges_only_writes_after_its_start(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        audit_line("c1/1", 1.0, holder="c1_a")
        + audit_line("c2/2", 2.0, holder="c2_b")
        + audit_line("c1/1", 3.0)  # before the monitor: not judged
    )
    m = monitor(audit_log=log)
    assert m.audit is not None
    m.writers.checking = False
    m.audit.read()
    m.writers.checking = True
    with log.open("a") as f:
        f.write(audit_line("c1/1", 4.0)[:50])  # a line the apiserver is still writing
    m.audit.read()
    assert m.violations == [] and m.writers.holder == "c2/2"
    with log.open("a") as f:
        f.write(audit_line("c1/1", 4.0)[50:])
    m.audit.read()
    assert len(m.violations) == 1 and "c1/1 wrote while c2/2 held the Lease" in m.violations[0]


def audit_line(who: str, at: float, holder: str | None = None) -> str:
    """One audit event as kube-apiserver logs it (``who``: POD/pid)."""
    pod, pid = who.split("/")
    stamp = dt.datetime.fromtimestamp(1_800_000_000 + at, dt.UTC).isoformat()
    event: dict[str, Any] = {
        "kind": "Event",
        "level": "Metadata",
        "stage": "ResponseComplete",
        "verb": "patch",
        "userAgent": f"bootc-operator/0.1.0 ({pod}; pid {pid})",
        "objectRef": {"resource": "nodes", "name": "worker-1", "apiVersion": "v1"},
        "responseStatus": {"code": 200},
        "requestReceivedTimestamp": stamp,
        "stageTimestamp": stamp,
    }
    if holder is not None:
        event["verb"] = "update"
        event["objectRef"] = {
            "resource": "leases",
            "namespace": "bootc-operator",
            "name": LEASE,
            "apiGroup": "coordination.k8s.io",
        }
        event["requestObject"] = {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 4}}
    return json.dumps(event) + "\n"


def test_an_audit_line_is_a_write_by_a_named_process() -> None:
    w = parse(audit_line("controller-2/77", 5.0, holder="controller-2_ab"))
    assert w is not None
    assert (w.writer, w.resource, w.holder, w.lease_duration, w.ok) == (
        "controller-2/77",
        "leases",
        "controller-2_ab",
        4.0,
        True,
    )
    assert writer("bootc-operator/0.1.0") is None  # a daemon (kube.lite)
    assert writer("OpenAPI-Generator/33.3.0/python") is None
    assert parse("not json") is None


# ------------------------------------------------------------ reboots once, convergence

REBOOTING = {"type": c.COND_IDLE, "status": "False", "reason": c.REASON_REBOOTING}


def test_a_second_reboot_in_one_rollout_is_a_violation() -> None:
    m = monitor(once_per_node=True)
    seed(m, [node("a", 1)], [bn("a", 2)])
    m.bootc_nodes.apply("MODIFIED", bn("a", 3, conditions=(REBOOTING,)))
    m.bootc_nodes.apply("MODIFIED", bn("a", 4))
    assert m.violations == [] and m.reboot_counts == {"a": 1}
    m.bootc_nodes.apply("MODIFIED", bn("a", 5, conditions=(REBOOTING,)))
    assert len(m.violations) == 1 and "a rebooted a second time" in m.violations[0]


def pool(up: bool, target: str = TARGET) -> dict[str, Any]:
    status = "True" if up else "False"
    return {
        "kind": "BootcNodePool",
        "metadata": {"name": POOL, "resourceVersion": "9"},
        "status": {
            "targetDigest": target,
            "conditions": [{"type": c.COND_UP_TO_DATE, "status": status}],
        },
    }


def test_convergence_is_timed_from_the_faults_stopping() -> None:
    m = monitor(target=TARGET, converge_within=1000.0)
    seed(m, [node("a", 1)], [bn("a", 2)])
    m.faults_stopped()
    converged = []
    for up, target in ((False, TARGET), (True, OLD), (True, TARGET)):
        m.pools.apply("MODIFIED", pool(up, target))
        converged.append(m.summary.converged_after is not None)
    assert converged == [False, False, True] and m.violations == []


def test_not_converging_within_the_bound_is_a_violation() -> None:
    m = monitor(target=TARGET, converge_within=0.0)
    seed(m, [node("a", 1)], [bn("a", 2)])
    m.faults_stopped()
    m.pools.apply("ADDED", pool(False))
    m.pools.apply("MODIFIED", pool(False))
    assert len(m.violations) == 1 and "did not converge within 0s" in m.violations[0]


# ------------------------------------------------------------ UpToDate once every member is done


def pool_at(rv: int, up: bool) -> dict[str, Any]:
    return {
        "kind": "BootcNodePool",
        "metadata": {"name": POOL, "resourceVersion": str(rv)},
        "status": {"conditions": [{"type": c.COND_UP_TO_DATE, "status": str(up)}]},
    }


def rolled_out(m: SafetyMonitor) -> None:
    """x took a slot (rv 5), was cordoned (6) and rebooted into the target (7)."""
    seed(m, [node("x", 1)], [bn("x", 2)])
    m.pools.apply("ADDED", pool_at(3, False))
    m.bootc_nodes.apply("MODIFIED", bn("x", 5, slot=STAMP))
    m.nodes.apply("MODIFIED", node("x", 6, cordoned=True))
    m.bootc_nodes.apply("MODIFIED", bn("x", 7, slot=STAMP, booted=TARGET, desired=TARGET))


def test_up_to_date_while_the_last_node_holds_its_slot_is_a_violation() -> None:
    m = monitor()
    rolled_out(m)
    m.pools.apply("MODIFIED", pool_at(8, True))  # before the release
    m.nodes.apply("MODIFIED", node("x", 9))  # the uncordon
    m.bootc_nodes.apply("MODIFIED", bn("x", 10, booted=TARGET, desired=TARGET))  # the release
    assert m.up_to_date_at == [8]
    assert len(m.violations) == 1, m.violations
    assert "revision 8" in m.violations[0] and "slots ['x']" in m.violations[0]
    assert "cordoned by us ['x']" in m.violations[0]


def test_up_to_date_after_the_uncordon_and_the_release_is_fine_whatever_the_watch_order() -> None:
    m = monitor()
    rolled_out(m)
    # the pool watch is ahead of both others: nothing is judged until they pass revision 10
    m.pools.apply("MODIFIED", pool_at(10, True))
    assert m.violations == []
    m.bootc_nodes.apply("MODIFIED", bn("x", 9, booted=TARGET, desired=TARGET))  # released
    m.nodes.apply("MODIFIED", node("x", 8))  # uncordoned before
    assert m.violations == []
    m.judge_up_to_date(force=True)
    assert m.violations == [] and m.up_to_date_at == [10]


def test_up_to_date_with_a_node_we_left_cordoned_is_a_violation_an_admins_cordon_is_not() -> None:
    m = monitor()
    rolled_out(m)
    m.bootc_nodes.apply("MODIFIED", bn("x", 9, booted=TARGET, desired=TARGET))  # released...
    m.pools.apply("MODIFIED", pool_at(10, True))
    m.nodes.apply("MODIFIED", node("x", 11))  # ...but uncordoned only afterwards
    assert m.violations == []  # the BootcNode watch has not passed revision 10 yet
    m.judge_up_to_date(force=True)  # what stop() does
    assert len(m.violations) == 1 and "cordoned by us ['x']" in m.violations[0], m.violations

    kept = monitor()
    seed(kept, [node("y", 1, cordoned=True)], [bn("y", 2)])  # an admin cordoned it before
    kept.pools.apply("ADDED", pool_at(3, False))
    kept.bootc_nodes.apply("MODIFIED", bn("y", 5, slot=STAMP, was_cordoned=True))
    kept.bootc_nodes.apply("MODIFIED", bn("y", 7, booted=TARGET, desired=TARGET))
    kept.pools.apply("MODIFIED", pool_at(8, True))
    kept.judge_up_to_date(force=True)
    assert kept.violations == [] and kept.up_to_date_at == [8]
