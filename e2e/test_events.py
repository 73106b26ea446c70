"""The Event recorder against the real kube-apiserver: batching, series, overflow, flush.

Events are events.k8s.io/v1 objects in ``default`` (cluster-scoped subjects);
each test uses its own made-up pool name so it reads only its own Events.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from bootc_operator.api import constants as c
from bootc_operator.kube import EVENTS, list_objects
from bootc_operator.runtime.events import EventRecorder, ObjectRef
from e2e.helpers import unique_name, wait_for

TIMEOUT = 30.0


def pool(name: str) -> ObjectRef:
    return ObjectRef(c.API_VERSION, c.POOL_KIND, name, uid=f"uid-{name}")


async def events_of(api: ApiClient, name: str) -> list[dict[str, Any]]:
    items, _ = await list_objects(api, EVENTS, "default", field_selector=f"regarding.name={name}")
    return sorted(items, key=lambda e: (e["reason"], e["note"]))


async def test_batched_emits_become_one_event_per_reason(api: ApiClient) -> None:
    name = unique_name("ev-batch")
    rec = EventRecorder(api, instance="e2e", batch_window=0.5)
    rec.start()
    try:
        for node in ("n-1", "n-2", "n-3", "n-2"):  # a repeat within the window counts once
            rec.emit_batched(
                pool(name),
                "Normal",
                "SlotTaken",
                "Rollout",
                subject=node,
                note=f"{node} took a reboot slot",
                summary="{n} nodes took a reboot slot",
            )
        rec.emit_batched(
            pool(name),
            "Warning",
            "DrainTimeout",
            "Rollout",
            subject="n-9",
            note="n-9: drain timed out after 60s",
            summary="{n} nodes timed out",
        )

        async def two_events() -> bool:
            return len(await events_of(api, name)) == 2

        await wait_for(two_events, TIMEOUT, "one Event per (type, reason)")
        timeout, taken = await events_of(api, name)
        assert (taken["type"], taken["reason"]) == ("Normal", "SlotTaken")
        assert taken["note"] == "3 nodes took a reboot slot: n-1, n-2, n-3"
        assert taken["regarding"] == {
            "apiVersion": c.API_VERSION,
            "kind": c.POOL_KIND,
            "name": name,
            "uid": f"uid-{name}",
        }
        assert taken["reportingController"] == "bootc.dev/bootc-operator"
        assert taken["reportingInstance"] == "e2e"
        assert (timeout["type"], timeout["note"]) == ("Warning", "n-9: drain timed out after 60s")

        # a later emit starts a new batch (and a new Event)
        rec.emit_batched(
            pool(name),
            "Normal",
            "SlotTaken",
            "Rollout",
            subject="n-4",
            note="n-4 took a reboot slot",
            summary="{n} nodes took a reboot slot",
        )

        async def three_events() -> bool:
            return len(await events_of(api, name)) == 3

        await wait_for(three_events, TIMEOUT, "the next batch's Event")
        notes = {e["note"] for e in await events_of(api, name)}
        assert "n-4 took a reboot slot" in notes
    finally:
        await rec.stop()


async def test_stop_flushes_open_batches_at_once(api: ApiClient) -> None:
    name = unique_name("ev-flush")
    rec = EventRecorder(api, instance="e2e", batch_window=3600.0)
    rec.start()
    for node in ("a", "b"):
        rec.emit_batched(
            pool(name),
            "Normal",
            "NodeJoined",
            "Membership",
            subject=node,
            note=f"{node} joined",
            summary="{n} nodes joined the pool",
        )
    await rec.stop()  # long before the hour is up
    events = await events_of(api, name)
    assert [e["note"] for e in events] == ["2 nodes joined the pool: a, b"]


async def test_repeats_update_the_series_of_one_event(api: ApiClient) -> None:
    """Also: with several senders, never two Events of one object in flight (else three
    identical Events queued together would be created three times)."""
    name = unique_name("ev-series")
    rec = EventRecorder(api, instance="e2e", senders=4)
    rec.start()
    try:
        for _ in range(3):
            rec.emit(pool(name), "Warning", "Halted", "Rollout", "2 nodes did not come back")

        async def counted_three() -> bool:
            events = await events_of(api, name)
            return len(events) == 1 and (events[0].get("series") or {}).get("count") == 3

        await wait_for(counted_three, TIMEOUT, "one Event with series.count 3")
    finally:
        await rec.stop()


async def test_a_full_queue_drops_and_counts_and_warnings_go_first(api: ApiClient) -> None:
    name = unique_name("ev-drop")
    rec = EventRecorder(api, instance="e2e", queue_size=2)  # not started: nothing drains it

    def dropped(type_: str) -> float:
        return (
            REGISTRY.get_sample_value("bootc_operator_events_dropped_total", {"type": type_}) or 0.0
        )

    before = dropped("Normal"), dropped("Warning")
    for i in range(5):
        rec.emit(pool(name), "Normal", "Test", "Test", f"event {i}")
    # a full Normal queue does not stop Warnings
    rec.emit(pool(name), "Warning", "Test", "Test", "warning 0")
    assert (dropped("Normal") - before[0], dropped("Warning") - before[1]) == (3, 0)
    rec.start()
    await rec.stop()
    events = await events_of(api, name)
    assert sorted(e["note"] for e in events) == ["event 0", "event 1", "warning 0"]
    # Sent first, though emitted last (eventTime says when it was emitted). One etcd
    # hands out increasing resourceVersions, so they give the order of creation.
    first = min(events, key=lambda e: int(e["metadata"]["resourceVersion"]))
    assert first["note"] == "warning 0", "the queued Warning was sent before the Normals"
    last = max(events, key=lambda e: e["eventTime"])
    assert last["note"] == "warning 0", "each Event is stamped when it was emitted"
