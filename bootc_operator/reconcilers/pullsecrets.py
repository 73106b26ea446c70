"""Pull secrets referenced by pools: watched one by one, validated, hashed.

The controller never lists Secrets: for each ``spec.pullSecretRef`` in use it
runs an informer on exactly that Secret (namespace + ``metadata.name`` field
selector), so RBAC can stay as narrow as "get/list/watch Secrets in the
operator's namespace" (see manifests/rbac). Informers of refs no pool uses any
more are stopped.

``evaluate_secret`` (pure) turns a Secret into a content hash, or a problem
message naming the Secret; membership copies ``pullSecretRef`` and the hash
to every BootcNode only while the Secret is usable, so nodes keep their last
good credentials when it goes missing or turns malformed. Hashes cover the
decoded ``.dockerconfigjson`` bytes; secret content is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import SECRETS

log = logging.getLogger("pullsecrets")

Ref = tuple[str, str]  # (namespace, name)
DOCKERCONFIGJSON = ".dockerconfigjson"


@dataclass(frozen=True, slots=True)
class SecretState:
    hash: str | None = None
    dockerconfigjson: bytes | None = None
    problem: str | None = None
    pending: bool = False  # not read yet (informer not synced)


def ref_of(pool: Mapping[str, Any]) -> Ref | None:
    ref = (pool.get("spec") or {}).get("pullSecretRef")
    if not ref or not ref.get("name") or not ref.get("namespace"):
        return None
    return (str(ref["namespace"]), str(ref["name"]))


def evaluate_secret(ref: Ref, secret: Mapping[str, Any] | None) -> SecretState:
    where = f"pull secret {ref[0]}/{ref[1]}"
    if secret is None:
        return SecretState(problem=f"{where} not found")
    encoded = (secret.get("data") or {}).get(DOCKERCONFIGJSON)
    if encoded is None:
        return SecretState(
            problem=f'{where} has no "{DOCKERCONFIGJSON}" key '
            "(create it with type kubernetes.io/dockerconfigjson)"
        )
    try:
        raw = base64.b64decode(encoded, validate=True)
        doc = json.loads(raw)
    except (binascii.Error, ValueError):
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" is not valid base64 JSON')
    if not isinstance(doc, dict) or not isinstance(doc.get("auths"), dict):
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" has no "auths" object')
    return SecretState(hash=hashlib.sha256(raw).hexdigest()[:32], dockerconfigjson=raw)


class SecretWatcher:
    def __init__(self, api: ApiClient, on_change: Callable[[Ref], None]) -> None:
        self.api = api
        self._on_change = on_change
        self._informers: dict[Ref, Informer] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def ensure(self, refs: set[Ref]) -> None:
        """Watch exactly ``refs``: start informers for new ones, stop the rest."""
        for ref in refs - self._informers.keys():
            inf = Informer(
                self.api, SECRETS, namespace=ref[0], field_selector=f"metadata.name={ref[1]}"
            )
            inf.add_event_handler(self._handler(ref))
            inf.start()
            self._informers[ref] = inf
            log.info("watching pull secret", extra={"secret": f"{ref[0]}/{ref[1]}"})
        for ref in self._informers.keys() - refs:
            inf = self._informers.pop(ref)
            task = asyncio.create_task(inf.stop(), name=f"stop-secret-{ref[0]}-{ref[1]}")
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def _handler(self, ref: Ref) -> EventHandler:
        def changed(*_: Any) -> None:
            self._on_change(ref)

        return EventHandler(on_add=changed, on_update=changed, on_delete=changed)

    def state(self, ref: Ref) -> SecretState:
        inf = self._informers.get(ref)
        if inf is None:
            return SecretState(pending=True)
        if not inf.has_synced:
            err = inf.stats.last_error
            if err:
                return SecretState(
                    pending=True,
                    problem=f"cannot read pull secret {ref[0]}/{ref[1]}: {err[:300]}",
                )
            return SecretState(pending=True)
        return evaluate_secret(ref, inf.get(f"{ref[0]}/{ref[1]}"))

    async def stop(self) -> None:
        for inf in self._informers.values():
            await inf.stop()
        self._informers.clear()
        for task in list(self._stopping):
            await task
