"""The reconcilers' cached reads: the shared informers' stores, read-your-writes.

Every read comes from an informer's store, shadowed by an
:class:`~bootc_operator.informers.overlay.Overlay` per resource so a reconciler
always sees its own last writes (``writes.ApiWrites`` records them there). No read
here goes to the API server. ``CacheReads`` is one half of the reconcilers'
``Context``; the Event references (``pool_ref``, ``node_ref``) carry the uids the
cache knows.
"""

from __future__ import annotations

from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.informers import Informer
from bootc_operator.informers.overlay import Overlay
from bootc_operator.policy.nodestate import NodeView, ViewCache
from bootc_operator.policy.ownership import POOL_INDEX, pool_of
from bootc_operator.runtime.events import ObjectRef

Obj = dict[str, Any]


def _uid(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def pool_ref(pool: Obj) -> ObjectRef:
    """The pool an Event is about, with its uid (``kubectl describe`` selects by uid)."""
    return ObjectRef.of(pool, c.API_VERSION, c.POOL_KIND)


def node_ref(name: str, uid: str = "") -> ObjectRef:
    """Node ``name`` for an Event; prefer :meth:`CacheReads.node_ref`, which knows the uid."""
    return ObjectRef(api_version="v1", kind="Node", name=name, uid=uid)


def bootc_node_ref(name: str, uid: str = "") -> ObjectRef:
    """BootcNode ``name`` for an Event; prefer :meth:`CacheReads.bootc_node_ref`."""
    return ObjectRef(api_version=c.API_VERSION, kind=c.NODE_KIND, name=name, uid=uid)


class CacheReads:
    """Reads of pools, BootcNodes and Nodes as this process last wrote or saw them.

    The state is the ``Context``'s (a dataclass): the informers, their overlays,
    the BootcNodes created and not yet cached, the members' memoised views."""

    pools: Informer
    bootc_nodes: Informer
    nodes: Informer
    pool_overlay: Overlay
    bn_overlay: Overlay
    node_overlay: Overlay
    _bn_created: dict[str, str]  # name -> pool, until cached
    views: ViewCache

    def pool(self, name: str) -> Obj | None:
        return self.pool_overlay.read(name, self.pools.get(name))

    def live_pool(self, name: str) -> Obj | None:
        """The pool, unless it is gone or being deleted."""
        pool = self.pool(name)
        if pool is None or pool["metadata"].get("deletionTimestamp"):
            return None
        return pool

    def all_pools(self) -> list[Obj]:
        pools = (self.pool_overlay.read(o["metadata"]["name"], o) for o in self.pools.list())
        return [p for p in pools if p is not None]

    def bootc_node(self, name: str) -> Obj | None:
        return self.bn_overlay.read(name, self.bootc_nodes.get(name))

    def node(self, name: str) -> Obj | None:
        return self.node_overlay.read(name, self.nodes.get(name))

    # kubectl describe lists the Events whose object reference carries the
    # described object's uid (``kubectl describe node`` also those with uid = the
    # node's name, kubelet's habit): an Event without it is seen only in
    # ``kubectl get events``. The uid comes from the cache; an object already
    # gone gets an Event without one.

    def node_ref(self, name: str) -> ObjectRef:
        """Node ``name`` for an Event, with its uid when the Node is cached."""
        return node_ref(name, _uid(self.node(name)))

    def bootc_node_ref(self, name: str) -> ObjectRef:
        """BootcNode ``name`` for an Event, with its uid when it is cached."""
        return bootc_node_ref(name, _uid(self.bootc_node(name)))

    def bootc_nodes_of(self, pool: str) -> list[Obj]:
        """The pool's BootcNodes by name, as this process last wrote or saw them."""
        indexed = {o["metadata"]["name"]: o for o in self.bootc_nodes.by_index(POOL_INDEX, pool)}
        names = set(indexed)
        if self._bn_created:
            names |= {n for n, p in list(self._bn_created.items()) if p == pool}
        result = []
        for name in sorted(names):
            cached = indexed.get(name)
            obj = self.bn_overlay.read(name, cached) if len(self.bn_overlay) else cached
            if cached is not None and obj is cached:
                if self._bn_created:
                    self._bn_created.pop(name, None)
                result.append(obj)  # the index already says it belongs to the pool
                continue
            if cached is None:
                cached = self.bootc_nodes.get(name)
                obj = self.bn_overlay.read(name, cached)
            if obj is None:
                self._bn_created.pop(name, None)
                continue
            if cached is not None:
                self._bn_created.pop(name, None)
            if pool_of(obj) == pool:
                result.append(obj)
        return result

    def current_owners(self) -> dict[str, str]:
        owners = {}
        for name in set(self.bootc_nodes.keys()) | set(self._bn_created):
            obj = self.bootc_node(name)
            if obj is not None and (owner := pool_of(obj)):
                owners[name] = owner
        return owners

    def view(self, bootc_node: Obj, targets: frozenset[str]) -> NodeView:
        """``nodestate.view`` of a BootcNode and its Node (read here), memoised."""
        name = bootc_node["metadata"]["name"]
        return self.views.view(bootc_node, self.node(name), targets, live=self.bootc_nodes.store)

    def all_nodes(self) -> list[Obj]:
        nodes = (self.node_overlay.read(o["metadata"]["name"], o) for o in self.nodes.list())
        return [n for n in nodes if n is not None]
