"""The daemon's API client (``bootc_operator.kube.lite``) against a real kube-apiserver.

Covers: the verbs of ``kube.rest`` over a :class:`LiteClient` loaded from the test
cluster's kubeconfig (client certificate and CA as ``-data``): create, get, a paginated
LIST (continue tokens), merge patch, a status patch, delete, a 404 as ``ApiError``; a
raw watch that resumes from a resourceVersion and sees exactly the later changes; an
informer on the lite client that, cut off and reconnected, resumes its watch without a
LIST (a real 410 Gone answered by a relist is ``e2e/test_informer.py``'s test, run on
this client too); and bearer tokens from a ``tokenFile``: ServiceAccount tokens from the
TokenRequest API bound to Secrets, so deleting a Secret revokes its token (401) — a
fresh token written to the file first is re-read on the 401 and the request succeeds
with it; none written, the 401 is the caller's ``ApiError``; and the file is re-read
by age alone once the token in hand is a minute old (a fake clock).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from bootc_operator.informers import Backoff, Informer
from bootc_operator.kube import (
    BOOTC_NODES,
    NODES,
    SECRETS,
    ApiError,
    LiteClient,
    Resource,
    create_object,
    delete_object,
    get_object,
    list_objects,
    load_lite_client,
    patch_object,
    request_json,
)
from bootc_operator.kube.lite import load_access
from bootc_operator.kube.rest import iter_json_lines, open_stream
from e2e.helpers import unique_name, wait_for
from e2e.tcpproxy import TcpProxy
from e2e.test_informer import cleanup, running
from hack.testenv import ControlPlane

Obj = dict[str, Any]

LABEL = "e2e.bootc.dev/lite"
NS = "default"
TIMEOUT = 30.0
RESTART_TIMEOUT = 90.0
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", namespaced=True, kind="ServiceAccount")
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def bootc_node(name: str, sel: str) -> Obj:
    return {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": name, "labels": {LABEL: sel}},
        "spec": {
            "desiredImage": "quay.io/example/os@sha256:" + "a" * 64,
            "desiredImageState": "Staged",
        },
    }


def node_body(name: str, sel: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {LABEL: sel}},
        "spec": {"taints": [{"key": "e2e.bootc.dev/no-kubelet", "effect": "NoSchedule"}]},
    }


def rv(obj: Obj | None) -> str | None:
    return None if obj is None else obj["metadata"]["resourceVersion"]


@asynccontextmanager
async def lite(control_plane: ControlPlane) -> AsyncIterator[LiteClient]:
    async with load_lite_client(control_plane.kubeconfig) as client:
        yield client


async def test_verbs_on_the_lite_client(control_plane: ControlPlane, api: ApiClient) -> None:
    sel = unique_name("verbs")
    names = [unique_name("lite-bn") for _ in range(3)]
    async with lite(control_plane) as client, cleanup(api, BOOTC_NODES) as made:
        assert load_access(control_plane.kubeconfig).client_cert_data, "a client-cert login"
        for name in names:
            created = await create_object(client, BOOTC_NODES, bootc_node(name, sel))
            made.append(name)
            assert created["metadata"]["name"] == name
        got = await get_object(client, BOOTC_NODES, names[0])
        assert got["spec"]["desiredImageState"] == "Staged"

        # one item per page: every page after the first is asked for by continue token
        items, list_rv = await list_objects(
            client, BOOTC_NODES, label_selector=f"{LABEL}={sel}", page_size=1
        )
        assert sorted(i["metadata"]["name"] for i in items) == sorted(names)
        assert all(i["kind"] == "BootcNode" for i in items)
        assert int(list_rv) >= max(int(rv(i) or 0) for i in items)

        patched = await patch_object(
            client, BOOTC_NODES, names[0], {"metadata": {"annotations": {"lite": "yes"}}}
        )
        assert patched["metadata"]["annotations"]["lite"] == "yes"
        status = await patch_object(
            client,
            BOOTC_NODES,
            names[0],
            {"status": {"observedGeneration": 1}},
            subresource="status",
        )
        assert status["status"]["observedGeneration"] == 1
        # seen by another client: the writes are on the server
        again = await get_object(api, BOOTC_NODES, names[0])
        assert again["metadata"]["annotations"]["lite"] == "yes"
        assert again["status"]["observedGeneration"] == 1

        await delete_object(client, BOOTC_NODES, names[0])
        with pytest.raises(ApiError) as missing:
            await get_object(client, BOOTC_NODES, names[0])
        assert missing.value.not_found and missing.value.reason == "NotFound"


# ---------------------------------------------------------------- watch


async def test_a_watch_resumes_from_its_resource_version(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    sel = unique_name("resume")
    first, second = unique_name("lite-w1"), unique_name("lite-w2")
    async with lite(control_plane) as client, cleanup(api, BOOTC_NODES) as made:
        await create_object(api, BOOTC_NODES, bootc_node(first, sel))
        made.append(first)
        _, since = await list_objects(client, BOOTC_NODES, label_selector=f"{LABEL}={sel}")
        # changes made while nobody watches ...
        await patch_object(api, BOOTC_NODES, first, {"metadata": {"annotations": {"n": "1"}}})
        await create_object(api, BOOTC_NODES, bootc_node(second, sel))
        made.append(second)
        await delete_object(api, BOOTC_NODES, first)
        # ... are exactly what a watch from the list's resourceVersion delivers
        seen: list[tuple[str, str]] = []
        query = {
            "watch": "true",
            "resourceVersion": since,
            "labelSelector": f"{LABEL}={sel}",
            "allowWatchBookmarks": "false",
        }
        async with (
            asyncio.timeout(TIMEOUT),
            open_stream(client, BOOTC_NODES.path(), query=query) as resp,
        ):
            async for event in iter_json_lines(resp):
                seen.append((event["type"], event["object"]["metadata"]["name"]))
                if len(seen) == 3:
                    break
        assert seen == [("MODIFIED", first), ("ADDED", second), ("DELETED", first)]


async def test_an_informer_on_the_lite_client_resumes_without_a_list(
    control_plane: ControlPlane, api: ApiClient
) -> None:
    sel = unique_name("reconnect")
    names = [unique_name("lite-n") for _ in range(2)]
    target = urlsplit(control_plane.server)
    assert target.hostname and target.port
    proxy = TcpProxy(target.hostname, target.port)
    await proxy.start()
    try:
        async with lite(control_plane) as client, cleanup(api, NODES) as made:
            client.host = f"https://127.0.0.1:{proxy.port}"
            await create_object(api, NODES, node_body(names[0], sel))
            made.append(names[0])
            inf = Informer(
                client,
                NODES,
                label_selector=f"{LABEL}={sel}",
                backoff=Backoff(initial=0.1, cap=1.0),
                registry=CollectorRegistry(),
            )
            async with running(inf):
                assert sorted(inf.keys()) == [names[0]]
                errors = inf.stats.errors
                proxy.cut()
                await wait_for(lambda: inf.stats.errors > errors, TIMEOUT, "informer cut off")
                await create_object(api, NODES, node_body(names[1], sel))
                made.append(names[1])
                proxy.heal()
                await wait_for(lambda: names[1] in inf.store, TIMEOUT, "the missed add")
                fetched = inf.stats.lists + inf.stats.watch_lists
                assert (fetched, inf.stats.relists) == (1, 0), "resumed, no second list"
    finally:
        await proxy.close()


# ---------------------------------------------------------------- tokens


def _jti(token: str) -> str:
    payload = token.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["jti"])


class TokenKit:
    """A ServiceAccount and tokens bound to Secrets (deleting the Secret revokes the token)."""

    def __init__(self, api: ApiClient, name: str) -> None:
        self.api = api
        self.name = name
        self.secrets: list[str] = []

    async def __aenter__(self) -> TokenKit:
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": self.name}}
        await create_object(self.api, SERVICE_ACCOUNTS, sa, NS)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for name in self.secrets:
            await _delete_quietly(self.api, SECRETS, name, NS)
        await _delete_quietly(self.api, SERVICE_ACCOUNTS, self.name, NS)

    async def token(self) -> tuple[str, str]:
        """(token, name of the Secret it is bound to)."""
        secret_name = unique_name(f"{self.name}-bind")
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name}}
        made = await create_object(self.api, SECRETS, secret, NS)
        self.secrets.append(secret_name)
        review = await request_json(
            self.api,
            "POST",
            f"/api/v1/namespaces/{NS}/serviceaccounts/{self.name}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {
                    "expirationSeconds": 3600,
                    "boundObjectRef": {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "name": secret_name,
                        "uid": made["metadata"]["uid"],
                    },
                },
            },
        )
        return str(review["status"]["token"]), secret_name


async def _delete_quietly(api: ApiClient, resource: Resource, name: str, ns: str) -> None:
    try:
        await delete_object(api, resource, name, ns)
    except ApiError as e:
        if not e.not_found:
            raise


def token_file_kubeconfig(admin: Path, token_file: Path, path: Path) -> Path:
    """``admin``'s cluster and CA, authenticating with the bearer token in ``token_file``."""
    doc = yaml.safe_load(admin.read_text())
    doc["users"] = [{"name": "sa", "user": {"tokenFile": token_file.name}}]
    for ctx in doc["contexts"]:
        ctx["context"]["user"] = "sa"
    path.write_text(yaml.safe_dump(doc))
    return path


async def whoami(client: LiteClient) -> Obj:
    """The server's view of the caller (SelfSubjectReview: any authenticated user may ask)."""
    review = await request_json(
        client,
        "POST",
        SELF_SUBJECT_REVIEWS,
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return dict(review["status"]["userInfo"])


def credential(user: Obj) -> str:
    [cred] = user["extra"]["authentication.kubernetes.io/credential-id"]
    return str(cred)


async def revoked(client: LiteClient) -> bool:
    try:
        await whoami(client)
    except ApiError as e:
        if e.status == 401:
            return True
        raise
    return False


async def test_a_revoked_token_is_re_read_from_its_file_on_the_401(
    control_plane: ControlPlane, api: ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name = unique_name("lite-sa")
    async with TokenKit(api, name) as kit:
        token_a, secret_a = await kit.token()
        token_b, _ = await kit.token()
        token_file = tmp_path / "token"
        token_file.write_text(token_a)
        kubeconfig = token_file_kubeconfig(
            control_plane.kubeconfig, token_file, tmp_path / "sa.kubeconfig"
        )
        # a clock that never moves: only a 401 makes the client read the file again
        access = load_access(kubeconfig)
        assert access.token_file == str(token_file)
        async with LiteClient(access, clock=lambda: 0.0) as client:
            assert client.tokens is not None
            user = await whoami(client)
            assert user["username"] == f"system:serviceaccount:{NS}:{name}"
            assert credential(user) == f"JTI={_jti(token_a)}"

            await delete_object(api, SECRETS, secret_a, NS)
            # the apiserver notices the missing Secret (it may cache briefly)
            await wait_for(lambda: revoked(client), TIMEOUT, "token A rejected (401)")
            reads = client.tokens.reads
            with pytest.raises(ApiError) as denied:
                await whoami(client)
            assert denied.value.status == 401
            assert client.tokens.reads == reads + 1, "re-read once on the 401, nothing new"

            # kubelet writes a fresh token: the next request's 401 re-reads it, and succeeds
            token_file.write_text(token_b + "\n")
            with caplog.at_level(logging.INFO, logger="bootc_operator.kube.lite"):
                user = await whoami(client)
            assert credential(user) == f"JTI={_jti(token_b)}"
            assert client.tokens.reads == reads + 2
            assert any("401 Unauthorized: retrying POST" in r.getMessage() for r in caplog.records)
            # and it is kept: no further 401, no further read
            await whoami(client)
            assert client.tokens.reads == reads + 2


async def test_a_rotated_token_is_read_once_the_one_in_hand_is_a_minute_old(
    control_plane: ControlPlane, api: ApiClient, tmp_path: Path
) -> None:
    name = unique_name("lite-rot")
    now = [0.0]
    async with TokenKit(api, name) as kit:
        token_a, _ = await kit.token()
        token_b, _ = await kit.token()
        token_file = tmp_path / "token"
        token_file.write_text(token_a)
        kubeconfig = token_file_kubeconfig(
            control_plane.kubeconfig, token_file, tmp_path / "sa.kubeconfig"
        )
        async with LiteClient(load_access(kubeconfig), clock=lambda: now[0]) as client:
            assert credential(await whoami(client)) == f"JTI={_jti(token_a)}"
            token_file.write_text(token_b)  # rotated; A is still valid
            now[0] = 59.0
            assert credential(await whoami(client)) == f"JTI={_jti(token_a)}"
            now[0] = 60.0
            assert credential(await whoami(client)) == f"JTI={_jti(token_b)}"


# ---------------------------------------------------------------- 410 (restarts the apiserver)
