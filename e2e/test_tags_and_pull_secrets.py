"""Tag resolution and pull secrets end to end: real registry, controller, daemons, hosts.

Each scenario runs the in-process controller against the session's control
plane, Debian's docker-registry on loopback (open, or htpasswd over TLS with a
generated CA), and real ``bootc-operator daemon`` processes on simulated bootc
hosts that pull from that registry (``e2e.hostsenv``).
"""

from __future__ import annotations

import base64
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, SECRETS, ApiError
from bootc_operator.kube.rest import create_object, get_object, patch_object, request_json
from bootc_operator.registry import RegistryClient
from bootc_operator.registry.push import make_image, make_index, push_image, push_index
from e2e.controllerenv import (
    condition,
    create_pool,
    delete_quietly,
    get_pool,
    running_controller,
)
from e2e.daemonenv import Daemons
from e2e.helpers import unique_name, wait_for
from e2e.hostsenv import HostedNodes
from hack.testenv import ControlPlane
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

NS = "bootc-operator"


@pytest.fixture
async def hosted(
    api: ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[HostedNodes]:
    daemons = Daemons(control_plane.kubeconfig, tmp_path / "logs")
    async with HostedNodes(api, daemons, tmp_path / "hosts") as nodes:
        yield nodes


async def push(registry: Registry, ref: str, content: str, **image: Any) -> str:
    async with RegistryClient(registry.options()) as client:
        creds = registry.dockerconfigjson() if registry.auth else None
        return await push_image(client, ref, make_image(content, **image), dockerconfigjson=creds)


async def ensure_ns(api: ApiClient) -> None:
    try:
        await request_json(
            api,
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
    except ApiError as err:
        if err.status != 409:
            raise


async def pool_state(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_pool(api, name)


def up_to_date(pool: dict[str, Any], digest: str, count: int) -> bool:
    s = pool.get("status") or {}
    return (
        condition(pool, "UpToDate").get("status") == "True"
        and s.get("targetDigest") == digest
        and s.get("updatedCount") == count
        and s.get("deployedDigest") == digest
    )


def checker(api: ApiClient, name: str, digest: str, count: int) -> Callable[[], Any]:
    async def check() -> bool:
        return up_to_date(await get_pool(api, name), digest, count)

    return check


def degraded_with(api: ApiClient, name: str, reason: str, fragment: str) -> Callable[[], Any]:
    async def check() -> bool:
        deg = condition(await get_pool(api, name), "Degraded")
        return deg.get("reason") == reason and fragment in deg.get("message", "")

    return check


async def test_tag_resolves_moves_and_fails_clearly(
    api: ApiClient, hosted: HostedNodes, make_registry: Callable[..., Registry]
) -> None:
    registry = make_registry()
    repo = unique_name("os")
    first = await push(registry, registry.ref(repo, "v1"), "one")
    second = await push(registry, registry.ref(repo, "stable"), "two")
    group = unique_name("tag")
    for i in range(2):
        await hosted.add(f"{group}-{i}", registry.ref(repo, digest=first), {"group": group})
    pool = pool_body(group, {"group": group}, registry.ref(repo, "stable"), 1)
    async with running_controller(api, tag_resolution_interval=1.0, registry=registry.options()):
        await create_pool(api, pool)
        await wait_for(checker(api, group, second, 2), 90, "tag resolved and rolled out")
        assert sorted(hosted.reboots) == [f"{group}-0", f"{group}-1"]
        for name in (f"{group}-0", f"{group}-1"):
            bn = await get_object(api, BOOTC_NODES, name)
            assert bn["status"]["booted"]["imageDigest"] == second
            assert bn["status"]["rollback"]["imageDigest"] == first
        # the tag moves: updateAvailable, then rolled out
        third = await push(registry, registry.ref(repo, "stable"), "three")

        async def update_available() -> bool:
            s = (await get_pool(api, group)).get("status") or {}
            return s.get("targetDigest") == third and (
                s.get("updateAvailable") is True or s.get("deployedDigest") == third
            )

        await wait_for(update_available, 30, "the moved tag is noticed")
        await wait_for(checker(api, group, third, 2), 90, "moved tag rolled out")
        # a tag that does not exist: TagResolutionError, previous target kept
        await patch_object(
            api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": registry.ref(repo, "nope")}}}
        )
        await wait_for(
            degraded_with(api, group, "TagResolutionError", "not found"), 30, "missing tag reported"
        )
        s = (await get_pool(api, group))["status"]
        assert s["targetDigest"] == third and s["updatedCount"] == 2
        # fixed by pushing the tag
        await push(registry, registry.ref(repo, "nope"), "three")
        await wait_for(degraded_with(api, group, "Healthy", ""), 30, "recovers once the tag exists")
        # registry down: reported, recovers when it is back
        registry.stop()
        try:
            await wait_for(
                degraded_with(api, group, "TagResolutionError", "cannot connect"),
                30,
                "registry down reported",
            )
        finally:
            registry.start()
        await wait_for(degraded_with(api, group, "Healthy", ""), 30, "registry back: healthy")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_private_registry_needs_and_propagates_the_pull_secret(
    api: ApiClient, hosted: HostedNodes, private_registry: Registry
) -> None:
    await ensure_ns(api)
    reg = private_registry
    assert reg.ca_file is not None
    hosted.trust(reg.host, reg.ca_file)
    repo = unique_name("private")
    base = await push(reg, reg.ref(repo, "base"), "base")
    target = await push(reg, reg.ref(repo, "stable"), "stable")
    group = unique_name("priv")
    nodes = [f"{group}-{i}" for i in range(2)]
    for n in nodes:
        await hosted.add(n, reg.ref(repo, digest=base), {"group": group})
    secret = f"{group}-pull"
    pool = pool_body(group, {"group": group}, reg.ref(repo, "stable"), 1)
    pool["spec"]["pullSecretRef"] = {"name": secret, "namespace": NS}

    def secret_body(password: str) -> dict[str, Any]:
        raw = reg.dockerconfigjson(password=password)
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": NS},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(raw).decode()},
        }

    async with running_controller(api, tag_resolution_interval=1.0, registry=reg.options()):
        await create_pool(api, pool)
        # no secret yet: the pool says why
        await wait_for(
            degraded_with(api, group, "TagResolutionError", "no credentials"),
            30,
            "missing credentials reported",
        )
        assert reg.password
        await create_object(api, SECRETS, secret_body("wrong-password"), NS)
        await wait_for(
            degraded_with(api, group, "TagResolutionError", "credentials rejected"),
            30,
            "wrong password reported clearly",
        )
        msg = condition(await get_pool(api, group), "Degraded")["message"]
        assert "wrong-password" not in msg
        await patch_object(api, SECRETS, secret, secret_body(reg.password), NS)
        await wait_for(
            checker(api, group, target, 2), 120, "resolved, pulled with the secret, rolled out"
        )
        for n in nodes:
            auth = hosted.hosts[n].auth_file
            assert auth.read_bytes() == reg.dockerconfigjson()
            assert stat.S_IMODE(auth.stat().st_mode) == 0o600
        # rotation reaches every node (same password, new bytes: an extra entry)
        rotated = dict(secret_body(reg.password))
        raw = reg.dockerconfigjson().replace(
            b'"auths": {', b'"auths": {"other.example.com": {"auth": "eDp5"}, ', 1
        )
        if raw == reg.dockerconfigjson():
            raw = reg.dockerconfigjson()[:-1] + b', "note": "rotated"}'
        rotated["data"] = {".dockerconfigjson": base64.b64encode(raw).decode()}
        await patch_object(api, SECRETS, secret, {"data": rotated["data"]}, NS)

        async def rotated_everywhere() -> bool:
            return all(hosted.hosts[n].auth_file.read_bytes() == raw for n in nodes)

        await wait_for(rotated_everywhere, 30, "rotated secret written on every host")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_multi_arch_index_rolls_out_and_counts_as_updated(
    api: ApiClient, hosted: HostedNodes, make_registry: Callable[..., Registry]
) -> None:
    registry = make_registry()
    repo = unique_name("multi")
    base = await push(registry, registry.ref(repo, "base"), "base")
    index = make_index(
        [make_image("m-amd64", architecture="amd64"), make_image("m-arm64", architecture="arm64")]
    )
    async with RegistryClient(registry.options()) as client:
        index_digest = await push_index(client, registry.ref(repo, "stable"), index)
    group = unique_name("idx")
    await hosted.add(f"{group}-amd", registry.ref(repo, digest=base), {"group": group})
    await hosted.add(
        f"{group}-arm", registry.ref(repo, digest=base), {"group": group}, architecture="arm64"
    )
    async with running_controller(api, tag_resolution_interval=5.0, registry=registry.options()):
        await create_pool(api, pool_body(group, {"group": group}, registry.ref(repo, "stable"), 2))
        await wait_for(checker(api, group, index_digest, 2), 90, "index rolled out, both updated")
    per_arch = {
        (await get_object(api, BOOTC_NODES, f"{group}-{a}"))["status"]["booted"]["imageDigest"]
        for a in ("amd", "arm")
    }
    assert per_arch == {index.images[0].digest, index.images[1].digest}
    assert index_digest not in per_arch
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
