"""WWW-Authenticate parsing of the registry client (registry.auth)."""

from __future__ import annotations

import pytest

from bootc_operator.registry import Challenge, parse_www_authenticate
from bootc_operator.registry.auth import is_loopback, may_send_credentials, pick_challenge


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


# ---------------------------------------------------------------- issue 27: cleartext realms


@pytest.mark.parametrize(
    ("registry", "realm", "insecure", "allowed"),
    [
        # https: always (the usual Docker Hub / quay layout: another host)
        ("quay.io", "https://quay.io/v2/auth", False, True),
        ("registry-1.docker.io", "https://auth.docker.io/token", False, True),
        ("reg.example.com:5000", "https://auth.example.com/t", True, True),
        # plain http on another machine, registry TLS-verified: never (the review's repro)
        ("reg.example.com", "http://token-collector.attacker.net/t", False, False),
        ("reg.example.com", "http://reg.example.com/token", False, False),
        ("reg.example.com", "HTTP://token-collector.attacker.net/t", False, False),
        # loopback registry: only a loopback realm
        ("127.0.0.1:5000", "http://127.0.0.1:5001/token", False, True),
        ("localhost:5000", "http://localhost/token", False, True),
        ("[::1]:5000", "http://[::1]:5001/token", False, True),
        ("127.0.0.2", "http://127.9.9.9/token", False, True),
        ("registry.localhost", "http://auth.localhost/token", False, True),
        ("127.0.0.1:5000", "http://token-collector.attacker.net/t", False, False),
        ("127.0.0.1:5000", "http://10.0.0.1/t", False, False),
        ("reg.example.com", "http://127.0.0.1/token", False, False),
        ("localhost.attacker.net", "http://localhost.attacker.net/t", False, False),
        # the registry listed insecure: the admin accepted cleartext for it
        ("reg.example.com:5000", "http://auth.example.com/token", True, True),
        # neither http nor https
        ("reg.example.com", "ftp://auth.example.com/token", True, False),
        ("reg.example.com", "auth.example.com/token", True, False),
    ],
)
def test_may_send_credentials(registry: str, realm: str, insecure: bool, allowed: bool) -> None:
    assert may_send_credentials(registry, realm, insecure=insecure) is allowed


def test_is_loopback() -> None:
    assert all(map(is_loopback, ["localhost", "LOCALHOST.", "a.localhost", "127.1.2.3", "::1"]))
    assert not any(map(is_loopback, ["", "localhost.example", "10.0.0.1", "::2", "host"]))
