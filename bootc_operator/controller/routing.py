"""Who wakes whom: informer events and reconcilers' news become queue keys.

``Router`` owns the event handlers on the three shared informers (pools,
BootcNodes, Nodes) and the rules of which queues an event concerns
(``reconcilers.triggers`` holds the pure predicates). Handlers only enqueue.

A reconciler that learned something the others need (a tag resolved or failed)
wakes the *other* reconcilers through ``notify``, never its own queue:
re-adding a key while it is being processed makes the workqueue run it again at
once, which would defeat the delay the reconcile returned (a failing tag hit the
registry in a tight loop). A reconciler's own next run is its return value.
Drains and the health gate's pod watches are event sources like the
informers: they call ``member_changed``.
"""

from __future__ import annotations

from typing import Any

from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.policy.ownership import pool_of
from bootc_operator.policy.placement_plan import wants_look
from bootc_operator.reconcilers.loops.signatures import key_secret_refs
from bootc_operator.reconcilers.triggers import (
    membership_changed,
    node_changed,
    node_membership_changed,
    pool_changed,
    pools_selecting,
)
from bootc_operator.reconcilers.watchers.pullsecrets import ref_of
from bootc_operator.workqueue import RateLimitingQueue

# Pool status is recomputed at most this often for node-level changes. A status
# pass classifies every node of the pool (O(nodes)); run on every BootcNode/Node
# event it dominated the controller's CPU during large rollouts.
STATUS_COALESCE = 1.0
# The one key of the pull-secret watch queue: the set of watched Secrets is one
# piece of state, derived from every pool.
SECRET_WATCHES = "pull-secret-watches"


class Router:
    """Maps events to the pool queues (keyed by pool name), the pull-secret watch
    queue (one key) and the placement queue (keyed by Node name)."""

    def __init__(
        self,
        pools: Informer,
        bootc_nodes: Informer,
        nodes: Informer,
        queues: dict[str, RateLimitingQueue[str]],
        secret_watches: RateLimitingQueue[str],
        placement: RateLimitingQueue[str],
    ) -> None:
        self.pools = pools
        self.bootc_nodes = bootc_nodes
        self.nodes = nodes
        self.queues = queues
        self.secret_watches = secret_watches
        self.placement = placement

    def enqueue(self, pool: str | None) -> None:
        """An event concerns ``pool`` as a whole: every reconciler looks (handlers only)."""
        if pool:
            for queue in self.queues.values():
                queue.add(pool)

    def notify(self, pool: str, *, source: str) -> None:
        """Reconciler ``source`` changed what the others see of ``pool``: wake them.

        Never ``source``'s own queue: its next run is the delay it returns.
        """
        for name, queue in self.queues.items():
            if name != source:
                queue.add(pool)

    def member_changed(self, pool: str | None, *, membership: bool) -> None:
        """A BootcNode or Node of ``pool`` changed (or a drain moved on).

        Rollout looks at once; membership only when ``membership`` (see
        ``triggers.membership_changed``); status within ``STATUS_COALESCE``
        seconds, however many changes arrive meanwhile. Tag resolution does
        not depend on nodes.
        """
        if not pool:
            return
        if membership:
            self.queues["membership"].add(pool)
        self.queues["rollout"].add(pool)
        self.queues["status"].add_after(pool, STATUS_COALESCE)

    def secret_changed(self, ref: tuple[str, str]) -> None:
        """A watched pull or key Secret changed (or its watch synced): its pools look again."""
        for pool in self.pools.list():
            if ref_of(pool) == ref or ref in key_secret_refs(pool):
                self.enqueue(pool["metadata"]["name"])

    def check_all_placements(self) -> None:
        for node in self.nodes.list():
            self.check_placement(node)

    def check_placement(self, node: Any) -> None:
        """A Node labelled for the daemon but without a BootcNode: placement strips it."""
        if node is None:
            return
        name = node["metadata"]["name"]
        if wants_look(node, self.bootc_nodes.get(name) is not None):
            self.placement.add(name)

    def register(self) -> None:
        """Add the event handlers to the informers (once, before they start)."""
        self.pools.add_event_handler(
            EventHandler(
                on_add=self._pool_event, on_update=self._pool_update, on_delete=self._pool_event
            )
        )
        self.bootc_nodes.add_event_handler(
            EventHandler(
                on_add=self._bn_added, on_update=self._bn_updated, on_delete=self._bn_deleted
            )
        )
        self.nodes.add_event_handler(
            EventHandler(
                on_add=self._node_added, on_update=self._node_updated, on_delete=self._node_pools
            )
        )

    # ---------------------------------------------------------------- pools

    def _pool_event(self, obj: Any) -> None:
        self.secret_watches.add(SECRET_WATCHES)
        self.enqueue(unwrap(obj)["metadata"]["name"])
        self.check_all_placements()

    def _pool_update(self, old: Any, new: Any) -> None:
        name = new["metadata"]["name"]
        if ref_of(old) != ref_of(new) or key_secret_refs(old) != key_secret_refs(new):
            self.secret_watches.add(SECRET_WATCHES)
        if pool_changed(_without_status(old), _without_status(new)):
            self.enqueue(name)  # spec, deletion, finalizers or labels
            self.check_all_placements()  # a selector may have let go of a Node
        elif pool_changed(old, new):
            # status.targetDigest moved (the status loop wrote what tag resolution
            # learned; tags' own notify woke the others already): the loops acting on
            # the target look again, never tags (its next run is its own delay).
            self.notify(name, source="tags")
        else:  # only status moved (mostly our own writes)
            self.queues["status"].add_after(name, STATUS_COALESCE)

    # ---------------------------------------------------------------- BootcNodes

    def _bn_added(self, obj: Any) -> None:
        self.member_changed(pool_of(unwrap(obj)), membership=True)

    def _bn_updated(self, old: Any, new: Any) -> None:
        self.member_changed(pool_of(new), membership=membership_changed(old, new))

    def _bn_deleted(self, obj: Any) -> None:
        # A released node may now go to another pool that was waiting for it.
        bn = unwrap(obj)
        self.member_changed(pool_of(bn), membership=True)
        node = self.nodes.get(bn["metadata"]["name"])
        self.check_placement(node)
        if node is not None:
            for pool in pools_selecting(self.pools.list(), node["metadata"].get("labels")):
                self.member_changed(pool, membership=True)

    # ---------------------------------------------------------------- Nodes

    def _node_added(self, obj: Any) -> None:
        self.check_placement(unwrap(obj))
        self._node_pools(obj)

    def _node_pools(self, *nodes: Any, membership: bool = True) -> None:
        labels = [unwrap(n)["metadata"].get("labels") for n in nodes]
        targets = pools_selecting(self.pools.list(), *labels)
        bn = self.bootc_nodes.get(unwrap(nodes[-1])["metadata"]["name"])
        if bn is not None and (owner := pool_of(bn)):
            targets.add(owner)
        for pool in targets:
            self.member_changed(pool, membership=membership)

    def _node_updated(self, old: Any, new: Any) -> None:
        if node_changed(old, new):
            self.check_placement(new)
            self._node_pools(old, new, membership=node_membership_changed(old, new))


def _without_status(pool: Any) -> dict[str, Any]:
    return {"metadata": pool.get("metadata") or {}}
