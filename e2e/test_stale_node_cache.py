"""Cordon writes never trust a lagging Node cache.

The controller's Node and BootcNode caches come from two watches, and a new
leader's Node cache can predate the old leader's cordon. The wire chaos tier
caught it (seed 733324232): a new leader whose Node watch had not yet caught up
released three slot holders, skipped their uncordon because its cache said
"already schedulable", and left them cordoned with no slot — counted as
unavailable, they stalled the rollout for good. Here the Node informer of the
real controller is stopped (its cache frozen), the Node is cordoned or
uncordoned behind its back, and the controller's cordon writes must still
reach the server.

A slot's take reads the Node from the cache (no GET per take, issue 39 §1) and
cordons it only if the Node is still the version read: behind a frozen cache,
the admin's cordon and annotation made meanwhile are what the slot records.
"""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODES, NODES
from bootc_operator.kube.rest import API_REQUESTS, create_object, get_object, patch_object
from bootc_operator.policy.autoscaler import DO_NOT_DISRUPT, PROTECT, prior_record
from e2e.controllerenv import delete_quietly
from e2e.helpers import image, unique_name, wait_for
from hack.testenv.controller import running_controller


async def unschedulable(api: ApiClient, name: str) -> bool:
    node = await get_object(api, NODES, name)
    return bool((node.get("spec") or {}).get("unschedulable"))


async def test_an_uncordon_is_written_although_the_cache_says_schedulable(
    api: ApiClient,
) -> None:
    name = unique_name("stale")
    await create_object(
        api, NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    )
    try:
        async with running_controller(api) as ctl:
            await wait_for(lambda: ctl.ctx.node(name), 30, "the node in the controller's cache")
            await ctl.nodes.stop()  # the cache now lags the server
            await patch_object(api, NODES, name, {"spec": {"unschedulable": True}})
            cached = ctl.ctx.node(name)
            assert cached is not None
            assert not (cached.get("spec") or {}).get("unschedulable")

            assert await ctl.ctx.set_unschedulable(name, False)  # a slot's release
            assert not await unschedulable(api, name), "left cordoned by a stale cache"

            # The same for the cordon that takes a slot.
            await patch_object(api, NODES, name, {"spec": {"unschedulable": None}})
            assert await ctl.ctx.set_unschedulable(name, True)
            assert await unschedulable(api, name)
            await patch_object(api, NODES, name, {"spec": {"unschedulable": None}})

            # A re-check that trusts the cache is the one place a skip is allowed:
            # the cache (our own last write) says cordoned, so nothing is sent.
            assert await ctl.ctx.set_unschedulable(name, True, trust_cache=True)
            assert not await unschedulable(api, name)
    finally:
        await delete_quietly(api, NODES, name)


def node_gets() -> float:
    """GET nodes/NAME requests this process made so far (the in-process controller's)."""
    return sum(
        sample.value
        for metric in API_REQUESTS.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels.get("verb") == "GET"
        and sample.labels.get("resource") == "nodes"
    )


async def test_a_take_records_the_node_as_the_server_has_it_and_reads_it_only_when_stale(
    api: ApiClient,
) -> None:
    """Two takes by the real rollout reconciler, on a BootcNode of no pool (no
    reconciler acts on it meanwhile): with the cache in step, the take sends no GET
    and records the Node as cached; with the Node cache frozen and the Node cordoned
    and annotated by the admin behind it, the cordon conditional on the cached
    version fails and the take records what the server has."""
    fresh, stale = unique_name("take"), unique_name("stale-take")
    spec = {"desiredImage": image(1), "desiredImageState": "Staged"}
    for name in (fresh, stale):
        await create_object(
            api, NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        )
        await create_object(
            api,
            BOOTC_NODES,
            {
                "apiVersion": c.API_VERSION,
                "kind": c.NODE_KIND,
                "metadata": {"name": name},
                "spec": spec,
            },
        )
    pool = {"metadata": {"name": "no-pool", "uid": ""}}
    try:
        async with running_controller(api) as ctl:
            await wait_for(
                lambda: all(ctl.ctx.node(n) and ctl.ctx.bootc_node(n) for n in (fresh, stale)),
                30,
                "both Nodes and their BootcNodes in the controller's cache",
            )
            gets = node_gets()
            bn = ctl.ctx.bootc_node(fresh)
            assert bn is not None
            await ctl.rollout._take(pool, bn)
            assert node_gets() == gets, "a take with its Node cached read it from the server"
            recorded = (await get_object(api, BOOTC_NODES, fresh))["metadata"]["annotations"]
            assert recorded[c.WAS_CORDONED_ANNOTATION] == "false"
            assert recorded[c.AUTOSCALER_PRIOR_ANNOTATION] == prior_record({})

            await ctl.nodes.stop()  # the cache now lags the server
            await patch_object(
                api,
                NODES,
                stale,
                {
                    "spec": {"unschedulable": True},
                    "metadata": {"annotations": {DO_NOT_DISRUPT: "false"}},
                },
            )
            bn = ctl.ctx.bootc_node(stale)
            assert bn is not None
            await ctl.rollout._take(pool, bn)
            assert node_gets() == gets + 1, "the stale cache was not read again once"
            recorded = (await get_object(api, BOOTC_NODES, stale))["metadata"]["annotations"]
            assert recorded[c.WAS_CORDONED_ANNOTATION] == "true", "the admin's cordon taken as ours"
            assert recorded[c.AUTOSCALER_PRIOR_ANNOTATION] == prior_record(
                {DO_NOT_DISRUPT: "false"}
            )
            node = await get_object(api, NODES, stale)
            assert node["spec"].get("unschedulable") is True
            assert PROTECT.items() <= (node["metadata"].get("annotations") or {}).items()
    finally:
        for name in (fresh, stale):
            await delete_quietly(api, BOOTC_NODES, name)
            await delete_quietly(api, NODES, name)
