"""The whole system, the Go project's e2e scenarios: real everything, simulated hosts.

One ``hack/sim`` for the module (6 nodes): a real control plane (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok running the Pods),
Debian's docker-registry, two leader-elected ``bootc-operator controller``
processes and one ``bootc-operator daemon`` process per node on a simulated bootc
host; the node simulator performs the reboots. Each scenario runs its own pool on
a few nodes (``e2e.simenv.PoolRun``) with the safety monitor watching from start
to end, and prints the monitor's summary:

- update: stage, cordon, drain, reboot, uncordon (an admin-cordoned node stays so);
- roll back to the previous digest: the nodes boot the old image again;
- a moved tag is noticed and rolled out;
- pause: nodes stage but none takes a reboot slot; resume finishes the rollout;
- a digest the registry does not have: the node is Degraded with bootc's pull
  error, the pool names it, nothing gets staged; a good image clears it;
- an image in a private registry (htpasswd + TLS with its own CA): the tag does
  not resolve without the pool's pull secret, and with it the controller resolves
  it and the daemons pull with the credentials they write to ``auth.json``;
- drains with the sample workload and its PodDisruptionBudget: evictions really
  happen, the pods are rescheduled, the budget is never broken.
"""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import NODES, PODS, SECRETS, ApiError
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    list_objects,
    patch_object,
)
from bootc_operator.registry import RegistryClient
from e2e.helpers import condition, unique_name, wait_for
from e2e.simenv import NAMESPACE, PoolRun, booted_image, digest_of, push, reboots_since
from hack.simlib import Sim, SimConfig
from hack.simlib.workload import LABELS as WORKLOAD_LABELS
from hack.simlib.workload import NAME as WORKLOAD_NAME
from hack.simlib.workload import NAMESPACE as WORKLOAD_NAMESPACE
from hack.testenv import api_client
from hack.testenv.monitor import PDBS
from hack.testenv.push import make_image, push_image
from hack.testenv.registry import Registry

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

ROLLOUT = 120.0  # seconds a rollout of a few nodes may take on a loaded 2-core machine


@pytest.fixture(scope="module")
def sim(private_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """Six nodes; the controllers resolve tags every 2 s and trust the private registry's CA."""
    config = SimConfig(
        nodes=6,
        reboot_seconds=1.0,
        stage_seconds=0.5,
        controllers=2,
        tag_resolution_interval="2s",
        registry_ca_file=str(private_registry.ca_file),
    )
    with Sim(config, tmp_path_factory.mktemp("system") / "sim") as s:
        yield s


@pytest.fixture
async def api(sim: Sim) -> AsyncIterator[ApiClient]:
    async with await api_client(sim.kubeconfig) as client:
        yield client


async def common_image(sim: Sim, nodes: list[str]) -> str:
    images = {booted_image(sim, n) for n in nodes}
    assert len(images) == 1, f"the scenario's nodes run different images: {images}"
    return images.pop()


async def set_unschedulable(api: ApiClient, node: str, value: bool) -> None:
    await patch_object(api, NODES, node, {"spec": {"unschedulable": value}})


# ------------------------------------------------------------------ scenarios


async def test_update_reboots_and_uncordons(api: ApiClient, sim: Sim) -> None:
    nodes = sim.nodes[0:2]
    old = await common_image(sim, nodes)
    # an admin cordoned the second node before: it stays cordoned afterwards
    await set_unschedulable(api, nodes[1], True)
    try:
        async with PoolRun(api, sim, unique_name("update"), nodes, 2) as run:
            await run.create(old)
            await run.wait_up_to_date(digest_of(old))
            new = await push(sim, "os:update")
            await run.set_image(new)
            await run.wait_up_to_date(digest_of(new), ROLLOUT)
            summary = await run.finish(digest_of(new))
            assert summary.reboots == 2 and summary.slots_taken == 2, summary
            assert reboots_since(sim, run.started) == dict.fromkeys(nodes, 1)
            for node in nodes:
                state = sim.host(node).state()
                assert state.booted is not None and state.booted.image == new, node
                assert state.rollback is not None and state.rollback.image == old, node
                bn = await run.bootc_node(node)
                annotations = bn["metadata"].get("annotations") or {}
                assert c.IN_REBOOT_SLOT_ANNOTATION not in annotations, annotations
                assert c.WAS_CORDONED_ANNOTATION not in annotations, annotations
                assert bn["status"]["booted"]["imageDigest"] == digest_of(new)
            first = await get_object(api, NODES, nodes[0])
            second = await get_object(api, NODES, nodes[1])
            assert not first["spec"].get("unschedulable"), "uncordoned after its reboot"
            assert second["spec"].get("unschedulable") is True, "the admin's cordon is kept"
    finally:
        await set_unschedulable(api, nodes[1], False)


async def test_roll_back_to_the_previous_digest(api: ApiClient, sim: Sim) -> None:
    nodes = sim.nodes[2:4]
    old = await common_image(sim, nodes)
    async with PoolRun(api, sim, unique_name("rollback"), nodes, 1) as run:
        await run.create(old)
        await run.wait_up_to_date(digest_of(old))
        new = await push(sim, "os:rollback")
        await run.set_image(new)
        await run.wait_up_to_date(digest_of(new), ROLLOUT)
        # back to where we were: the previous digest, as a user would roll back
        await run.set_image(old)
        await run.wait_up_to_date(digest_of(old), ROLLOUT)
        summary = await run.finish(digest_of(old))
        assert summary.max_slots == 1 and summary.reboots == 4, summary
    assert reboots_since(sim, run.started) == dict.fromkeys(nodes, 2)
    for node in nodes:
        state = sim.host(node).state()
        assert state.booted is not None and state.booted.image == old, node
        assert state.rollback is not None and state.rollback.image == new, node


async def test_moved_tag_is_rolled_out(api: ApiClient, sim: Sim) -> None:
    nodes = sim.nodes[4:6]
    tag = f"moving-{uuid.uuid4().hex[:6]}"
    first = await push(sim, f"os:{tag}")
    tag_ref = f"{first.rsplit('@', 1)[0]}:{tag}"
    async with PoolRun(api, sim, unique_name("tag"), nodes, 2) as run:
        await run.create(tag_ref)
        await run.wait_up_to_date(digest_of(first), ROLLOUT)
        second = await push(sim, f"os:{tag}")  # the tag moves
        assert digest_of(second) != digest_of(first)
        await run.wait_up_to_date(digest_of(second), ROLLOUT)
        pool = await run.get()
        assert pool["spec"]["image"]["ref"] == tag_ref
        assert pool["status"]["updateAvailable"] is False
        for node in nodes:
            bn = await run.bootc_node(node)
            assert bn["spec"]["desiredImage"] == second, "BootcNodes get the digest"
        await run.finish(digest_of(second))
    assert reboots_since(sim, run.started) == dict.fromkeys(nodes, 2)


async def test_pause_stages_without_reboots_and_resume_finishes(api: ApiClient, sim: Sim) -> None:
    nodes = sim.nodes[2:4]
    old = await common_image(sim, nodes)
    async with PoolRun(api, sim, unique_name("pause"), nodes, 2) as run:
        await run.create(old)
        await run.wait_up_to_date(digest_of(old))
        new = await push(sim, "os:paused")
        await run.patch({"image": {"ref": new}, "rollout": {"paused": True}})

        def staged(bn: dict[str, Any]) -> bool:
            status = bn.get("status") or {}
            return condition(bn, c.COND_IDLE).get("reason") == c.REASON_STAGED and (
                status.get("staged") or {}
            ).get("imageDigest") == digest_of(new)

        await run.wait_nodes(staged, None, ROLLOUT, "both nodes staged while paused")
        pool = await run.wait(
            lambda p: (
                condition(p, c.COND_UP_TO_DATE).get("reason") == c.REASON_PAUSED
                and "2 staged" in condition(p, c.COND_UP_TO_DATE).get("message", "")
            ),
            60,
            "UpToDate=False/Paused counting the staged nodes",
        )
        assert pool["status"]["updatedCount"] == 0
        for node in nodes:
            assert booted_image(sim, node) == old
            assert not (await get_object(api, NODES, node))["spec"].get("unschedulable")
        resumed = run.monitor.now()
        await run.patch({"rollout": {"paused": False}})
        await run.wait_up_to_date(digest_of(new), ROLLOUT)
        assert run.monitor.takes_between(0, resumed) == [], "no slot taken while paused"
        await run.finish(digest_of(new))
    assert reboots_since(sim, run.started) == dict.fromkeys(nodes, 1)


async def test_image_missing_from_the_registry_degrades_the_node(api: ApiClient, sim: Sim) -> None:
    node = sim.nodes[0]
    old = await common_image(sim, [node])
    repo = (await push(sim, "os:exists")).rsplit("@", 1)[0]
    missing = f"{repo}@sha256:{uuid.uuid4().hex * 2}"
    host = sim.host(node)
    async with PoolRun(api, sim, unique_name("missing"), [node], 1) as run:
        await run.create(old)
        await run.wait_up_to_date(digest_of(old))
        await run.set_image(missing)

        def failed(bn: dict[str, Any]) -> bool:
            deg = condition(bn, c.COND_DEGRADED)
            return deg.get("status") == "True" and "manifest unknown" in deg.get("message", "")

        await run.wait_nodes(failed, None, 90, "Degraded with the registry's error")
        await run.wait_degraded(c.REASON_NODE_DEGRADED, (node, "Pulling", "manifest unknown"))
        # bootc was asked again (after the backoff): still nothing staged
        await wait_for(
            lambda: sum(missing in argv for argv in host.switch_calls()) >= 2,
            60,
            "a second switch attempt",
        )
        bn = await run.bootc_node(node)
        assert bn["status"].get("staged") is None, bn["status"]
        assert bn["status"]["booted"]["image"] == old
        assert host.state().staged is None
        pool = await run.get()
        assert pool["status"]["degradedCount"] == 1
        # a good image clears it, without a reboot
        await run.set_image(old)
        await run.wait_up_to_date(digest_of(old))
        await run.wait(
            lambda p: condition(p, c.COND_DEGRADED).get("status") == "False", 60, "healthy again"
        )
        summary = await run.finish(digest_of(old))
        assert summary.slots_taken == 0 and summary.reboots == 0, summary


async def test_private_registry_image_with_a_pull_secret(
    api: ApiClient, sim: Sim, private_registry: Registry
) -> None:
    nodes = sim.nodes[4:6]
    old = await common_image(sim, nodes)
    repo = unique_name("private-os")
    async with RegistryClient(private_registry.options()) as client:
        digest = await push_image(
            client,
            private_registry.ref(repo, "v1"),
            make_image(f"private {repo}", version="v1"),
            dockerconfigjson=private_registry.dockerconfigjson(),
        )
    tag_ref = private_registry.ref(repo, "v1")
    ca_file = private_registry.ca_file
    assert ca_file is not None
    for node in nodes:  # the hosts trust the registry's CA, as /etc/containers/certs.d would
        sim.host(node).trust_registry_ca(private_registry.host, ca_file)
    secret = unique_name("pull")
    config_json = private_registry.dockerconfigjson()
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "namespace": NAMESPACE},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config_json).decode()},
    }
    await create_object(api, SECRETS, body, NAMESPACE)
    try:
        async with PoolRun(api, sim, unique_name("private"), nodes, 2) as run:
            await run.create(old)
            await run.wait_up_to_date(digest_of(old))
            # without credentials the tag cannot even be resolved; nothing moves
            await run.set_image(tag_ref)
            await run.wait_degraded(c.REASON_TAG_RESOLUTION_ERROR, (tag_ref,))
            assert all(booted_image(sim, n) == old for n in nodes)
            await run.patch({"pullSecretRef": {"name": secret, "namespace": NAMESPACE}})
            await run.wait_up_to_date(digest, ROLLOUT)
            await run.finish(digest)
            for node in nodes:
                auth = sim.host(node).auth_file
                # rewritten after the reboot emptied /run, owner-only; the daemon
                # writes only the auths, re-serialised
                assert json.loads(auth.read_bytes()) == json.loads(config_json), node
                assert stat.S_IMODE(auth.stat().st_mode) == 0o600, node
                state = sim.host(node).state()
                assert state.booted is not None and state.booted.digest == digest, node
                bn = await run.bootc_node(node)
                assert bn["spec"]["pullSecretRef"] == {"name": secret, "namespace": NAMESPACE}
                assert bn["spec"]["pullSecretHash"]
        assert reboots_since(sim, run.started) == dict.fromkeys(nodes, 1)
    finally:
        try:
            await delete_object(api, SECRETS, secret, NAMESPACE)
        except ApiError as err:
            if not err.not_found:
                raise


def _ready(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in (pod.get("status") or {}).get("conditions") or ()
    )


async def workload_pods(api: ApiClient) -> list[dict[str, Any]]:
    selector = ",".join(f"{k}={v}" for k, v in WORKLOAD_LABELS.items())
    pods, _ = await list_objects(api, PODS, WORKLOAD_NAMESPACE, label_selector=selector)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def test_drains_evict_the_workload_within_its_budget(api: ApiClient, sim: Sim) -> None:
    nodes = sim.nodes[0:2]
    replicas = len(sim.nodes)
    await asyncio.to_thread(sim.deploy_workload, replicas)
    try:

        async def settled() -> list[dict[str, Any]] | None:
            pods = await workload_pods(api)
            pdb = await get_object(api, PDBS, WORKLOAD_NAME, WORKLOAD_NAMESPACE)
            healthy = (pdb.get("status") or {}).get("currentHealthy")
            ok = len(pods) == replicas and all(map(_ready, pods)) and healthy == replicas
            return pods if ok else None

        before = await wait_for(settled, 90, "the workload Running and its budget satisfied")
        evictable = {
            p["metadata"]["name"] for p in before if p["spec"].get("nodeName") in set(nodes)
        }
        assert evictable, f"no workload pod on {nodes}: spread {before}"
        old = await common_image(sim, nodes)
        async with PoolRun(api, sim, unique_name("drain"), nodes, 2) as run:
            await run.create(old)
            await run.wait_up_to_date(digest_of(old))
            new = await push(sim, "os:drain")
            started = time.monotonic()
            await run.set_image(new)
            await run.wait_up_to_date(digest_of(new), ROLLOUT)
            print(f"rollout with drains took {time.monotonic() - started:.1f}s")
            summary = await run.finish(digest_of(new))
            # the monitor saw both reboots, none with a workload pod still bound, and
            # the budget never broken (it would have recorded a violation)
            assert summary.reboots == 2, summary
        after = await wait_for(settled, 90, "the workload back to full strength")
        names = {p["metadata"]["name"] for p in after}
        assert not evictable & names, f"pods {evictable & names} were never evicted"
        assert all(p["spec"].get("nodeName") for p in after), "every pod rescheduled"
    finally:
        await asyncio.to_thread(
            sim.kubectl,
            "delete",
            "-n",
            WORKLOAD_NAMESPACE,
            "deployment,poddisruptionbudget",
            "-l",
            ",".join(f"{k}={v}" for k, v in WORKLOAD_LABELS.items()),
            "--wait=false",
        )
