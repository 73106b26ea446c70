"""Store and indexers: keys, get/list, named indexes kept in step with every write."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.informers import (
    Store,
    by_controller_uid,
    by_field,
    by_label,
    by_namespace,
    by_owner_uid,
    object_key,
    split_key,
)

Obj = dict[str, Any]


def obj(
    name: str, ns: str | None = None, labels: dict[str, str] | None = None, **extra: Any
) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": "1"}
    if ns:
        meta["namespace"] = ns
    if labels:
        meta["labels"] = labels
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, **extra}


def owner(uid: str, controller: bool = False) -> Obj:
    return {"uid": uid, "kind": "BootcNodePool", "name": uid, "controller": controller}


def test_keys() -> None:
    assert object_key(obj("n1")) == "n1"
    assert object_key(obj("p", "ns")) == "ns/p"
    assert split_key("ns/p") == ("ns", "p")
    assert split_key("n1") == (None, "n1")


def test_upsert_get_list_delete() -> None:
    s = Store()
    assert s.upsert(obj("a")) is None
    s.upsert(obj("b", "ns"))
    first = s.get("a")
    assert first is not None
    newer = obj("a", labels={"x": "1"})
    assert s.upsert(newer) is first
    assert s.get("a") is newer
    assert sorted(s.keys()) == ["a", "ns/b"]
    assert len(s) == 2 and "ns/b" in s and "b" not in s
    assert len(s.list()) == 2
    assert s.delete("a") is newer
    assert s.delete("a") is None
    assert s.keys() == ["ns/b"]


def test_label_index_follows_changes() -> None:
    s = Store(indexers={"pool": by_label("bootc.dev/pool")})
    s.upsert(obj("n1", labels={"bootc.dev/pool": "p1"}))
    s.upsert(obj("n2", labels={"bootc.dev/pool": "p1"}))
    s.upsert(obj("n3"))
    assert sorted(o["metadata"]["name"] for o in s.by_index("pool", "p1")) == ["n1", "n2"]
    s.upsert(obj("n1", labels={"bootc.dev/pool": "p2"}))
    assert s.index_keys("pool", "p1") == ["n2"]
    assert s.index_keys("pool", "p2") == ["n1"]
    s.delete("n2")
    assert s.by_index("pool", "p1") == []
    assert s.index_values("pool") == ["p2"], "empty index buckets are dropped"
    s.upsert(obj("n1"))
    assert s.index_values("pool") == []


def test_multi_valued_owner_index() -> None:
    s = Store(indexers={"owner": by_owner_uid, "controller": by_controller_uid})
    s.upsert(obj("x", meta={"ownerReferences": [owner("u1", controller=True), owner("u2")]}))
    s.upsert(obj("y", meta={"ownerReferences": [owner("u2")]}))
    assert s.index_keys("owner", "u1") == ["x"]
    assert sorted(s.index_keys("owner", "u2")) == ["x", "y"]
    assert s.index_keys("controller", "u1") == ["x"]
    assert s.index_keys("controller", "u2") == []


def test_field_and_namespace_indexes() -> None:
    s = Store(indexers={"node": by_field("spec", "nodeName"), "ns": by_namespace})
    s.upsert(obj("p1", "a", spec={"nodeName": "n1"}))
    s.upsert(obj("p2", "b", spec={"nodeName": "n1"}))
    s.upsert(obj("p3", "b", spec={}))
    s.upsert(obj("p4", "b", spec="not a dict"))
    assert sorted(s.index_keys("node", "n1")) == ["a/p1", "b/p2"]
    assert sorted(s.index_keys("ns", "b")) == ["b/p2", "b/p3", "b/p4"]


def test_replace_rebuilds_items_and_indexes() -> None:
    s = Store(indexers={"pool": by_label("pool")})
    s.upsert(obj("old", labels={"pool": "p"}))
    s.replace([obj("new1", labels={"pool": "p"}), obj("new2", labels={"pool": "q"})])
    assert sorted(s.keys()) == ["new1", "new2"]
    assert s.index_keys("pool", "p") == ["new1"]
    assert s.index_keys("pool", "q") == ["new2"]


def test_indexers_added_later_index_existing_objects() -> None:
    s = Store()
    s.upsert(obj("n1", labels={"pool": "p"}))
    s.add_indexers({"pool": by_label("pool")})
    assert s.index_keys("pool", "p") == ["n1"]
    s.add_indexers({"pool": by_label("pool")})  # same function (cached): fine
    with pytest.raises(ValueError, match="already exists"):
        s.add_indexers({"pool": by_label("other")})
    assert s.index_names() == ["pool"]


def test_unknown_index_is_an_error() -> None:
    with pytest.raises(KeyError, match="nope"):
        Store().by_index("nope", "x")


def test_snapshot_is_a_copy() -> None:
    s = Store()
    s.upsert(obj("a"))
    snap = s.snapshot()
    s.delete("a")
    assert list(snap) == ["a"]
