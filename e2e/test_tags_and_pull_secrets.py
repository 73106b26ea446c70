"""Tag resolution and pull secrets end to end: real registry, controller, daemons, hosts.

Each scenario runs the in-process controller against the session's control
plane, Debian's docker-registry on loopback (open, or htpasswd over TLS with a
generated CA), and real ``bootc-operator daemon`` processes on simulated bootc
hosts that pull from that registry (``e2e.hostsenv``), or simulated daemons
(``fleet``) where only the controller's side matters.

A tag that never resolves is retried with backoff: the registry's access log
counts the controller's requests and a watch on the pool counts its status
writes (a tight retry loop made hundreds of each in 30 s).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import stat
import time
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, SECRETS, ApiError
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    patch_object,
)
from bootc_operator.registry import RegistryClient
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, ensure_namespace, image, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.pools import pool_body
from hack.testenv.push import make_image, make_index, push_index
from hack.testenv.registry import Registry

NS = "bootc-operator"


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
    await ensure_namespace(api, NS)
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
            assert json.loads(auth.read_bytes()) == json.loads(reg.dockerconfigjson())
            assert stat.S_IMODE(auth.stat().st_mode) == 0o600
        # rotation reaches every node (same password, new bytes: an extra entry)
        rotated = dict(secret_body(reg.password))
        raw = reg.dockerconfigjson().replace(
            b'"auths": {', b'"auths": {"other.example.com": {"auth": "eDp5"}, ', 1
        )
        assert raw != reg.dockerconfigjson()
        rotated["data"] = {".dockerconfigjson": base64.b64encode(raw).decode()}
        await patch_object(api, SECRETS, secret, {"data": rotated["data"]}, NS)

        async def rotated_everywhere() -> bool:
            return all(
                json.loads(hosted.hosts[n].auth_file.read_bytes()) == json.loads(raw) for n in nodes
            )

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


class StatusWrites:
    """Counts changes of one pool's status, as a watch sees them (each one a write)."""

    def __init__(self, api: ApiClient, name: str) -> None:
        self.count = 0
        self._informer = Informer(api, BOOTC_NODE_POOLS, field_selector=f"metadata.name={name}")
        self._informer.add_event_handler(EventHandler(on_update=self._updated))

    def _updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if old.get("status") != new.get("status"):
            self.count += 1

    async def __aenter__(self) -> StatusWrites:
        self._informer.start()
        await self._informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._informer.stop()


def controller_requests(registry: Registry, path: str = "") -> int:
    """Requests the controller sent to ``registry`` (its access log), under ``path``."""
    pattern = re.compile(rf'"[A-Z]+ {re.escape(path)}[^"]* HTTP/[0-9.]+" .*"bootc-operator/')
    return sum(1 for line in registry.tail(100_000).splitlines() if pattern.search(line))


async def test_a_tag_that_never_resolves_is_retried_with_backoff(
    api: ApiClient, make_registry: Callable[..., Registry]
) -> None:
    registry = make_registry()  # its own: every request in its log is this test's
    repo = unique_name("never")
    group = unique_name("retry")
    manifest = f"/v2/{repo}/manifests/missing"
    pool = pool_body(group, {"group": group}, registry.ref(repo, "missing"), 1)
    async with (
        StatusWrites(api, group) as writes,
        running_controller(api, tag_resolution_interval=300.0, registry=registry.options()),
    ):
        started = time.monotonic()
        await create_pool(api, pool)
        await wait_for(
            degraded_with(api, group, "TagResolutionError", "not found"), 30, "missing tag reported"
        )
        # Retries at about 5, 15 and 35 s: the 4th attempt comes after 30 s of failing.
        await wait_for(
            lambda: controller_requests(registry, manifest) >= 4, 90, "the 4th resolution attempt"
        )
        elapsed = time.monotonic() - started
        attempts = controller_requests(registry, manifest)
        requests = controller_requests(registry)
        status_writes = writes.count
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    assert elapsed >= 30, f"4 attempts within {elapsed:.1f}s: retries ignore the backoff"
    assert attempts <= 5, attempts
    assert requests <= 10, f"{requests} registry requests in {elapsed:.0f}s"
    assert status_writes <= 12, f"{status_writes} pool status writes in {elapsed:.0f}s"


async def test_malformed_pull_secret_with_a_digest_ref_is_reported_not_propagated(
    api: ApiClient, fleet: Fleet
) -> None:
    """A digest ref never asks the registry, so the secret must be checked on its own."""
    await ensure_namespace(api, NS)
    group = unique_name("badauth")
    secret = f"{group}-pull"
    nodes = [f"{group}-n{i}" for i in range(2)]
    for n in nodes:
        await fleet.add_node(n, image(1), {"group": group})

    def secret_data(auth: str) -> dict[str, str]:
        doc = {"auths": {"registry.example.com": {"auth": auth}}}
        return {".dockerconfigjson": base64.b64encode(json.dumps(doc).encode()).decode()}

    await create_object(
        api,
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": NS},
            "type": "kubernetes.io/dockerconfigjson",
            "data": secret_data("%%%"),
        },
        NS,
    )
    pool = pool_body(group, {"group": group}, image(1), 1)
    pool["spec"]["pullSecretRef"] = {"name": secret, "namespace": NS}

    async def node_secrets() -> set[tuple[str | None, str | None]]:
        out = set()
        for n in nodes:
            spec = (await get_object(api, BOOTC_NODES, n))["spec"]
            ref = spec.get("pullSecretRef")
            out.add((ref and f"{ref['namespace']}/{ref['name']}", spec.get("pullSecretHash")))
        return out

    async def members_without_secret() -> bool:
        try:
            return await node_secrets() == {(None, None)}
        except ApiError:
            return False  # not created yet

    try:
        async with running_controller(api):
            await create_pool(api, pool)
            await wait_for(
                degraded_with(
                    api, group, "PullSecretError", '"registry.example.com" is not base64'
                ),
                30,
                "the malformed auth named in Degraded",
            )
            await wait_for(members_without_secret, 30, "members created without the bad secret")
            message = condition(await get_pool(api, group), "Degraded")["message"]
            assert f"{NS}/{secret}" in message and "%%%" not in message
            # repaired: the nodes get it, the pool is healthy
            await patch_object(api, SECRETS, secret, {"data": secret_data("dTpw")}, NS)

            async def propagated() -> str | None:
                got = await node_secrets()
                if len(got) != 1:
                    return None
                ref, digest = next(iter(got))
                return digest if ref == f"{NS}/{secret}" and digest else None

            good = await wait_for(propagated, 30, "the repaired secret on every node")
            await wait_for(degraded_with(api, group, "Healthy", ""), 30, "healthy once repaired")
            # broken again: reported, and the nodes keep their last good credentials
            await patch_object(api, SECRETS, secret, {"data": secret_data("%%%")}, NS)
            await wait_for(
                degraded_with(api, group, "PullSecretError", "is not base64"),
                30,
                "broken again reported",
            )
            assert await node_secrets() == {(f"{NS}/{secret}", good)}
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        with contextlib.suppress(ApiError):
            await delete_object(api, SECRETS, secret, NS)
