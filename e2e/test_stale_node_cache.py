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
"""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import NODES
from bootc_operator.kube.rest import create_object, get_object, patch_object
from e2e.controllerenv import delete_quietly
from e2e.helpers import unique_name, wait_for
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
