"""The fault-injecting proxy (``hack.testenv.faultproxy``) against the real apiserver.

Callers keep their identity through it (client certificate → front-proxy headers;
bearer token → forwarded), each fault kind reaches the client as the error it is
meant to produce (and a reset after forwarding still applies the write), and a
partition cuts off one listener while another still gets through.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import (
    LEASES,
    ApiError,
    Resource,
    create_object,
    get_object,
    request_json,
)
from bootc_operator.kube.rest import iter_json_lines, open_stream
from e2e.helpers import ensure_namespace, unique_name
from hack.testenv.controlplane import ControlPlane
from hack.testenv.faultproxy import KINDS, FaultProxy, Profile, write_kubeconfig
from hack.testenv.kube import api_client

NAMESPACE = "faultproxy"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", namespaced=True, kind="ServiceAccount")


def only(kind: str) -> Profile:
    """Every request gets ``kind``."""
    return Profile(rate=1.0, weights=((kind, 1.0),))


@pytest.fixture
async def proxy(control_plane: ControlPlane) -> AsyncIterator[FaultProxy]:
    p = FaultProxy(control_plane.server, control_plane.pki, seed=1)
    await p.listen("a")
    await p.listen("b")
    try:
        yield p
    finally:
        await p.close()


async def client(proxy: FaultProxy, name: str, tmp_path: Path) -> ApiClient:
    return await api_client(proxy.kubeconfig(name, tmp_path / f"{name}.kubeconfig"))


async def whoami(api: ApiClient) -> dict[str, Any]:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    doc = await request_json(
        api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review
    )
    info: dict[str, Any] = doc["status"]["userInfo"]
    return info


def lease(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"holderIdentity": "x"},
    }


@pytest.fixture
async def ns(api: ApiClient) -> str:
    await ensure_namespace(api, NAMESPACE)
    return NAMESPACE


async def test_a_client_certificate_caller_keeps_its_identity(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    async with await client(proxy, "a", tmp_path) as api:
        info = await whoami(api)
    assert info["username"] == "admin"
    assert "system:masters" in info["groups"]
    assert info.get("extra", {}).get("bootc.dev/via") == ["a"], info


async def test_a_bearer_token_caller_keeps_its_identity(
    proxy: FaultProxy, api: ApiClient, ns: str, tmp_path: Path
) -> None:
    sa = unique_name("sa")
    await create_object(
        api,
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}},
        ns,
    )
    token = await request_json(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    path = write_kubeconfig(
        tmp_path / "token.kubeconfig",
        proxy.url("a"),
        proxy.pki.ca.cert,
        token=token["status"]["token"],
    )
    async with await api_client(path) as sa_api:
        info = await whoami(sa_api)
    assert info["username"] == f"system:serviceaccount:{ns}:{sa}", info


async def test_a_reset_after_forwarding_applies_the_write_and_loses_the_answer(
    proxy: FaultProxy, api: ApiClient, ns: str, tmp_path: Path
) -> None:
    proxy.profile = only("reset-response")
    proxy.start_faults()
    name = unique_name("reset")
    async with await client(proxy, "a", tmp_path) as through:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await create_object(through, LEASES, lease(name), ns)
    assert (await get_object(api, LEASES, name, ns))["spec"]["holderIdentity"] == "x"
    assert proxy.counts["reset-response"] == 1
    assert [(f.listener, f.method, f.status) for f in proxy.log] == [("a", "POST", 201)]


async def test_a_reset_before_forwarding_does_not_apply_it(
    proxy: FaultProxy, api: ApiClient, ns: str, tmp_path: Path
) -> None:
    proxy.profile = only("reset-request")
    proxy.start_faults()
    name = unique_name("reset")
    async with await client(proxy, "a", tmp_path) as through:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await create_object(through, LEASES, lease(name), ns)
    with pytest.raises(ApiError) as err:
        await get_object(api, LEASES, name, ns)
    assert err.value.not_found
    assert proxy.log == []


@pytest.mark.parametrize(
    ("kind", "error"),
    [("cut-body", aiohttp.ClientPayloadError), ("bad-json", json.JSONDecodeError)],
)
async def test_a_cut_answer_reaches_the_client(
    proxy: FaultProxy, ns: str, tmp_path: Path, kind: str, error: type[Exception]
) -> None:
    async with await client(proxy, "a", tmp_path) as through:
        await create_object(through, LEASES, lease(name := unique_name(kind)), ns)
        proxy.profile = only(kind)
        proxy.start_faults()
        with pytest.raises(error):
            await get_object(through, LEASES, name, ns)
    assert proxy.counts[kind] == 1


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_an_injected_status_says_when_to_retry(
    proxy: FaultProxy, tmp_path: Path, code: int
) -> None:
    proxy.profile = only(f"status-{code}")
    proxy.start_faults()
    async with await client(proxy, "a", tmp_path) as through:
        resp = await through.call_api(
            "/api/v1/namespaces", "GET", _preload_content=False, auth_settings=["BearerToken"]
        )
        async with resp:
            assert resp.status == code
            assert resp.headers["Retry-After"] == str(proxy.profile.retry_after)
            assert (await resp.json())["details"]["retryAfterSeconds"] == 1


async def test_a_watch_is_reset_mid_stream(proxy: FaultProxy, ns: str, tmp_path: Path) -> None:
    async with await client(proxy, "a", tmp_path) as through:
        for _ in range(3):
            await create_object(through, LEASES, lease(unique_name("w")), ns)
        proxy.profile = only("reset-watch")
        proxy.start_faults()
        events = 0
        with pytest.raises((aiohttp.ClientError, json.JSONDecodeError)):
            async with open_stream(
                through,
                LEASES.path(ns),
                query={"watch": "true", "resourceVersion": "0", "allowWatchBookmarks": "true"},
            ) as resp:
                async for _ in iter_json_lines(resp):
                    events += 1
    assert proxy.counts["reset-watch"] == 1, proxy.faults()
    print(f"events before the reset: {events}")


async def test_a_partition_cuts_one_listener_off_and_heals(
    proxy: FaultProxy, ns: str, tmp_path: Path
) -> None:
    async with await client(proxy, "a", tmp_path) as a, await client(proxy, "b", tmp_path) as b:
        name = unique_name("p")
        await create_object(a, LEASES, lease(name), ns)
        proxy.partition("a")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await get_object(a, LEASES, name, ns)
        assert (await get_object(b, LEASES, name, ns))["metadata"]["name"] == name
        proxy.heal("a")
        proxy.partition("a", "lease")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await get_object(a, LEASES, name, ns)
        assert (await request_json(a, "GET", f"/api/v1/namespaces/{ns}"))["metadata"]["name"] == ns
        proxy.heal("a")
        proxy.partition("a", "hang")
        with pytest.raises(TimeoutError):
            await request_json(a, "GET", LEASES.path(ns, name), request_timeout=1.0)
        proxy.heal("a")
        assert (await get_object(a, LEASES, name, ns))["metadata"]["name"] == name
    faults = proxy.faults()
    # aiohttp retries an idempotent request once when a kept-alive connection drops
    assert faults.pop("partitioned") in range(3, 7), proxy.faults()
    assert faults == {"partition-hang": 1, "partition-lease": 1, "partition-reset": 1}


async def test_every_kind_is_known() -> None:
    assert set(dict(Profile.from_seed(7).weights)) == set(KINDS)
