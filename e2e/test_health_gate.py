"""The post-reboot health gate, rollback and canaries end to end (issue 16).

Each scenario runs the real controller against the session's kube-apiserver, with
real daemons on simulated bootc hosts (``hosted``) pulling from a real registry,
watched by the safety monitor:

- ``pods``: a node whose selected pod is not Ready after its reboot keeps its slot;
  the pool and the BootcNode name the pod, past ``timeoutSeconds`` the pool is
  ``Degraded/HealthCheckFailed`` and nobody else reboots (Halt); once the pod is
  Ready the node is released and the rollout resumes by itself;
- ``minReadySeconds``: a node that flaps NotReady inside the window is released
  no earlier than ``minReadySeconds`` after it became Ready again;
- a canary with ``requireApproval``: exactly one node updates, the pool waits
  with ``AwaitingApproval``; approving another digest changes nothing; approving
  the target lets the others go;
- ``bootComplete`` with ``Halt`` and with ``Rollback`` (a boot whose assessment
  fails on the simulated host): see the tests below.

The pods the gate looks at are created by the test on the node, as a kubelet
would report a static (mirror) pod: no kubelet runs here, so the test writes
their Ready condition itself.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import now_rfc3339
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, ApiError, request_bytes
from bootc_operator.kube.rest import create_object, delete_object, get_object, patch_object
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, ensure_namespace, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from e2e.test_rollout_policies import booted, cordoned, report, setup_hosts, up_to_date_on
from hack.testenv.controller import running_controller
from hack.testenv.kubelet import set_node_ready, timestamp
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

NAMESPACE = "health-e2e"


# ------------------------------------------------------------------ helpers


async def node_pod(api: ApiClient, node: str, name: str, labels: dict[str, str]) -> None:
    """A static pod on ``node`` as its kubelet reports it (a mirror pod: drains leave it)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {"kubernetes.io/config.mirror": "e2e"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "example/cni"}]},
    }
    await create_object(api, PODS, body, namespace=NAMESPACE)
    await set_pod_ready(api, name, True)


async def set_pod_ready(api: ApiClient, name: str, ready: bool, since: str = "") -> None:
    """The pod's Ready condition, changed now (or at ``since``)."""
    status = "True" if ready else "False"
    changed = since or timestamp()
    patch = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": changed}],
        }
    }
    await patch_object(
        api,
        PODS,
        name,
        patch,
        namespace=NAMESPACE,
        patch_type="strategic",
        subresource="status",
    )


async def health_note(api: ApiClient, name: str) -> str:
    bn = await get_object(api, BOOTC_NODES, name)
    return str((bn["metadata"].get("annotations") or {}).get(c.HEALTH_CHECK_ANNOTATION, ""))


# ------------------------------------------------------------------ pods + Halt


async def test_a_pod_not_ready_after_the_reboot_holds_the_slot_then_halts_then_resumes(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    await ensure_namespace(api, NAMESPACE)
    group = unique_name("pods")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 3)
    for name in names:
        await node_pod(api, name, f"cni-{name}", {"app": f"cni-{group}"})
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {
        "pods": {"selector": {"matchLabels": {"app": f"cni-{group}"}}, "namespaces": [NAMESPACE]},
        "timeoutSeconds": 20,
    }
    monitor = SafetyMonitor(api, group, 1, target=v2)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: monitor.takes, 90, "a first slot")
        first = monitor.takes[0][1]
        pod = f"cni-{first}"
        # the pod crashes while its node reboots and never becomes Ready again
        await set_pod_ready(api, pod, False)

        async def pending() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            note = await health_note(api, first)
            if up.get("reason") == c.REASON_HEALTH_CHECK_PENDING and note.startswith("Pending"):
                return pool
            return None

        pool = await wait_for(pending, 90, f"{first} rebooted and under its health check")
        up = condition(pool, "UpToDate")
        assert f"{first} (pods: {NAMESPACE}/{pod} is not Ready (0/1 Ready))" in up["message"], up
        assert await health_note(api, first) == (
            f"Pending: pods: {NAMESPACE}/{pod} is not Ready (0/1 Ready)"
        )
        assert await booted(api, first) == v2 and await cordoned(api, first)
        assert monitor.holders() == {first}
        # running the target is not enough to count as updated
        assert pool["status"]["updatedCount"] == 0, pool["status"]
        assert "1 under health check" in up["message"], up

        async def failed() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            deg = condition(pool, "Degraded")
            return pool if deg.get("reason") == c.REASON_HEALTH_CHECK_FAILED else None

        pool = await wait_for(failed, 60, "the gate failing at its timeout")
        deg = condition(pool, "Degraded")
        assert deg["status"] == "True"
        assert f"{first} failed its health check on {v2}: pods: not healthy 20s" in deg["message"]
        assert f"{NAMESPACE}/{pod} is not Ready" in deg["message"], deg
        assert condition(pool, "UpToDate")["reason"] == c.REASON_HEALTH_CHECK_FAILED
        assert pool["status"]["phase"] == c.PHASE_HALTED
        assert (await health_note(api, first)).startswith("Failed: pods: not healthy 20s")
        # halted: the node keeps its slot (unavailable), nobody else reboots
        assert [n for _, n in monitor.takes] == [first]
        assert monitor.holders() == {first} and await cordoned(api, first)

        failures = REGISTRY.get_sample_value(
            "bootc_operator_health_check_failures_total", {"pool": group, "check": "pods"}
        )
        assert failures == 1, failures
        healthy_before = REGISTRY.get_sample_value(
            "bootc_operator_health_check_duration_seconds_count"
        )
        # the pod recovers: the gate passes, the rollout resumes by itself
        await set_pod_ready(api, pod, True)
        await wait_for(lambda: up_to_date_on(api, group, v2, 3), 180, "the rollout finishing")
        pool = await get_pool(api, group)
        assert condition(pool, "Degraded")["status"] == "False"
        assert monitor.takes[0][1] == first and len(monitor.takes) == 3
        for name in names:
            assert await booted(api, name) == v2 and not await cordoned(api, name)
            assert await health_note(api, name) == ""  # cleared with the slot
        healthy = REGISTRY.get_sample_value("bootc_operator_health_check_duration_seconds_count")
        assert healthy is not None and healthy - (healthy_before or 0) == 3, healthy
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health gate: pods", started)


# ------------------------------------------------------------------ stale readiness


async def test_a_pod_ready_from_before_the_reboot_passes_only_once_reported_again(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """Issue 25: the node comes back (Node Ready, daemon Idle on the target) before its
    kubelet has reported its pods again, so the selected pod still says Ready, as it
    did before the reboot. That must not pass the gate; the kubelet's report after
    the reboot does."""
    started = time.monotonic()
    await ensure_namespace(api, NAMESPACE)
    group = unique_name("stale")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 2)
    an_hour_ago = now_rfc3339(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
    for name in names:
        await node_pod(api, name, f"cni-{name}", {"app": f"cni-{group}"})
        await set_pod_ready(api, f"cni-{name}", True, since=an_hour_ago)  # running for long
    hosted.hold_pod_reports(*names)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {
        "pods": {"selector": {"matchLabels": {"app": f"cni-{group}"}}, "namespaces": [NAMESPACE]}
    }
    monitor = SafetyMonitor(api, group, 1, target=v2)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: monitor.takes, 90, "a first slot")
        first = monitor.takes[0][1]
        pod = f"cni-{first}"
        stale = (
            f"Pending: pods: {NAMESPACE}/{pod} has not been reported Ready since the reboot "
            "(0/1 Ready)"
        )

        async def judged_stale() -> bool:
            return await health_note(api, first) == stale

        await wait_for(judged_stale, 90, f"{first} back and its stale pod not counted")
        # back indeed: runs the target, Idle, its Node Ready; the pod says Ready, as of
        # before the reboot was requested
        bn = await get_object(api, BOOTC_NODES, first)
        annotations = bn["metadata"]["annotations"]
        requested = annotations[c.REBOOT_REQUESTED_ANNOTATION]
        assert c.IN_REBOOT_SLOT_ANNOTATION in annotations
        assert await booted(api, first) == v2 and await cordoned(api, first)
        assert condition(bn, c.COND_IDLE)["status"] == "True"
        assert condition(await get_object(api, NODES, first), "Ready")["status"] == "True"
        said = condition(await get_object(api, PODS, pod, NAMESPACE), "Ready")
        assert (said["status"], said["lastTransitionTime"]) == ("True", an_hour_ago), said
        assert an_hour_ago < requested
        assert hosted.pod_reports == []

        async def pool_says_stale() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            fresh = up.get("reason") == c.REASON_HEALTH_CHECK_PENDING
            return pool if fresh and "not been reported Ready since" in up["message"] else None

        pool = await wait_for(pool_says_stale, 30, "the pool naming the stale pod")
        assert pool["status"]["updatedCount"] == 0, pool["status"]
        assert await health_note(api, first) == stale and monitor.holders() == {first}
        assert [n for _, n in monitor.takes] == [first]
        # its kubelet reports the pod again: the gate passes, the rollout goes on
        hosted.release_pod_reports(*names)
        await wait_for(lambda: up_to_date_on(api, group, v2, 2), 180, "the rollout finishing")
        (second,) = set(names) - {first}
        assert [(n, pods) for n, pods, _ in hosted.pod_reports] == [
            (first, [f"{NAMESPACE}/{pod}"]),
            (second, [f"{NAMESPACE}/cni-{second}"]),
        ]
        for name in names:
            assert await health_note(api, name) == ""  # cleared with the slot
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health gate: stale readiness", started)


# ------------------------------------------------------------------ watches end with the pool


async def apiserver_pod_watches(api: ApiClient) -> float:
    """The WATCH requests on pods kube-apiserver is serving now (all scopes)."""
    text = (await request_bytes(api, "GET", "/metrics")).decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "apiserver_longrunning_requests"
        and s.labels.get("verb") == "WATCH"
        and s.labels.get("resource") == "pods"
        and not s.labels.get("subresource")
    )


async def test_a_deleted_pools_pod_watches_end_with_it(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """Issue 25: the health gate's pod watch of a node under check ends when its pool
    is deleted, not when the controller restarts: on the controller's side and on
    kube-apiserver's (one WATCH on pods fewer)."""
    started = time.monotonic()
    await ensure_namespace(api, NAMESPACE)
    group = unique_name("leak")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 2)
    for name in names:  # not Ready: the first node to reboot stays under check
        await node_pod(api, name, f"cni-{name}", {"app": f"cni-{group}"})
        await set_pod_ready(api, f"cni-{name}", False)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {
        "pods": {"selector": {"matchLabels": {"app": f"cni-{group}"}}, "namespaces": [NAMESPACE]}
    }
    async with running_controller(api) as ctl:
        await create_pool(api, body)

        async def under_check() -> str | None:
            for name in names:
                if (await health_note(api, name)).startswith("Pending: pods: "):
                    return name
            return None

        first = await wait_for(
            under_check, 90, "a node rebooted and under its pods check", ignore=(ApiError,)
        )
        # the note was written from the watch's synced cache: the WATCH is open
        assert ctl.health_pods.watching() == {first}
        assert ctl.health_pods.open_watches() == 1
        before = await apiserver_pod_watches(api)
        assert before >= 1, before

        await delete_object(api, BOOTC_NODE_POOLS, group)

        async def pool_gone() -> bool:
            try:
                await get_pool(api, group)
            except ApiError as err:
                return err.not_found
            return False

        await wait_for(pool_gone, 60, "the pool deleted (finalizer removed)")

        async def watches_ended() -> float | None:
            if ctl.health_pods.open_watches():
                return None
            now = await apiserver_pod_watches(api)
            return now if now == before - 1 else None

        after = await wait_for(watches_ended, 30, "the pool's pod watch closed")
        assert ctl.health_pods.watching() == set() and after == before - 1
    report("health gate: watches end with the pool", started)


# ------------------------------------------------------------------ minReadySeconds


async def test_a_node_that_flaps_not_ready_is_released_only_after_min_ready_seconds_again(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    group = unique_name("minready")
    _names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 2)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {"minReadySeconds": 15}
    monitor = SafetyMonitor(api, group, 1, target=v2)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: monitor.takes, 90, "a first slot")
        first = monitor.takes[0][1]

        async def checking() -> bool:
            return (await health_note(api, first)).startswith("Pending: minReadySeconds: Ready")

        await wait_for(checking, 90, f"{first} back and counting minReadySeconds")
        # a flap inside the window: NotReady, then Ready again
        await set_node_ready(api, first, False)

        async def noticed() -> bool:
            return (await health_note(api, first)) == "Pending: Ready: the Node is not Ready"

        await wait_for(noticed, 30, "the gate seeing the node NotReady")
        await set_node_ready(api, first, True)
        node = await get_object(api, NODES, first)
        ready_again = condition(node, "Ready")["lastTransitionTime"]
        released = await wait_for(
            lambda: [t for t, n in monitor.releases if n == first], 60, f"{first} released"
        )
        # released no earlier than minReadySeconds after it became Ready again
        ready_at = dt.datetime.fromisoformat(ready_again.replace("Z", "+00:00"))
        assert monitor.wall(released[0]) >= ready_at + dt.timedelta(seconds=15), (
            monitor.wall(released[0]),
            ready_again,
        )
        await wait_for(lambda: up_to_date_on(api, group, v2, 2), 120, "the rollout finishing")
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health gate: minReadySeconds", started)


# ------------------------------------------------------------------ canary + approval


async def test_one_canary_then_approval_of_exactly_the_target(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    group = unique_name("canary")
    names, repo, (v1, v2) = await setup_hosts(hosted, registry, group, 3)
    canary = names[2]  # labelled: chosen before the others whatever their names
    await patch_object(api, NODES, canary, {"metadata": {"labels": {c.CANARY_LABEL: ""}}})
    body = pool_body(
        group,
        {"group": group},
        registry.ref(repo, digest=v2),
        2,
        canary={"nodes": 1, "requireApproval": True},
    )
    monitor = SafetyMonitor(api, group, 2, target=v2)
    async with monitor, running_controller(api):
        await create_pool(api, body)

        async def awaiting() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            return pool if up.get("reason") == c.REASON_AWAITING_APPROVAL else None

        pool = await wait_for(awaiting, 120, "the canary updated and the pool awaiting approval")
        up = condition(pool, "UpToDate")
        assert up["status"] == "False"
        assert (
            f"1 canary healthy on {v2}; set spec.rollout.approvedDigest to {v2} to continue"
            in up["message"]
        ), up
        assert pool["status"]["phase"] == c.PHASE_AWAITING_APPROVAL
        assert pool["status"]["updatedCount"] == 1
        assert [n for _, n in monitor.takes] == [canary]
        assert await booted(api, canary) == v2
        assert [await booted(api, n) for n in names[:2]] == [v1, v1]

        # approving another digest approves nothing
        wrong = await patch_object(
            api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"approvedDigest": v1}}}
        )

        async def seen(generation: int) -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            return pool if pool["status"].get("observedGeneration") == generation else None

        pool = await wait_for(lambda: seen(wrong["metadata"]["generation"]), 30, "the wrong one")
        assert condition(pool, "UpToDate")["reason"] == c.REASON_AWAITING_APPROVAL
        assert [n for _, n in monitor.takes] == [canary]

        # approving the target lets the others go (two at once: maxUnavailable 2)
        await patch_object(
            api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"approvedDigest": v2}}}
        )
        await wait_for(lambda: up_to_date_on(api, group, v2, 3), 120, "the rollout finishing")
        assert monitor.takes[0][1] == canary
        assert sorted(n for _, n in monitor.takes[1:]) == sorted(names[:2])
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("canary + approval", started)


# ------------------------------------------------------------------ boot assessment

BAD = {"fakebootc.boot-assessment": "fail"}  # every boot of the image fails its assessment


async def bad_and_good_images(
    hosted: HostedNodes, registry: Registry, group: str, n: int
) -> tuple[list[str], str, list[str]]:
    """``n`` hosts on v1, plus v2 (its boots fail their assessment) and v3 (good)."""
    names, repo, (v1,) = await setup_hosts(hosted, registry, group, n, images=1)
    v2 = await push(registry, registry.ref(repo, "v2"), "os bad", labels=BAD)
    v3 = await push(registry, registry.ref(repo, "v3"), "os good")
    return names, repo, [v1, v2, v3]


async def degraded_with(api: ApiClient, pool: str, fragment: str) -> dict[str, Any] | None:
    p = await get_pool(api, pool)
    deg = condition(p, "Degraded")
    ok = deg.get("reason") == c.REASON_HEALTH_CHECK_FAILED and fragment in deg.get("message", "")
    return p if ok else None


async def retarget(api: ApiClient, pool: str, ref: str) -> None:
    await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"image": {"ref": ref}}})


async def test_a_failed_boot_assessment_halts_the_rollout_until_the_image_changes(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """onFailure Halt: the first node boots the bad image, its boot assessment fails,
    the pool names it and nobody else reboots; a good image moves everyone on (the
    halted node gives its slot back while it stages the new image, like any holder
    whose target moves before it is told to reboot)."""
    started = time.monotonic()
    group = unique_name("halt")
    names, repo, (v1, v2, v3) = await bad_and_good_images(hosted, registry, group, 3)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {"bootComplete": True, "timeoutSeconds": 300}
    monitor = SafetyMonitor(api, group, 1)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: monitor.takes, 90, "a first slot")
        first = monitor.takes[0][1]
        pool = await wait_for(
            lambda: degraded_with(api, group, f"{first} failed its health check on {v2}"),
            90,
            "the pool halted by the failed boot assessment",
        )
        message = condition(pool, "Degraded")["message"]
        assert "bootComplete: the boot finished without reaching boot-complete.target" in message
        assert "greenboot-healthcheck.service" in message, message
        assert pool["status"]["phase"] == c.PHASE_HALTED
        assert condition(pool, "UpToDate")["reason"] == c.REASON_HEALTH_CHECK_FAILED
        bn = await get_object(api, BOOTC_NODES, first)
        assert bn["status"]["bootAssessment"]["state"] == "Failed", bn["status"]
        assert (await health_note(api, first)).startswith("Failed: bootComplete: ")
        # Halt: it keeps its slot and stays cordoned; nobody else took one or rebooted
        assert monitor.holders() == {first} and await cordoned(api, first)
        assert [n for _, n in monitor.takes] == [first]
        assert hosted.reboots == [first]
        others = [n for n in names if n != first]
        assert [await booted(api, n) for n in others] == [v1, v1]

        # the admin changes the image: the halted node goes first, then the rest
        await retarget(api, group, registry.ref(repo, digest=v3))
        await wait_for(lambda: up_to_date_on(api, group, v3, 3), 180, "everyone on the good one")
        assert sorted(n for _, n in monitor.takes[1:]) == sorted(names), monitor.takes
        pool = await get_pool(api, group)
        assert condition(pool, "Degraded")["status"] == "False"
        for name in names:
            assert await booted(api, name) == v3 and not await cordoned(api, name)
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health gate: bootComplete + Halt", started)


async def test_a_failed_boot_assessment_is_rolled_back_with_bootc_and_held_until_the_target_changes(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    """onFailure Rollback: the first node fails its boot assessment on v2 and is rolled
    back with ``bootc rollback`` (no pull), released and uncordoned on v1, the pool
    halted naming it, nobody else touched; it is not offered v2 again; a new target
    (v3) clears the hold and everyone updates."""
    started = time.monotonic()
    group = unique_name("rollback")
    names, repo, (v1, v2, v3) = await bad_and_good_images(hosted, registry, group, 3)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {"bootComplete": True, "onFailure": "Rollback"}
    monitor = SafetyMonitor(api, group, 1)
    async with monitor, running_controller(api):
        await create_pool(api, body)
        await wait_for(lambda: monitor.takes, 90, "a first slot")
        first = monitor.takes[0][1]
        host = hosted.hosts[first]

        async def rolled_back() -> dict[str, Any] | None:
            said = f"{first} failed its health check on {v2} and was rolled back"
            pool = await degraded_with(api, group, said)
            released = first not in monitor.holders()
            ok = released and await booted(api, first) == v1 and not await cordoned(api, first)
            return pool if pool is not None and ok else None

        pool = await wait_for(rolled_back, 150, f"{first} rolled back, released, pool halted")
        message = condition(pool, "Degraded")["message"]
        assert f"{first} failed its health check on {v2} and was rolled back" in message, message
        assert "bootComplete" in message, message
        assert pool["status"]["phase"] == c.PHASE_HALTED
        assert "1 rolled back" in condition(pool, "UpToDate")["message"]
        # bootc's own rollback, and no pull for it: v2 was the only image fetched
        assert host.bootc_calls("rollback"), host.calls("bootc")
        assert [p.rsplit("@", 1)[-1] for p in host.pulls()] == [v2], host.pulls()
        status = (await get_object(api, BOOTC_NODES, first))["status"]
        assert status["booted"]["imageDigest"] == v1
        assert status["rollback"]["imageDigest"] == v2
        bn = await get_object(api, BOOTC_NODES, first)
        annotations = bn["metadata"].get("annotations") or {}
        assert annotations.get(c.HEALTH_FAILED_ANNOTATION) == v2
        assert bn["spec"]["desiredImage"].endswith(f"@{v1}")
        assert bn["spec"]["desiredImageState"] == "Staged"
        # halted: nobody else took a slot or rebooted; first rebooted twice (v2, back)
        assert [n for _, n in monitor.takes] == [first]
        assert hosted.reboots == [first, first]
        # the metrics say so too (the controller runs in this process)
        assert REGISTRY.get_sample_value("bootc_operator_rollbacks_total", {"pool": group}) == 1
        failures = REGISTRY.get_sample_value(
            "bootc_operator_health_check_failures_total",
            {"pool": group, "check": "bootComplete"},
        )
        assert failures == 1, failures
        for name in names:
            if name != first:
                assert await booted(api, name) == v1

        # a new target clears the hold: everyone, the rolled-back node included
        await retarget(api, group, registry.ref(repo, digest=v3))
        await wait_for(lambda: up_to_date_on(api, group, v3, 3), 180, "everyone on v3")
        bn = await get_object(api, BOOTC_NODES, first)
        assert c.HEALTH_FAILED_ANNOTATION not in (bn["metadata"].get("annotations") or {})
        pool = await get_pool(api, group)
        assert condition(pool, "Degraded")["status"] == "False"
        for name in names:
            assert await booted(api, name) == v3 and not await cordoned(api, name)
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health gate: bootComplete + Rollback", started)
