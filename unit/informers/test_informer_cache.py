"""Informer without a server: what LISTs and watch events do to the store and handlers.

The reflector feeds ``Informer.replace(items)`` and ``Informer.apply(type, obj)``;
these tests call them directly. The network side is covered by e2e/test_informer.py.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from bootc_operator.informers import (
    DeletedFinalStateUnknown,
    EventHandler,
    Informer,
    by_label,
    generation_changed,
    key_of,
    resource_version_changed,
    unwrap,
)
from bootc_operator.kube import NODES, PODS

NO_API = cast(ApiClient, None)  # these tests never reach the network

Obj = dict[str, Any]


def node(name: str, rv: str, labels: dict[str, str] | None = None, generation: int = 1) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": rv, "generation": generation}
    if labels is not None:
        meta["labels"] = labels
    meta["managedFields"] = [{"manager": "kubectl"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.tombstones: list[DeletedFinalStateUnknown] = []

    def handler(self, **kw: Any) -> EventHandler:
        return EventHandler(on_add=self.add, on_update=self.update, on_delete=self.delete, **kw)

    def add(self, obj: Obj) -> None:
        self.events.append(("add", key_of(obj)))

    def update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", key_of(new)))

    def delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones.append(obj)
        self.events.append(("delete", key_of(obj)))


@pytest.fixture
def informer() -> Informer:
    return Informer(NO_API, NODES, registry=CollectorRegistry())


def test_first_list_adds_everything_and_marks_synced(informer: Informer) -> None:
    rec = Recorder()
    informer.add_event_handler(rec.handler())
    synced_before = informer.has_synced
    informer.replace([node("a", "1"), node("b", "2")])
    assert (synced_before, informer.has_synced) == (False, True)
    assert rec.events == [("add", "a"), ("add", "b")]
    assert sorted(informer.keys()) == ["a", "b"]


def test_watched_objects_pass_the_transform(informer: Informer) -> None:
    informer.replace([])
    informer.reflector.handle_event({"type": "ADDED", "object": node("b", "2")})
    cached = informer.get("b")
    assert cached is not None and "managedFields" not in cached["metadata"]
    assert informer.resource_version == "2"


def test_custom_transform() -> None:
    def mark(obj: Obj) -> Obj:
        obj["marked"] = True
        return obj

    inf = Informer(NO_API, NODES, transform=mark, registry=CollectorRegistry())
    inf.reflector.handle_event({"type": "ADDED", "object": node("a", "1")})
    cached = inf.get("a")
    assert cached is not None and cached["marked"] and "managedFields" in cached["metadata"]


def test_watch_events(informer: Informer) -> None:
    rec = Recorder()
    informer.add_event_handler(rec.handler())
    informer.replace([node("a", "1")])
    informer.apply("ADDED", node("b", "2"))
    informer.apply("MODIFIED", node("b", "3", labels={"x": "y"}))
    informer.apply("ADDED", node("a", "4"))  # replayed add of a known key → update
    informer.apply("DELETED", node("b", "5"))
    informer.apply("DELETED", node("never-seen", "6"))  # dropped: no delete without add
    informer.apply("MODIFIED", node("c", "7"))  # unknown key → add
    assert rec.events == [
        ("add", "a"),
        ("add", "b"),
        ("update", "b"),
        ("update", "a"),
        ("delete", "b"),
        ("add", "c"),
    ]
    assert sorted(informer.keys()) == ["a", "c"]
    a = informer.get("a")
    assert a is not None and a["metadata"]["resourceVersion"] == "4"


def test_relist_emits_only_differences_with_tombstones(informer: Informer) -> None:
    rec = Recorder()
    informer.add_event_handler(rec.handler())
    informer.replace([node("keep", "1"), node("change", "1"), node("vanish", "1")])
    rec.events.clear()
    informer.replace([node("keep", "1"), node("change", "9"), node("appear", "9")])
    assert rec.events == [("update", "change"), ("add", "appear"), ("delete", "vanish")]
    [tomb] = rec.tombstones
    assert tomb.key == "vanish" and tomb.obj["metadata"]["resourceVersion"] == "1"
    assert sorted(informer.keys()) == ["appear", "change", "keep"]


def test_handler_added_after_sync_gets_synthetic_adds(informer: Informer) -> None:
    informer.replace([node("a", "1"), node("b", "1")])
    rec = Recorder()
    informer.add_event_handler(rec.handler())
    assert sorted(rec.events) == [("add", "a"), ("add", "b")]
    late_filtered = Recorder()
    informer.add_event_handler(
        late_filtered.handler(predicate=lambda o: o["metadata"]["name"] == "b")
    )
    assert late_filtered.events == [("add", "b")]


def test_predicate_turns_updates_into_adds_and_deletes(informer: Informer) -> None:
    managed = Recorder()
    informer.add_event_handler(
        managed.handler(predicate=lambda o: "managed" in o["metadata"].get("labels", {}))
    )
    informer.replace([node("n", "1", labels={})])
    informer.apply("MODIFIED", node("n", "2", labels={"managed": ""}))
    informer.apply("MODIFIED", node("n", "3", labels={"managed": "", "x": "1"}))
    informer.apply("MODIFIED", node("n", "4", labels={}))
    informer.apply("MODIFIED", node("n", "5", labels={"y": "1"}))
    assert managed.events == [("add", "n"), ("update", "n"), ("delete", "n")]


def test_update_predicate_filters_updates_only(informer: Informer) -> None:
    spec = Recorder()
    informer.add_event_handler(spec.handler(update_predicate=generation_changed))
    informer.replace([node("n", "1", generation=1)])
    informer.apply("MODIFIED", node("n", "2", generation=1))  # status-only
    informer.apply("MODIFIED", node("n", "3", generation=2))
    informer.apply("DELETED", node("n", "4", generation=2))
    assert spec.events == [("add", "n"), ("update", "n"), ("delete", "n")]


def test_predicate_sees_the_state_inside_a_tombstone(informer: Informer) -> None:
    seen: list[Obj] = []
    informer.add_event_handler(
        EventHandler(
            on_delete=lambda o: seen.append(unwrap(o)),
            predicate=lambda o: o["metadata"]["name"] == "keep-me",
        )
    )
    informer.replace([node("keep-me", "1"), node("other", "1")])
    informer.replace([])
    assert [o["metadata"]["name"] for o in seen] == ["keep-me"]


def test_failing_handler_is_logged_and_others_still_run(
    informer: Informer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(obj: Obj) -> None:
        raise RuntimeError("handler bug")

    rec = Recorder()
    informer.add_event_handler(EventHandler(on_add=broken))
    informer.add_event_handler(rec.handler())
    with caplog.at_level(logging.ERROR):
        informer.replace([node("a", "1")])
    assert rec.events == [("add", "a")]
    assert any("event handler failed" in r.getMessage() for r in caplog.records)


def test_removed_handler_hears_nothing(informer: Informer) -> None:
    rec = Recorder()
    h = informer.add_event_handler(rec.handler())
    informer.remove_event_handler(h)
    informer.remove_event_handler(h)
    informer.replace([node("a", "1")])
    assert rec.events == []


def test_indexers_and_namespaced_keys() -> None:
    inf = Informer(NO_API, PODS, indexers={"app": by_label("app")}, registry=CollectorRegistry())
    pod: Obj = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}}}
    inf.replace([pod])
    assert inf.get("ns/p") is pod
    assert inf.by_index("app", "x") == [pod]


def test_resync_redelivers_cached_objects_as_updates(informer: Informer) -> None:
    rec = Recorder()
    informer.add_event_handler(rec.handler())
    informer.resync()  # not synced yet: nothing to resync
    informer.replace([node("a", "1"), node("b", "1")])
    rec.events.clear()
    informer.resync()
    assert sorted(rec.events) == [("update", "a"), ("update", "b")]
    filtered = Recorder()
    informer.add_event_handler(filtered.handler(update_predicate=resource_version_changed))
    filtered.events.clear()
    informer.resync()
    assert filtered.events == [], "resource_version_changed drops resyncs"


async def test_wait_for_sync(informer: Informer) -> None:
    informer.replace([])
    await informer.wait_for_sync()
    assert informer.has_synced
