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

Anyone who reaches the port can make up tokens, and every new one would cost
the API server two reviews: reviews are **rationed** (``ReviewLimits``). At most
``max_inflight`` (4) run at once, and a token bucket (``rate`` 5 a second,
``burst`` 10) admits new ones; a request beyond them is answered **503** at once
(``Retry-After: 1``), without a review, with one log line a minute counting
them. Allowed verdicts are kept apart (``allowed``, same ``ttl``), so a flood
of made-up tokens cannot evict a scraper's; and a token that was allowed before
(the last ``known`` 64, for an hour) is reviewed again on its own lane
(``max_known_inflight``, 2) outside the bucket: a Prometheus keeps scraping
through a flood, and still loses access within ``ttl`` of a revocation. The
controller sends the reviews through an API client of their own
(``controller.lifecycle``), so they never queue on the connections its leader
Lease is renewed on (which has its own client too).

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
BUSY: Final = Verdict(503, "too many tokens to review now; retry\n")
#: how often the count of requests refused for want of a review is logged
BUSY_LOG_EVERY: Final = 60.0


@dataclass(frozen=True, slots=True)
class ReviewLimits:
    """How many token reviews a process sends: at once, and a second (see the module doc)."""

    max_inflight: int = 4
    rate: float = 5.0
    burst: int = 10
    max_known_inflight: int = 2
    known: int = 64
    known_ttl: float = 3600.0


class TokenBucket:
    """``take()``: True while the bucket holds a token (``rate`` a second, up to ``burst``)."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


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

    def __init__(
        self,
        api: Api,
        cache: VerdictCache | None = None,
        limits: ReviewLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.cache = cache or VerdictCache(clock=clock)
        self.limits = limits or ReviewLimits()
        self.clock = clock
        # allowed verdicts, apart: made-up tokens (never allowed) cannot evict them
        self.allowed = VerdictCache(ttl=self.cache.ttl, size=self.limits.known, clock=clock)
        # tokens allowed before: reviewed again outside the bucket (their own lane)
        self.known = VerdictCache(ttl=self.limits.known_ttl, size=self.limits.known, clock=clock)
        self.bucket = TokenBucket(self.limits.rate, self.limits.burst, clock)
        self._inflight: dict[bytes, asyncio.Future[Verdict]] = {}
        self._running = 0  # reviews of unknown tokens in flight
        self._running_known = 0
        self.refused = 0  # requests answered BUSY, in all
        self._refused_since_log = 0
        self._logged_at: float | None = None

    async def check(self, header: str | None) -> Verdict:
        token = bearer_token(header)
        if token is None:
            return UNAUTHENTICATED
        key = token_key(token)
        cached = self.allowed.get(key) or self.cache.get(key)
        if cached is not None:
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        known = self.known.get(key) is not None
        if not self._admit(known):
            self._busy()
            return BUSY
        task = asyncio.ensure_future(self._review(token))
        self._inflight[key] = task
        if known:
            self._running_known += 1
        else:
            self._running += 1
        task.add_done_callback(lambda _: self._finished(key, known))
        try:
            verdict = await asyncio.shield(task)
        except ReviewError as exc:
            log.warning("a /metrics request got 503: %s", exc)
            return UNAVAILABLE
        if verdict.allowed:
            self.allowed.put(key, verdict)
            self.known.put(key, verdict)
        else:
            self.cache.put(key, verdict)
        return verdict

    def _admit(self, known: bool) -> bool:
        """May a new review start now (``known``: a token allowed before)?"""
        if known:
            return self._running_known < self.limits.max_known_inflight
        return self._running < self.limits.max_inflight and self.bucket.take()

    def _finished(self, key: bytes, known: bool) -> None:
        self._inflight.pop(key, None)
        if known:
            self._running_known -= 1
        else:
            self._running -= 1

    def _busy(self) -> None:
        """Count a request refused for want of a review; log the count once a minute."""
        self.refused += 1
        self._refused_since_log += 1
        now = self.clock()
        if self._logged_at is None or now - self._logged_at >= BUSY_LOG_EVERY:
            log.warning(
                "/metrics: %d requests answered 503 without a token review (more new "
                "tokens than %d reviews at once / %g a second); only the monitoring "
                "namespace should reach this port (the NetworkPolicy)",
                self._refused_since_log,
                self.limits.max_inflight,
                self.limits.rate,
            )
            self._refused_since_log = 0
            self._logged_at = now

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
