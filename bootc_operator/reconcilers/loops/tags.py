"""Tag resolution: pools that name a tag roll out whatever digest the tag points to.

``reconcile(pool_name)`` for a pool whose ``spec.image.ref`` is a tag:

- resolves it when due: the first pass of this process, after the ref changed,
  or once ``now >= status.nextTagResolutionTime`` (interval
  ``--tag-resolution-interval``); credentials come from the pool's pull secret;
- success: remembers (ref, digest) for the other reconcilers (its part of the
  controller's ``PoolKnowledge``, ``tags``), writes ``nextTagResolutionTime``, and
  requeues after the interval; a moved tag is an Event and starts a rollout (the
  status loop writes the new ``status.targetDigest`` from the knowledge, membership
  the new desiredImage);
- failure: ``Degraded/TagResolutionError`` (via ``problems``) with the
  registry's message; the previous target is kept, nothing is rolled back;
  retried with capped exponential backoff (never later than the interval).
  The backoff holds whoever enqueues the pool meanwhile (a spec edit that
  leaves the ref alone, a status write): only a new ref or new pull-secret
  content retries at once.

``on_target_changed`` tells the *other* reconcilers that what they see of the
pool changed (a new target, an error appearing, changing or clearing); it is
not called for a failure that repeats the previous one, and it must never
re-queue this reconciler (see the controller's module docstring).

The registry call is injected (``resolve(ref, dockerconfigjson) -> digest``)
so the decision logic is testable and the registry client stays separate.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import now_rfc3339, parse_time
from bootc_operator.kube import ApiError
from bootc_operator.reconcilers.context import Context, Obj, pool_ref
from bootc_operator.reconcilers.watchers.pullsecrets import SecretState

log = logging.getLogger("tags")

Resolve = Callable[[str, bytes | None], Awaitable[str]]
FIRST_RETRY = 5.0


def retry_delay(failures: int, interval: float) -> float:
    """5 s, 10 s, 20 s ... capped at the resolution interval."""
    return float(min(interval, FIRST_RETRY * 2.0 ** max(0, failures - 1)))


class TagReconciler:
    name = "tags"

    def __init__(
        self,
        ctx: Context,
        resolve: Resolve,
        *,
        interval: float,
        secret_state: Callable[[Obj], SecretState | None],
        on_target_changed: Callable[[str], None],
    ) -> None:
        self.ctx = ctx
        self._resolve = resolve
        self.interval = interval
        self._secret_state = secret_state
        self._on_target_changed = on_target_changed
        self.errors: dict[str, str] = {}
        # pool -> (ref, digest) resolved: this loop's part of the knowledge
        self._targets = ctx.knowledge.tags
        self._failures: dict[str, int] = {}
        # pool -> (ref, pull-secret hash, when the next attempt is due) after a failure
        self._retry_at: dict[str, tuple[str, str | None, dt.datetime]] = {}

    def target(self, pool_name: str) -> tuple[str, str] | None:
        """(ref, digest) the pool's tag last resolved to in this process, if any."""
        return self._targets.get(pool_name)

    def problems(self, pool: Obj) -> dict[str, str]:
        err = self.errors.get(pool["metadata"]["name"])
        return {c.REASON_TAG_RESOLUTION_ERROR: err} if err else {}

    def _forget(self, pool_name: str) -> None:
        self._targets.pop(pool_name, None)
        self.errors.pop(pool_name, None)
        self._failures.pop(pool_name, None)
        self._retry_at.pop(pool_name, None)

    async def reconcile(self, pool_name: str) -> float | None:
        ctx = self.ctx
        pool = ctx.live_pool(pool_name)
        if pool is None:
            self._forget(pool_name)
            return None
        policy = ctx.policy(pool)
        if policy.tag is None or policy.repository is None:
            self._forget(pool_name)  # a digest ref, or an invalid one (InvalidSpec)
            return None
        ref = policy.image_ref
        now = ctx.now()
        last = self._targets.get(pool_name)
        next_at = parse_time((pool.get("status") or {}).get("nextTagResolutionTime"))
        if last is not None and last[0] == ref and next_at is not None and now < next_at:
            return (next_at - now).total_seconds() + 0.1
        secret = self._secret_state(pool)
        if secret is not None and secret.pending and not secret.problem:
            return 1.0  # the pull secret's informer has not synced yet
        creds = secret.dockerconfigjson if secret is not None else None
        secret_hash = secret.hash if secret is not None else None
        retry = self._retry_at.get(pool_name)
        if retry is not None and retry[:2] == (ref, secret_hash) and now < retry[2]:
            # Still backing off from a failure with the same ref and credentials.
            return (retry[2] - now).total_seconds() + 0.1
        try:
            digest = await self._resolve(ref, creds)
        except Exception as err:  # the resolver's errors carry readable messages
            failures = self._failures.get(pool_name, 0) + 1
            self._failures[pool_name] = failures
            message = f"cannot resolve {ref}: {err}"
            first = self.errors.get(pool_name) != message
            self.errors[pool_name] = message
            delay = retry_delay(failures, self.interval)
            retry_at = now + dt.timedelta(seconds=delay)
            self._retry_at[pool_name] = (ref, secret_hash, retry_at)
            await self._write(pool, retry_at)
            if first:
                log.warning(message, extra={"pool": pool_name})
                self._on_target_changed(pool_name)  # status shows the new error
            return delay
        self._failures.pop(pool_name, None)
        self._retry_at.pop(pool_name, None)
        had_error = self.errors.pop(pool_name, None) is not None
        previous = last[1] if last is not None and last[0] == ref else None
        self._targets[pool_name] = (ref, digest)
        await self._write(pool, now + dt.timedelta(seconds=self.interval))
        old_status_digest = (pool.get("status") or {}).get("targetDigest")
        if digest != (previous or old_status_digest):
            msg = f"{ref} resolved to {digest}"
            log.info(msg, extra={"pool": pool_name})
            ctx.recorder.emit(pool_ref(pool), "Normal", "TagResolved", "TagResolution", msg)
        if had_error or digest != previous:
            self._on_target_changed(pool_name)
        return self.interval

    async def _write(self, pool: Obj, next_at: dt.datetime) -> None:
        """``nextTagResolutionTime``, this loop's one field: the digest itself is the
        knowledge's ``tags`` part, which the status loop writes as ``targetDigest``."""
        status: dict[str, Any] = {"nextTagResolutionTime": now_rfc3339(next_at)}
        try:
            await self.ctx.patch_pool(pool, {"status": status}, status=True)
        except ApiError as err:
            if not err.not_found:
                raise
