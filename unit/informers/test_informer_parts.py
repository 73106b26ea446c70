"""Small informer parts: backoff, transform, resource paths, watch line splitting, factory."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from bootc_operator.informers import Backoff, SharedInformerFactory, by_label, strip_bulk
from bootc_operator.informers.transform import (
    LAST_APPLIED_ANNOTATION,
    chain,
    drop_paths,
    intern_strings,
)
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, ApiError, Resource
from bootc_operator.kube.rest import iter_json_lines
from bootc_operator.workqueue import FakeClock

NO_API = cast(ApiClient, None)  # these tests never reach the network


def test_backoff_doubles_to_cap_with_jitter_and_resets() -> None:
    b = Backoff(initial=1.0, cap=10.0, rand=lambda: 0.0)
    assert [b.next() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert b.failures == 6
    b.reset()
    assert b.next() == 1.0
    jittered = Backoff(initial=1.0, cap=10.0, jitter=1.0, rand=lambda: 0.5)
    assert [jittered.next() for _ in range(4)] == [1.5, 3.0, 6.0, 10.0]


def test_backoff_validates() -> None:
    with pytest.raises(ValueError):
        Backoff(initial=0)
    with pytest.raises(ValueError):
        Backoff(initial=5, cap=1)


def test_strip_bulk() -> None:
    obj: dict[str, Any] = {
        "metadata": {
            "name": "n",
            "managedFields": [{"manager": "x"}],
            "annotations": {LAST_APPLIED_ANNOTATION: "{...}", "keep": "me"},
        },
        "spec": {},
    }
    assert strip_bulk(obj) is obj
    assert obj["metadata"] == {"name": "n", "annotations": {"keep": "me"}}
    only: dict[str, Any] = {"metadata": {"annotations": {LAST_APPLIED_ANNOTATION: "{}"}}}
    assert strip_bulk(only) == {"metadata": {}}
    assert strip_bulk({"kind": "Weird"}) == {"kind": "Weird"}


def test_chain() -> None:
    def mark(obj: dict[str, Any]) -> dict[str, Any]:
        obj["marked"] = True
        return obj

    out = chain(strip_bulk, mark)({"metadata": {"managedFields": []}})
    assert out == {"metadata": {}, "marked": True}


def test_drop_paths() -> None:
    drop = drop_paths(("status", "images"), ("spec", "deep", "x"), ("top",))
    obj: dict[str, Any] = {"top": 1, "status": {"images": [1], "keep": 2}, "spec": {"deep": 3}}
    assert drop(obj) == {"status": {"keep": 2}, "spec": {"deep": 3}}
    assert drop({"status": "odd"}) == {"status": "odd"}
    with pytest.raises(ValueError):
        drop_paths(())


def test_intern_strings_shares_keys_and_short_values() -> None:
    a = json.loads('{"metadata": {"labels": {"zone": "a"}}, "l": ["True", 1, {"k": null}]}')
    b = json.loads('{"metadata": {"labels": {"zone": "a"}}, "l": ["True", 1, {"k": null}]}')
    ia, ib = intern_strings(a), intern_strings(b)
    assert ia == a == ib
    [ka] = ia["metadata"]["labels"].keys()
    [kb] = ib["metadata"]["labels"].keys()
    assert ka is kb and ia["l"][0] is ib["l"][0]
    assert ia["metadata"]["labels"]["zone"] is ib["metadata"]["labels"]["zone"]


def test_resource_paths() -> None:
    assert NODES.path() == "/api/v1/nodes"
    assert NODES.path(name="n1") == "/api/v1/nodes/n1"
    assert NODES.path(name="n1", subresource="status") == "/api/v1/nodes/n1/status"
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert PODS.path("ns", "p", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    assert BOOTC_NODE_POOLS.path() == "/apis/node.bootc.dev/v1alpha1/bootcnodepools"
    assert BOOTC_NODES.path(name="n") == "/apis/node.bootc.dev/v1alpha1/bootcnodes/n"
    assert BOOTC_NODES.api_version == "node.bootc.dev/v1alpha1" and NODES.api_version == "v1"
    assert str(NODES) == "nodes" and str(BOOTC_NODES) == "bootcnodes.node.bootc.dev"
    with pytest.raises(ValueError, match="namespace"):
        PODS.path(name="p")
    with pytest.raises(ValueError, match="subresource"):
        NODES.path(subresource="status")
    odd = Resource("", "v1", "nodes", namespaced=False)
    assert odd.path(name="a/b") == "/api/v1/nodes/a%2Fb"


def test_api_error_from_status_body() -> None:
    body = json.dumps({"kind": "Status", "code": 410, "reason": "Expired", "message": "old"})
    err = ApiError.from_body(410, body.encode())
    assert err.gone and err.reason == "Expired" and err.message == "old"
    assert not ApiError.from_body(404, b"<html>").gone
    assert ApiError.from_body(404, b"not json").not_found


class _FakeContent:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


class _FakeResponse:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _FakeContent(chunks)


async def test_json_lines_split_anywhere_and_of_any_length() -> None:
    docs = [
        {"type": "ADDED", "n": i, "blob": "x" * (i * 3_000_000 if i == 2 else 10)} for i in range(4)
    ]
    stream = b"".join(json.dumps(d).encode() + b"\n" for d in docs)
    # cut into awkward pieces: mid-document, exactly at newlines, single bytes
    cuts = [0, 5, 6, 70, len(stream) // 2, len(stream) - 3, len(stream) - 1, len(stream)]
    chunks = [stream[a:b] for a, b in itertools.pairwise(cuts)] + [b"\n"]
    resp = cast(aiohttp.ClientResponse, _FakeResponse(chunks))
    assert [d async for d in iter_json_lines(resp)] == docs


async def test_json_lines_without_final_newline() -> None:
    resp = cast(aiohttp.ClientResponse, _FakeResponse([b'{"a": 1}\n{"b"', b": 2}"]))
    assert [d async for d in iter_json_lines(resp)] == [{"a": 1}, {"b": 2}]


def test_factory_shares_one_informer_per_resource_and_selectors() -> None:
    f = SharedInformerFactory(NO_API, registry=CollectorRegistry())
    a = f.informer(NODES)
    assert f.informer(NODES) is a
    assert f.informer(NODES, label_selector="x=y") is not a
    assert f.informer(NODES, field_selector="metadata.name=n") is not a
    assert f.informer(PODS, namespace="ns") is not f.informer(PODS)
    assert len(f.informers) == 5
    f.informer(NODES, indexers={"pool": by_label("pool")})
    f.informer(NODES, indexers={"zone": by_label("zone")})
    assert a.store.index_names() == ["pool", "zone"]
    assert not f.has_synced


def test_fake_clock_fires_due_timers_in_order() -> None:
    clock = FakeClock(start=0.0)
    fired: list[tuple[str, float]] = []
    clock.call_at(2.0, lambda: fired.append(("b", clock.now())))
    clock.call_at(1.0, lambda: fired.append(("a", clock.now())))
    cancelled = clock.call_at(1.5, lambda: fired.append(("x", clock.now())))
    cancelled.cancel()
    clock.advance(1.9)
    assert fired == [("a", 1.0)]
    assert clock.now() == 1.9
    clock.advance(0.1)
    assert fired == [("a", 1.0), ("b", 2.0)]
    with pytest.raises(ValueError):
        clock.advance(-1)
