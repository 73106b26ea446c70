"""What every reconciler shares: cached reads (with read-your-writes) and narrow writes.

Reads come only from the shared informers' stores, shadowed by an
:class:`~bootc_operator.informers.overlay.Overlay` per resource so a
reconciler always sees its own last writes.

Writes are JSON merge patches that name only the fields the writing reconciler
owns. Where two reconcilers write the same object (BootcNode: membership owns
``spec.desiredImage``/pull secret and resets ``desiredImageState`` to Staged;
rollout owns the slot annotations and sets ``desiredImageState: Booted``) the
patch carries ``metadata.resourceVersion`` as a precondition: a write based on a
stale read fails with 409 Conflict and the reconcile is retried from fresh
caches, so e.g. rollout can never set Booted on a BootcNode whose desiredImage
membership just changed. Merge patch was chosen over server-side apply because
the writes are few, small and conditional, and a precondition is exactly the
guard these invariants need.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.gates.alerts import AlertGate
from bootc_operator.informers import Informer
from bootc_operator.informers.overlay import Overlay
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    ApiError,
    create_object,
    delete_object,
    get_object,
    patch_object,
)
from bootc_operator.kube.rest import request_json
from bootc_operator.policy.nodestate import NodeView, ViewCache
from bootc_operator.policy.ownership import POOL_INDEX, pool_of
from bootc_operator.policy.placement_plan import managed_label_patch
from bootc_operator.policy.poolspec import PoolPolicy, check_pool
from bootc_operator.policy.slots import node_release_patch, node_take_patch
from bootc_operator.runtime.events import EventRecorder, ObjectRef

Obj = dict[str, Any]
log = logging.getLogger("reconcilers")


def _uid(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def pool_ref(pool: Obj) -> ObjectRef:
    """The pool an Event is about, with its uid (``kubectl describe`` selects by uid)."""
    return ObjectRef.of(pool, c.API_VERSION, c.POOL_KIND)


def node_ref(name: str, uid: str = "") -> ObjectRef:
    """Node ``name`` for an Event; prefer :meth:`Context.node_ref`, which knows the uid."""
    return ObjectRef(api_version="v1", kind="Node", name=name, uid=uid)


def bootc_node_ref(name: str, uid: str = "") -> ObjectRef:
    """BootcNode ``name`` for an Event; prefer :meth:`Context.bootc_node_ref`."""
    return ObjectRef(api_version=c.API_VERSION, kind=c.NODE_KIND, name=name, uid=uid)


@dataclass
class Context:
    api: ApiClient
    pools: Informer
    bootc_nodes: Informer
    nodes: Informer
    recorder: EventRecorder
    # Long-lived streams (the drains' Pod watches) go through their own client so
    # they never hold the connections requests need; None: ``api``.
    watch_api: ApiClient | None = None
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    pool_overlay: Overlay = field(default_factory=Overlay)
    bn_overlay: Overlay = field(default_factory=Overlay)
    node_overlay: Overlay = field(default_factory=Overlay)
    _bn_created: dict[str, str] = field(default_factory=dict)  # name -> pool, until cached
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    # pool name -> (image ref, digest) its tag last resolved to in this process; the
    # tag reconciler owns that knowledge and the controller injects this lookup
    resolved_tag: Callable[[str], tuple[str, str] | None] = lambda pool: None
    # pool -> the repo@digest whose cosign signature verification holds for the keys the
    # pool trusts now; the signature reconciler owns that knowledge, the controller
    # injects this
    verified_image: Callable[[Obj], str | None] = lambda pool: None
    views: ViewCache = field(default_factory=ViewCache)
    # the alert gate of a pool (None: it has no spec.rollout.blockingAlerts); the alert
    # reconciler owns it and the controller injects this lookup
    alert_gate: Callable[[Obj], AlertGate | None] = lambda pool: None
    # pool name -> ((uid, resourceVersion, tag resolution, verification), its policy):
    # the spec is read once per revision, whichever reconciler asks first
    _policies: dict[str, tuple[tuple[Any, ...], PoolPolicy]] = field(default_factory=dict)

    def alerts_blocked(self, pool: Obj) -> bool:
        gate = self.alert_gate(pool)
        return gate is not None and gate.blocked

    @property
    def streams(self) -> ApiClient:
        """The client for watches (``watch_api``, else ``api``)."""
        return self.watch_api if self.watch_api is not None else self.api

    def policy(self, pool: Obj) -> PoolPolicy:
        """The pool's policy (``check_pool`` with this process's tag resolutions),
        resolved once per revision of the pool and tag resolution."""
        meta = pool["metadata"]
        name, version = meta["name"], meta.get("resourceVersion")
        resolved = self.resolved_tag(name)
        verified = self.verified_image(pool)
        key = (meta.get("uid"), version, resolved, verified)
        memo = self._policies.get(name)
        if version is not None and memo is not None and memo[0] == key:
            return memo[1]
        policy = check_pool(pool, dict([resolved]) if resolved else None, verified)
        if version is not None:
            self._policies[name] = (key, policy)
        return policy

    def forget_policy(self, pool: str) -> None:
        """The pool is gone: drop its memoised policy."""
        self._policies.pop(pool, None)

    def pool_lock(self, pool: str) -> asyncio.Lock:
        """Serialises membership and rollout passes of one pool.

        Both write the same Nodes (cordon) and BootcNodes; run concurrently, a
        rollout pass could re-cordon a node that membership is releasing.
        """
        lock = self._locks.get(pool)
        if lock is None:
            lock = self._locks[pool] = asyncio.Lock()
        return lock

    # ---------------------------------------------------------------- reads

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

    # ---------------------------------------------------------------- writes

    async def create_bootc_node(self, body: Obj) -> Obj:
        created = await create_object(self.api, BOOTC_NODES, body)
        name = created["metadata"]["name"]
        self.bn_overlay.wrote(name, created)
        if owner := pool_of(created):
            self._bn_created[name] = owner
        return created

    async def patch_bootc_node(self, obj: Obj, patch: Obj, *, precondition: bool = True) -> Obj:
        """Merge-patch a BootcNode; with ``precondition`` it fails on a stale read (409)."""
        name = obj["metadata"]["name"]
        if precondition:
            meta = patch.setdefault("metadata", {})
            meta["resourceVersion"] = obj["metadata"]["resourceVersion"]
        updated = await patch_object(self.api, BOOTC_NODES, name, patch)
        self.bn_overlay.wrote(name, updated)
        return updated

    async def delete_bootc_node(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        try:
            await delete_object(
                self.api, BOOTC_NODES, name, preconditions={"uid": obj["metadata"]["uid"]}
            )
        except ApiError as err:
            if not err.not_found:
                raise
        self.bn_overlay.deleted(name, obj["metadata"].get("resourceVersion"))
        self._bn_created.pop(name, None)

    async def patch_node(self, name: str, patch: Obj) -> Obj | None:
        """Merge-patch a Node; None when it no longer exists."""
        try:
            updated = await patch_object(self.api, NODES, name, patch)
        except ApiError as err:
            if err.not_found:
                return None
            raise
        self.node_overlay.wrote(name, updated)
        return updated

    async def patch_pool(self, pool: Obj, patch: Obj, *, status: bool = False) -> Obj:
        name = pool["metadata"]["name"]
        if not status:
            patch.setdefault("metadata", {})["resourceVersion"] = pool["metadata"][
                "resourceVersion"
            ]
        updated = await patch_object(
            self.api, BOOTC_NODE_POOLS, name, patch, subresource="status" if status else None
        )
        self.pool_overlay.wrote(name, updated)
        return updated

    async def evict(
        self, namespace: str, name: str, uid: str, grace_period: int | None = None
    ) -> None:
        """Evict the pod; ``uid``: only that pod, not one recreated under its name
        meanwhile (the apiserver answers 409 Conflict then)."""
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options: Obj = {"preconditions": {"uid": uid}} if uid else {}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if options:
            body["deleteOptions"] = options
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        await request_json(self.api, "POST", path, body=body)

    async def force_delete_pod(
        self, namespace: str, name: str, uid: str, grace_period: int | None = None
    ) -> None:
        """DELETE the pod itself, not through the Eviction API (no PodDisruptionBudget
        is asked); ``uid``: only that pod, not one recreated under its name."""
        body: Obj = {"preconditions": {"uid": uid}} if uid else {}
        if grace_period is not None:
            body["gracePeriodSeconds"] = grace_period
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        await request_json(self.api, "DELETE", path, body=body or None)

    # ---------------------------------------------------------------- node helpers

    async def set_unschedulable(self, name: str, value: bool, *, trust_cache: bool = False) -> bool:
        """Cordon/uncordon; True when the Node exists.

        The write is sent whatever the cache says (it is idempotent): the Node
        cache can lag the BootcNode cache (two watches; a new leader's cache may
        predate the old leader's cordon), and a release that skipped its
        uncordon on a stale "already uncordoned" would leave the node cordoned
        with its slot gone. ``trust_cache`` skips a write the cache calls
        useless: only for re-checks that a forced write already preceded.
        """
        node = self.node(name)
        if node is None:
            return False
        if trust_cache and bool(node.get("spec", {}).get("unschedulable")) == value:
            return True
        return await self.patch_node(name, {"spec": {"unschedulable": value or None}}) is not None

    async def live_node(self, name: str) -> Obj | None:
        """Node ``name`` as the API server has it now (None: gone), for what a lagging
        cache must not decide: what a slot records as the Node's prior state."""
        try:
            return await get_object(self.api, NODES, name)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def hold_node(self, name: str) -> bool:
        """A slot taken: cordon Node ``name`` and tell the autoscalers to leave it alone
        (``slots.node_take_patch``), whatever the cache says; True when it exists."""
        return await self.patch_node(name, node_take_patch()) is not None

    async def give_node_back(self, name: str, annotations: Mapping[str, str]) -> None:
        """Restore what a slot changed on Node ``name``, from its BootcNode's
        ``annotations`` (``slots.node_release_patch``). Sent whatever the cache says
        the Node carries (see ``set_unschedulable``)."""
        patch = node_release_patch(annotations)
        if patch and self.node(name) is not None:
            await self.patch_node(name, patch)

    async def set_managed_label(self, name: str, managed: bool) -> bool:
        """Label a member for the daemon (or unlabel it); True when it wrote."""
        node = self.node(name)
        if node is None:
            return False
        labels = managed_label_patch(node["metadata"].get("labels") or {}, managed)
        if not labels:
            return False
        await self.patch_node(name, {"metadata": {"labels": labels}})
        return True
