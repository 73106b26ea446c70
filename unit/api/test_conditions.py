"""metav1.Condition semantics of bootc_operator.api.conditions."""

from __future__ import annotations

import datetime as dt

import pytest

from bootc_operator.api.conditions import (
    conditions_equal_ignoring_time,
    get_condition,
    is_true,
    remove_condition,
    set_condition,
)
from bootc_operator.api.timefmt import now_rfc3339

T0 = dt.datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def test_new_condition_gets_transition_time_without_microseconds() -> None:
    conds = set_condition(None, "Degraded", False, "Healthy", now=T0)
    assert conds == [
        {
            "type": "Degraded",
            "status": "False",
            "reason": "Healthy",
            "message": "",
            "lastTransitionTime": "2026-11-21T10:00:00Z",
        }
    ]


def test_transition_time_kept_when_only_reason_or_message_changes() -> None:
    conds = set_condition(None, "UpToDate", False, "RolloutInProgress", "1/3 updated", now=T0)
    conds = set_condition(conds, "UpToDate", False, "Paused", "paused at 2/3", now=T1)
    cond = get_condition(conds, "UpToDate")
    assert cond is not None
    assert cond["lastTransitionTime"] == "2026-11-21T10:00:00Z"
    assert (cond["reason"], cond["message"]) == ("Paused", "paused at 2/3")


def test_transition_time_moves_when_status_changes() -> None:
    conds = set_condition(None, "UpToDate", False, "RolloutInProgress", now=T0)
    conds = set_condition(conds, "UpToDate", True, "AllUpdated", now=T1)
    cond = get_condition(conds, "UpToDate")
    assert cond is not None and cond["lastTransitionTime"] == now_rfc3339(T1)
    assert is_true(conds, "UpToDate")


def test_observed_generation_is_recorded_and_input_not_mutated() -> None:
    original = set_condition(None, "Idle", True, "Idle", now=T0)
    updated = set_condition(original, "Idle", True, "Idle", observed_generation=7, now=T1)
    assert "observedGeneration" not in original[0]
    assert updated[0]["observedGeneration"] == 7


def test_order_of_other_conditions_kept_and_remove() -> None:
    conds = set_condition(None, "A", True, "R", now=T0)
    conds = set_condition(conds, "B", True, "R", now=T0)
    conds = set_condition(conds, "A", False, "R2", now=T1)
    assert [c["type"] for c in conds] == ["A", "B"]
    assert [c["type"] for c in remove_condition(conds, "A")] == ["B"]
    assert get_condition(conds, "C") is None and not is_true(conds, "C")


def test_equality_ignores_transition_time_only() -> None:
    a = set_condition(None, "A", True, "R", "m", now=T0)
    b = set_condition(None, "A", True, "R", "m", now=T1)
    c = set_condition(None, "A", True, "R", "other", now=T0)
    assert conditions_equal_ignoring_time(a, b)
    assert not conditions_equal_ignoring_time(a, c)


@pytest.mark.parametrize(("status", "reason"), [("Maybe", "R"), (True, "")])
def test_invalid_status_or_empty_reason_rejected(status: str | bool, reason: str) -> None:
    with pytest.raises(ValueError):
        set_condition(None, "A", status, reason)
