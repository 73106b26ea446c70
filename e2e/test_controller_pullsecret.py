"""Pull-secret propagation by the controller (no registry involved)."""

from __future__ import annotations

import base64
import json
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, SECRETS, ApiError
from bootc_operator.kube.rest import create_object, delete_object, get_object, patch_object
from e2e.controllerenv import (
    create_pool,
    delete_quietly,
    get_pool,
    running_controller,
)
from e2e.helpers import condition, ensure_namespace, image, unique_name, wait_for
from hack.testenv.fleet import Fleet
from hack.testenv.pools import pool_body

NS = "bootc-operator"


def dockerconfig(password: str) -> str:
    auth = base64.b64encode(f"user:{password}".encode()).decode()
    doc = {"auths": {"registry.example.com": {"auth": auth}}}
    return base64.b64encode(json.dumps(doc).encode()).decode()


async def test_pull_secret_reaches_every_node_and_survives_breakage(
    api: ApiClient, fleet: Fleet
) -> None:
    await ensure_namespace(api, NS)
    group = unique_name("ps")
    secret = f"{group}-pull"
    nodes = [f"{group}-n{i}" for i in range(2)]
    for n in nodes:
        await fleet.add_node(n, image(1), {"group": group})
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "namespace": NS},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": dockerconfig("one")},
    }
    await create_object(api, SECRETS, body, NS)
    pool = pool_body(group, {"group": group}, image(1))
    pool["spec"]["pullSecretRef"] = {"name": secret, "namespace": NS}

    async def hashes() -> set[Any]:
        out = set()
        for n in nodes:
            spec = (await get_object(api, BOOTC_NODES, n))["spec"]
            out.add(
                (json.dumps(spec.get("pullSecretRef"), sort_keys=True), spec.get("pullSecretHash"))
            )
        return out

    async def one_hash() -> str | None:
        try:
            got = await hashes()
        except ApiError:
            return None
        if len(got) != 1:
            return None
        ref, h = next(iter(got))
        return h if h and json.loads(ref) == {"name": secret, "namespace": NS} else None

    async def degraded(fragment: str) -> bool:
        deg = condition(await get_pool(api, group), "Degraded")
        return deg.get("reason") == "PullSecretError" and fragment in deg.get("message", "")

    async with running_controller(api):
        await create_pool(api, pool)
        first = await wait_for(one_hash, 30, "every node has the pull secret ref and hash")
        # rotate: every node gets the new hash
        await patch_object(
            api, SECRETS, secret, {"data": {".dockerconfigjson": dockerconfig("two")}}, NS
        )
        second = await wait_for(
            lambda: _changed(one_hash(), first), 30, "the rotated secret's hash on every node"
        )
        # malformed: reported, nodes keep the last good hash
        # (the API server checks the JSON itself, so "malformed" means no "auths")
        wrong = base64.b64encode(b'{"registries": {}}').decode()
        await patch_object(api, SECRETS, secret, {"data": {".dockerconfigjson": wrong}}, NS)
        await wait_for(lambda: degraded('no "auths" object'), 30, "malformed secret reported")
        assert await one_hash() == second
        # gone: reported, nodes keep the last good hash
        await delete_object(api, SECRETS, secret, NS)
        await wait_for(lambda: degraded("not found"), 30, "missing secret reported")
        assert await one_hash() == second
        # ref removed from the pool: cleared on every node, pool healthy
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"pullSecretRef": None}})

        async def cleared() -> bool:
            got = await hashes()
            healthy = condition(await get_pool(api, group), "Degraded").get("reason") == "Healthy"
            return got == {("null", None)} and healthy

        await wait_for(cleared, 30, "pull secret fields cleared, pool healthy")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def _changed(value: Any, old: str | None) -> str | None:
    got = await value
    return got if got and got != old else None
