"""policy.autoscaler and the slot's Node patches: the autoscaler annotations a slot
holder carries, what is restored when the slot ends, and nodes an autoscaler removes."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.autoscaler import (
    DO_NOT_DISRUPT,
    PROTECT,
    SCALE_DOWN_DISABLED,
    leaving,
    parse_record,
    prior_record,
    restore_annotations,
)
from bootc_operator.policy.slots import (
    node_release_patch,
    node_take_patch,
    take_patch,
)

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
