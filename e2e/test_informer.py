"""The informer library against a real kube-apiserver + etcd.

Covers: create/update/delete of a core kind (Node), a custom kind
(BootcNodePool) and a namespaced kind (Secret); label and field selectors; no
LIST while the watch is healthy (the informer's counters and the apiserver's
own ``apiserver_request_total``), with the initial state from a LIST or from a
streaming list (``sendInitialEvents``, which makes no LIST at all), and the
fallback to LIST when the server has the ``WatchList`` gate off; a real 410
Gone (the informer is cut off by a TCP proxy while objects change, etcd is
compacted and kube-apiserver restarted so its watch cache forgets the
informer's resourceVersion), by either means; recovery after kube-apiserver is
stopped and started again on the same etcd. After each
disruption the cache must equal a fresh LIST and every change must have
reached the handlers.

The disruptive tests run last: they restart the shared kube-apiserver.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from bootc_operator.informers import (
    Backoff,
    DeletedFinalStateUnknown,
    EventHandler,
    Informer,
    SharedInformerFactory,
    generation_changed,
    key_of,
    strip_bulk,
)
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    SECRETS,
    Resource,
    create_object,
    delete_object,
    list_objects,
    load_api_client,
    patch_object,
    request_bytes,
)
from bootc_operator.kube.lite import load_lite_client
from bootc_operator.kube.rest import Api
from e2e.helpers import unique_name, wait_for
from e2e.tcpproxy import TcpProxy
from hack.testenv import ControlPlane

Obj = dict[str, Any]

LABEL = "e2e.bootc.dev/informer"
TIMEOUT = 30.0
RESTART_TIMEOUT = 90.0
FAST_BACKOFF = Backoff(initial=0.1, cap=1.0)


# ---------------------------------------------------------------- helpers


class Recorder:
    """Everything an informer told its handler, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Obj | DeletedFinalStateUnknown]] = []

    def handler(self, **kw: Any) -> EventHandler:
        return EventHandler(
            on_add=lambda o: self.events.append(("add", key_of(o), o)),
            on_update=lambda old, new: self.events.append(("update", key_of(new), new)),
            on_delete=lambda o: self.events.append(("delete", key_of(o), o)),
            **kw,
        )

    def kinds(self, key: str) -> list[str]:
        return [kind for kind, k, _ in self.events if k == key]

    def last(self, key: str) -> tuple[str, Obj | DeletedFinalStateUnknown]:
        [(kind, obj)] = [(kind, o) for kind, k, o in self.events if k == key][-1:]
        return kind, obj


def node_body(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": [{"key": "e2e.bootc.dev/no-kubelet", "effect": "NoSchedule"}]},
    }


def pool_body(name: str) -> Obj:
    return {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"pool": name}},
            "image": {"ref": "quay.io/example/os:latest"},
        },
    }


def bootc_node_body(name: str) -> Obj:
    return {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": name},
        "spec": {
            "desiredImage": "quay.io/example/os@sha256:" + "a" * 64,
            "desiredImageState": "Staged",
        },
    }


def rv(obj: Obj | None) -> str | None:
    return None if obj is None else obj["metadata"]["resourceVersion"]


async def fresh_list(
    api: ApiClient,
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str = "",
    field_selector: str = "",
) -> dict[str, Obj]:
    items, _ = await list_objects(
        api, resource, namespace, label_selector=label_selector, field_selector=field_selector
    )
    return {key_of(o): strip_bulk(o) for o in items}


async def cache_diff(api: ApiClient, inf: Informer) -> list[str]:
    """How the informer's cache differs from a fresh LIST (empty: it does not)."""
    listed = await fresh_list(
        api,
        inf.resource,
        namespace=inf.namespace,
        label_selector=inf.label_selector,
        field_selector=inf.field_selector,
    )
    cached = inf.store.snapshot()
    diff = [f"missing {k}" for k in listed.keys() - cached.keys()]
    diff += [f"extra {k}" for k in cached.keys() - listed.keys()]
    diff += [
        f"differs {k}: cached {cached[k]} listed {listed[k]}"
        for k in listed.keys() & cached.keys()
        if cached[k] != listed[k]
    ]
    return diff


async def cache_equals_list(api: ApiClient, inf: Informer) -> bool:
    return not await cache_diff(api, inf)


def matches_list(api: ApiClient, inf: Informer) -> Callable[[], bool | Awaitable[bool]]:
    """A ``wait_for`` predicate: the cache equals a fresh LIST."""
    return lambda: cache_equals_list(api, inf)


async def apiserver_lists(
    api: ApiClient, resource: str, group: str = "", verb: str = "LIST"
) -> float:
    """``apiserver_request_total{verb=..., resource=...}`` summed over the other labels."""
    text = (await request_bytes(api, "GET", "/metrics")).decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (
                s.name == "apiserver_request_total"
                and s.labels.get("verb") == verb
                and s.labels.get("resource") == resource
                and s.labels.get("group", "") == group
            ):
                total += s.value
    return total


@asynccontextmanager
async def informer_client(control_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    """The informer's own client, loaded by the library's ``load_api_client``."""
    client = await load_api_client(control_plane.kubeconfig)
    async with client:
        yield client


@asynccontextmanager
async def running(inf: Informer) -> AsyncIterator[Informer]:
    inf.start()
    try:
        await wait_for(lambda: inf.has_synced, TIMEOUT, f"{inf} to sync")
        yield inf
    finally:
        await inf.stop()


@asynccontextmanager
async def cleanup(api: ApiClient, resource: Resource) -> AsyncIterator[list[str]]:
    """Names appended to the yielded list are deleted afterwards (if still there)."""
    names: list[str] = []
    try:
        yield names
    finally:
        for name in names:
            try:
                await delete_object(api, resource, name)
            except Exception as e:
                if getattr(e, "status", None) != 404:
                    raise


def labelled(sel: str) -> dict[str, str]:
    return {LABEL: sel}


# ---------------------------------------------------------------- basic events


async def test_node_create_update_delete_through_the_shared_factory(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    name = unique_name("inf-node")
    async with informer_client(control_plane) as client, cleanup(api, NODES) as created:
        factory = SharedInformerFactory(client, registry=CollectorRegistry())
        nodes = factory.informer(NODES)
        assert factory.informer(NODES) is nodes
        rec = Recorder()
        nodes.add_event_handler(rec.handler())
        factory.start()
        try:
            await wait_for(lambda: factory.has_synced, TIMEOUT, "factory sync")

            made = await create_object(api, NODES, node_body(name, {"x": "1"}))
            created.append(name)
            await wait_for(lambda: rec.kinds(name) == ["add"], TIMEOUT, "add event")
            cached = nodes.get(name)
            assert cached is not None and cached["metadata"]["uid"] == made["metadata"]["uid"]
            assert "managedFields" not in cached["metadata"]

            patched = await patch_object(api, NODES, name, {"metadata": {"labels": {"x": "2"}}})
            await wait_for(lambda: rv(nodes.get(name)) == rv(patched), TIMEOUT, "update")
            assert rec.kinds(name) == ["add", "update"]
            kind, obj = rec.last(name)
            assert isinstance(obj, dict) and obj["metadata"]["labels"]["x"] == "2"

            # a late handler gets the current objects as adds
            late = Recorder()
            nodes.add_event_handler(late.handler())
            assert late.kinds(name) == ["add"]

            await delete_object(api, NODES, name)
            await wait_for(lambda: name not in nodes.store, TIMEOUT, "delete")
            kind, obj = rec.last(name)
            assert kind == "delete" and isinstance(obj, dict), "a watched delete has a final state"
            assert late.kinds(name) == ["add", "delete"]
            # the factory's default: the initial state came from one streaming list
            assert (nodes.stats.lists, nodes.stats.watch_lists, nodes.stats.relists) == (0, 1, 0)
        finally:
            await factory.stop()


async def test_custom_resource_create_update_status_delete(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    name = unique_name("inf-pool")
    async with informer_client(control_plane) as client, cleanup(api, BOOTC_NODE_POOLS) as made:
        pools = Informer(client, BOOTC_NODE_POOLS, registry=CollectorRegistry())
        rec, spec_only = Recorder(), Recorder()
        pools.add_event_handler(rec.handler())
        pools.add_event_handler(spec_only.handler(update_predicate=generation_changed))
        async with running(pools):
            await create_object(api, BOOTC_NODE_POOLS, pool_body(name))
            made.append(name)
            await wait_for(lambda: name in pools.store, TIMEOUT, "pool added")
            cached = pools.get(name)
            assert cached is not None and cached["spec"]["image"]["ref"].endswith(":latest")

            p = await patch_object(
                api, BOOTC_NODE_POOLS, name, {"spec": {"rollout": {"paused": True}}}
            )
            await wait_for(lambda: rv(pools.get(name)) == rv(p), TIMEOUT, "spec update")
            s = await patch_object(
                api, BOOTC_NODE_POOLS, name, {"status": {"nodeCount": 3}}, subresource="status"
            )
            await wait_for(lambda: rv(pools.get(name)) == rv(s), TIMEOUT, "status update")
            cached = pools.get(name)
            assert cached is not None and cached["status"]["nodeCount"] == 3
            assert cached["metadata"]["generation"] == 2

            await delete_object(api, BOOTC_NODE_POOLS, name)
            await wait_for(lambda: name not in pools.store, TIMEOUT, "pool deleted")
            assert rec.kinds(name) == ["add", "update", "update", "delete"]
            assert spec_only.kinds(name) == ["add", "update", "delete"], (
                "the status-only write is filtered by generation_changed"
            )


async def test_namespaced_secrets(control_plane: ControlPlane, api: ApiClient) -> None:
    name = unique_name("inf-secret")
    sel = unique_name("sec")
    async with informer_client(control_plane) as client:
        secrets = Informer(
            client,
            SECRETS,
            namespace="default",
            label_selector=f"{LABEL}={sel}",
            registry=CollectorRegistry(),
        )
        rec = Recorder()
        secrets.add_event_handler(rec.handler())
        async with running(secrets):
            body = {"metadata": {"name": name, "labels": labelled(sel)}, "stringData": {"k": "v"}}
            await create_object(api, SECRETS, body, "default")
            key = f"default/{name}"
            await wait_for(lambda: key in secrets.store, TIMEOUT, "secret added")
            await patch_object(api, SECRETS, name, {"stringData": {"k": "w"}}, "default")
            await wait_for(lambda: len(rec.kinds(key)) == 2, TIMEOUT, "secret updated")
            await delete_object(api, SECRETS, name, "default")
            await wait_for(lambda: key not in secrets.store, TIMEOUT, "secret deleted")
            assert rec.kinds(key) == ["add", "update", "delete"]


# ---------------------------------------------------------------- selectors


async def test_label_and_field_selectors_filter(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    sel = unique_name("sel")
    a, b, c = (unique_name(f"inf-sel-{x}") for x in "abc")
    label_sel = f"{LABEL}={sel}"
    async with (
        informer_client(control_plane) as client,
        cleanup(api, NODES) as nodes_made,
        cleanup(api, BOOTC_NODES) as bns_made,
    ):
        reg = CollectorRegistry()
        by_label_inf = Informer(client, NODES, label_selector=label_sel, registry=reg)
        by_name_inf = Informer(client, NODES, field_selector=f"metadata.name={b}", registry=reg)
        bn_by_name = Informer(
            client, BOOTC_NODES, field_selector=f"metadata.name={a}", registry=reg
        )
        rec = Recorder()
        by_label_inf.add_event_handler(rec.handler())
        async with running(by_label_inf), running(by_name_inf), running(bn_by_name):
            for name, labels in ((a, labelled(sel)), (b, {}), (c, labelled(sel))):
                await create_object(api, NODES, node_body(name, labels))
                nodes_made.append(name)
            for name in (a, b):
                await create_object(api, BOOTC_NODES, bootc_node_body(name))
                bns_made.append(name)

            await wait_for(
                lambda: sorted(by_label_inf.keys()) == sorted([a, c]), TIMEOUT, "label selector"
            )
            await wait_for(lambda: by_name_inf.keys() == [b], TIMEOUT, "field selector")
            await wait_for(lambda: bn_by_name.keys() == [a], TIMEOUT, "field selector on a CRD")

            # c leaves the selection, b joins it
            await patch_object(api, NODES, c, {"metadata": {"labels": {LABEL: None}}})
            await patch_object(api, NODES, b, {"metadata": {"labels": labelled(sel)}})
            await wait_for(
                lambda: sorted(by_label_inf.keys()) == sorted([a, b]), TIMEOUT, "re-selection"
            )
            assert rec.kinds(c) == ["add", "delete"]
            assert rec.kinds(b) == ["add"]
            assert by_name_inf.keys() == [b]
            assert not await cache_diff(api, by_label_inf)
            assert not await cache_diff(api, by_name_inf)
            assert not await cache_diff(api, bn_by_name)


async def test_an_informer_started_from_the_callers_list_goes_straight_to_the_watch(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    """``start(listed=...)`` (a drain's first pod LIST): synced from those items, no
    second read, and the watch from the list's resourceVersion misses nothing written
    after the list."""
    sel = unique_name("listed")
    a, b = unique_name("inf-listed-a"), unique_name("inf-listed-b")
    async with informer_client(control_plane) as client, cleanup(api, NODES) as made:
        await create_object(api, NODES, node_body(a, labelled(sel)))
        made.append(a)
        # listed as the informer would: same selector, same transform
        listed = await list_objects(
            client, NODES, label_selector=f"{LABEL}={sel}", transform=strip_bulk
        )
        await create_object(api, NODES, node_body(b, labelled(sel)))  # after the list
        made.append(b)
        inf = Informer(client, NODES, label_selector=f"{LABEL}={sel}", registry=CollectorRegistry())
        rec = Recorder()
        inf.add_event_handler(rec.handler())
        inf.start(listed=listed)
        try:
            await wait_for(lambda: inf.has_synced, TIMEOUT, "synced from the given list")
            await wait_for(lambda: sorted(inf.keys()) == sorted([a, b]), TIMEOUT, "b watched")
            assert rec.kinds(a) == ["add"] and rec.kinds(b) == ["add"]
            assert (inf.stats.lists, inf.stats.watch_lists, inf.stats.watches) == (0, 0, 1)
            assert not await cache_diff(api, inf)
        finally:
            await inf.stop()


# ---------------------------------------------------------------- no LIST while healthy


@pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watch-list"])
async def test_no_list_after_sync_while_the_watch_is_healthy(
    control_plane: ControlPlane, api: ApiClient, watch_list: bool
) -> None:
    sel = unique_name("nolist")
    names = [unique_name("inf-nolist") for _ in range(2)]
    async with informer_client(control_plane) as client, cleanup(api, NODES) as made:
        for name in names:
            await create_object(api, NODES, node_body(name, labelled(sel)))
            made.append(name)
        # timeoutSeconds=1: the server ends the watch every second, so the informer
        # re-watches many times during the test; none of that may cause a LIST.
        inf = Informer(
            client,
            NODES,
            label_selector=f"{LABEL}={sel}",
            min_watch_timeout=1.0,
            watch_list=watch_list,
            registry=CollectorRegistry(),
        )
        lists_before = await apiserver_lists(api, "nodes")
        async with running(inf):
            lists_synced = await apiserver_lists(api, "nodes")
            assert sorted(inf.keys()) == sorted(names)
            if watch_list:
                assert lists_synced == lists_before, "a streaming list makes no LIST request"
                assert (inf.stats.lists, inf.stats.watch_lists) == (0, 1)
            else:
                assert lists_synced - lists_before >= 1, "the initial LIST is counted by the server"
                assert (inf.stats.lists, inf.stats.watch_lists) == (1, 0)
            watches_synced = inf.stats.watches
            for gen in range(1, 6):
                start = inf.stats.watches
                await patch_object(
                    api, NODES, names[gen % 2], {"metadata": {"labels": {"gen": str(gen)}}}
                )

                def observed(g: str = str(gen)) -> bool:
                    return any(o["metadata"]["labels"].get("gen") == g for o in inf.list())

                def rewatched(s: int = start) -> bool:
                    return inf.stats.watches > s

                await wait_for(observed, TIMEOUT, f"generation {gen} observed")
                await wait_for(rewatched, TIMEOUT, "a re-watch")
            lists_end = await apiserver_lists(api, "nodes")
            assert inf.stats.watches - watches_synced >= 5
            assert (inf.stats.relists, inf.stats.errors) == (0, 0)
            assert inf.stats.lists + inf.stats.watch_lists == 1, "the initial state came once"
            assert lists_end == lists_synced, "no LIST of nodes reached the server after sync"
            assert not await cache_diff(api, inf)


async def test_a_streaming_list_broken_half_way_is_followed_by_a_list(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    """The connection dies inside the initial events: one LIST next, then watching as usual."""
    sel = unique_name("broken")
    names = [unique_name("inf-broken") for _ in range(20)]
    target = urlsplit(control_plane.server)
    assert target.hostname and target.port
    proxy = TcpProxy(target.hostname, target.port)
    await proxy.start()
    try:
        async with informer_client(control_plane) as client, cleanup(api, NODES) as made:
            client.configuration.host = f"https://127.0.0.1:{proxy.port}"
            for name in names:  # ~4 KiB each: the stream is far longer than the break point
                body = node_body(name, labelled(sel))
                body["metadata"]["annotations"] = {"e2e.bootc.dev/padding": "x" * 4096}
                await create_object(api, NODES, body)
                made.append(name)
            # TLS handshake and headers fit in 16 KiB; the initial events do not.
            proxy.break_once_after(16 * 1024)
            inf = Informer(
                client,
                NODES,
                label_selector=f"{LABEL}={sel}",
                backoff=FAST_BACKOFF,
                registry=CollectorRegistry(),
            )
            async with running(inf):
                assert proxy.broken_connections == 1
                assert sorted(inf.keys()) == sorted(names)
                assert (inf.stats.watch_lists, inf.stats.lists, inf.stats.errors) == (1, 1, 1)
                p = await patch_object(api, NODES, names[0], {"metadata": {"labels": {"v": "2"}}})
                await wait_for(lambda: rv(inf.get(names[0])) == rv(p), TIMEOUT, "watched update")
                assert inf.reflector.watch_list, "streaming stays the first choice for re-lists"
    finally:
        await proxy.close()


async def test_streaming_list_falls_back_to_list_when_the_server_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A kube-apiserver with the WatchList gate off refuses sendInitialEvents: LIST instead."""
    with ControlPlane(
        controller_manager=False, crd_dir=None, apiserver_args=["--feature-gates=WatchList=false"]
    ) as cp:
        async with informer_client(cp) as client:
            for i in range(3):
                await create_object(client, NODES, node_body(f"old-server-{i}", labelled("x")))
            inf = Informer(client, NODES, label_selector=f"{LABEL}=x", registry=CollectorRegistry())
            with caplog.at_level(logging.INFO, logger="bootc_operator.informers.informer"):
                async with running(inf):
                    assert sorted(inf.keys()) == [f"old-server-{i}" for i in range(3)]
                    assert (inf.stats.watch_lists, inf.stats.lists, inf.stats.errors) == (1, 1, 0)
                    await create_object(client, NODES, node_body("old-server-3", labelled("x")))
                    await wait_for(lambda: "old-server-3" in inf.store, TIMEOUT, "watched add")
                    assert inf.reflector.watch_list is False
            refusals = [r for r in caplog.records if "refused a streaming list" in r.getMessage()]
            assert len(refusals) == 1, "the fallback is logged once"
            assert "WatchList feature gate" in str(getattr(refusals[0], "error", ""))


# ---------------------------------------------------------------- disruptions


@asynccontextmanager
async def client_through(control_plane: ControlPlane, kind: str, port: int) -> AsyncIterator[Api]:
    """A client of ``kind`` ("kubernetes_asyncio", the controller's; "lite", the
    daemon's ``kube.lite``) that reaches the apiserver through 127.0.0.1:``port``."""
    if kind == "lite":
        async with load_lite_client(control_plane.kubeconfig) as lite:
            lite.host = f"https://127.0.0.1:{port}"
            yield lite
        return
    async with informer_client(control_plane) as client:
        client.configuration.host = f"https://127.0.0.1:{port}"
        yield client


@pytest.mark.parametrize("client_kind", ["kubernetes_asyncio", "lite"])
@pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watch-list"])
async def test_survives_a_real_410_gone(
    control_plane: ControlPlane, api: ApiClient, watch_list: bool, client_kind: str
) -> None:
    sel = unique_name("gone")
    keep, change, vanish, appear = (unique_name(f"inf-410-{x}") for x in ("k", "c", "v", "a"))
    target = urlsplit(control_plane.server)
    assert target.hostname and target.port
    proxy = TcpProxy(target.hostname, target.port)
    await proxy.start()
    reg = CollectorRegistry()
    try:
        async with (
            client_through(control_plane, client_kind, proxy.port) as client,
            cleanup(api, NODES) as made,
        ):
            for name in (keep, change, vanish):
                await create_object(api, NODES, node_body(name, labelled(sel)))
                made.append(name)
            inf = Informer(
                client,
                NODES,
                label_selector=f"{LABEL}={sel}",
                backoff=FAST_BACKOFF,
                watch_list=watch_list,
                registry=reg,
            )
            rec = Recorder()
            inf.add_event_handler(rec.handler())
            async with running(inf):
                await wait_for(lambda: len(inf.store) == 3, TIMEOUT, "initial objects")
                errors = inf.stats.errors
                proxy.cut()
                await wait_for(lambda: inf.stats.errors > errors, TIMEOUT, "informer cut off")
                stale_rv = inf.resource_version

                # The world changes while the informer cannot see it ...
                await patch_object(api, NODES, change, {"metadata": {"labels": {"v": "2"}}})
                await delete_object(api, NODES, vanish)
                await create_object(api, NODES, node_body(appear, labelled(sel)))
                made.append(appear)
                # ... and its resourceVersion is made unservable: compacted in etcd and
                # outside the restarted apiserver's fresh watch cache.
                control_plane.stop_apiserver()
                revision = control_plane.compact_etcd()
                control_plane.start_apiserver()
                assert revision > int(stale_rv)

                relists = inf.stats.relists
                proxy.heal()
                await wait_for(lambda: inf.stats.relists > relists, RESTART_TIMEOUT, "a 410 relist")
                await wait_for(
                    matches_list(api, inf),
                    TIMEOUT,
                    "cache equals a fresh LIST",
                    ignore=(aiohttp.ClientError,),
                )
                assert sorted(inf.keys()) == sorted([keep, change, appear])
                assert rec.kinds(keep) == ["add"], "unchanged objects cause no events"
                assert rec.kinds(change) == ["add", "update"]
                assert rec.kinds(appear) == ["add"]
                assert rec.kinds(vanish) == ["add", "delete"]
                _, tomb = rec.last(vanish)
                assert isinstance(tomb, DeletedFinalStateUnknown)
                assert tomb.key == vanish and tomb.obj["metadata"]["name"] == vanish
                # the initial state was fetched twice, by the same means both times
                fetched = (0, 2) if watch_list else (2, 0)
                assert (inf.stats.lists, inf.stats.watch_lists) == fetched
                assert reg.get_sample_value("informer_relists_total", {"resource": "nodes"}) == 1
                metric = "informer_watch_lists_total" if watch_list else "informer_lists_total"
                assert reg.get_sample_value(metric, {"resource": "nodes"}) == 2

                # and the watch works again afterwards
                p = await patch_object(api, NODES, keep, {"metadata": {"labels": {"v": "3"}}})
                await wait_for(lambda: rv(inf.get(keep)) == rv(p), TIMEOUT, "post-410 watch")
    finally:
        await proxy.close()


async def test_recovers_after_apiserver_restart(
    control_plane: ControlPlane, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    sel = unique_name("restart")
    before = [unique_name("inf-rs-old") for _ in range(3)]
    after = [unique_name("inf-rs-new") for _ in range(3)]
    label_sel = f"{LABEL}={sel}"
    caplog.set_level(logging.INFO, logger="bootc_operator.informers")
    async with informer_client(control_plane) as client, cleanup(api, NODES) as made:
        for name in before:
            await create_object(api, NODES, node_body(name, labelled(sel)))
            made.append(name)
        inf = Informer(
            client,
            NODES,
            label_selector=label_sel,
            backoff=FAST_BACKOFF,
            registry=CollectorRegistry(),
        )
        rec = Recorder()
        inf.add_event_handler(rec.handler())
        async with running(inf):
            await wait_for(lambda: len(inf.store) == 3, TIMEOUT, "initial objects")
            errors = inf.stats.errors
            control_plane.stop_apiserver()
            await wait_for(lambda: inf.stats.errors >= errors + 2, TIMEOUT, "retries while down")
            control_plane.start_apiserver()

            async def change_everything() -> None:
                for name in after:
                    await create_object(api, NODES, node_body(name, labelled(sel)))
                    made.append(name)
                await patch_object(api, NODES, before[0], {"metadata": {"labels": {"v": "2"}}})
                await patch_object(api, NODES, after[0], {"metadata": {"labels": {"v": "2"}}})
                await delete_object(api, NODES, before[1])
                await delete_object(api, NODES, after[1])

            await change_everything()
            await wait_for(matches_list(api, inf), RESTART_TIMEOUT, "cache equals a fresh LIST")
            assert sorted(inf.keys()) == sorted([before[0], before[2], after[0], after[2]])
            # no event lost: every change reached the handler
            assert rec.kinds(before[0]) == ["add", "update"]
            assert rec.kinds(before[1]) == ["add", "delete"]
            assert rec.kinds(before[2]) == ["add"]
            for name in after:
                kinds = rec.kinds(name)
                assert kinds[0] == "add", kinds
            assert rec.kinds(after[1])[-1] == "delete"
            cached = inf.get(after[0])
            assert cached is not None and cached["metadata"]["labels"]["v"] == "2"

            # each failure was logged once, with its context
            failures = [r for r in caplog.records if "failed; retrying" in r.getMessage()]
            assert len(failures) == inf.stats.errors - errors
            assert all(
                r.__dict__["resource"] == "nodes" and r.__dict__["labelSelector"] == label_sel
                for r in failures
            )
            assert any("healthy again" in r.getMessage() for r in caplog.records)
