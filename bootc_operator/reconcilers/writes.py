"""The reconcilers' API writes: narrow merge patches, recorded for read-your-writes.

Writes are JSON merge patches that name only the fields the writing reconciler
owns (the one writer of each field: ``docs/development.md``). Where two
reconcilers write the same object (BootcNode: membership its pull secret, reboot
policy and pool label; rollout its target, ``desiredImageState`` and the slot
annotations) the patch carries ``metadata.resourceVersion`` as a precondition: a
write based on a stale read fails with 409 Conflict and the reconcile is retried
from fresh caches, so e.g. membership never re-seals a pull secret from a read
that an update raced. Merge patch was chosen over server-side apply because the writes are few,
small and conditional, and a precondition is exactly the guard these invariants
need. Each answer is recorded in the resource's overlay (``cache.CacheReads``),
through its informer's transform first: what a write returns has the shape of a
cached object (``controller/caches.py``: a Node is only the parts the
reconcilers read).
``ApiWrites`` is the other half of the reconcilers' ``Context``.
"""

from __future__ import annotations

from collections.abc import Mapping

from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    Api,
    ApiError,
    create_object,
    delete_object,
    get_object,
    patch_object,
)
from bootc_operator.kube.rest import request_json
from bootc_operator.policy.ownership import pool_of
from bootc_operator.policy.placement_plan import managed_label_patch
from bootc_operator.policy.slots import node_release_patch, node_take_patch
from bootc_operator.reconcilers.cache import CacheReads, Obj


class ApiWrites(CacheReads):
    """Writes to BootcNodes, Nodes, pools and Pods (evictions); a write that needs to
    know what the cache says (a Node still there) reads it through ``CacheReads``."""

    api: Api

    async def create_bootc_node(self, body: Obj) -> Obj:
        created = self.bootc_nodes.transform(await create_object(self.api, BOOTC_NODES, body))
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
        updated = self.bootc_nodes.transform(await patch_object(self.api, BOOTC_NODES, name, patch))
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
            updated = self.nodes.transform(await patch_object(self.api, NODES, name, patch))
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
        """Node ``name`` as the API server has it now (None: gone): only after a
        conditional write found the cached copy stale (``hold_node``)."""
        try:
            return await get_object(self.api, NODES, name)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def hold_node(self, name: str, *, resource_version: str | None = None) -> bool:
        """A slot taken: cordon Node ``name`` and tell the autoscalers to leave it alone
        (``slots.node_take_patch``); True when it exists. With ``resource_version``
        only if the Node is still that version (else ``ApiError`` 409): the version
        the slot's record of the Node was read from."""
        patch = node_take_patch()
        if resource_version is not None:
            patch["metadata"]["resourceVersion"] = resource_version
        return await self.patch_node(name, patch) is not None

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
