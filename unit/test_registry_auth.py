"""WWW-Authenticate parsing of the registry client (registry.auth)."""

from __future__ import annotations

import pytest

from bootc_operator.registry import Challenge, parse_www_authenticate
from bootc_operator.registry.auth import pick_challenge


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
            'scope="repository:library/fedora:pull"',
            [
                Challenge(
                    "bearer",
                    {
                        "realm": "https://auth.docker.io/token",
                        "service": "registry.docker.io",
                        "scope": "repository:library/fedora:pull",
                    },
                )
            ],
        ),
        ('Basic realm="Registry Realm"', [Challenge("basic", {"realm": "Registry Realm"})]),
        ("basic realm=simple", [Challenge("basic", {"realm": "simple"})]),
        ("Basic", [Challenge("basic")]),
        (
            'BEARER Realm = "https://a/t" , Service=svc',
            [Challenge("bearer", {"realm": "https://a/t", "service": "svc"})],
        ),
        (
            # a comma inside a quoted scope, escapes, and a second challenge
            r'Bearer realm="https://a/t",scope="repository:x:pull,push",error="say \"hi\"", '
            'Basic realm="r"',
            [
                Challenge(
                    "bearer",
                    {
                        "realm": "https://a/t",
                        "scope": "repository:x:pull,push",
                        "error": 'say "hi"',
                    },
                ),
                Challenge("basic", {"realm": "r"}),
            ],
        ),
        (
            "Negotiate abc123==, Basic realm=r",
            [Challenge("negotiate", {}, "abc123=="), Challenge("basic", {"realm": "r"})],
        ),
        ("Negotiate", [Challenge("negotiate")]),
        ("", []),
        (" , ,", []),
        ('Bearer realm="unterminated', [Challenge("bearer", {"realm": "unterminated"})]),
        ('Bearer realm="a", realm="b"', [Challenge("bearer", {"realm": "a"})]),
    ],
)
def test_parse(header: str, expected: list[Challenge]) -> None:
    assert parse_www_authenticate(header) == expected


def test_repeated_headers() -> None:
    got = parse_www_authenticate(['Basic realm="r"', 'Bearer realm="https://t/",service=s'])
    assert [c.scheme for c in got] == ["basic", "bearer"]
    assert got[1].realm == "https://t/" and got[1].service == "s" and got[1].scope is None


@pytest.mark.parametrize("garbage", ['"', "=", "===", '"a"=b', "Bearer realm=", "@@@ Basic"])
def test_garbage_never_raises(garbage: str) -> None:
    parse_www_authenticate(garbage)


def test_pick_prefers_bearer_with_realm() -> None:
    both = parse_www_authenticate('Basic realm="r", Bearer realm="https://t/"')
    picked = pick_challenge(both)
    assert picked is not None and picked.scheme == "bearer"
    no_realm = parse_www_authenticate('Bearer service="x", Basic realm="r"')
    picked = pick_challenge(no_realm)
    assert picked is not None and picked.scheme == "basic"
    assert pick_challenge(parse_www_authenticate("Negotiate abc==")) is None
