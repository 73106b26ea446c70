"""dockerconfigjson parsing and credential matching of the registry client."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from bootc_operator.registry import Credentials, InvalidDockerConfig, parse_docker_config
from bootc_operator.registry.credentials import (
    api_endpoint,
    api_repository,
    normalize_key,
    normalize_registry,
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def auths(entries: dict[str, Any]) -> bytes:
    return json.dumps({"auths": entries}).encode()


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("quay.io", ("quay.io", True)),
        ("Quay.IO", ("quay.io", False)),
        ("quay.io:443", ("quay.io", False)),
        ("reg.example.com:5000", ("reg.example.com:5000", True)),
        ("https://reg.example.com:5000", ("reg.example.com:5000", False)),
        ("https://reg.example.com:5000/v2/", ("reg.example.com:5000", False)),
        ("http://127.0.0.1:5000", ("127.0.0.1:5000", False)),
        ("https://index.docker.io/v1/", ("docker.io", False)),
        ("index.docker.io", ("docker.io", False)),
        ("registry-1.docker.io", ("docker.io", False)),
        ("docker.io", ("docker.io", True)),
        ("docker.io/nginx", ("docker.io/library/nginx", False)),
        ("quay.io/org", ("quay.io/org", True)),
        ("quay.io/org/os/", ("quay.io/org/os", False)),
        ("[::1]:5000", ("[::1]:5000", True)),
    ],
)
def test_key_normalisation(key: str, expected: tuple[str, bool]) -> None:
    assert normalize_key(key) == expected


# (auths keys, registry, repository) -> which key's credentials are used (None: none)
MATCHING: list[tuple[list[str], str, str, str | None]] = [
    (["quay.io"], "quay.io", "org/os", "quay.io"),
    (["quay.io"], "quay.io:443", "org/os", "quay.io"),
    (["https://quay.io"], "quay.io", "org/os", "https://quay.io"),
    (["quay.io"], "quay.io:8443", "org/os", None),
    (["reg.example.com:5000"], "reg.example.com:5000", "os", "reg.example.com:5000"),
    (["reg.example.com:5000"], "reg.example.com", "os", None),
    (["reg.example.com"], "reg.example.com:5000", "os", None),
    (
        ["https://reg.example.com:5000/v1/"],
        "reg.example.com:5000",
        "os",
        "https://reg.example.com:5000/v1/",
    ),
    (["http://127.0.0.1:5000"], "127.0.0.1:5000", "os", "http://127.0.0.1:5000"),
    (["localhost:5000"], "127.0.0.1:5000", "os", None),
    (["https://index.docker.io/v1/"], "docker.io", "org/os", "https://index.docker.io/v1/"),
    (["index.docker.io"], "docker.io", "library/fedora", "index.docker.io"),
    (["docker.io"], "index.docker.io", "fedora", "docker.io"),
    (["registry-1.docker.io"], "docker.io", "fedora", "registry-1.docker.io"),
    (["docker.io/library/fedora"], "docker.io", "fedora", "docker.io/library/fedora"),
    (["docker.io/fedora"], "docker.io", "library/fedora", "docker.io/fedora"),
    (["quay.io", "quay.io/org"], "quay.io", "org/os", "quay.io/org"),
    (["quay.io", "quay.io/org", "quay.io/org/os"], "quay.io", "org/os", "quay.io/org/os"),
    (["quay.io/org"], "quay.io", "other/os", None),
    (["quay.io/org"], "quay.io", "organisation/os", None),
    (["QUAY.io"], "quay.io", "org/os", "QUAY.io"),
    (["example.com"], "registry.example.com", "os", None),
]


@pytest.mark.parametrize(("keys", "registry", "repository", "expected"), MATCHING)
def test_credential_matching(
    keys: list[str], registry: str, repository: str, expected: str | None
) -> None:
    # the user name says which key was used (user names cannot hold a colon)
    config = parse_docker_config(
        auths({k: {"auth": b64(f"user{i}:pw")} for i, k in enumerate(keys)})
    )
    creds = config.credentials_for(registry, repository)
    if expected is None:
        assert creds is None
    else:
        assert creds == Credentials(f"user{keys.index(expected)}", "pw")


def test_exact_key_wins_over_aliases_whatever_the_order() -> None:
    doc = {
        "https://index.docker.io/v1/": {"auth": b64("legacy:pw")},
        "docker.io": {"auth": b64("modern:pw")},
        "index.docker.io": {"auth": b64("alias:pw")},
    }
    creds = parse_docker_config(auths(doc)).credentials_for("docker.io", "library/fedora")
    assert creds is not None and creds.username == "modern"
    # without an exact key, the first in the file wins
    doc.pop("docker.io")
    creds = parse_docker_config(auths(doc)).credentials_for("docker.io", "library/fedora")
    assert creds is not None and creds.username == "legacy"


def test_auth_field_forms() -> None:
    config = parse_docker_config(
        {
            "auths": {
                "a.example": {"auth": b64("alice:pa:ss:word")},
                "b.example": {"username": "bob", "password": "secret"},
                "c.example": {"auth": b64("carol:one"), "username": "x", "password": "y"},
                "d.example": {},  # a credential-helper leftover: ignored
                "e.example": {"username": "erin"},
            }
        }
    )
    assert config.credentials_for("a.example") == Credentials("alice", "pa:ss:word")
    assert config.credentials_for("b.example") == Credentials("bob", "secret")
    assert config.credentials_for("c.example") == Credentials("carol", "one")
    assert config.credentials_for("d.example") is None
    assert config.credentials_for("e.example") == Credentials("erin", "")
    assert len(config) == 4


def test_inputs_accepted() -> None:
    doc = {"auths": {"quay.io": {"auth": b64("u:p")}}}
    for data in (doc, json.dumps(doc), json.dumps(doc).encode()):
        assert parse_docker_config(data).credentials_for("quay.io") == Credentials("u", "p")
    # legacy .dockercfg: the auths object at the top level
    legacy = parse_docker_config({"quay.io": {"auth": b64("u:p")}})
    assert legacy.credentials_for("quay.io") == Credentials("u", "p")
    assert len(parse_docker_config(None)) == 0
    assert len(parse_docker_config({})) == 0
    assert len(parse_docker_config({"auths": {}})) == 0
    assert len(parse_docker_config({"credsStore": "desktop"})) == 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        # issue 27: RecursionError / int-digits ValueError from json.loads escaped
        (b'{"auths": {"quay.io": ' + b"[" * 100_000, "not valid JSON (nested more than 64"),
        (b'{"auths": {"quay.io": {"x": ' + b"1" * 5000 + b"}}}", "(a number has too many digits)"),
        (b"[]", "not a JSON object"),
        (b'{"auths": []}', '"auths" in the docker config is not a JSON object'),
        (auths({"quay.io": "c2VjcmV0"}), 'the auths entry for "quay.io" is not a JSON object'),
        (auths({"quay.io": {"auth": "!!!not-base64"}}), 'not base64 of "user:password"'),
        (auths({"quay.io": {"auth": b64("nocolonsecret")}}), "no colon"),
        (auths({"quay.io": {"username": "u", "password": 42}}), "are not strings"),
    ],
)
def test_invalid_config_messages(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidDockerConfig) as info:
        parse_docker_config(data)
    message = str(info.value)
    assert fragment in message
    for secret in ("nocolonsecret", "c2VjcmV0", b64("nocolonsecret")):
        assert secret not in message


def test_credentials_never_print_the_password() -> None:
    creds = Credentials("alice", "hunter2-password")
    assert "hunter2" not in repr(creds)
    config = parse_docker_config(auths({"quay.io": {"auth": b64("alice:hunter2-password")}}))
    assert "hunter2" not in repr(config)
    assert creds.basic_authorization() == "Basic " + b64("alice:hunter2-password")
    assert "hunter2-password" in creds.secrets()


def test_docker_hub_names() -> None:
    assert normalize_registry("Registry-1.Docker.io") == "docker.io"
    assert api_repository("docker.io", "fedora") == "library/fedora"
    assert api_repository("index.docker.io", "org/os") == "org/os"
    assert api_repository("quay.io", "fedora") == "fedora"
    assert api_endpoint("docker.io") == "registry-1.docker.io"
    assert api_endpoint("quay.io:443") == "quay.io:443"
