"""Helpers for controller e2e tests: an in-process controller, pools, and a safety log.

``running_controller(api)`` runs the real :class:`bootc_operator.controller.Controller`
(informers, queues, reconcilers; no leader election) on the test's event loop.
``SlotLog`` watches BootcNodes and Nodes from the start of a scenario and
records, at every observed event, how many nodes of a pool hold a reboot slot
and how many are cordoned — the evidence for "never more than maxUnavailable".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.controller import Controller
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, ApiError, create_object
from bootc_operator.kube.rest import delete_object, get_object, patch_object, request_json
from hack.testenv.fleet import Fleet

REPO = "registry.example.com/os"


def digest(n: int) -> str:
    return "sha256:" + f"{n:064x}"


def image(n: int) -> str:
    return f"{REPO}@{digest(n)}"


SYNC_DEADLINE = 60.0


@contextlib.asynccontextmanager
async def running_controller(
    api: ApiClient, workers: int = 2, **options: Any
) -> AsyncIterator[Controller]:
    """The real controller on this loop; ``options`` go to :class:`Controller`."""
    ctl = Controller(api, identity=f"test-{uuid.uuid4().hex[:6]}", workers=workers, **options)
    ctl.factory.start()
    try:
        async with asyncio.timeout(SYNC_DEADLINE):
            await ctl.factory.wait_for_cache_sync()
    except TimeoutError:
        await ctl.factory.stop()
        raise AssertionError(f"controller caches not synced within {SYNC_DEADLINE}s") from None
    task = asyncio.create_task(ctl.run_workers())
    try:
        yield ctl
    finally:
        await ctl.shutdown()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await ctl.factory.stop()


async def add_nodes(fleet: Fleet, group: str, n: int, booted: str, **labels: str) -> list[str]:
    """``n`` Ready nodes ``<group>-n<i>`` labelled ``group=<group>`` running ``booted``."""
    names = [f"{group}-n{i}" for i in range(n)]
    for name in names:
        await fleet.add_node(name, booted, {"group": group, **labels})
    return names


async def create_pool(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    return await create_object(api, BOOTC_NODE_POOLS, body)


async def get_pool(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_object(api, BOOTC_NODE_POOLS, name)


async def delete_quietly(api: ApiClient, resource: Any, name: str) -> None:
    with contextlib.suppress(ApiError):
        await delete_object(api, resource, name)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond["type"] == ctype:
            return dict(cond)
    return {}


@dataclass
class SlotLog:
    """Max concurrent slot holders / cordoned nodes among ``nodes``, over time."""

    api: ApiClient
    nodes: set[str]
    slots: dict[str, bool] = field(default_factory=dict)
    cordoned: dict[str, bool] = field(default_factory=dict)
    max_slots: int = 0
    max_cordoned: int = 0
    timeline: list[tuple[str, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._bn = Informer(self.api, BOOTC_NODES)
        self._nodes = Informer(self.api, NODES)
        self._bn.add_event_handler(
            EventHandler(on_add=self._bn_ev, on_update=lambda o, n: self._bn_ev(n))
        )
        self._nodes.add_event_handler(
            EventHandler(on_add=self._node_ev, on_update=lambda o, n: self._node_ev(n))
        )

    def _record(self, what: str) -> None:
        s = sum(self.slots.values())
        k = sum(self.cordoned.values())
        self.max_slots = max(self.max_slots, s)
        self.max_cordoned = max(self.max_cordoned, k)
        self.timeline.append((what, s, k))

    def _bn_ev(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.nodes:
            ann = obj["metadata"].get("annotations") or {}
            self.slots[name] = c.IN_REBOOT_SLOT_ANNOTATION in ann
            self._record(f"bn {name}")

    def _node_ev(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.nodes:
            self.cordoned[name] = bool(obj.get("spec", {}).get("unschedulable"))
            self._record(f"node {name}")

    async def __aenter__(self) -> SlotLog:
        self._bn.start()
        self._nodes.start()
        await self._bn.wait_for_sync()
        await self._nodes.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._bn.stop()
        await self._nodes.stop()


PODS_PATH = "/api/v1/namespaces/{ns}/pods"


async def create_pod(
    api: ApiClient,
    name: str,
    node: str,
    labels: dict[str, str],
    *,
    namespace: str = "default",
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod bound straight to ``node`` (no scheduler), deleted at once when evicted."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner:
        meta["ownerReferences"] = [owner]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.example.com/app:1"}],
        },
    }
    await create_object(api, PODS, body, namespace)
    # No kubelet runs: report the pod Running and Ready ourselves, or the eviction
    # API would skip PodDisruptionBudgets for a Pending pod.
    now = "2026-01-01T00:00:00Z"
    status = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            ],
        }
    }
    return await patch_object(
        api, PODS, name, status, namespace, patch_type="strategic", subresource="status"
    )


async def create_blocking_pdb(
    api: ApiClient, name: str, labels: dict[str, str], namespace: str = "default"
) -> None:
    """A PDB no eviction of the selected pods can satisfy (minAvailable: 100%)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": "100%", "selector": {"matchLabels": labels}},
    }
    await request_json(
        api, "POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body=body
    )
