"""The metrics guard's pure parts (bootc_operator.runtime.metricsauth): the bearer
header, the review bodies and answers, the verdict cache. Through a real API
server: e2e/test_metrics_auth.py."""

from __future__ import annotations

import pytest

from bootc_operator.runtime.metricsauth import (
    UNAUTHENTICATED,
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
