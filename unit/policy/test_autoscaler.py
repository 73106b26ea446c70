"""policy.autoscaler and the slot's Node patches: the autoscaler annotations a slot
holder carries, what is restored when the slot ends, and nodes an autoscaler removes."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.autoscaler import (
    DO_NOT_DISRUPT,
    MAX_RECORD,
    PROTECT,
    SCALE_DOWN_DISABLED,
    UnrecordableProtection,
    leaving,
    parse_record,
    prior_record,
    protection,
    protection_to_reapply,
    restore_annotations,
)
from bootc_operator.policy.health import choose_canaries
from bootc_operator.policy.nodestate import NodeState, NodeView, view
from bootc_operator.policy.poolstatus import (
    MemberState,
    count_states,
    member_state,
    progress_message,
)
from bootc_operator.policy.slots import (
    hold_repair_patch,
    node_release_patch,
    node_take_patch,
    plan_staging,
    take_patch,
)
from bootc_operator.policy.topology import Topology, current_domain
from unit.policy.planning import rollout_plan
from unit.reconcilers.test_pool_metrics import member

SLOT = c.IN_REBOOT_SLOT_ANNOTATION
WAS = c.WAS_CORDONED_ANNOTATION
PRIOR = c.AUTOSCALER_PRIOR_ANNOTATION


def test_a_slot_holder_is_cordoned_and_protected_from_both_autoscalers() -> None:
    assert node_take_patch() == {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": {SCALE_DOWN_DISABLED: "true", DO_NOT_DISRUPT: "true"}},
    }
    assert PROTECT == {SCALE_DOWN_DISABLED: "true", DO_NOT_DISRUPT: "true"}


def test_the_record_keeps_only_the_admins_values_of_our_keys() -> None:
    assert prior_record({}) == "{}"
    assert prior_record({"other": "x"}) == "{}"
    record = prior_record({DO_NOT_DISRUPT: "false", "other": "x"})
    assert parse_record(record) == {DO_NOT_DISRUPT: "false"}
    both = {DO_NOT_DISRUPT: "", SCALE_DOWN_DISABLED: "true"}
    assert parse_record(prior_record(both)) == both
    taking = take_patch("T", was_cordoned=False, autoscaler_prior=record)
    assert taking["metadata"]["annotations"][PRIOR] == record


def test_the_record_is_bounded_and_what_does_not_fit_is_refused_by_name() -> None:
    """Issue 37 item 4: a node's own 44 KB control-character value under one of our
    keys grew sixfold in JSON (264 KB), past the 256 KiB a BootcNode's annotations may
    hold: every take of that node got a 422. The record never exceeds MAX_RECORD;
    what does not fit is refused before any write, naming the key and its size."""
    fits = {DO_NOT_DISRUPT: "\x01" * 600, SCALE_DOWN_DISABLED: "x" * 300}
    record = prior_record(fits)
    assert len(record) <= MAX_RECORD and parse_record(record) == fits
    with pytest.raises(UnrecordableProtection) as err:
        prior_record({DO_NOT_DISRUPT: "\x01" * 44_000, SCALE_DOWN_DISABLED: "true"})
    message = str(err.value)
    assert message.startswith(
        f"its Node annotations {SCALE_DOWN_DISABLED} (4 characters), "
        f"{DO_NOT_DISRUPT} (44000 characters) take 264"
    ), message
    assert f"more than the {MAX_RECORD} the operator keeps" in message
    assert "\x01" not in message and len(message) < 400


@pytest.mark.parametrize(
    ("prior", "expected"),
    [
        ({}, {SCALE_DOWN_DISABLED: None, DO_NOT_DISRUPT: None}),  # ours removed
        (
            {SCALE_DOWN_DISABLED: "true"},  # the admin's own "true" stays
            {SCALE_DOWN_DISABLED: "true", DO_NOT_DISRUPT: None},
        ),
        (
            {DO_NOT_DISRUPT: "false", SCALE_DOWN_DISABLED: "no"},  # any value comes back
            {SCALE_DOWN_DISABLED: "no", DO_NOT_DISRUPT: "false"},
        ),
    ],
)
def test_the_end_of_a_slot_restores_exactly_what_was_there(
    prior: dict[str, str], expected: dict[str, str | None]
) -> None:
    held = {SLOT: "T", WAS: "false", PRIOR: prior_record(prior)}
    assert restore_annotations(held) == expected
    assert node_release_patch(held) == {
        "spec": {"unschedulable": None},
        "metadata": {"annotations": expected},
    }


def test_a_slot_without_a_record_never_wrote_ours_and_restores_nothing() -> None:
    # taken by the Go operator or an older controller: the cordon alone is restored
    assert restore_annotations({SLOT: ""}) == {}
    assert node_release_patch({SLOT: ""}) == {"spec": {"unschedulable": None}}
    # the admin had cordoned it: nothing at all to write
    assert node_release_patch({SLOT: "T", WAS: "true"}) == {}
    kept = node_release_patch({SLOT: "T", WAS: "true", PRIOR: "{}"})
    assert kept == {"metadata": {"annotations": {SCALE_DOWN_DISABLED: None, DO_NOT_DISRUPT: None}}}


HELD = {SLOT: "T", WAS: "false", PRIOR: "{}"}


@pytest.mark.parametrize(
    ("on_node", "lost"),
    [
        (dict(PROTECT), {}),  # as written: nothing to do
        ({**PROTECT, "other": "x"}, {}),
        ({}, dict(PROTECT)),  # both removed
        ({SCALE_DOWN_DISABLED: "true"}, {DO_NOT_DISRUPT: "true"}),  # one removed
        ({**PROTECT, DO_NOT_DISRUPT: "false"}, {DO_NOT_DISRUPT: "true"}),  # one changed
    ],
)
def test_a_holder_gets_back_the_autoscaler_annotations_someone_removed(
    on_node: dict[str, str], lost: dict[str, str]
) -> None:
    assert protection_to_reapply(on_node, HELD) == lost
    node = {"metadata": {"annotations": on_node}, "spec": {"unschedulable": True}}
    expected = {"metadata": {"annotations": lost}} if lost else {}
    assert hold_repair_patch(node, HELD, cordon=True) == expected
    assert hold_repair_patch(node, HELD, cordon=False) == expected
    assert protection(node) == {k: on_node.get(k) for k in PROTECT}


def test_only_a_slot_with_our_record_gets_them_back() -> None:
    # no slot (released, or never taken): nothing of ours to keep
    assert protection_to_reapply({}, {}) == {}
    assert protection_to_reapply({}, {PRIOR: "{}"}) == {}
    # a slot the Go operator or an older controller took: never had ours, and its
    # release would not take them off
    assert protection_to_reapply({}, {SLOT: "T", WAS: "false"}) == {}


def test_a_draining_holder_is_cordoned_again_with_its_annotations() -> None:
    bare: dict[str, Any] = {"metadata": {"name": "n"}}
    assert hold_repair_patch(bare, HELD, cordon=True) == {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": dict(PROTECT)},
    }
    # rebooting or under health check: the cordon is not its business here
    assert hold_repair_patch(bare, HELD, cordon=False) == {
        "metadata": {"annotations": dict(PROTECT)}
    }
    # without our record only the cordon
    assert hold_repair_patch(bare, {SLOT: "T"}, cordon=True) == {"spec": {"unschedulable": True}}
    assert hold_repair_patch(bare, {SLOT: "T"}, cordon=False) == {}


@pytest.mark.parametrize("record", ["not json", "[1]", '{"other": "x"}'])
def test_a_record_that_is_not_ours_restores_as_had_none(record: str) -> None:
    assert parse_record(record) == {}
    assert restore_annotations({PRIOR: record}) == {SCALE_DOWN_DISABLED: None, DO_NOT_DISRUPT: None}


def node(*taints: str) -> dict[str, Any]:
    return {"spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]}}


@pytest.mark.parametrize(
    ("taints", "who"),
    [
        (("ToBeDeletedByClusterAutoscaler",), "the cluster autoscaler"),
        (("karpenter.sh/disrupted",), "Karpenter"),
        (("karpenter.sh/disruption",), "Karpenter"),
        (("other", "karpenter.sh/disrupted"), "Karpenter"),
    ],
)
def test_a_node_an_autoscaler_removes_is_leaving(taints: tuple[str, ...], who: str) -> None:
    why = leaving(node(*taints))
    assert why.startswith(f"being removed by {who}") and taints[-1] in why


def test_other_nodes_are_not_leaving() -> None:
    assert leaving(None) == ""
    assert leaving({}) == ""
    assert leaving(node("node.kubernetes.io/unschedulable")) == ""
    assert leaving({"spec": {"taints": [None, {"effect": "NoSchedule"}]}}) == ""


# ------------------------------------------------------------------ leaving nodes in plans


NOW = dt.datetime(2026, 11, 25, 12, tzinfo=dt.UTC)
GOING = "being removed by the cluster autoscaler (taint ToBeDeletedByClusterAutoscaler)"


def test_a_leaving_node_gets_no_slot_and_the_next_one_takes_it() -> None:
    nodes = [member("a", NodeState.STAGED, leaving=GOING), member("b", NodeState.STAGED)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW)
    assert plan.take == ("b",)
    assert "a" not in plan.waiting
    # even first in line (already cordoned: the autoscaler cordons what it removes)
    nodes[0] = replace(nodes[0], unschedulable=True)
    assert rollout_plan(nodes, 2, paused=False, now=NOW).take == ("b",)


def test_a_leaving_node_is_counted_as_leaving_unless_it_holds_a_slot_or_is_done() -> None:
    staged = member("a", NodeState.STAGED, leaving=GOING)
    assert member_state(staged) is MemberState.LEAVING
    assert member_state(replace(staged, in_slot=True)) is MemberState.DRAINING
    assert member_state(replace(staged, state=NodeState.UP_TO_DATE)) is MemberState.UP_TO_DATE
    counts = count_states([staged, member("b", NodeState.UP_TO_DATE)])
    assert (counts.total, counts.updated, counts.leaving, counts.updating) == (2, 1, 1, 0)
    assert progress_message(counts) == "1/2 updated; 1 leaving (an autoscaler is removing them)"


def test_the_view_reads_the_taint_from_the_node() -> None:
    bn = {"metadata": {"name": "a"}, "spec": {}, "status": {}}
    assert view(bn, node("karpenter.sh/disrupted"), frozenset()).leaving.startswith(
        "being removed by Karpenter"
    )
    assert view(bn, node(), frozenset()).leaving == ""


def test_a_leaving_node_is_neither_staged_ahead_nor_a_canary() -> None:
    # a staged leaving node does not hold stageAhead's only place
    stuck = member("a", NodeState.STAGED, leaving=GOING)
    behind = member("b", NodeState.UP_TO_DATE, spec_in_sync=False, booted_digest="sha256:old")
    behind = replace(behind, state=NodeState.PENDING)
    assert plan_staging([stuck, behind], 1) == ("b",)
    assert plan_staging([replace(stuck, leaving=""), behind], 1) == ()
    # nor is it pointed at the target itself
    assert plan_staging([replace(stuck, spec_in_sync=False, state=NodeState.PENDING)], 3) == ()
    # canaries are chosen among the others (labelled first still)
    labelled = replace(stuck, canary_label=True)
    assert choose_canaries([labelled, behind, member("c", NodeState.STAGED)], 1) == {"b"}
    done = replace(labelled, state=NodeState.UP_TO_DATE)  # already updated: may stay one
    assert choose_canaries([done, behind], 1) == {"a"}


def test_a_leaving_node_does_not_keep_its_zone_open() -> None:
    zone = "topology.kubernetes.io/zone"
    topology = Topology(zone)

    def in_zone(name: str, value: str, **kw: Any) -> NodeView:
        return member(name, NodeState.STAGED, labels=((zone, value),), **kw)

    nodes = [in_zone("a1", "a", leaving=GOING), in_zone("b1", "b")]
    assert current_domain(topology, nodes, holders=()) == "b"
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, topology=topology)
    assert plan.take == ("b1",)
