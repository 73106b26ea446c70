"""Pull-secret propagation by the controller (no registry involved).

The simulated fleet has no daemons: the test publishes each node's sealing key in
its BootcNode status (as a daemon does) and opens the sealed blobs with the private
keys it holds, as each daemon would. Without the daemons' node-scope admission
policy (its binding deleted for one test) nothing is sealed and the pool says why.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, SECRETS, ApiError
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    patch_object,
    request_json,
)
from bootc_operator.policy.nodescope import DEFAULT_POLICY
from bootc_operator.sealing import NodeKey, Sealed, SealedForAnotherKey, UnsealFailed
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, ensure_namespace, image, unique_name, wait_for
from hack.testenv import ControlPlane
from hack.testenv.controller import running_controller
from hack.testenv.controlplane import ADMISSION_DIR
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

    keys = {n: NodeKey.generate() for n in nodes}

    async def publish(node: str, key: NodeKey) -> None:
        await patch_object(
            api, BOOTC_NODES, node, {"status": {"sealingKey": key.public}}, subresource="status"
        )

    async def opened(node: str) -> bytes | None:
        """What ``node``'s daemon reads from its sealed blob (None: not sealed to it yet)."""
        spec = (await get_object(api, BOOTC_NODES, node))["spec"]
        if not spec.get("sealedPullSecret"):
            return None
        sealed = Sealed.from_wire(spec["sealedPullSecret"])
        if sealed.key_id != keys[node].key_id:
            return None
        return keys[node].unseal(sealed, node=node, secret_hash=spec["pullSecretHash"])

    async def every_node_opens(password: str) -> bool:
        want = base64.b64decode(dockerconfig(password))
        return all([await opened(n) == want for n in nodes])

    async with running_controller(api):
        await create_pool(api, pool)
        first = await wait_for(one_hash, 30, "every node has the pull secret ref and hash")
        # no daemon key published yet: nothing sealed
        specs = [(await get_object(api, BOOTC_NODES, n))["spec"] for n in nodes]
        assert not any("sealedPullSecret" in spec for spec in specs), specs
        for n in nodes:
            await publish(n, keys[n])
        await wait_for(lambda: every_node_opens("one"), 30, "each node's secret sealed to it")
        # a node opens only its own blob: not another node's, even relabelled
        mine, theirs = nodes
        blob = Sealed.from_wire(
            (await get_object(api, BOOTC_NODES, theirs))["spec"]["sealedPullSecret"]
        )
        try:
            keys[mine].unseal(blob, node=mine, secret_hash=str(first))
        except SealedForAnotherKey:
            pass
        else:
            raise AssertionError(f"{mine} opened the blob sealed for {theirs}")
        forged = Sealed(keys[mine].key_id, blob.data)
        for node in (mine, theirs):
            try:
                keys[mine].unseal(forged, node=node, secret_hash=str(first))
            except UnsealFailed:
                pass
            else:
                raise AssertionError(f"{mine}'s key opened {theirs}'s blob as {node}")
        # rotate: every node gets the new hash and the new content, sealed to its key
        await patch_object(
            api, SECRETS, secret, {"data": {".dockerconfigjson": dockerconfig("two")}}, NS
        )
        second = await wait_for(
            lambda: _changed(one_hash(), first), 30, "the rotated secret's hash on every node"
        )
        await wait_for(lambda: every_node_opens("two"), 30, "the rotated secret sealed")
        # a daemon restarts with a new key: its secret is sealed to that one
        keys[mine] = NodeKey.generate()
        await publish(mine, keys[mine])
        await wait_for(lambda: every_node_opens("two"), 30, "re-sealed to the new key")
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
            sealed = [
                (await get_object(api, BOOTC_NODES, n))["spec"].get("sealedPullSecret")
                for n in nodes
            ]
            return got == {("null", None)} and healthy and sealed == [None] * len(nodes)

        await wait_for(cleared, 30, "pull secret fields cleared, pool healthy")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def _changed(value: Any, old: str | None) -> str | None:
    got = await value
    return got if got and got != old else None


VAPB_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


async def test_nothing_is_sealed_while_the_node_scope_policy_is_not_enforced(
    api: ApiClient, fleet: Fleet, control_plane: ControlPlane
) -> None:
    """Issue 37 §15: without the daemons' node-scope admission policy any daemon could
    publish its key as another node's sealingKey, so the controller seals nothing: the
    pool says Degraded/SealingUnavailable naming what is missing (as kubectl shows it);
    once the policy is enforced again the node's secret is sealed to it."""
    await ensure_namespace(api, NS)
    group = unique_name("unscoped")
    secret = f"{group}-pull"
    node = f"{group}-n0"
    await fleet.add_node(node, image(1), {"group": group})
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
    key = NodeKey.generate()
    await request_json(api, "DELETE", f"{VAPB_PATH}/{DEFAULT_POLICY}")
    try:
        async with running_controller(api):
            await create_pool(api, pool)

            async def member() -> bool:
                try:
                    await get_object(api, BOOTC_NODES, node)
                except ApiError:
                    return False
                return True

            await wait_for(member, 30, f"the BootcNode of {node}")
            await patch_object(
                api, BOOTC_NODES, node, {"status": {"sealingKey": key.public}}, subresource="status"
            )
            waited = await asyncio.to_thread(
                lambda: control_plane.kubectl(
                    "wait",
                    "--for=jsonpath={.status.conditions[?(@.type=='Degraded')].reason}"
                    "=SealingUnavailable",
                    f"bnp/{group}",
                    "--timeout=60s",
                    check=False,
                )
            )
            assert waited.returncode == 0, waited.stderr
            message = condition(await get_pool(api, group), "Degraded")["message"]
            assert message.startswith(
                f"pull secret {NS}/{secret} is not sealed to the nodes: the "
                f"ValidatingAdmissionPolicyBinding {DEFAULT_POLICY} is not installed"
            ), message
            assert "--seal-without-node-scope" in message, message
            spec = (await get_object(api, BOOTC_NODES, node))["spec"]
            assert spec.get("pullSecretHash") and "sealedPullSecret" not in spec, spec
            # enforced again: sealed to the node's key, and the pool no longer says so
            await asyncio.to_thread(control_plane.install_admission, ADMISSION_DIR / "policy.yaml")

            async def sealed() -> bool:
                spec = (await get_object(api, BOOTC_NODES, node))["spec"]
                deg = condition(await get_pool(api, group), "Degraded")
                return "sealedPullSecret" in spec and deg.get("reason") != "SealingUnavailable"

            await wait_for(sealed, 60, "sealed once the policy is enforced")
            spec = (await get_object(api, BOOTC_NODES, node))["spec"]
            blob = Sealed.from_wire(spec["sealedPullSecret"])
            opened = key.unseal(blob, node=node, secret_hash=spec["pullSecretHash"])
            assert opened == base64.b64decode(dockerconfig("one"))
    finally:
        await asyncio.to_thread(control_plane.install_admission, ADMISSION_DIR / "policy.yaml")
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        with contextlib.suppress(ApiError):
            await delete_object(api, SECRETS, secret, NS)
