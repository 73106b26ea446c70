"""The metrics guard's pure parts (bootc_operator.runtime.metricsauth): the bearer
header, the review bodies and answers, the verdict cache; and how reviews are rationed
(in flight, a token bucket, a lane for tokens allowed before), with the API round
trips replaced. Through a real API server: e2e/test_metrics_auth.py."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bootc_operator.kube.rest import Api
from bootc_operator.runtime.metricsauth import (
    BUSY,
    UNAUTHENTICATED,
    MetricsAuthorizer,
    ReviewLimits,
    TokenBucket,
    Verdict,
    VerdictCache,
    access_review,
    access_verdict,
    bearer_token,
    reviewed_user,
    token_key,
    token_review,
)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def", "abc.def"),
        ("bearer abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic YWxpY2U6czNjcmV0", None),
        ("Bearer a b", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_token_review_body() -> None:
    assert token_review("t") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t"},
    }


def test_reviewed_user_only_when_authenticated() -> None:
    user = {"username": "system:serviceaccount:mon:prom", "uid": "u1", "groups": ["g"]}
    assert reviewed_user({"status": {"authenticated": True, "user": user}}) == user
    assert reviewed_user({"status": {"authenticated": False, "user": user}}) is None
    assert reviewed_user({"status": {"authenticated": True, "user": {}}}) is None
    assert reviewed_user({"status": {"error": "token expired"}}) is None
    assert reviewed_user({}) is None


def test_access_review_asks_for_get_on_the_metrics_url_as_the_whole_user() -> None:
    user = {
        "username": "system:serviceaccount:mon:prom",
        "uid": "u1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]},
    }
    body = access_review(user)
    assert body["kind"] == "SubjectAccessReview"
    assert body["spec"] == {
        "user": "system:serviceaccount:mon:prom",
        "uid": "u1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    assert "uid" not in access_review({"username": "alice"})["spec"]


def test_access_verdict() -> None:
    user = {"username": "alice"}
    assert access_verdict(user, {"status": {"allowed": True}}).status == 200
    denied = access_verdict(user, {"status": {"allowed": False, "reason": "no"}})
    assert denied.status == 403 and "alice" in denied.text
    assert access_verdict(user, {}).status == 403


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_cache_expires_after_the_ttl() -> None:
    clock = Clock()
    cache = VerdictCache(ttl=30, size=4, clock=clock)
    ok = Verdict(200, "")
    cache.put(b"a", ok)
    clock.now = 29.9
    assert cache.get(b"a") == ok
    clock.now = 30.0
    assert cache.get(b"a") is None
    assert len(cache) == 0, "an expired entry is dropped when met"


def test_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    clock = Clock()
    cache = VerdictCache(ttl=30, size=2, clock=clock)
    cache.put(b"a", Verdict(200, ""))
    cache.put(b"b", UNAUTHENTICATED)
    assert cache.get(b"a") is not None  # a is now the most recent
    cache.put(b"c", Verdict(403, ""))
    assert len(cache) == 2
    assert cache.get(b"b") is None
    assert cache.get(b"a") is not None and cache.get(b"c") is not None


def test_cache_rejects_nonsense_bounds() -> None:
    with pytest.raises(ValueError, match="size"):
        VerdictCache(size=0)


def test_the_cache_key_is_not_the_token() -> None:
    key = token_key("secret-token")
    assert b"secret-token" not in key and len(key) == 32
    assert key == token_key("secret-token") != token_key("secret-token2")


# ------------------------------------------------------------------ rationed reviews


class Reviews(MetricsAuthorizer):
    """The authorizer with its API round trips replaced: ``good`` tokens are allowed,
    any other is unknown; each review waits for ``gate`` (so tests hold them in flight)."""

    def __init__(self, clock: Clock, **limits: Any) -> None:
        super().__init__(cast(Api, None), limits=ReviewLimits(**limits), clock=clock)
        self.good: set[str] = set()
        self.gate = asyncio.Event()
        self.gate.set()
        self.reviews: list[str] = []

    async def _review(self, token: str) -> Verdict:
        self.reviews.append(token)
        await self.gate.wait()
        return Verdict(200, "") if token in self.good else UNAUTHENTICATED


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_the_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, 3, clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.5  # one token back
    assert [bucket.take(), bucket.take()] == [True, False]
    clock.now += 100  # never more than the burst
    assert sum(bucket.take() for _ in range(10)) == 3
    with pytest.raises(ValueError, match="rate > 0"):
        TokenBucket(0, 1, clock)


async def test_reviews_in_flight_are_bounded_beyond_them_503_at_once() -> None:
    """Issue 37 item 2: every made-up token cost a review, without limit."""
    auth = Reviews(Clock(), max_inflight=2, burst=100)
    auth.gate.clear()
    held = [asyncio.ensure_future(auth.check(bearer(f"t{i}"))) for i in range(2)]
    for _ in range(100):  # let both requests start their reviews
        if len(auth.reviews) == 2:
            break
        await asyncio.sleep(0)
    assert await auth.check(bearer("t2")) == BUSY  # at once, no review
    assert auth.reviews == ["t0", "t1"] and auth.refused == 1
    auth.gate.set()
    assert [await h for h in held] == [UNAUTHENTICATED] * 2
    assert await auth.check(bearer("t2")) == UNAUTHENTICATED  # room again


async def test_new_tokens_are_reviewed_at_the_buckets_rate() -> None:
    clock = Clock()
    auth = Reviews(clock, rate=1.0, burst=3)
    answers = [await auth.check(bearer(f"made-up-{i}")) for i in range(5)]
    assert answers == [UNAUTHENTICATED] * 3 + [BUSY] * 2
    assert len(auth.reviews) == 3
    clock.now += 1.0
    assert await auth.check(bearer("made-up-9")) == UNAUTHENTICATED
    # a verdict cached: no review, no token taken
    assert await auth.check(bearer("made-up-0")) == UNAUTHENTICATED and len(auth.reviews) == 4


async def test_a_scraper_keeps_its_access_through_a_flood_of_made_up_tokens() -> None:
    clock = Clock()
    auth = Reviews(clock, rate=1.0, burst=2, max_known_inflight=1)
    auth.cache = VerdictCache(ttl=30, size=4, clock=clock)  # a flood evicts every entry
    auth.good.add("prometheus")
    assert (await auth.check(bearer("prometheus"))).allowed
    flood = [await auth.check(bearer(f"made-up-{i}")) for i in range(50)]
    assert flood.count(BUSY) == 49  # the bucket had one token left
    # its verdict was not evicted by the flood
    assert (await auth.check(bearer("prometheus"))).allowed
    reviews = len(auth.reviews)
    # past the ttl it is reviewed again, outside the empty bucket (its own lane)
    clock.now += 31
    refilled = [await auth.check(bearer(f"made-up-{c}")) for c in "xyz"]
    assert refilled == [UNAUTHENTICATED, UNAUTHENTICATED, BUSY]  # the burst, then none
    assert (await auth.check(bearer("prometheus"))).allowed
    assert auth.reviews[reviews:] == ["made-up-x", "made-up-y", "prometheus"]
    # revoked: the next review says so (no verdict outlives the ttl)
    auth.good.clear()
    clock.now += 31
    assert await auth.check(bearer("prometheus")) == UNAUTHENTICATED
