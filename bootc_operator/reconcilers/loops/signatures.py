"""Signature verification: a pool with ``spec.image.verification`` rolls out signed digests only.

``reconcile(pool_name)`` for a pool that requires signatures and names a digest (a
digest ref, or the digest its tag resolved to: the policy's ``candidate_digest``):

- collects the trusted keys (``collect_keys``, pure): the inline PEMs and the keys
  of the Secrets named by ``publicKeySecretRefs``, read from the controller's
  per-Secret watches (``SecretWatcher.read``, shared with the pull secrets);
- asks the ``VerdictCache`` for (image, digest, key set), else fetches the
  ``sha256-<hex>.sig`` documents with the pool's pull secret and verifies them
  (``registry.signature``); the verdict is cached, a registry failure is not;
- ``Verified``: remembers (``repo@digest``, the key set's fingerprint) for the
  other reconcilers (its part of the controller's ``PoolKnowledge``,
  ``signatures``, read as ``PoolKnowledge.verified``). Only then does
  ``check_pool`` make the digest the pool's target, so membership and rollout
  never write an unverified ``desiredImage``;
- anything else (unsigned, wrong key, a payload for another digest, an unreadable
  signature): ``Degraded/SignatureVerificationFailed`` with the verdict's message
  and a Warning Event (once per message), and the digest stays unverified: no node
  stages it, nodes stay on what they run (the digest verified before with the same
  keys, if any, stays the target, so a rollout to it completes and its reboot slots
  are released). Looked at again when the cache's refusal is due
  (``VerdictCache``: 2 s after the first refusal, doubling with each refusal in a
  row up to a minute, with jitter: a signature pushed later is seen within seconds),
  or at once when the spec or a key Secret changes. When that is, is the pool's
  ``status.nextSignatureCheckTime`` (``kubectl bootc why`` shows it), also while a
  registry failure is retried; cleared once nothing is refused;
- keys that cannot be had (a key Secret deleted, without its data key, a key that
  does not parse): the same reason, and the verification held is dropped;
- a registry that cannot be asked (connection, auth, 5xx): fail closed,
  ``Degraded/SignatureRegistryError``, retried with capped exponential backoff.

A verification holds only for the key set that made it: the fingerprints of the
keys themselves (``keys_fingerprint``: sha256 of each key's SubjectPublicKeyInfo),
not the spec's text, which names a Secret whatever it holds. ``verified(pool)``
checks that on every call, against the keys the pool trusts *now* (inline, and
read from the watched Secrets; memoised on their content): a key Secret deleted,
emptied or rotated, or an inline key changed, makes it answer None at once, before
this reconciler has even run, so no other reconciler can hand the digest to a
node. The target stays withdrawn until a digest verifies with the new keys.

``on_change`` tells the *other* reconcilers that what they see of the pool changed
(verified, or an error appearing, changing or clearing), as tag resolution does.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api import defaults
from bootc_operator.api.timefmt import now_rfc3339
from bootc_operator.kube import ApiError
from bootc_operator.reconcilers.context import Context, Obj, pool_ref
from bootc_operator.reconcilers.loops.tags import retry_delay
from bootc_operator.reconcilers.watchers.pullsecrets import Ref, SecretState, WatchedSecret
from bootc_operator.registry.signature import (
    InvalidPublicKey,
    SignatureDocuments,
    TrustedKey,
    Verdict,
    VerdictCache,
    keys_fingerprint,
    keyset_id,
    load_public_keys,
)

log = logging.getLogger("signatures")

#: ``(host/repo@sha256:…, dockerconfigjson) -> the signature documents``
FetchSignature = Callable[[str, bytes | None], Awaitable[SignatureDocuments]]
PENDING_RETRY = 1.0  # a key or pull Secret whose watch has not synced yet
#: past a refusal's re-check time (monotonic clocks of the queue and of the cache)
RECHECK_MARGIN = 0.05
NEXT_CHECK_FIELD = "nextSignatureCheckTime"


@dataclass(frozen=True, slots=True)
class KeySet:
    """The trusted keys of a pool, or why they cannot be had (yet)."""

    keys: tuple[TrustedKey, ...] = ()
    problem: str = ""
    pending: bool = False

    @property
    def fingerprint(self) -> str | None:
        """``keys_fingerprint`` of a usable key set (None: a problem, or pending)."""
        if self.problem or self.pending or not self.keys:
            return None
        return keys_fingerprint(self.keys)


def key_secret_refs(pool: Mapping[str, Any]) -> set[Ref]:
    """(namespace, name) of every Secret the pool's verification takes keys from."""
    verification = ((pool.get("spec") or {}).get("image") or {}).get("verification") or {}
    refs = set()
    for ref in verification.get("publicKeySecretRefs") or []:
        if isinstance(ref, Mapping) and ref.get("name") and ref.get("namespace"):
            refs.add((str(ref["namespace"]), str(ref["name"])))
    return refs


def collect_keys(verification: Mapping[str, Any], read: Callable[[Ref], WatchedSecret]) -> KeySet:
    """The trusted keys of ``spec.image.verification`` (``read``: a watched Secret).

    Every key must be usable: a key that does not parse, a Secret or data key that
    is missing, is a problem naming it (never quoting the Secret's content), not a
    key silently left out. A Secret not read yet is ``pending``.
    """
    keys: list[TrustedKey] = []
    try:
        for n, pem in enumerate(verification.get("publicKeys") or []):
            keys.extend(load_public_keys(str(pem), f"verification.publicKeys[{n}]"))
        for ref in verification.get("publicKeySecretRefs") or []:
            ns, name = str(ref.get("namespace", "")), str(ref.get("name", ""))
            data_key = str(ref.get("key") or defaults.PUBLIC_KEY_SECRET_KEY)
            where = f"Secret {ns}/{name} key {data_key}"
            watched = read((ns, name))
            if watched.pending:
                if watched.error:
                    return KeySet(problem=f"cannot read the key {where}: {watched.error}")
                return KeySet(pending=True)
            if watched.secret is None:
                return KeySet(problem=f"the key {where}: Secret {ns}/{name} not found")
            encoded = (watched.secret.get("data") or {}).get(data_key)
            if encoded is None:
                return KeySet(problem=f"the key {where}: the Secret has no {data_key!r}")
            try:
                pem_bytes = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                return KeySet(problem=f"the key {where}: not valid base64")
            keys.extend(load_public_keys(pem_bytes, where))
    except InvalidPublicKey as err:  # names the key, never quotes it
        return KeySet(problem=f"trusted key unusable: {err}")
    if not keys:
        return KeySet(problem="spec.image.verification names no key")
    return KeySet(keys=tuple(keys))


class TrustedKeys:
    """The keys each pool trusts, as its spec and the watched key Secrets say now,
    parsed again only when what they are read from changed. The controller's
    ``PoolKnowledge`` reads their fingerprints (a verification holds only while the
    pool trusts exactly the keys that made it); the signature loop verifies with them."""

    def __init__(self, read_secret: Callable[[Ref], WatchedSecret]) -> None:
        self._read_secret = read_secret
        # pool -> (what its keys were read from, the key set, its fingerprint)
        self._keys: dict[str, tuple[tuple[Any, ...], KeySet, str | None]] = {}

    def current(self, pool: Obj) -> tuple[KeySet, str | None]:
        """The pool's trusted keys and their fingerprint (None: not usable)."""
        name = pool["metadata"]["name"]
        verification = ((pool.get("spec") or {}).get("image") or {}).get("verification") or {}
        source = (
            json.dumps(verification, sort_keys=True, separators=(",", ":")),
            tuple(_secret_source(self._read_secret(ref)) for ref in sorted(key_secret_refs(pool))),
        )
        memo = self._keys.get(name)
        if memo is not None and memo[0] == source:
            return memo[1], memo[2]
        keyset = collect_keys(verification, self._read_secret)
        fingerprint = keyset.fingerprint
        self._keys[name] = (source, keyset, fingerprint)
        return keyset, fingerprint

    def fingerprint(self, pool: Obj) -> str | None:
        return self.current(pool)[1]

    def forget(self, pool_name: str) -> None:
        self._keys.pop(pool_name, None)


class SignatureReconciler:
    name = "signatures"

    def __init__(
        self,
        ctx: Context,
        fetch: FetchSignature,
        *,
        keys: TrustedKeys,
        pull_secret: Callable[[Obj], SecretState | None],
        on_change: Callable[[str], None],
        cache: VerdictCache | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        max_retry: float = 60.0,
    ) -> None:
        self.ctx = ctx
        self._fetch = fetch
        self.keys = keys
        self._pull_secret = pull_secret
        self._on_change = on_change
        self.cache = cache if cache is not None else VerdictCache()
        self._monotonic = monotonic
        self.max_retry = max_retry
        # pool -> (repo@digest, keys' fingerprint): this loop's part of the knowledge
        self._verified = ctx.knowledge.signatures
        # pool -> (Degraded reason, message): this loop's other part of the knowledge
        self.errors = ctx.knowledge.signature_errors
        self._failures: dict[str, int] = {}  # pool -> registry failures in a row
        # pool -> (repo@digest, when a registry failure may be retried)
        self._retry_at: dict[str, tuple[str, dt.datetime]] = {}

    def verified(self, pool: Obj) -> str | None:
        """The ``repo@digest`` verified for the pool, while that verification holds
        (``PoolKnowledge.verified``)."""
        return self.ctx.knowledge.verified(pool)

    def current_keys(self, pool: Obj) -> tuple[KeySet, str | None]:
        return self.keys.current(pool)

    def problems(self, pool: Obj) -> dict[str, str]:
        err = self.errors.get(pool["metadata"]["name"])
        return {err[0]: err[1]} if err else {}

    def _forget(self, pool_name: str) -> None:
        self.keys.forget(pool_name)
        changed = self._verified.pop(pool_name, None) is not None
        changed = self.errors.pop(pool_name, None) is not None or changed
        self._failures.pop(pool_name, None)
        self._retry_at.pop(pool_name, None)
        if changed:
            self._on_change(pool_name)

    async def reconcile(self, pool_name: str) -> float | None:
        ctx = self.ctx
        pool = ctx.live_pool(pool_name)
        if pool is None:
            self._forget(pool_name)
            return None
        policy = ctx.policy(pool)
        digest = policy.candidate_digest
        if policy.verification is None:
            self._forget(pool_name)
            await self._publish_next_check(pool, None)
            return None
        if policy.repository is None or digest is None:
            # Nothing to verify yet (a new tag not resolved, an invalid ref): what was
            # verified stays (it is the target meanwhile), a failure of another ref goes.
            if self.errors.pop(pool_name, None) is not None:
                self._on_change(pool_name)
            await self._publish_next_check(pool, None)
            return None
        image = policy.repository
        desired = f"{image}@{digest}"
        keyset, fingerprint = self.current_keys(pool)
        if keyset.pending:
            return PENDING_RETRY
        if keyset.problem or fingerprint is None:
            # whatever was verified no longer holds (``verified`` already says so)
            self._fail(
                pool,
                c.REASON_SIGNATURE_VERIFICATION_FAILED,
                keyset.problem or "spec.image.verification names no key",
                withdraw_any=True,
            )
            await self._publish_next_check(pool, None)
            return None  # the spec or the Secret changing wakes this reconciler
        ident = keyset_id(keyset.keys)
        verdict = self.cache.get(image, digest, ident, now=self._monotonic())
        if verdict is None:
            fetched = await self._check(pool, image, digest, keyset.keys)
            if not isinstance(fetched, Verdict):
                return fetched  # seconds until the next try
            verdict = fetched
        if not verdict.verified:
            self._fail(
                pool,
                c.REASON_SIGNATURE_VERIFICATION_FAILED,
                verdict.message,
                withdraw=desired,
            )
            # looked at again when the refusal is due (VerdictCache's backoff)
            due = self.cache.next_check(image, digest, ident)
            wait = self.cache.recheck_after
            if due is not None:
                wait = max(0.0, due - self._monotonic())
            await self._publish_next_check(pool, ctx.now() + dt.timedelta(seconds=wait))
            return wait + RECHECK_MARGIN
        self._pass(pool, desired, fingerprint, verdict)
        await self._publish_next_check(pool, None)
        return None

    async def _check(
        self, pool: Obj, image: str, digest: str, keys: tuple[TrustedKey, ...]
    ) -> Verdict | float:
        """Fetch the signatures of ``image@digest`` and judge them against ``keys``
        (the verdict cached); or, when they cannot be fetched now, seconds to the next try.
        """
        pool_name = pool["metadata"]["name"]
        desired = f"{image}@{digest}"
        pull = self._pull_secret(pool)
        if pull is not None and pull.pending and not pull.problem:
            return PENDING_RETRY
        retry = self._retry_at.get(pool_name)
        now = self.ctx.now()
        if retry is not None and retry[0] == desired and now < retry[1]:
            return (retry[1] - now).total_seconds() + 0.1
        try:
            docs = await self._fetch(desired, pull.dockerconfigjson if pull else None)
        except Exception as err:  # the registry client's errors carry readable messages
            failures = self._failures[pool_name] = self._failures.get(pool_name, 0) + 1
            delay = retry_delay(failures, self.max_retry)
            self._retry_at[pool_name] = (desired, now + dt.timedelta(seconds=delay))
            self._fail(
                pool,
                c.REASON_SIGNATURE_REGISTRY_ERROR,
                f"cannot check the signature of {desired}: {err}; "
                "nothing stages until it can (fail closed)",
            )
            await self._publish_next_check(pool, self._retry_at[pool_name][1])
            return delay
        self._failures.pop(pool_name, None)
        self._retry_at.pop(pool_name, None)
        verdict = docs.verify(image, digest, keys)
        self.cache.put(image, digest, keyset_id(keys), verdict, now=self._monotonic())
        return verdict

    async def _publish_next_check(self, pool: Obj, when: dt.datetime | None) -> None:
        """``status.nextSignatureCheckTime``: when a refused (or unreachable) signature is
        checked again, for ``kubectl bootc why``; None clears it. Written on change only."""
        value = now_rfc3339(when + dt.timedelta(microseconds=999_999)) if when else None
        if (pool.get("status") or {}).get(NEXT_CHECK_FIELD) == value:
            return
        try:
            await self.ctx.patch_pool(pool, {"status": {NEXT_CHECK_FIELD: value}}, status=True)
        except ApiError as err:
            if not err.not_found:
                raise

    def _pass(self, pool: Obj, desired: str, fingerprint: str, verdict: Verdict) -> None:
        name = pool["metadata"]["name"]
        had_error = self.errors.pop(name, None) is not None
        new = self._verified.get(name) != (desired, fingerprint)
        self._verified[name] = (desired, fingerprint)
        if new:
            log.info(verdict.message, extra={"pool": name, "image": desired})
            self.ctx.recorder.emit(
                pool_ref(pool),
                "Normal",
                "SignatureVerified",
                "SignatureVerification",
                verdict.message,
            )
        if new or had_error:
            self._on_change(name)

    def _fail(
        self,
        pool: Obj,
        reason: str,
        message: str,
        *,
        withdraw: str = "",
        withdraw_any: bool = False,
    ) -> None:
        """Report a failure; ``withdraw``: the digest that failed, whose earlier
        verification (with other key content) no longer counts; ``withdraw_any``: the
        keys are unusable, nothing verified holds. Otherwise a digest verified earlier
        with the same keys stays the target while a new one fails (``check_pool``)."""
        name = pool["metadata"]["name"]
        withdrawn = False
        held = self._verified.get(name)
        if held is not None and (withdraw_any or held[0] == withdraw):
            del self._verified[name]
            withdrawn = True
        first = self.errors.get(name) != (reason, message)
        self.errors[name] = (reason, message)
        if first:
            log.warning(message, extra={"pool": name, "reason": reason})
            self.ctx.recorder.emit(
                pool_ref(pool), "Warning", reason, "SignatureVerification", message
            )
        if first or withdrawn:
            self._on_change(name)


def _secret_source(watched: WatchedSecret) -> tuple[Any, ...]:
    """What the keys read from a watched Secret depend on: its uid and resourceVersion
    (which every change of its data moves), else (an object never stored) its data."""
    secret = watched.secret
    if secret is None:
        return (watched.pending, watched.error, None)
    meta = secret.get("metadata") or {}
    if meta.get("resourceVersion"):
        return (False, "", (meta.get("uid"), meta["resourceVersion"]))
    data = secret.get("data") or {}
    return (False, "", tuple(sorted((str(k), str(v)) for k, v in data.items())))
