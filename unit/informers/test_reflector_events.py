"""Reflector.handle_event: resourceVersion bookkeeping and ERROR events (no server)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from bootc_operator.informers import informer_metrics
from bootc_operator.informers.reflector import Expired, Reflector, WatchFailed
from bootc_operator.kube import BOOTC_NODE_POOLS

NO_API = cast(ApiClient, None)  # these tests never reach the network

Obj = dict[str, Any]


class Sink:
    def __init__(self) -> None:
        self.applied: list[tuple[str, str]] = []

    def replace(self, items: list[Obj]) -> None:
        raise AssertionError("not expected")

    def apply(self, event_type: str, obj: Obj) -> None:
        self.applied.append((event_type, obj["metadata"]["name"]))


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def reflector(sink: Sink, registry: CollectorRegistry) -> Reflector:
    return Reflector(NO_API, BOOTC_NODE_POOLS, sink, informer_metrics(registry))


def ev(etype: str, name: str, rv: str) -> Obj:
    return {"type": etype, "object": {"metadata": {"name": name, "resourceVersion": rv}}}


def test_events_reach_the_sink_and_advance_the_resource_version(
    reflector: Reflector, sink: Sink, registry: CollectorRegistry
) -> None:
    reflector.handle_event(ev("ADDED", "p", "10"))
    reflector.handle_event(ev("MODIFIED", "p", "11"))
    reflector.handle_event(ev("DELETED", "p", "12"))
    assert sink.applied == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
    assert reflector.resource_version == "12"
    assert reflector.stats.events["MODIFIED"] == 1
    labels = {"resource": "bootcnodepools.node.bootc.dev", "type": "ADDED"}
    assert registry.get_sample_value("informer_watch_events_total", labels) == 1


def test_bookmark_only_advances_the_resource_version(reflector: Reflector, sink: Sink) -> None:
    reflector.handle_event({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99"}}})
    assert sink.applied == []
    assert reflector.resource_version == "99"
    assert reflector.stats.events["BOOKMARK"] == 1


def test_error_410_means_expired(reflector: Reflector) -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    with pytest.raises(Expired, match="too old"):
        reflector.handle_event({"type": "ERROR", "object": status})


def test_other_errors_fail_the_watch(reflector: Reflector) -> None:
    status = {"kind": "Status", "code": 500, "reason": "InternalError", "message": "oops"}
    with pytest.raises(WatchFailed, match="oops"):
        reflector.handle_event({"type": "ERROR", "object": status})


@pytest.mark.parametrize("event", [{}, {"type": "ADDED"}, {"object": {}}, [], "x"])
def test_malformed_events_fail_the_watch(reflector: Reflector, event: Any) -> None:
    with pytest.raises(WatchFailed, match="malformed"):
        reflector.handle_event(event)
