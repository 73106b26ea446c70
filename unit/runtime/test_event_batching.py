"""``batch_note``: how a batch of per-member Events becomes one note; Event names."""

from __future__ import annotations

import datetime as dt

import pytest

from bootc_operator.runtime.events import NOTE_MAX, EventRecorder, ObjectRef, _Pending, batch_note


def test_a_single_member_keeps_its_own_note() -> None:
    assert batch_note("{n} nodes took a slot", ["a"], ["a took a slot in pool p"]) == (
        "a took a slot in pool p"
    )


def test_several_members_are_named_after_the_summary() -> None:
    note = batch_note("{n} nodes took a slot", ["a", "b", "c"], ["x", "y", "z"])
    assert note == "3 nodes took a slot: a, b, c"


def test_names_that_do_not_fit_are_counted() -> None:
    names = [f"worker-{i:04d}" for i in range(500)]
    note = batch_note("{n} nodes took a slot", names, names)
    assert len(note) <= NOTE_MAX
    assert note.startswith("500 nodes took a slot: worker-0000, worker-0001, ")
    shown = note.split(": ", 1)[1].split(" and ")[0].split(", ")
    more = int(note.rsplit(" and ", 1)[1].removesuffix(" more"))
    assert shown == names[: len(shown)] and len(shown) + more == 500
    assert len(shown) > 50, "the note is filled, not cut short"


@pytest.mark.parametrize("limit", [40, 41, 42, 43, 60, 61, 62, 100])
def test_any_limit_is_respected_and_counts_add_up(limit: int) -> None:
    names = ["n1", "n22", "n333", "n4444", "n55555", "n666666", "n7777777"]
    note = batch_note("{n} done", names, names, limit=limit)
    assert len(note) <= limit
    listed = note.split(": ", 1)[1]
    if " and " in listed:
        shown_part, more_part = listed.rsplit(" and ", 1)
        shown = [x for x in shown_part.split(", ") if x]
        assert len(shown) + int(more_part.removesuffix(" more")) == len(names)
    else:
        assert listed.split(", ") == names


def test_a_long_single_note_is_cut_to_the_limit() -> None:
    assert len(batch_note("{n} x", ["a"], ["y" * 5000])) == NOTE_MAX


def test_event_names_sort_by_emit_time() -> None:
    """kubectl describe keeps name order among Events of the same second."""
    ref = ObjectRef("v1", "Node", "node-1")
    t0 = dt.datetime(2026, 11, 23, 14, 0, 0, 999_999, tzinfo=dt.UTC)
    times = [t0 + dt.timedelta(microseconds=us) for us in (0, 1, 2, 10, 999_999, 10**8)]
    names = [EventRecorder._name(_Pending(ref, "Normal", "R", "A", "n", t)) for t in times]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert names[0] == f"node-1.{int(t0.timestamp()) * 10**9 + 999_999_000:x}"
    # a retry after a name clash takes the next nanosecond, still before the next µs
    assert names[0] < EventRecorder._name(_Pending(ref, "Normal", "R", "A", "n", t0), 1) < names[1]
