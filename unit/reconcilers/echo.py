"""The real :class:`~bootc_operator.controller.Controller` without a server, for the
reconcilers' unit tests: every BootcNode and Node patch is merged into the cached
object (``hack.testenv.mergepatch``), given a new resourceVersion and echoed back as
the MODIFIED watch event the API server would send; ``hold(kind, node)`` keeps that
node's writes of that kind in flight until the returned Event is set. Subclasses say
how a write is recorded (``record``) and build their pool with ``pool_body``."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.controller import Controller
from bootc_operator.informers import Informer
from bootc_operator.workqueue import FakeClock
from hack.testenv.mergepatch import merge_patch

NO_API = cast(ApiClient, None)  # never reached: writes are echoed in memory
REPO = "registry.example.com/os"
OLD, NEW = "sha256:" + "a" * 64, "sha256:" + "b" * 64
SLOT = {
    c.IN_REBOOT_SLOT_ANNOTATION: "2026-01-01T00:00:00.000000Z",
    c.WAS_CORDONED_ANNOTATION: "false",
}


def pool_body(**rollout: Any) -> dict[str, Any]:
    """Pool ``p`` for nodes labelled ``g=p``, its target ``REPO@NEW`` (a digest: known)."""
    spec: dict[str, Any] = {
        "nodeSelector": {"matchLabels": {"g": "p"}},
        "image": {"ref": f"{REPO}@{NEW}"},
    }
    if rollout:
        spec["rollout"] = rollout
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.POOL_KIND,
        "metadata": {
            "name": "p",
            "uid": "u1",
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": [c.POOL_FINALIZER],
        },
        "spec": spec,
    }


class EchoWorld:
    def __init__(self) -> None:
        self.ctl = Controller(NO_API, identity="unit", clock=FakeClock())
        self.held: dict[tuple[str, str], asyncio.Event] = {}
        self._rv = 10
        ctx = self.ctl.ctx
        ctx.patch_bootc_node = self._patch_bn  # type: ignore[method-assign]
        ctx.patch_node = self._patch_node  # type: ignore[method-assign]

    def record(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        """A write as it reaches the server (``kind``: "BootcNode" or "Node")."""

    def hold(self, kind: str, node: str) -> asyncio.Event:
        self.held[(kind, node)] = event = asyncio.Event()
        return event

    async def _echo(
        self, kind: str, informer: Informer, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        if (event := self.held.get((kind, name))) is not None:
            await event.wait()
        self.record(kind, name, copy.deepcopy(patch))
        cached = informer.get(name)
        assert cached is not None, f"{kind} {name} is not in the cache"
        current: dict[str, Any] = merge_patch(copy.deepcopy(cached), patch)
        self._rv += 1
        current["metadata"]["resourceVersion"] = str(self._rv)
        informer.apply("MODIFIED", current)
        return current

    async def _patch_bn(self, obj: Any, patch: dict[str, Any], *, precondition: bool = True) -> Any:
        return await self._echo("BootcNode", self.ctl.bootc_nodes, obj["metadata"]["name"], patch)

    async def _patch_node(self, name: str, patch: dict[str, Any]) -> Any:
        return await self._echo("Node", self.ctl.nodes, name, patch)
