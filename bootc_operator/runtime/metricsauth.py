"""Who may read ``/metrics``: a bearer token, checked by the API server (kubebuilder's filter).

controller-runtime's ``filters.WithAuthenticationAndAuthorization``, the metrics
guard every kubebuilder project ships, done the same way here:

1. **Authentication**: the ``Authorization: Bearer <token>`` header's token goes
   to the API server in a ``TokenReview``; no token, or one it does not
   authenticate, is **401**.
2. **Authorization**: the reviewed user (name, uid, groups, extra) is checked by
   a ``SubjectAccessReview`` for verb ``get`` on the non-resource URL ``/metrics``
   (what the ``bootc-operator-metrics-reader`` ClusterRole grants); denied is **403**.
3. Only then 200 with the metrics.

A review the API server could not answer (unreachable, or it refused our own
ServiceAccount the review: RBAC) is **503** with one log line saying why; it is
never cached, so the next scrape asks again. The token itself is never logged
nor kept: verdicts are cached under its SHA-256, for ``ttl`` seconds (30) and at
most ``size`` (1,024) entries (least recently used dropped first), so a
Prometheus scraping every 30 s costs the API server two small reviews a minute
per scraper, and a flood of made-up tokens cannot grow the cache. Concurrent
requests with one token share one review. A token revoked, or a role unbound,
is honoured after at most ``ttl``.

Pure parts (``bearer_token``, the review bodies and answers, ``VerdictCache``) are
unit-tested; ``MetricsAuthorizer`` is the thin shell that sends the reviews
through any :class:`~bootc_operator.kube.rest.Api` client (the controller's
kubernetes_asyncio client, the daemon's ``kube.lite``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from bootc_operator.kube.rest import Api, ApiError, request_json

log = logging.getLogger("http.metrics-auth")

TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#: seconds a verdict is reused, and how many are kept
DEFAULT_TTL: Final = 30.0
DEFAULT_SIZE: Final = 1024
#: seconds one review may take before the request is answered 503
REVIEW_TIMEOUT: Final = 10.0

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to one request: ``status`` 200, 401, 403 or 503; ``text`` its body."""

    status: int
    text: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


UNAUTHENTICATED: Final = Verdict(401, "Unauthorized: send a ServiceAccount token as Bearer\n")
UNAVAILABLE: Final = Verdict(503, "cannot check the token with the API server now; retry\n")


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None if absent or not Bearer."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def token_review(token: str) -> Obj:
    """The body of a TokenReview of ``token`` (the API server's default audiences)."""
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }


def reviewed_user(review: Obj) -> Obj | None:
    """The user a TokenReview answer authenticated, or None if it did not."""
    status = review.get("status")
    if not isinstance(status, dict) or status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, dict) or not user.get("username"):
        return None
    return user


def access_review(user: Obj, path: str = "/metrics", verb: str = "get") -> Obj:
    """The body of a SubjectAccessReview: may ``user`` ``verb`` the non-resource URL ``path``?"""
    spec: Obj = {
        "user": str(user["username"]),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    for key in ("uid", "groups", "extra"):
        if user.get(key):
            spec[key] = user[key]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_verdict(user: Obj, review: Obj) -> Verdict:
    """200 if the SubjectAccessReview answer allows ``user``, else 403 naming the user."""
    status = review.get("status")
    if isinstance(status, dict) and status.get("allowed") is True:
        return Verdict(200, "")
    return Verdict(403, f"Forbidden: {user['username']} may not get /metrics\n")


class VerdictCache:
    """Verdicts by key for ``ttl`` seconds, at most ``size`` of them (LRU)."""

    def __init__(
        self,
        ttl: float = DEFAULT_TTL,
        size: int = DEFAULT_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if size < 1 or ttl < 0:
            raise ValueError("a verdict cache needs size >= 1 and ttl >= 0")
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[bytes, tuple[float, Verdict]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> Verdict | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, verdict = entry
        if self.clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return verdict

    def put(self, key: bytes, verdict: Verdict) -> None:
        self._entries[key] = (self.clock() + self.ttl, verdict)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


def token_key(token: str) -> bytes:
    """What a verdict is cached under: the token's SHA-256, never the token."""
    return hashlib.sha256(token.encode()).digest()


class ReviewError(Exception):
    """The API server did not answer a review (the reason is logged, never the token)."""


class MetricsAuthorizer:
    """``await check(authorization_header)`` → :class:`Verdict` (see the module docstring)."""

    def __init__(self, api: Api, cache: VerdictCache | None = None) -> None:
        self.api = api
        self.cache = cache or VerdictCache()
        self._inflight: dict[bytes, asyncio.Future[Verdict]] = {}

    async def check(self, header: str | None) -> Verdict:
        token = bearer_token(header)
        if token is None:
            return UNAUTHENTICATED
        key = token_key(token)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        task = asyncio.ensure_future(self._review(token))
        self._inflight[key] = task
        try:
            verdict = await asyncio.shield(task)
        except ReviewError as exc:
            log.warning("a /metrics request got 503: %s", exc)
            return UNAVAILABLE
        finally:
            if task.done():
                self._inflight.pop(key, None)
            else:  # this request was cancelled: the review goes on for the others
                task.add_done_callback(lambda _: self._inflight.pop(key, None))
        self.cache.put(key, verdict)
        return verdict

    async def _review(self, token: str) -> Verdict:
        review = await self._post(TOKEN_REVIEWS, token_review(token), "TokenReview")
        user = reviewed_user(review)
        if user is None:
            return UNAUTHENTICATED
        answer = await self._post(ACCESS_REVIEWS, access_review(user), "SubjectAccessReview")
        return access_verdict(user, answer)

    async def _post(self, path: str, body: Obj, kind: str) -> Obj:
        try:
            return await request_json(
                self.api, "POST", path, body=body, request_timeout=REVIEW_TIMEOUT
            )
        except ApiError as exc:
            hint = ""
            if exc.status == 403:
                hint = (
                    f" (this process' ServiceAccount needs create on {kind.lower()}s: "
                    "the ClusterRole bootc-operator-metrics-auth)"
                )
            raise ReviewError(f"the API server refused the {kind}: {exc}{hint}") from None
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise ReviewError(
                f"the {kind} failed: {type(exc).__name__}: {exc or 'no answer'}"
            ) from None
