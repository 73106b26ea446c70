"""What the operator tells kubectl users is exactly true (the status issue, #13).

Each scenario runs the real controller against the session's kube-apiserver and
checks what an admin (or a CI pipeline) sees: pool conditions, status fields,
Events, and ``kubectl wait`` through the real kubectl binary. The first one also
runs real daemons on simulated bootc hosts pulling from a real registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES
from bootc_operator.kube.rest import (
    ApiError,
    delete_object,
    get_object,
    list_objects,
    patch_object,
    request_json,
)
from e2e.controllerenv import add_nodes, create_pool, delete_quietly, get_pool
from e2e.helpers import condition, image, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from hack.testenv import ControlPlane
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet, daemon_status
from hack.testenv.kubelet import set_node_ready
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry


def kubectl_wait(control_plane: ControlPlane, pool: str, timeout: int = 180) -> float:
    """``kubectl wait --for=condition=UpToDate bnp/POOL``; returns when it did (monotonic)."""
    res = control_plane.kubectl(
        "wait", "--for=condition=UpToDate", f"bnp/{pool}", f"--timeout={timeout}s"
    )
    assert "condition met" in res.stdout, res
    return time.monotonic()


async def booted_digests(api: ApiClient, names: list[str]) -> list[str | None]:
    out = []
    for name in names:
        bn = await get_object(api, BOOTC_NODES, name)
        out.append((((bn.get("status") or {}).get("booted")) or {}).get("imageDigest"))
    return out


# ---------------------------------------------------------------- item 1: kubectl wait


async def test_kubectl_apply_then_wait_returns_only_once_every_node_runs_the_target(
    api: ApiClient,
    control_plane: ControlPlane,
    hosted: HostedNodes,
    make_registry: Callable[..., Registry],
) -> None:
    """``kubectl apply && kubectl wait --for=condition=UpToDate`` gates a CI pipeline:
    it must return only when every matching node runs the target, also after a
    ``kubectl patch`` (the previous generation's True must not satisfy it)."""
    registry = make_registry()
    repo = unique_name("os")
    first = await push(registry, registry.ref(repo, "v1"), "one")
    second = await push(registry, registry.ref(repo, "v2"), "two")
    third = await push(registry, registry.ref(repo, "v3"), "three")
    group = unique_name("wait")
    names = [f"{group}-{i}" for i in range(2)]
    for name in names:
        await hosted.add(name, registry.ref(repo, digest=first), {"group": group})
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=second), 1)
    async with running_controller(api, registry=registry.options()):
        await asyncio.to_thread(control_plane.kubectl, "apply", "-f", "-", input=json.dumps(body))
        await asyncio.to_thread(kubectl_wait, control_plane, group)
        # when wait returned, every node ran the target, each rebooted once
        assert await booted_digests(api, names) == [second, second]
        assert sorted(hosted.reboots) == names
        pool = await get_pool(api, group)
        status = pool["status"]
        assert status["nodeCount"] == 2 and status["updatedCount"] == 2
        assert status["observedGeneration"] == pool["metadata"]["generation"]
        assert status["phase"] == "UpToDate"
        for cond in status["conditions"]:
            assert cond["observedGeneration"] == pool["metadata"]["generation"], cond

        # a patch: the True of the previous generation does not satisfy wait
        patch = {"spec": {"image": {"ref": registry.ref(repo, digest=third)}}}
        await asyncio.to_thread(
            control_plane.kubectl, "patch", f"bnp/{group}", "--type=merge", "-p", json.dumps(patch)
        )
        await asyncio.to_thread(kubectl_wait, control_plane, group)
        assert await booted_digests(api, names) == [third, third]
        assert sorted(hosted.reboots) == sorted(names * 2)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def at_revision(api: ApiClient, resource: Any, name: str, rv: int) -> dict[str, Any]:
    """Object ``name`` as it was at etcd revision ``rv`` (LIST, resourceVersionMatch=Exact)."""
    doc = await request_json(
        api,
        "GET",
        resource.path(),
        query={
            "resourceVersion": str(rv),
            "resourceVersionMatch": "Exact",
            "fieldSelector": f"metadata.name={name}",
        },
    )
    (item,) = doc["items"]
    return dict(item)


async def test_up_to_date_comes_only_after_the_last_node_left_its_slot_and_was_uncordoned(
    api: ApiClient, control_plane: ControlPlane, fleet: Fleet
) -> None:
    """``kubectl wait --for=condition=UpToDate`` returns only once every member is
    out of its reboot slot and uncordoned. The test plays the node's daemon and
    kubelet: the node comes back on the target and Idle while its Node is still
    NotReady, so the rollout cannot release it yet; the pool must not call it
    updated then. Judged at the etcd revision of the UpToDate=True write (the
    cluster as an admin's kubectl saw it), not by timing."""
    group = unique_name("last")
    (name,) = await add_nodes(fleet, group, 1, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(2), 1, paused=True))

        async def staged() -> bool:
            bn = await get_object(api, BOOTC_NODES, name)
            return condition(bn, "Idle").get("reason") == "Staged"

        await wait_for(staged, 30, "the node to stage the target", ignore=(ApiError,))
        fleet.detach(name)  # from here the test is the node's daemon and kubelet
        monitor = await SafetyMonitor(api, group, 1).start()
        try:
            await patch_object(
                api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"paused": False}}}
            )

            async def told_to_reboot() -> bool:
                bn = await get_object(api, BOOTC_NODES, name)
                annotations = bn["metadata"].get("annotations") or {}
                return bool(
                    bn["spec"]["desiredImageState"] == "Booted"
                    and c.REBOOT_REQUESTED_ANNOTATION in annotations
                )

            await wait_for(told_to_reboot, 30, "the node drained and told to reboot")
            # The reboot: the Node goes NotReady and the host comes back on the target,
            # Idle. A Degraded blip, set and cleared, tells when the status reconciler
            # has seen that report: its Degraded=False write comes after it.
            await set_node_ready(api, name, False)
            for degraded in (("True", "Error", "a transient error"), ("False", "Healthy", "")):
                bn = await get_object(api, BOOTC_NODES, name)
                status = daemon_status(bn, image(2), None, image(1), ("True", "Idle"), degraded)
                await patch_object(api, BOOTC_NODES, name, {"status": status}, subresource="status")

                async def seen(want: str = degraded[0]) -> bool:
                    return condition(await get_pool(api, group), "Degraded").get("status") == want

                await wait_for(seen, 30, f"the pool to report Degraded={degraded[0]}")
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            # runs the target, but holds its slot and is cordoned: not updated yet
            assert up["status"] == "False" and up["message"].startswith("0/1 updated; 1 "), up
            assert (pool["status"]["updatedCount"], pool["status"]["updatingCount"]) == (0, 1)
            assert (await get_object(api, NODES, name))["spec"].get("unschedulable")

            # its kubelet reports Ready: the rollout releases it, then the pool is UpToDate
            await set_node_ready(api, name, True)
            await asyncio.to_thread(kubectl_wait, control_plane, group, 60)
            node = await get_object(api, NODES, name)
            bn = await get_object(api, BOOTC_NODES, name)
            assert not node["spec"].get("unschedulable")
            assert c.IN_REBOOT_SLOT_ANNOTATION not in (bn["metadata"].get("annotations") or {})
        finally:
            await monitor.stop()
    assert monitor.violations == [], monitor.violations
    (rv,) = monitor.up_to_date_at  # the one revision at which UpToDate turned True
    pool = await at_revision(api, BOOTC_NODE_POOLS, group, rv)
    assert condition(pool, "UpToDate")["status"] == "True"
    bn = await at_revision(api, BOOTC_NODES, name, rv)
    node = await at_revision(api, NODES, name, rv)
    assert c.IN_REBOOT_SLOT_ANNOTATION not in (bn["metadata"].get("annotations") or {}), bn
    assert not node["spec"].get("unschedulable"), node
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_new_pool_is_not_up_to_date_before_its_nodes_are_matched(
    api: ApiClient, fleet: Fleet
) -> None:
    """The first status of a pool whose nodes already run its image: never a
    premature 0/0 "AllUpdated", and nodeCount counts the matching nodes."""
    group = unique_name("first")
    await add_nodes(fleet, group, 3, image(1))
    seen: list[tuple[str, str, int | None]] = []
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))

        async def done() -> bool:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            if up:
                seen.append((up["status"], up["reason"], pool["status"].get("nodeCount")))
            return up.get("status") == "True"

        await wait_for(done, 30, "the pool to be up to date")
    for status, reason, count in seen:
        assert status == "False" or (reason == "AllUpdated" and count == 3), seen
    pool = await get_pool(api, group)
    assert pool["status"]["nodeCount"] == 3 and pool["status"]["updatedCount"] == 3
    events = await pool_events(api, group)
    assert [e for e in events if e["reason"] == "RolloutComplete"], events
    for e in events:
        assert "0/0" not in e.get("note", ""), e
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_selector_matching_nothing_says_so(api: ApiClient, fleet: Fleet) -> None:
    group = unique_name("none")
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(1)))

        async def said() -> bool:
            up = condition(await get_pool(api, group), "UpToDate")
            return up.get("reason") == "NoMatchingNodes"

        await wait_for(said, 30, "UpToDate saying no node matches")
        up = condition(await get_pool(api, group), "UpToDate")
        assert up["status"] == "True" and "no nodes match" in up["message"]
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def pool_events(api: ApiClient, pool: str) -> list[dict[str, Any]]:
    items, _ = await list_objects(
        api, EVENTS, namespace="default", field_selector=f"regarding.name={pool}"
    )
    return items


# ---------------------------------------------------------------- item 0: Booted by hand


async def test_a_hand_written_booted_is_restored_to_staged(api: ApiClient, fleet: Fleet) -> None:
    """A Staged node of a paused pool with no slot: someone sets Booted by hand. The
    controller owns BootcNode spec and puts Staged back, with a Warning; the node is
    neither cordoned nor rebooted."""
    group = unique_name("hand")
    (name,) = await add_nodes(fleet, group, 1, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(2), 1, paused=True))

        async def staged() -> bool:
            bn = await get_object(api, BOOTC_NODES, name)
            idle = condition(bn, "Idle")
            return idle.get("reason") == "Staged"

        await wait_for(staged, 30, "the node to stage the new image", ignore=(ApiError,))
        # From here the simulated daemon ignores the node: only the controller acts.
        fleet.detach(name)
        await patch_object(api, BOOTC_NODES, name, {"spec": {"desiredImageState": "Booted"}})

        async def restored() -> bool:
            bn = await get_object(api, BOOTC_NODES, name)
            return bool(bn["spec"]["desiredImageState"] == "Staged")

        await wait_for(restored, 30, "the controller to restore Staged")

        async def warned() -> bool:
            items, _ = await list_objects(
                api, EVENTS, namespace="default", field_selector=f"regarding.name={name}"
            )
            return any(e["reason"] == "UnsafeBootedRestored" for e in items)

        await wait_for(warned, 30, "a Warning Event on the node")
        node = await get_object(api, NODES, name)
        assert not node["spec"].get("unschedulable")
        assert not fleet.reboots
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


# ---------------------------------------------------------------- item 2 and bad input


async def test_max_unavailable_zero_says_the_rollout_is_blocked(
    api: ApiClient, fleet: Fleet
) -> None:
    group = unique_name("mu0")
    await add_nodes(fleet, group, 1, image(1))
    async with running_controller(api):
        await create_pool(api, pool_body(group, {"group": group}, image(2), 0))

        async def blocked() -> bool:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            return up.get("reason") == "RolloutBlocked" and "1 staged" in up.get("message", "")

        await wait_for(blocked, 30, "UpToDate=False/RolloutBlocked")
        pool = await get_pool(api, group)
        assert "maxUnavailable is 0" in condition(pool, "UpToDate")["message"]
        assert pool["status"]["phase"] == "Blocked"
        assert not fleet.reboots
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_an_empty_selector_is_warned_about(api: ApiClient, fleet: Fleet) -> None:
    """Kubernetes' meaning is kept (empty selects all), but the admin is told."""
    group = unique_name("all")
    await add_nodes(fleet, group, 1, image(1))
    body = pool_body(group, {}, image(1), 1, paused=True)
    body["spec"]["nodeSelector"] = {}
    async with running_controller(api):
        await create_pool(api, body)

        async def told() -> bool:
            up = condition(await get_pool(api, group), "UpToDate")
            return "selects every node" in up.get("message", "")

        await wait_for(told, 30, "the condition message to name the empty selector")

        async def warned() -> bool:
            events = await pool_events(api, group)
            return any(e["reason"] == "SelectsAllNodes" and e["type"] == "Warning" for e in events)

        await wait_for(warned, 30, "a Warning Event about the empty selector")
        # deleting it gives every node back (the finalizer runs while we still lead)
        await delete_object(api, BOOTC_NODE_POOLS, group)

        async def gone() -> bool:
            try:
                await get_pool(api, group)
            except ApiError as err:
                return err.not_found
            return False

        await wait_for(gone, 60, "the pool to release every node and go")


async def test_an_invalid_member_write_ends_in_a_condition_with_backoff(
    api: ApiClient, fleet: Fleet
) -> None:
    """A BootcNode write the API server refuses as invalid (here: an admission policy
    says no, HTTP 422) is named in a condition and retried with backoff, not in a loop."""
    group = unique_name("rej")
    await add_nodes(fleet, group, 1, image(1))
    policy = f"deny-{group}"
    await request_json(
        api,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    # only this test's objects: the apiserver is shared by the modules of
                    # a worker, and a policy matching every BootcNode refused the next
                    # module's (the expression errs on an object with no labels)
                    "objectSelector": {"matchLabels": {c.POOL_LABEL: group}},
                    "resourceRules": [
                        {
                            "apiGroups": [c.GROUP],
                            "apiVersions": ["*"],
                            "operations": ["CREATE"],
                            "resources": [c.NODE_PLURAL],
                        }
                    ],
                },
                "validations": [
                    {
                        "expression": f"object.metadata.labels['{c.POOL_LABEL}'] != '{group}'",
                        "message": "no BootcNodes for this pool today",
                    }
                ],
            },
        },
    )
    await request_json(
        api,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {"policyName": policy, "validationActions": ["Deny"]},
        },
    )
    probe = {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": {"name": f"{group}-probe", "labels": {c.POOL_LABEL: group}},
        "spec": {"desiredImage": image(1), "desiredImageState": "Staged"},
    }

    async def policy_active() -> bool:
        try:
            await request_json(
                api,
                "POST",
                f"/apis/{c.GROUP}/{c.VERSION}/{c.NODE_PLURAL}",
                query={"dryRun": "All"},
                body=probe,
            )
        except ApiError as err:
            return err.status == 422
        return False

    async def policy_gone() -> bool:
        return not await policy_active()

    await wait_for(policy_active, 30, "the admission policy to take effect")
    try:
        async with running_controller(api) as ctl:
            await create_pool(api, pool_body(group, {"group": group}, image(1)))

            async def named() -> bool:
                deg = condition(await get_pool(api, group), "Degraded")
                return deg.get("reason") == "InvalidSpec" and "no BootcNodes for this pool" in (
                    deg.get("message") or ""
                )

            await wait_for(named, 60, "Degraded/InvalidSpec naming the refusal")
            up = condition(await get_pool(api, group), "UpToDate")
            assert (up["status"], up["reason"]) == ("False", "InvalidSpec"), up
            # retried with backoff: a handful of attempts in 10 s, not hundreds (an
            # observation window, not synchronisation)
            before = ctl.membership._rejections.get(group, 0)
            await asyncio.sleep(10)
            after = ctl.membership._rejections.get(group, 0)
            assert after >= 1 and after - before <= 3, (before, after)
    finally:
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            path = f"/apis/admissionregistration.k8s.io/v1/{plural}/{policy}"
            with contextlib.suppress(ApiError):
                await request_json(api, "DELETE", path)
        # the apiserver unloads a policy asynchronously: the next test sees none
        await wait_for(policy_gone, 30, "the admission policy no longer enforced")
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
