"""The fault proxy's pure decisions: the seeded profile and the per-request draw."""

from __future__ import annotations

import random

import pytest

from hack.testenv.faultproxy import ALLOWED, KINDS, Hold, Profile, Refusal, draw, request_class


def test_a_seed_gives_the_same_profile_and_draws() -> None:
    assert Profile.from_seed(42) == Profile.from_seed(42)
    assert Profile.from_seed(42) != Profile.from_seed(43)
    profile = Profile.from_seed(42)

    def draws(stream: str) -> list[str | None]:
        rng = random.Random(stream)
        return [draw(rng, profile, "write") for _ in range(500)]

    assert draws("42/controller-1") == draws("42/controller-1")
    assert draws("42/controller-1") != draws("42/controller-2")


def test_the_rate_is_the_share_of_requests_hit() -> None:
    profile = Profile(rate=0.1, weights=tuple((k, 1.0) for k in KINDS))
    rng = random.Random(0)
    hits = sum(draw(rng, profile, "read") is not None for _ in range(10_000))
    assert 800 < hits < 1200, hits


@pytest.mark.parametrize("cls", ["read", "write", "watch"])
def test_a_request_only_gets_what_its_class_can_suffer(cls: str) -> None:
    profile = Profile(rate=1.0, weights=tuple((k, 1.0) for k in KINDS))
    rng = random.Random(1)
    seen = {draw(rng, profile, cls) for _ in range(2000)}
    assert seen == ALLOWED[cls]


def test_request_classes() -> None:
    assert request_class("GET", "watch=true&resourceVersion=5") == "watch"
    assert request_class("GET", "watch=1") == "watch"
    assert request_class("GET", "labelSelector=a") == "read"
    assert request_class("PATCH", "") == "write"
    assert request_class("DELETE", "") == "write"


def test_a_refusal_matches_reads_of_its_path_with_its_query_only() -> None:
    rule = Refusal(503, "/api/v1/pods", (("fieldSelector", "spec.nodeName=n1"),))
    query = {"fieldSelector": "spec.nodeName=n1", "limit": "500"}
    assert rule.matches("read", "/api/v1/pods", query)
    assert not rule.matches("watch", "/api/v1/pods", query)  # its watches get through
    assert not rule.matches("write", "/api/v1/pods", query)
    assert not rule.matches("read", "/api/v1/nodes", query)
    assert not rule.matches("read", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n2"})
    assert not rule.matches("read", "/api/v1/pods", {})
    assert Refusal(500, "/api/v1/pods").matches("read", "/api/v1/pods", query)


def test_a_hold_matches_its_method_and_path_only() -> None:
    rule = Hold("POST", "/api/v1/namespaces/default/pods/web-0/eviction")
    assert rule.matches("POST", "/api/v1/namespaces/default/pods/web-0/eviction")
    assert not rule.matches("GET", "/api/v1/namespaces/default/pods/web-0/eviction")
    assert not rule.matches("POST", "/api/v1/namespaces/default/pods/web-1/eviction")
    assert rule.waiting == 0 and not rule.released.is_set()
