"""Placement: the daemon runs only on Nodes that have a BootcNode.

The DaemonSet selects on ``MANAGED_LABEL``, a ``node-restriction.kubernetes.io``
label that the NodeRestriction admission plugin forbids a kubelet to set on its
own Node. Membership sets it on a member after creating the member's BootcNode
and removes it before deleting that BootcNode. Anyone else may still set it
(an admin, a tool with Node patch rights); ``reconcile(node_name)`` strips it,
and the Go operator's ``LEGACY_MANAGED_LABEL`` (which members carry too, but
which places nothing), from every Node that has no BootcNode and that no pool
selects, so a daemon Pod and its token reach members only.

``placement_plan`` holds the pure decisions; this is their thin shell. It
holds the lock of every pool that selects or owns the Node while it decides
and writes, so a membership pass creating the Node's BootcNode cannot
interleave with a strip.
"""

from __future__ import annotations

import contextlib
import logging

from bootc_operator.policy.ownership import pool_of
from bootc_operator.policy.placement_plan import wants_look
from bootc_operator.reconcilers.context import Context
from bootc_operator.reconcilers.triggers import pools_selecting

log = logging.getLogger("placement")


class PlacementReconciler:
    """Strips the managed labels from Nodes without a BootcNode (keyed by Node name)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def reconcile(self, node_name: str) -> None:
        ctx = self.ctx
        node = ctx.node(node_name)
        if node is None:
            return
        pools = pools_selecting(ctx.all_pools(), node["metadata"].get("labels"))
        bn = ctx.bootc_node(node_name)
        if bn is not None and (owner := pool_of(bn)):
            pools.add(owner)
        async with contextlib.AsyncExitStack() as stack:
            # Membership holds one pool's lock at a time, so taking several (in a
            # fixed order) cannot deadlock with it.
            for pool in sorted(pools):
                await stack.enter_async_context(ctx.pool_lock(pool))
            node = ctx.node(node_name)
            selected = node is not None and bool(
                pools_selecting(ctx.all_pools(), node["metadata"].get("labels"))
            )
            has_bootc_node = ctx.bootc_node(node_name) is not None
            if wants_look(node, has_bootc_node, selected=selected) and await ctx.set_managed_label(
                node_name, False
            ):
                log.warning(
                    "removed the managed label from a node that has no BootcNode",
                    extra={"node": node_name},
                )
