"""Pull secrets referenced by pools: watched one by one, validated, hashed.

(The same per-Secret watches serve the Secrets holding a pool's cosign public keys,
``spec.image.verification.publicKeySecretRefs``: ``SecretWatcher.read``; the
signature reconciler reads and checks those.)

The controller never lists Secrets: for each ``spec.pullSecretRef`` in use it
runs an informer on exactly that Secret (namespace + ``metadata.name`` field
selector), so RBAC can stay as narrow as "get/list/watch Secrets in the
operator's namespace" (see manifests/rbac). Informers of refs no pool uses any
more are stopped.

``evaluate_secret`` (pure) turns a Secret into a version hash, or a problem
message naming the Secret and what is wrong with it. The whole
``.dockerconfigjson`` is validated with the registry client's own parser
(``parse_docker_config``: every ``auths`` entry, each ``auth`` base64 of
``user:password``), whatever the pool's ref, so a secret the tag resolver
would refuse is never handed to the nodes either; and with the nodes' gate
(``registry.hostauth``): nothing but ``auths`` — no ``credHelpers``/``credsStore``,
which would run a program as root on every node. Membership copies
``pullSecretRef`` and the hash to every BootcNode only while the Secret is
usable, so nodes keep their last good credentials when it goes missing or
turns malformed. Secret content is never logged nor quoted in a message.

The hash (``spec.pullSecretHash``, which anyone who may read BootcNodes sees) covers
the Secret's ``metadata.uid`` and ``resourceVersion``, never its content: a hash of
the content would let a weak password be guessed offline (a ``kubectl create secret
docker-registry`` Secret has a fixed layout). Every change of the content changes
the resourceVersion, so the hash still tells the daemons when to re-read; the pair
is stable across controller restarts (no rewrites on every node), and a keyed hash
would need a key to create, keep and protect. A change of metadata alone (a label)
also moves it: the daemons re-read and find the same bytes (no file rewrite).

``SecretWatcher`` owns the per-Secret informers: ``sync(refs)`` (run by the
controller's pull-secret reconcile, never by an event handler) starts and
stops them; ``on_change(ref)`` fires on every event of a watched Secret and
once its informer has synced, so pools waiting for a Secret that does not
exist learn it at once.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bootc_operator import safejson
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import SECRETS, Api
from bootc_operator.registry import InvalidDockerConfig, parse_docker_config
from bootc_operator.registry.hostauth import HostAuthError, host_auth_json

log = logging.getLogger("pullsecrets")

Ref = tuple[str, str]  # (namespace, name)
DOCKERCONFIGJSON = ".dockerconfigjson"


@dataclass(frozen=True, slots=True)
class SecretState:
    hash: str | None = None
    dockerconfigjson: bytes | None = None
    problem: str | None = None
    pending: bool = False  # not read yet (informer not synced)


@dataclass(frozen=True, slots=True)
class WatchedSecret:
    """A watched Secret as its informer has it (``SecretWatcher.read``)."""

    pending: bool  # the informer has not synced yet
    secret: Mapping[str, Any] | None = None  # None once synced: there is no such Secret
    error: str = ""  # the watch's last error while pending


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
    except (binascii.Error, ValueError):
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" is not valid base64')
    try:
        doc = safejson.loads(raw)
    except safejson.JSONInputError as exc:
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" is not valid JSON ({exc})')
    if not isinstance(doc, dict) or not isinstance(doc.get("auths"), dict):
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" has no "auths" object')
    try:
        parse_docker_config(doc)
        host_auth_json(doc)
    except InvalidDockerConfig as err:  # says what is wrong, never the credentials
        return SecretState(problem=f'{where}: in "{DOCKERCONFIGJSON}", {err}')
    except HostAuthError as err:
        return SecretState(problem=f'{where}: "{DOCKERCONFIGJSON}" {err}')
    return SecretState(hash=version_hash(secret), dockerconfigjson=raw)


def version_hash(secret: Mapping[str, Any]) -> str:
    """``spec.pullSecretHash``: of the Secret's uid and resourceVersion, not its content."""
    meta = secret.get("metadata") or {}
    version = f"{meta.get('uid') or ''}/{meta.get('resourceVersion') or ''}"
    return hashlib.sha256(version.encode()).hexdigest()[:32]


class SecretWatcher:
    def __init__(self, api: Api, on_change: Callable[[Ref], None]) -> None:
        self.api = api
        self._on_change = on_change
        self._informers: dict[Ref, Informer] = {}
        self._synced: dict[Ref, asyncio.Task[None]] = {}

    @property
    def watched(self) -> frozenset[Ref]:
        return frozenset(self._informers)

    async def sync(self, refs: set[Ref]) -> None:
        """Watch exactly ``refs``: start informers for new ones, stop the rest."""
        for ref in refs - self._informers.keys():
            inf = Informer(
                self.api, SECRETS, namespace=ref[0], field_selector=f"metadata.name={ref[1]}"
            )
            inf.add_event_handler(self._handler(ref))
            inf.start()
            self._informers[ref] = inf
            self._synced[ref] = asyncio.create_task(
                self._notify_synced(ref, inf), name=f"synced-secret-{ref[0]}-{ref[1]}"
            )
            log.info("watching pull secret", extra={"secret": f"{ref[0]}/{ref[1]}"})
        for ref in self._informers.keys() - refs:
            await self._stop(ref)
            log.info("stopped watching pull secret", extra={"secret": f"{ref[0]}/{ref[1]}"})

    async def _notify_synced(self, ref: Ref, inf: Informer) -> None:
        # A Secret that does not exist produces no event: say "read" once synced.
        await inf.wait_for_sync()
        self._on_change(ref)

    async def _stop(self, ref: Ref) -> None:
        task = self._synced.pop(ref, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        inf = self._informers.pop(ref, None)
        if inf is not None:
            await inf.stop()

    def _handler(self, ref: Ref) -> EventHandler:
        def changed(*_: Any) -> None:
            self._on_change(ref)

        return EventHandler(on_add=changed, on_update=changed, on_delete=changed)

    def read(self, ref: Ref) -> WatchedSecret:
        """What the watch of ``ref`` holds: the Secret (None: it does not exist), or
        pending until its informer synced (with the watch's last error, if any)."""
        inf = self._informers.get(ref)
        if inf is None:
            return WatchedSecret(pending=True)
        if not inf.has_synced:
            return WatchedSecret(pending=True, error=(inf.stats.last_error or "")[:300])
        return WatchedSecret(pending=False, secret=inf.get(f"{ref[0]}/{ref[1]}"))

    def state(self, ref: Ref) -> SecretState:
        watched = self.read(ref)
        if watched.pending:
            if watched.error:
                return SecretState(
                    pending=True,
                    problem=f"cannot read pull secret {ref[0]}/{ref[1]}: {watched.error}",
                )
            return SecretState(pending=True)
        return evaluate_secret(ref, watched.secret)

    async def stop(self) -> None:
        for ref in list(self._informers):
            await self._stop(ref)
