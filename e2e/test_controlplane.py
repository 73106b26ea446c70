"""The harness's own contract (hack/testenv), which later e2e tests build on.

An apiserver restart keeps etcd's data and expires old watch resourceVersions;
``compact_etcd`` expires old resourceVersions in etcd; the TokenRequest API
issues ServiceAccount tokens the apiserver accepts; namespace deletion is
carried out by kube-controller-manager; ``api_client`` works from a kubeconfig.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import (
    ApiClient,
    AuthenticationV1Api,
    AuthenticationV1TokenRequest,
    CoreV1Api,
    CustomObjectsApi,
    V1ConfigMap,
    V1Namespace,
    V1ObjectMeta,
    V1SelfSubjectReview,
    V1ServiceAccount,
    V1TokenRequestSpec,
    VersionApi,
)
from kubernetes_asyncio.client.exceptions import ApiException

from bootc_operator.api import constants as c
from e2e.helpers import unique_name, wait_for
from hack.testenv import ControlPlane, ControlPlaneError, api_client

POOLS_PATH = f"/apis/{c.GROUP}/{c.VERSION}/{c.POOL_PLURAL}"


def _pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.POOL_KIND,
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"e2e.bootc.dev/pool": name}},
            "image": {"ref": "quay.io/example/myos:latest"},
        },
    }


async def _first_watch_event(api: ApiClient, resource_version: str) -> dict[str, Any]:
    """The first event of a pool watch starting at ``resource_version``."""
    resp = await api.call_api(
        POOLS_PATH,
        "GET",
        query_params=[("watch", "true"), ("resourceVersion", resource_version)],
        _preload_content=False,
    )
    try:
        async with asyncio.timeout(15):
            line = await resp.content.readline()
    finally:
        resp.release()
    event: dict[str, Any] = json.loads(line)
    return event


def _assert_expired(event: dict[str, Any]) -> None:
    assert event["type"] == "ERROR", event
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired", event


async def _create_pools(api: ApiClient, count: int) -> list[dict[str, Any]]:
    custom = CustomObjectsApi(api)
    return [
        await custom.create_cluster_custom_object(
            c.GROUP, c.VERSION, c.POOL_PLURAL, _pool(unique_name("harness"))
        )
        for _ in range(count)
    ]


async def _delete_pools(api: ApiClient, pools: list[dict[str, Any]]) -> None:
    custom = CustomObjectsApi(api)
    for pool in pools:
        await custom.delete_cluster_custom_object(
            c.GROUP, c.VERSION, c.POOL_PLURAL, pool["metadata"]["name"]
        )


async def test_apiserver_restart_keeps_data_and_expires_old_watches(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    pools = await _create_pools(api, 3)
    old_rv = pools[0]["metadata"]["resourceVersion"]
    assert (await _first_watch_event(api, old_rv))["type"] == "ADDED"

    await asyncio.to_thread(control_plane.stop_apiserver)
    assert "kube-apiserver" not in control_plane.processes
    with pytest.raises(ControlPlaneError, match="refused"):
        await asyncio.to_thread(
            control_plane.kubectl, "get", "--raw", "/readyz", "--request-timeout=5s"
        )
    await asyncio.to_thread(control_plane.start_apiserver)

    custom = CustomObjectsApi(api)
    got = await custom.get_cluster_custom_object(
        c.GROUP, c.VERSION, c.POOL_PLURAL, pools[0]["metadata"]["name"]
    )
    assert got["metadata"]["uid"] == pools[0]["metadata"]["uid"], "etcd data must survive"
    # The new watch cache starts at the current revision: older ones are gone.
    _assert_expired(await _first_watch_event(api, old_rv))
    await _delete_pools(api, pools)


@pytest.fixture(scope="module")
def uncached_plane() -> Iterator[ControlPlane]:
    """A second control plane without watch cache, so watches go straight to etcd."""
    with ControlPlane(watch_cache=False, controller_manager=False) as cp:
        yield cp


async def test_compact_etcd_expires_old_resource_versions(uncached_plane: ControlPlane) -> None:
    async with await api_client(uncached_plane.kubeconfig) as api:
        pools = await _create_pools(api, 3)
        old_rv = pools[0]["metadata"]["resourceVersion"]
        assert (await _first_watch_event(api, old_rv))["type"] == "ADDED"

        revision = await asyncio.to_thread(uncached_plane.compact_etcd)
        assert revision > int(old_rv)

        _assert_expired(await _first_watch_event(api, old_rv))
        with pytest.raises(ApiException) as excinfo:
            await CustomObjectsApi(api).list_cluster_custom_object(
                c.GROUP,
                c.VERSION,
                c.POOL_PLURAL,
                resource_version=old_rv,
                resource_version_match="Exact",
            )
        assert excinfo.value.status == 410
        # A fresh list still works, and watching from its resourceVersion too.
        listed = await CustomObjectsApi(api).list_cluster_custom_object(
            c.GROUP, c.VERSION, c.POOL_PLURAL
        )
        assert {p["metadata"]["name"] for p in pools} <= {
            p["metadata"]["name"] for p in listed["items"]
        }
        await _delete_pools(api, pools)
        event = await _first_watch_event(api, listed["metadata"]["resourceVersion"])
        assert event["type"] == "DELETED", event


async def test_token_request_issues_accepted_tokens(
    control_plane: ControlPlane, api: ApiClient, tmp_path: Path
) -> None:
    core = CoreV1Api(api)
    name = unique_name("harness-sa")
    await core.create_namespaced_service_account(
        "default", V1ServiceAccount(metadata=V1ObjectMeta(name=name))
    )
    try:
        token_request = await core.create_namespaced_service_account_token(
            name,
            "default",
            AuthenticationV1TokenRequest(spec=V1TokenRequestSpec(audiences=[])),
        )
        token = token_request.status.token
        assert token

        admin = yaml.safe_load(control_plane.kubeconfig.read_text())
        admin["users"] = [{"name": "sa", "user": {"token": token}}]
        admin["contexts"][0]["context"]["user"] = "sa"
        kubeconfig = tmp_path / "sa.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(admin))
        async with await api_client(kubeconfig) as sa_api:
            review = await AuthenticationV1Api(sa_api).create_self_subject_review(
                V1SelfSubjectReview()
            )
            assert review.status.user_info.username == f"system:serviceaccount:default:{name}"
            # RBAC is on: a fresh ServiceAccount may not list namespaces.
            with pytest.raises(ApiException) as excinfo:
                await CoreV1Api(sa_api).list_namespace()
            assert excinfo.value.status == 403
    finally:
        await core.delete_namespaced_service_account(name, "default")


async def test_namespace_deletion_is_carried_out(api: ApiClient) -> None:
    core = CoreV1Api(api)
    ns = unique_name("harness-ns")
    await core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=ns)))
    # The serviceaccount controller runs: every namespace gets a "default" SA.
    await wait_for(
        lambda: core.read_namespaced_service_account("default", ns),
        30,
        f"ServiceAccount default in {ns}",
        ignore=(ApiException,),
    )
    await core.create_namespaced_config_map(
        ns, V1ConfigMap(metadata=V1ObjectMeta(name="data"), data={"k": str(uuid.uuid4())})
    )
    await core.delete_namespace(ns)

    async def namespace_gone() -> bool:
        try:
            await core.read_namespace(ns)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    await wait_for(namespace_gone, 60, f"namespace {ns} to be finalized and deleted")


async def test_server_version_and_kubectl(control_plane: ControlPlane, api: ApiClient) -> None:
    version = await VersionApi(api).get_code()
    assert version.git_version.startswith("v1."), version
    res = await asyncio.to_thread(control_plane.kubectl, "version", "-o", "json")
    assert json.loads(res.stdout)["serverVersion"]["gitVersion"] == version.git_version
    assert control_plane.server.startswith("https://127.0.0.1:")
    assert control_plane.etcd_endpoint.startswith("http://127.0.0.1:")
