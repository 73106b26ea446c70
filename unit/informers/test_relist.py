"""diff_relist: old cache + fresh LIST → the events a handler must see."""

from __future__ import annotations

from typing import Any

from bootc_operator.informers import DeletedFinalStateUnknown, DeltaType, diff_relist

Obj = dict[str, Any]


def o(name: str, rv: str, ns: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, **extra}


def test_empty_cache_everything_added_in_list_order() -> None:
    deltas = diff_relist({}, [o("b", "1"), o("a", "2")])
    assert [(d.type, d.key) for d in deltas] == [(DeltaType.ADDED, "b"), (DeltaType.ADDED, "a")]


def test_added_updated_unchanged_deleted() -> None:
    cached = {"same": o("same", "1"), "changed": o("changed", "1"), "gone": o("gone", "3")}
    listed = [o("same", "1"), o("changed", "7"), o("new", "8")]
    deltas = diff_relist(cached, listed)
    assert [(d.type, d.key) for d in deltas] == [
        (DeltaType.UPDATED, "changed"),
        (DeltaType.ADDED, "new"),
        (DeltaType.DELETED, "gone"),
    ]
    updated, added, deleted = deltas
    assert updated.old is cached["changed"] and updated.obj is listed[1]
    assert added.old is None and added.obj is listed[2]
    assert deleted.obj == DeletedFinalStateUnknown("gone", cached["gone"])
    assert isinstance(deleted.obj, DeletedFinalStateUnknown)
    assert deleted.obj.obj is cached["gone"], "the tombstone carries the last known state"


def test_namespaced_keys() -> None:
    cached = {"ns1/x": o("x", "1", "ns1")}
    deltas = diff_relist(cached, [o("x", "1", "ns2")])
    assert [(d.type, d.key) for d in deltas] == [
        (DeltaType.ADDED, "ns2/x"),
        (DeltaType.DELETED, "ns1/x"),
    ]


def test_without_resource_versions_content_decides() -> None:
    cached = {"a": {"metadata": {"name": "a"}, "v": 1}, "b": {"metadata": {"name": "b"}, "v": 1}}
    listed = [{"metadata": {"name": "a"}, "v": 1}, {"metadata": {"name": "b"}, "v": 2}]
    assert [(d.type, d.key) for d in diff_relist(cached, listed)] == [(DeltaType.UPDATED, "b")]


def test_nothing_changed_means_no_events() -> None:
    cached = {f"n{i}": o(f"n{i}", str(i)) for i in range(100)}
    assert diff_relist(cached, [o(f"n{i}", str(i)) for i in range(100)]) == []


def test_everything_vanished() -> None:
    cached = {"a": o("a", "1"), "b": o("b", "2")}
    deltas = diff_relist(cached, [])
    assert [(d.type, d.key) for d in deltas] == [(DeltaType.DELETED, "a"), (DeltaType.DELETED, "b")]
