"""Pure decision logic of the controller: selectors, classification, slots, status."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.nodestate import NodeState, NodeView, classify, view
from bootc_operator.policy.ownership import retarget_due
from bootc_operator.policy.poolstatus import (
    Counts,
    MemberState,
    RolloutFacts,
    count_states,
    degraded_condition,
    degraded_nodes_message,
    member_state,
    member_states,
    phase,
    progress_message,
    rollout_condition,
)
from bootc_operator.policy.selectors import (
    InvalidSelector,
    is_empty,
    matches,
    validate_selector,
)
from bootc_operator.policy.slots import (
    adoption,
    adoption_patch,
    gives_node_back,
    gives_slot_back_on_retarget,
    must_restore_staged,
    must_uncordon,
    next_reboot_deadline,
    plan_staging,
    release_patch,
    take_patch,
)
from unit.policy.planning import rollout_plan

OLD = "sha256:" + "1" * 64
NEW = "sha256:" + "2" * 64
INDEX = "sha256:" + "3" * 64  # a multi-arch index; NEW is its amd64 manifest
REPO = "quay.io/example/os"
NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)

# ------------------------------------------------------------------ selectors


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),
        (None, {"a": "b"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "x"}, False),
        ({"matchLabels": {"a": ""}}, {"a": ""}, True),
        ({"matchLabels": {"a": ""}}, {}, False),
        (
            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["1", "2"]}]},
            {"z": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "z", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "z", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "z", "operator": "NotIn", "values": ["1"]}]},
            {"z": "1"},
            False,
        ),
        ({"matchExpressions": [{"key": "z", "operator": "Exists"}]}, {"z": ""}, True),
        ({"matchExpressions": [{"key": "z", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "z", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "z", "operator": "DoesNotExist"}]}, {"z": "1"}, False),
        (
            {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "z", "operator": "Exists"}]},
            {"a": "b"},
            False,
        ),
    ],
)
def test_selector_matching(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    validate_selector(selector)
    assert matches(selector, labels) is expected


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ({"matchLabels": {"a b": "c"}}, "label key"),
        ({"matchLabels": {"Bad_Prefix/x": "c"}}, "invalid prefix"),
        ({"matchLabels": {"a": "not valid!"}}, "label value"),
        ({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}, "operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "at least one"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "must not"),
    ],
)
def test_selector_validation(selector: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidSelector, match=fragment):
        validate_selector(selector)


def test_empty_selector_detection() -> None:
    assert is_empty({}) and is_empty(None) and is_empty({"matchLabels": {}})
    assert not is_empty({"matchLabels": {"a": "b"}})


# ------------------------------------------------------------------ classification


def cond(type_: str, status: str, reason: str, message: str = "", at: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at or "2026-11-21T11:00:00Z",
    }


def bootc_node(
    name: str = "n1",
    *,
    desired: str = NEW,
    want: str = "Staged",
    booted: str | None = OLD,
    staged: str | None = None,
    idle: tuple[str, str] | None = ("True", "Idle"),
    degraded: str | None = None,
    slot: bool = False,
    was_cordoned: bool = False,
    idle_at: str = "",
) -> dict[str, Any]:
    annotations = {}
    if slot:
        annotations[c.IN_REBOOT_SLOT_ANNOTATION] = "2026-11-21T11:00:00Z"
        annotations[c.WAS_CORDONED_ANNOTATION] = "true" if was_cordoned else "false"
    status: dict[str, Any] = {"conditions": []}
    if booted:
        status["booted"] = {"image": f"{REPO}@{booted}", "imageDigest": booted}
    if staged:
        status["staged"] = {"image": f"{REPO}@{staged}", "imageDigest": staged}
    if idle:
        status["conditions"].append(cond("Idle", idle[0], idle[1], at=idle_at))
    if degraded is not None:
        status["conditions"].append(cond("Degraded", "True", "Error", degraded))
    else:
        status["conditions"].append(cond("Degraded", "False", "Healthy"))
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"desiredImage": f"{REPO}@{desired}", "desiredImageState": want},
        "status": status,
    }


def k8s_node(ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


TARGETS = frozenset({NEW})


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"booted": NEW}, NodeState.UP_TO_DATE),
        ({"booted": NEW, "degraded": "boom"}, NodeState.DEGRADED),
        ({"booted": OLD, "degraded": "error: pull failed"}, NodeState.DEGRADED),
        ({"booted": None, "idle": None}, NodeState.PENDING),
        ({"booted": OLD, "idle": None}, NodeState.PENDING),
        ({"booted": OLD}, NodeState.PENDING),  # Idle but not yet reacting to the new spec
        ({"idle": ("False", "Staging")}, NodeState.STAGING),
        ({"idle": ("False", "Staged"), "staged": NEW}, NodeState.STAGED),
        ({"idle": ("False", "Staged"), "staged": OLD}, NodeState.PENDING),  # stale stage
        ({"idle": ("False", "Rebooting"), "staged": NEW}, NodeState.REBOOTING),
        ({"idle": ("False", "Rebooting"), "booted": NEW}, NodeState.REBOOTING),
        ({"idle": ("False", "Mystery")}, NodeState.PENDING),
    ],
)
def test_classify(kwargs: dict[str, Any], expected: NodeState) -> None:
    assert classify(bootc_node(**kwargs), TARGETS) is expected


def test_drain_blocked_annotation_marks_node_degraded() -> None:
    node = bootc_node(idle=("False", "Staged"), staged=NEW)
    node["metadata"]["annotations"][c.DRAIN_BLOCKED_ANNOTATION] = "drain timed out"
    assert classify(node, TARGETS) is NodeState.DEGRADED
    assert view(node, k8s_node(), TARGETS).degraded_message == "drain timed out"


def test_index_target_matches_through_the_switched_image_ref() -> None:
    """bootc records the ref it switched to (repo@index) and the per-arch imageDigest."""
    arch = "sha256:" + "4" * 64
    node = bootc_node(booted=arch)
    node["status"]["booted"]["image"] = f"{REPO}@{INDEX}"
    assert classify(node, frozenset({INDEX})) is NodeState.UP_TO_DATE
    assert classify(node, frozenset({arch})) is NodeState.UP_TO_DATE
    assert classify(node, frozenset({NEW})) is NodeState.PENDING
    staged = bootc_node(idle=("False", "Staged"), staged=arch)
    staged["status"]["staged"]["image"] = f"{REPO}@{INDEX}"
    assert classify(staged, frozenset({INDEX})) is NodeState.STAGED


def test_view_reads_annotations_node_and_conditions() -> None:
    v = view(
        bootc_node(slot=True, was_cordoned=True, degraded="bad", idle_at="2026-11-21T11:30:00Z"),
        k8s_node(ready=False, unschedulable=True),
        TARGETS,
    )
    assert v.in_slot and v.was_cordoned and not v.ready and v.unschedulable
    assert v.degraded_message == "bad" and v.spec_in_sync and v.idle
    assert v.idle_since == dt.datetime(2026, 11, 21, 11, 30, tzinfo=dt.UTC)
    assert v.reboot_requested_at is None
    assert view(bootc_node(desired=OLD), None, TARGETS).spec_in_sync is False


def test_view_reads_the_reboot_request_time() -> None:
    node = bootc_node(slot=True)
    node["metadata"]["annotations"][c.IN_REBOOT_SLOT_ANNOTATION] = "2026-11-21T11:58:00Z"
    node["metadata"]["annotations"][c.REBOOT_REQUESTED_ANNOTATION] = "2026-11-21T11:59:00Z"
    got = view(node, k8s_node(), TARGETS)
    assert got.slot_since == dt.datetime(2026, 11, 21, 11, 58, tzinfo=dt.UTC)
    assert got.reboot_requested_at == dt.datetime(2026, 11, 21, 11, 59, tzinfo=dt.UTC)
    assert view(bootc_node(), None, TARGETS).ready is False
    # written to the microsecond now; whole seconds (an older controller's) read as well
    node["metadata"]["annotations"][c.REBOOT_REQUESTED_ANNOTATION] = "2026-11-21T11:59:00.900000Z"
    got = view(node, k8s_node(), TARGETS)
    assert got.reboot_requested_at == dt.datetime(2026, 11, 21, 11, 59, 0, 900_000, tzinfo=dt.UTC)


# ------------------------------------------------------------------ slots


def v(
    name: str,
    state: NodeState,
    *,
    slot: bool = False,
    ready: bool = True,
    want: str = "Staged",
    idle: bool | None = None,
    in_sync: bool = True,
    unschedulable: bool = False,
    idle_since: dt.datetime | None = None,
    slot_since: dt.datetime | None = None,
    reboot_requested_at: dt.datetime | None = None,
    was_cordoned: bool = False,
) -> NodeView:
    return NodeView(
        name=name,
        state=state,
        desired_image=f"{REPO}@{NEW}",
        desired_image_state=want,
        spec_in_sync=in_sync,
        in_slot=slot,
        was_cordoned=was_cordoned,
        ready=ready,
        unschedulable=unschedulable,
        idle=(state is NodeState.UP_TO_DATE) if idle is None else idle,
        idle_since=idle_since,
        degraded_message="",
        booted_digest=None,
        staged_digest=None,
        slot_since=slot_since,
        reboot_requested_at=reboot_requested_at,
    )


S = NodeState


def test_one_at_a_time_with_max_unavailable_1() -> None:
    nodes = [v("c", S.STAGED), v("a", S.STAGED), v("b", S.STAGED)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.take == ("a",) and plan.waiting == ("b", "c") and plan.drain == ("a",)
    # a holds the slot while draining: nobody else gets one
    nodes = [v("a", S.STAGED, slot=True), v("b", S.STAGED), v("c", S.STAGED)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.take == () and plan.drain == ("a",) and plan.holders == ("a",)
    # a told to reboot: keeps the slot, no drain
    nodes[0] = v("a", S.STAGED, slot=True, want="Booted")
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.take == () and plan.drain == () and plan.holders == ("a",)
    # a back up to date, Ready and Idle: released, b takes the slot in the same pass
    nodes[0] = v("a", S.UP_TO_DATE, slot=True, want="Booted")
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.release == ("a",) and plan.take == ("b",) and plan.cancel == ()


def test_up_to_date_but_not_ready_keeps_slot() -> None:
    nodes = [v("a", S.UP_TO_DATE, slot=True, ready=False, want="Booted"), v("b", S.STAGED)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.release == () and plan.take == ()


def test_paused_takes_no_new_slots_but_keeps_holders() -> None:
    nodes = [v("a", S.STAGED, slot=True), v("b", S.STAGED), v("c", S.STAGING)]
    plan = rollout_plan(nodes, 3, paused=True, now=NOW)
    assert plan.take == () and plan.drain == ("a",) and plan.waiting == ("b",)


def test_only_healthy_ready_staged_in_sync_nodes_take_slots() -> None:
    nodes = [
        v("a", S.STAGED, ready=False),
        v("b", S.DEGRADED),
        v("c", S.STAGING),
        v("d", S.PENDING),
        v("e", S.STAGED, in_sync=False),
        v("f", S.STAGED, want="Booted"),
        v("g", S.UP_TO_DATE),
        v("h", S.STAGED),
    ]
    assert rollout_plan(nodes, 10, paused=False, now=NOW).take == ("h",)


def test_unschedulable_nodes_first_then_by_name() -> None:
    nodes = [v("a", S.STAGED), v("z", S.STAGED, unschedulable=True), v("b", S.STAGED)]
    assert rollout_plan(nodes, 2, paused=False, now=NOW).take == ("z", "a")


def test_staged_longest_goes_first_among_equals() -> None:
    t = NOW - dt.timedelta(minutes=10)
    nodes = [
        v("a", S.STAGED, idle_since=t),
        v("b", S.STAGED, idle_since=t - dt.timedelta(minutes=5)),
        v("c", S.STAGED),
    ]
    assert rollout_plan(nodes, 3, paused=False, now=NOW).take == ("b", "a", "c")


def test_unavailable_members_outside_the_rollout_count_against_the_budget() -> None:
    nodes = [
        v("a", S.STAGED),
        v("b", S.STAGED),
        v("c", S.UP_TO_DATE, unschedulable=True),  # cordoned by an admin
        v("d", S.UP_TO_DATE, ready=False),  # NotReady
    ]
    plan = rollout_plan(nodes, 2, paused=False, now=NOW)
    assert plan.take == () and plan.budget_blocked
    assert plan.outside == (("c", "cordoned by someone else"), ("d", "NotReady"))
    assert plan.waiting == ("a", "b")
    plan = rollout_plan(nodes, 3, paused=False, now=NOW)
    assert plan.take == ("a",) and plan.budget_blocked  # 1 slot + 2 outside = 3
    assert rollout_plan(nodes, 4, paused=False, now=NOW).take == ("a", "b")


def test_an_already_unavailable_node_takes_a_slot_whatever_the_budget() -> None:
    nodes = [
        v("a", S.STAGED),
        v("z", S.STAGED, unschedulable=True),
        v("u", S.UP_TO_DATE, ready=False),
    ]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    # z is unschedulable already: updating it costs nothing; a would make 3 unavailable
    assert plan.take == ("z",) and plan.waiting == ("a",)


def test_a_released_node_someone_else_cordoned_stays_in_the_budget() -> None:
    done = v("a", S.UP_TO_DATE, slot=True, unschedulable=True, was_cordoned=True)
    plan = rollout_plan([done, v("b", S.STAGED)], 1, paused=False, now=NOW)
    assert plan.release == ("a",)
    assert plan.outside == (("a", "cordoned by someone else"),)
    assert plan.take == () and plan.budget_blocked


def test_no_new_slot_outside_a_maintenance_window() -> None:
    holder = v("h", S.STAGED, slot=True)
    nodes = [holder, v("a", S.STAGED)]
    plan = rollout_plan(nodes, 2, paused=False, now=NOW, window_open=False)
    assert plan.take == () and plan.window_closed and plan.waiting == ("a",)
    assert plan.drain == ("h",)  # a holder finishes after its window closed
    assert rollout_plan(nodes, 2, paused=False, now=NOW).take == ("a",)


@pytest.mark.parametrize(("max_unhealthy", "halted"), [(1, True), (2, True), (3, False)])
def test_the_halt_threshold_is_configurable(max_unhealthy: int, halted: bool) -> None:
    t = NOW - dt.timedelta(seconds=30)
    nodes = [
        v("a", S.DEGRADED, slot=True, slot_since=t),
        v("b", S.STAGED, slot=True, ready=False, slot_since=t),
        v("c", S.STAGED),
    ]
    plan = rollout_plan(nodes, 3, paused=False, now=NOW, max_unhealthy=max_unhealthy)
    assert plan.halted is halted and plan.max_unhealthy == max_unhealthy
    assert (plan.take == ()) is halted


def test_two_unhealthy_holders_halt() -> None:
    nodes = [
        v("a", S.DEGRADED, slot=True),
        v("b", S.STAGED, slot=True, ready=False),
        v("c", S.STAGED),
    ]
    plan = rollout_plan(nodes, 5, paused=False, now=NOW)
    assert plan.halted and plan.unhealthy == ("a", "b") and plan.take == ()
    one = rollout_plan(nodes[:1] + nodes[2:], 5, paused=False, now=NOW)
    assert not one.halted and one.take == ("c",)


def test_rebooting_is_healthy_until_the_reboot_timeout() -> None:
    since = NOW - dt.timedelta(seconds=100)
    nodes = [
        v("a", S.REBOOTING, slot=True, ready=False, want="Booted", reboot_requested_at=since),
        v("b", S.REBOOTING, slot=True, ready=False, want="Booted", reboot_requested_at=since),
        v("c", S.STAGED),
    ]
    assert not rollout_plan(nodes, 3, paused=False, now=NOW).halted
    assert not rollout_plan(nodes, 3, paused=False, now=NOW, reboot_timeout=200).halted
    late = rollout_plan(nodes, 3, paused=False, now=NOW, reboot_timeout=50)
    assert late.halted and late.unhealthy == ("a", "b")
    assert next_reboot_deadline(nodes, NOW, 200) == pytest.approx(100.5)


def test_the_reboot_timeout_counts_from_the_reboot_request_not_from_staging() -> None:
    """Nodes staged long ago and told to reboot just now are not late (found by the
    chaos e2e: Idle's lastTransitionTime is when the node started staging)."""
    staged_long_ago = NOW - dt.timedelta(seconds=600)
    just_now = NOW - dt.timedelta(seconds=2)
    nodes = [
        v(
            n,
            S.REBOOTING,
            slot=True,
            ready=False,
            want="Booted",
            idle_since=staged_long_ago,
            slot_since=just_now - dt.timedelta(seconds=1),
            reboot_requested_at=just_now,
        )
        for n in "ab"
    ]
    plan = rollout_plan(nodes, 3, paused=False, now=NOW, reboot_timeout=15)
    assert not plan.halted and plan.unhealthy == ()
    assert next_reboot_deadline(nodes, NOW, 15) == pytest.approx(13.5)
    # holders from before the annotation existed: the slot's time, still not staging
    legacy = [replace(n, reboot_requested_at=None) for n in nodes]
    assert not rollout_plan(legacy, 3, paused=False, now=NOW, reboot_timeout=15).halted
    late = rollout_plan(
        nodes, 3, paused=False, now=NOW + dt.timedelta(seconds=20), reboot_timeout=15
    )
    assert late.halted and late.unhealthy == ("a", "b")


def test_target_moved_mid_drain_releases_and_cancels() -> None:
    nodes = [v("a", S.STAGING, slot=True), v("b", S.PENDING, slot=True, in_sync=False)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.release == ("a", "b") and plan.cancel == ("a", "b")
    # but a node already told to reboot keeps its slot until it is back
    nodes = [v("a", S.PENDING, slot=True, want="Booted")]
    assert rollout_plan(nodes, 1, paused=False, now=NOW).release == ()


def test_lowered_max_unavailable_keeps_existing_holders_and_takes_none() -> None:
    nodes = [v(n, S.STAGED, slot=True) for n in "abc"] + [v("d", S.STAGED)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.holders == ("a", "b", "c") and plan.take == ()


def test_zero_max_unavailable_takes_nothing() -> None:
    assert rollout_plan([v("a", S.STAGED)], 0, paused=False, now=NOW).take == ()


STATES = list(NodeState)


def test_booted_without_a_drained_slot_is_restored_to_staged() -> None:
    t = NOW - dt.timedelta(seconds=30)
    hand_written = v("a", S.STAGED, want="Booted")  # no slot at all
    undrained = v("b", S.STAGED, slot=True, slot_since=t, want="Booted")  # no reboot request
    drained = v("c", S.REBOOTING, slot=True, slot_since=t, reboot_requested_at=t, want="Booted")
    left_booted = v("d", S.UP_TO_DATE, want="Booted")  # e.g. an earlier operator's leftover
    staged = v("e", S.STAGED)
    nodes = [hand_written, undrained, drained, left_booted, staged]
    assert [n.name for n in nodes if must_restore_staged(n)] == ["a", "b", "d"]
    # paused, halted or not: restoring is never skipped
    for paused in (False, True):
        plan = rollout_plan(nodes, 1, paused=paused, now=NOW)
        assert plan.restore == ("a", "b", "d")
        assert "a" not in plan.take and "a" not in plan.drain


def test_slots_a_previous_controller_left_are_adopted() -> None:
    """The Go operator's state on the wire: slots with an empty in-reboot-slot value,
    Booted after its drain without reboot-requested. Adopted, not called unsafe."""
    since = NOW - dt.timedelta(seconds=10)
    before, after = since - dt.timedelta(minutes=5), since + dt.timedelta(seconds=1)
    go_drained = v("a", S.STAGED, slot=True, want="Booted")  # Go: drained, told to reboot
    go_draining = v("b", S.STAGED, slot=True, was_cordoned=True)  # admin had cordoned it
    go_rebooted = v("c", S.UP_TO_DATE, slot=True, want="Booted")
    old_version = v("d", S.STAGED, slot=True, slot_since=before, want="Booted")
    ours_resumed = v("e", S.STAGED, slot=True, slot_since=before)  # our drain: resumed as is
    by_hand = v("f", S.STAGED, slot=True, slot_since=after, want="Booted")  # ours, mid-drain
    drained = v("g", S.REBOOTING, slot=True, slot_since=before, reboot_requested_at=before)
    no_slot = v("h", S.UP_TO_DATE, want="Booted")  # the Go operator's finished node
    nodes = [go_drained, go_draining, go_rebooted, old_version]
    nodes += [ours_resumed, by_hand, drained, no_slot]
    adopt = {n.name: a for n in nodes if (a := adoption(n, since)) is not None}
    assert sorted(adopt) == ["a", "b", "c", "d"]
    assert (adopt["a"].stamp, adopt["a"].restore) == (True, True)
    assert (adopt["b"].stamp, adopt["b"].restore) == (True, False)
    assert (adopt["c"].stamp, adopt["c"].restore) == (True, True)
    assert (adopt["d"].stamp, adopt["d"].restore) == (False, True)
    assert adopt["a"].message("a") == (
        "a: adopted reboot slot from a previous controller (desiredImageState Booted without "
        "a reboot-requested annotation): found it was drained and told to reboot, cordoned "
        "for its slot; desiredImageState set back to Staged; it is drained again and then "
        "told to reboot"
    )
    assert adopt["b"].message("b") == (
        "b: adopted reboot slot from a previous controller (no time on its in-reboot-slot "
        "annotation): found its drain under way, cordoned by someone else before; its "
        "drain is resumed; it is then told to reboot"
    )
    assert "found it already runs the target" in adopt["c"].message("c")
    assert "set back to Staged; its slot is released once it is Ready" in adopt["c"].message("c")
    # one write: the adoption time on the slot and Staged back
    assert adoption_patch(adopt["a"], "T") == {
        "metadata": {"annotations": {SLOT: "T"}},
        "spec": {"desiredImageState": "Staged"},
    }
    assert adoption_patch(adopt["b"], "T") == {"metadata": {"annotations": {SLOT: "T"}}}
    assert adoption_patch(adopt["d"], "T") == {"spec": {"desiredImageState": "Staged"}}
    # a Booted written by hand on our own holder mid-drain stays the Warning's case
    assert must_restore_staged(by_hand)


def test_an_adopted_holder_is_drained_again_before_it_reboots() -> None:
    """After adoption the Go holder is a Staged slot holder: drained, never a new slot."""
    adopted = v("a", S.STAGED, slot=True, slot_since=NOW)
    plan = rollout_plan([adopted, v("b", S.STAGED)], 1, paused=False, now=NOW)
    assert plan.drain == ("a",) and plan.take == () and plan.holders == ("a",)


@pytest.mark.parametrize("seed", range(40))
def test_invariants_hold_for_random_pools(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(250):
        nodes = [
            v(
                f"n{i:02d}",
                rng.choice(STATES),
                slot=rng.random() < 0.3,
                ready=rng.random() < 0.8,
                want=rng.choice(["Staged", "Booted"]),
                idle=rng.random() < 0.5,
                in_sync=rng.random() < 0.8,
                unschedulable=rng.random() < 0.2,
                idle_since=NOW - dt.timedelta(seconds=rng.randint(0, 1000)),
                was_cordoned=rng.random() < 0.2,
            )
            for i in range(rng.randint(0, 8))
        ]
        mu = rng.randint(0, 4)
        paused = rng.random() < 0.2
        timeout = rng.choice([None, 300.0])
        max_unhealthy = rng.randint(1, 3)
        window_open = rng.random() < 0.8
        plan = rollout_plan(
            nodes,
            mu,
            paused=paused,
            now=NOW,
            reboot_timeout=timeout,
            max_unhealthy=max_unhealthy,
            window_open=window_open,
        )
        by_name = {n.name: n for n in nodes}
        holders_before = {n.name for n in nodes if n.in_slot}
        kept = holders_before - set(plan.release)
        # never more than maxUnavailable slot holders once new slots are taken
        if plan.take:
            assert len(kept) + len(plan.take) <= mu
        # an available node is taken only while every unavailable member, counting
        # outside causes, stays within maxUnavailable
        if any(not by_name[n].unschedulable for n in plan.take):
            unavailable = set(plan.holders) | {name for name, _ in plan.outside}
            assert len(unavailable) <= mu, (unavailable, mu)
        for name, why in plan.outside:
            n = by_name[name]
            assert why in ("NotReady", "cordoned by someone else")
            assert not n.ready or n.unschedulable or n.was_cordoned
        assert set(plan.holders) == kept | set(plan.take)
        assert not (plan.take and (paused or plan.halted or not window_open))
        for name in plan.take:
            n = by_name[name]
            assert n.state is S.STAGED and n.ready and not n.in_slot and n.spec_in_sync
        for name in plan.release:
            n = by_name[name]
            assert n.in_slot and n.ready and n.state is not S.DEGRADED
        assert set(plan.cancel) <= set(plan.release)
        assert set(plan.drain) <= set(plan.holders)
        assert plan.halted == (len(plan.unhealthy) >= max_unhealthy)
        for n in nodes:
            drained = n.in_slot and n.reboot_requested_at is not None
            assert (n.name in plan.restore) == (n.desired_image_state == "Booted" and not drained)


# ------------------------------------------------------------------ status


def test_counts_and_message() -> None:
    views = [
        v("a", S.UP_TO_DATE),
        v("b", S.UP_TO_DATE),
        v("c", S.STAGING),
        v("d", S.STAGING),
        v("e", S.STAGED, slot=True, want="Booted"),
        v("f", S.STAGED, slot=True),
        v("g", S.STAGED),
        v("h", S.DEGRADED),
        v("i", S.PENDING),
        v("j", S.REBOOTING, slot=True, want="Booted"),
    ]
    counts = count_states(views)
    assert counts == Counts(
        total=10, updated=2, pending=1, staging=2, staged=1, draining=1, rebooting=2, degraded=1
    )
    assert counts.updating == 6
    assert progress_message(counts) == (
        "2/10 updated; 1 pending, 2 staging, 1 staged, 1 draining, 2 rebooting, 1 degraded"
    )
    assert progress_message(Counts(total=10, updated=7, staging=2, rebooting=1)) == (
        "7/10 updated; 2 staging, 1 rebooting"
    )


M = MemberState


@pytest.mark.parametrize(
    ("node", "checking", "expected"),
    [
        (v("a", S.UP_TO_DATE), False, M.UP_TO_DATE),
        # an admin's cordon, kept after the release, does not hold the pool back
        (v("a", S.UP_TO_DATE, unschedulable=True, was_cordoned=False), False, M.UP_TO_DATE),
        # back on the target, Ready, Idle, its slot (and our cordon) not yet released
        (v("a", S.UP_TO_DATE, slot=True, want="Booted", unschedulable=True), False, M.RELEASING),
        # the slot is the fact, whoever touched the cordon meanwhile
        (v("a", S.UP_TO_DATE, slot=True, want="Booted"), False, M.RELEASING),
        (
            v("a", S.UP_TO_DATE, slot=True, was_cordoned=True, unschedulable=True),
            False,
            M.RELEASING,
        ),
        # back on the target but its Node not Ready again: still rebooting
        (v("a", S.UP_TO_DATE, slot=True, want="Booted", ready=False), False, M.REBOOTING),
        (v("a", S.UP_TO_DATE, slot=True, want="Booted"), True, M.HEALTH_CHECK),
        (v("a", S.STAGED, slot=True), False, M.DRAINING),
        (v("a", S.STAGED, slot=True, want="Booted"), False, M.REBOOTING),
        (v("a", S.REBOOTING, slot=True, want="Booted"), False, M.REBOOTING),
        (v("a", S.STAGED), False, M.STAGED),
        (v("a", S.STAGING), False, M.STAGING),
        (v("a", S.PENDING), False, M.PENDING),
        (v("a", S.DEGRADED, slot=True), False, M.DEGRADED),
        (replace(v("a", S.PENDING), held_back=True), False, M.ROLLED_BACK),
    ],
)
def test_member_states(node: NodeView, checking: bool, expected: MemberState) -> None:
    marked = frozenset({node.name}) if checking else frozenset()
    assert member_state(node, checking=marked) is expected
    counts = count_states([node, v("z", S.UP_TO_DATE)], checking=marked)
    # only a member that is done counts as updated; the others are updating (or worse)
    assert counts.updated == 1 + (expected is M.UP_TO_DATE)
    done = rollout_condition(RolloutFacts(counts, max_unavailable=1))[0]
    assert done == (expected is M.UP_TO_DATE)


def test_the_last_node_still_in_its_slot_keeps_the_pool_from_up_to_date() -> None:
    """UpToDate=True only once every member is out of its slot (so uncordoned: the
    rollout restores the cordon before it removes the slot annotation)."""
    views = [v("a", S.UP_TO_DATE), v("b", S.UP_TO_DATE, slot=True, want="Booted")]
    counts = count_states(views)
    assert (counts.updated, counts.releasing, counts.updating) == (1, 1, 1)
    assert rollout_condition(RolloutFacts(counts, max_unavailable=1)) == (
        False,
        "RolloutInProgress",
        "1/2 updated; 1 releasing",
    )
    released = count_states([views[0], replace(views[1], in_slot=False)])
    assert rollout_condition(RolloutFacts(released))[:2] == (True, "AllUpdated")


def test_member_states_agree_with_the_counts() -> None:
    views = [
        v("a", S.UP_TO_DATE),
        v("b", S.UP_TO_DATE, slot=True),
        v("c", S.UP_TO_DATE, slot=True, ready=False),
        v("d", S.UP_TO_DATE, slot=True, want="Booted"),
        v("e", S.STAGED, slot=True),
        v("f", S.DEGRADED),
    ]
    states = member_states(views, checking=frozenset({"d"}))
    assert set(states) == set(MemberState) and sum(states.values()) == len(views)
    counts = count_states(views, checking=frozenset({"d"}))
    assert states[M.UP_TO_DATE] == counts.updated == 1
    assert (states[M.RELEASING], states[M.REBOOTING], states[M.HEALTH_CHECK]) == (1, 1, 1)
    assert counts.updating == 4 and counts.total == 6


def test_up_to_date_all_updated_paused_and_in_progress() -> None:
    assert rollout_condition(RolloutFacts(Counts(total=3, updated=3), paused=True)) == (
        True,
        "AllUpdated",
        "3/3 updated",
    )
    status, reason, msg = rollout_condition(
        RolloutFacts(Counts(total=3, updated=1, staged=2), paused=True)
    )
    assert (status, reason) == (False, "Paused") and "1/3 updated" in msg
    facts = RolloutFacts(Counts(total=3, updated=1), max_unavailable=1)
    assert rollout_condition(facts)[:2] == (False, "RolloutInProgress")


def test_up_to_date_is_never_true_before_membership_processed_the_generation() -> None:
    # A new pool: membership has not matched nodes yet, so nothing is known.
    for counts in (Counts(), Counts(total=3, updated=3), Counts(total=2, pending=2)):
        status, reason, msg = rollout_condition(
            RolloutFacts(counts, generation=4, membership_done=False)
        )
        assert (status, reason) == (False, "Pending")
        assert "generation 4" in msg


def test_a_pool_matching_no_node_says_so() -> None:
    status, reason, msg = rollout_condition(RolloutFacts(Counts()))
    assert (status, reason) == (True, "NoMatchingNodes")
    assert msg == "no nodes match spec.nodeSelector"


def test_a_pool_that_cannot_progress_names_what_blocks_it() -> None:
    counts = Counts(total=2, pending=2)
    assert rollout_condition(RolloutFacts(counts, invalid="spec.image.ref: bad")) == (
        False,
        "InvalidSpec",
        "spec.image.ref: bad; 0/2 updated; 2 pending",
    )
    # invalid wins over everything, also over "all updated" and pending membership
    facts = RolloutFacts(Counts(total=1, updated=1), invalid="x", membership_done=False)
    assert rollout_condition(facts)[1] == "InvalidSpec"
    tag_error = RolloutFacts(counts, tag="q.io/a/b:v1", target_known=False, tag_error="no tag")
    assert rollout_condition(tag_error)[:2] == (False, "TagResolutionError")
    waiting = RolloutFacts(counts, tag="q.io/a/b:v1", target_known=False)
    assert rollout_condition(waiting) == (
        False,
        "Pending",
        "waiting for tag q.io/a/b:v1 to be resolved; 0/2 updated; 2 pending",
    )
    halted = RolloutFacts(Counts(total=3, updated=1, rebooting=2), halted="a, b unhealthy")
    assert rollout_condition(halted)[:2] == (False, "RolloutHalted")
    status, reason, msg = rollout_condition(
        RolloutFacts(Counts(total=1, staged=1), max_unavailable=0)
    )
    assert (status, reason) == (False, "RolloutBlocked")
    assert msg == "maxUnavailable is 0, so no node may reboot; 0/1 updated; 1 staged"
    # maxUnavailable 0 blocks nothing once every node is updated
    assert rollout_condition(RolloutFacts(Counts(total=1, updated=1), max_unavailable=0))[0]


def test_a_closed_maintenance_window_says_when_the_next_opens() -> None:
    facts = RolloutFacts(
        Counts(total=2, updated=1, staged=1),
        window_closed=True,
        next_window="the next maintenance window opens Sat 2026-11-28 22:00 UTC",
        max_unavailable=1,
    )
    assert rollout_condition(facts) == (
        False,
        "AwaitingMaintenanceWindow",
        "no new reboots outside maintenance windows; the next maintenance window opens "
        "Sat 2026-11-28 22:00 UTC; 1/2 updated; 1 staged",
    )
    assert phase("AwaitingMaintenanceWindow", False, "Healthy") == "AwaitingWindow"
    # once every node runs the target, a closed window does not matter
    done = RolloutFacts(Counts(total=2, updated=2), window_closed=True)
    assert rollout_condition(done)[:2] == (True, "AllUpdated")


def test_nodes_outside_the_rollout_using_the_budget_are_named() -> None:
    waiting = "worker-9 cordoned by someone else, worker-4 NotReady"
    facts = RolloutFacts(Counts(total=3, staged=1, updated=2), budget_used_by=waiting)
    assert rollout_condition(facts) == (
        False,
        "RolloutBlocked",
        f"2/3 updated; 1 staged; waiting: {waiting}",
    )
    moving = RolloutFacts(Counts(total=3, staged=1, rebooting=1, updated=1), budget_used_by=waiting)
    assert rollout_condition(moving)[1] == "RolloutInProgress"


def test_an_empty_selector_is_named_in_the_message() -> None:
    msg = rollout_condition(RolloutFacts(Counts(total=2, updated=2), selects_all=True))[2]
    assert msg == "2/2 updated; spec.nodeSelector is empty, so the pool selects every node"


@pytest.mark.parametrize(
    ("up_reason", "degraded", "degraded_reason", "expected"),
    [
        ("AllUpdated", False, "Healthy", "UpToDate"),
        ("NoMatchingNodes", False, "Healthy", "UpToDate"),
        ("AllUpdated", True, "NodeConflict", "Degraded"),
        ("RolloutInProgress", False, "Healthy", "Progressing"),
        ("RolloutInProgress", True, "NodeDegraded", "Degraded"),
        ("RolloutHalted", True, "RolloutHalted", "Halted"),
        ("Paused", False, "Healthy", "Paused"),
        ("Paused", True, "RolloutHalted", "Halted"),
        ("Pending", False, "Healthy", "Pending"),
        ("RolloutBlocked", False, "Healthy", "Blocked"),
        ("InvalidSpec", True, "InvalidSpec", "Degraded"),
        ("TagResolutionError", True, "TagResolutionError", "Degraded"),
    ],
)
def test_phase(up_reason: str, degraded: bool, degraded_reason: str, expected: str) -> None:
    assert phase(up_reason, degraded, degraded_reason) == expected
    assert expected in c.PHASES


def test_matched_nodes_without_bootc_node_count_as_pending() -> None:
    counts = count_states([v("a", S.UP_TO_DATE)], without_bootc_node=2)
    assert counts == Counts(total=3, updated=1, pending=2)


def test_degraded_precedence_highest_wins_and_rest_is_kept() -> None:
    assert degraded_condition({}) == (False, "Healthy", "all nodes healthy")
    order = list(c.DEGRADED_PRECEDENCE)
    for i, reason in enumerate(order):
        problems = {r: f"msg {r}" for r in order[: i + 1]}
        status, top, message = degraded_condition(problems)
        assert status and top == reason and message.startswith(f"msg {reason}")
        for lower in order[:i]:
            assert f"{lower}: msg {lower}" in message
    assert degraded_condition({"NodeDegraded": ""}) == (False, "Healthy", "all nodes healthy")
    with pytest.raises(ValueError, match="unknown"):
        degraded_condition({"Bogus": "x"})


def test_degraded_nodes_message_names_nodes() -> None:
    views = [v(f"n{i}", S.DEGRADED) for i in range(7)] + [v("ok", S.UP_TO_DATE)]
    msg = degraded_nodes_message(views, limit=3)
    assert msg.startswith("n0: degraded; n1: degraded; n2: degraded") and "and 4 more" in msg


# ------------------------------------------------------------------ the slot protocol

SLOT = c.IN_REBOOT_SLOT_ANNOTATION
WAS = c.WAS_CORDONED_ANNOTATION
REQ = c.REBOOT_REQUESTED_ANNOTATION


def test_take_patch_records_the_slot_and_who_cordoned() -> None:
    assert take_patch("T", was_cordoned=True) == {
        "metadata": {"annotations": {SLOT: "T", WAS: "true"}}
    }
    assert take_patch("T", was_cordoned=False)["metadata"]["annotations"][WAS] == "false"


@pytest.mark.parametrize("state", ["Staged", "Booted"])
def test_release_patch_clears_the_whole_memory_and_never_leaves_booted(state: str) -> None:
    patch = release_patch(state)
    assert patch["metadata"]["annotations"] == {
        SLOT: None,
        WAS: None,
        c.AUTOSCALER_PRIOR_ANNOTATION: None,
        REQ: None,
        c.HEALTH_CHECK_ANNOTATION: None,
        c.DRAIN_SUMMARY_ANNOTATION: None,
        c.DRAIN_SKIPPED_ANNOTATION: None,
    }
    assert patch.get("spec") == (None if state == "Staged" else {"desiredImageState": "Staged"})
    blocked = release_patch(state, {c.DRAIN_BLOCKED_ANNOTATION: "why"})
    assert blocked["metadata"]["annotations"][c.DRAIN_BLOCKED_ANNOTATION] == "why"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({SLOT: "T", WAS: "false"}, True),  # we cordoned it
        ({SLOT: "T", WAS: "true"}, False),  # someone else did: keep it
        ({SLOT: "T"}, True),  # a holder without the record: we may have cordoned it
        ({}, False),  # never a holder: never cordoned by us
        ({WAS: "false"}, True),  # a leftover record says we did
        ({WAS: "true"}, False),
    ],
)
def test_must_uncordon(annotations: dict[str, str], expected: bool) -> None:
    assert must_uncordon(annotations) is expected


@pytest.mark.parametrize(
    ("annotations", "state", "expected"),
    [
        ({SLOT: "T", WAS: "false"}, "Staged", True),  # draining: the drain is void
        ({SLOT: "T", WAS: "false", REQ: "T"}, "Booted", False),  # told to reboot: finish
        ({}, "Staged", False),
        ({}, "Booted", False),
    ],
)
def test_a_new_target_gives_the_slot_back_unless_the_reboot_was_requested(
    annotations: dict[str, str], state: str, expected: bool
) -> None:
    assert gives_slot_back_on_retarget(annotations, state) is expected


TARGET, BEFORE = "r@sha256:new", "r@sha256:old"
HELD_BACK = {c.HEALTH_FAILED_ANNOTATION: "sha256:new"}


@pytest.mark.parametrize(
    ("annotations", "current", "stage_ahead", "due"),
    [
        ({}, BEFORE, False, True),  # a member waiting: pointed at the target at once
        ({}, None, False, True),  # a spec without an image
        ({}, TARGET, False, False),  # already there
        ({}, BEFORE, True, False),  # stageAhead: the plan's stage step, a few at a time
        ({SLOT: "T", WAS: "false"}, BEFORE, False, True),  # a holder: its slot goes back
        ({SLOT: "T", WAS: "false"}, BEFORE, True, True),  # whatever stageAhead says
        ({SLOT: "T", REQ: "T"}, BEFORE, False, True),  # told to reboot: keeps its slot
        ({SLOT: "T"}, TARGET, False, False),
        (HELD_BACK, BEFORE, False, False),  # rolled back from it: held back
        ({**HELD_BACK, SLOT: "T"}, BEFORE, False, False),
        ({c.HEALTH_FAILED_ANNOTATION: "sha256:other"}, BEFORE, False, True),  # another digest
    ],
)
def test_a_member_is_retargeted_before_the_plan_unless_held_back_or_staged_ahead(
    annotations: dict[str, str], current: str | None, stage_ahead: bool, due: bool
) -> None:
    in_slot, failed = SLOT in annotations, annotations.get(c.HEALTH_FAILED_ANNOTATION)
    assert (
        retarget_due(
            TARGET, current, in_slot=in_slot, failed_digest=failed, every_member=not stage_ahead
        )
        is due
    )
    assert not retarget_due(
        None, current, in_slot=in_slot, failed_digest=failed, every_member=not stage_ahead
    )


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({SLOT: "T", WAS: "false"}, True),  # cordoned by us: rollout uncordons it
        ({SLOT: "T"}, True),
        ({SLOT: "T", WAS: "true"}, False),  # someone else's cordon stays; nothing to give back
        ({SLOT: "T", WAS: "true", c.AUTOSCALER_PRIOR_ANNOTATION: "{}"}, True),
        ({WAS: "false"}, True),  # a leftover record says we cordoned it
        ({}, False),
    ],
)
def test_a_leaving_member_goes_to_rollout_first_when_a_slot_changed_its_node(
    annotations: dict[str, str], expected: bool
) -> None:
    assert gives_node_back(annotations) is expected


# ------------------------------------------------------------------ stage-ahead


def behind(name: str, state: NodeState = S.PENDING, **kw: Any) -> NodeView:
    return v(name, state, in_sync=False, **kw)


def test_stage_ahead_unset_leaves_everything_to_membership() -> None:
    assert plan_staging([behind("a"), behind("b")], None) == ()


def test_stage_ahead_buffers_a_few_nodes_beyond_the_slot_holders() -> None:
    nodes = [
        v("h", S.STAGED, slot=True),  # a holder: not counted
        v("s", S.STAGING),  # on its way
        behind("a"),
        behind("b"),
        behind("c"),
        behind("z", unschedulable=True),
    ]
    assert plan_staging(nodes, 1) == ()  # s already fills it
    assert plan_staging(nodes, 2) == ("z",)  # already-unavailable first
    assert plan_staging(nodes, 4) == ("z", "a", "b")
    assert plan_staging(nodes, 10) == ("z", "a", "b", "c")


def test_stage_ahead_never_holds_back_nodes_already_on_the_target() -> None:
    nodes = [v("s", S.STAGED), behind("u", S.UP_TO_DATE), behind("a")]
    assert plan_staging(nodes, 1) == ("u",)


def test_degraded_and_updated_nodes_do_not_use_the_stage_ahead_budget() -> None:
    nodes = [v("d", S.DEGRADED), v("ok", S.UP_TO_DATE), behind("a"), behind("b")]
    assert plan_staging(nodes, 1) == ("a",)


@pytest.mark.parametrize("seed", range(20))
def test_never_more_than_stage_ahead_on_the_way(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        nodes = [
            v(
                f"n{i:02d}",
                rng.choice(STATES),
                slot=rng.random() < 0.2,
                in_sync=rng.random() < 0.5,
                unschedulable=rng.random() < 0.2,
            )
            for i in range(rng.randint(0, 10))
        ]
        limit = rng.randint(0, 4)
        stage = plan_staging(nodes, limit)
        by_name = {n.name: n for n in nodes}
        way = {
            n.name
            for n in nodes
            if n.spec_in_sync and not n.in_slot and n.state in (S.PENDING, S.STAGING, S.STAGED)
        }
        new = {n for n in stage if by_name[n].state is not S.UP_TO_DATE}
        assert all(not by_name[n].spec_in_sync and not by_name[n].in_slot for n in stage)
        if new:
            assert len(way) + len(new) <= limit
