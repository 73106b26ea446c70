"""Seeded fuzzing of the daemon's two parsers of outside input: ``bootc status``
(``parse_status``) and a pull secret's ``.dockerconfigjson`` (``docker_config``).

Each seed mutates a valid document a few times (truncation, a stray or deep run of
brackets, a nested value hundreds or thousands of levels deep, a number of
thousands of digits, a byte replaced); whatever comes out, the parser either
accepts it or raises its own error type with one readable line. Before issue 27,
``RecursionError`` and ``ValueError`` from ``json.loads`` escaped both.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable

import pytest

from bootc_operator.daemon.authfile import PullSecretError, docker_config
from bootc_operator.daemon.bootc_status import BootcStatusError, parse_status
from unit.daemon.test_bootc_status import FULL, canonical

SEEDS = range(150)
SECRET = json.dumps({"auths": {"quay.io": {"auth": base64.b64encode(b"u:hunter2").decode()}}})


def _insert(text: str, rng: random.Random, piece: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + piece + text[at:]


def _replace_value(text: str, rng: random.Random, value: str) -> str:
    """A JSON value (after a ``:``) replaced by ``value``."""
    colons = [i for i, ch in enumerate(text) if ch == ":"]
    if not colons:
        return text + value
    at = rng.choice(colons) + 1
    end = at
    while end < len(text) and text[end] not in ",}]":
        end += 1
    return text[:at] + value + text[end:]


def _nested(rng: random.Random) -> str:
    depth = rng.choice([65, 500, 3000, 50_000])
    opening, closing = rng.choice([("[", "]"), ('{"a":', "}")])
    return opening * depth + "1" + closing * depth


MUTATIONS: list[Callable[[str, random.Random], str]] = [
    lambda t, r: t[: r.randrange(len(t) + 1)],
    lambda t, r: _insert(t, r, r.choice('[]{}",:') * r.randint(1, 100_000)),
    lambda t, r: _replace_value(t, r, _nested(r)),
    lambda t, r: _replace_value(t, r, "9" * r.choice([4300, 4301, 20_000])),
    lambda t, r: _replace_value(t, r, r.choice(["1e308", "-1e999", "Infinity", "NaN", "-0"])),
    lambda t, r: _insert(t, r, chr(r.randrange(0x110000 if r.random() < 0.5 else 0x80))),
]


def mutated(text: str, seed: int) -> str:
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


def one_readable_line(message: str) -> None:
    assert message and "\n" not in message and len(message) < 400


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_bootc_status_is_parsed_or_one_readable_error(seed: int) -> None:
    text = mutated(canonical(FULL), seed)
    try:
        parse_status(text)
    except BootcStatusError as exc:
        one_readable_line(str(exc))
        assert str(exc).startswith("bootc status")


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_pull_secret_is_read_or_one_readable_error(seed: int) -> None:
    content = mutated(SECRET, seed).encode("utf-8", "surrogatepass")
    secret = {"data": {".dockerconfigjson": base64.b64encode(content).decode()}}
    try:
        docker_config(secret)
    except PullSecretError as exc:
        one_readable_line(str(exc))
        assert "hunter2" not in str(exc)
