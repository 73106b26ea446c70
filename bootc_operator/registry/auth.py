"""``WWW-Authenticate`` parsing (RFC 7235 challenges) for the registry client.

Owns turning header values such as::

    Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:os:pull"
    Basic realm="Registry Realm"

into ``Challenge`` objects. One header value may carry several challenges and a
response may carry several headers; scheme and parameter names are
case-insensitive (lowercased here), parameter values keep their case; quoted
strings may contain commas and backslash escapes; a ``token68`` credential
(``Negotiate abc==``) is kept as ``Challenge.token68``. Garbage never raises: the
parser skips what it cannot read, and the caller decides what no usable challenge
means.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_SPACE = " \t"


@dataclass(frozen=True)
class Challenge:
    """One authentication challenge: ``scheme`` (lowercase) and its parameters."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=dict)
    token68: str | None = None

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")

    @property
    def service(self) -> str | None:
        return self.params.get("service")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def done(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> None:
        while self.peek() and self.peek() in _SPACE:
            self.pos += 1

    def skip_separators(self) -> None:
        while self.peek() and self.peek() in _SPACE + ",":
            self.pos += 1

    def match(self, pattern: re.Pattern[str]) -> str | None:
        m = pattern.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group()

    def quoted(self) -> str:
        """A quoted-string starting at the current ``"``; unterminated runs to the end."""
        self.pos += 1
        out: list[str] = []
        while not self.done():
            ch = self.text[self.pos]
            self.pos += 1
            if ch == "\\" and not self.done():
                out.append(self.text[self.pos])
                self.pos += 1
            elif ch == '"':
                break
            else:
                out.append(ch)
        return "".join(out)


def _parse_token68(reader: _Reader) -> str | None:
    """A token68 right after the scheme (``Negotiate abc==``), else None (nothing consumed)."""
    start = reader.pos
    token = reader.match(_TOKEN68)
    if token is not None:
        reader.skip_space()
        if reader.done() or reader.peek() == ",":
            return token
    reader.pos = start
    return None


def _parse_params(reader: _Reader) -> dict[str, str]:
    params: dict[str, str] = {}
    while True:
        reader.skip_separators()
        start = reader.pos
        name = reader.match(_TOKEN)
        if name is None:
            return params
        reader.skip_space()
        if reader.peek() != "=":
            # Not "name=value": the next challenge's scheme starts here.
            reader.pos = start
            return params
        reader.pos += 1
        reader.skip_space()
        value = reader.quoted() if reader.peek() == '"' else (reader.match(_TOKEN) or "")
        params.setdefault(name.lower(), value)


def parse_www_authenticate(values: str | Iterable[str]) -> list[Challenge]:
    """Every challenge in one header value, or in all values of repeated headers."""
    if isinstance(values, str):
        values = [values]
    challenges: list[Challenge] = []
    for value in values:
        reader = _Reader(value)
        while True:
            reader.skip_separators()
            if reader.done():
                break
            scheme = reader.match(_TOKEN)
            if scheme is None:
                reader.pos += 1  # unreadable character: skip it
                continue
            if reader.peek() and reader.peek() not in _SPACE + ",":
                continue  # not followed by a separator: garbage glued to a token
            reader.skip_space()
            token68 = _parse_token68(reader)
            params = {} if token68 is not None else _parse_params(reader)
            challenges.append(Challenge(scheme.lower(), params, token68))
    return challenges


def pick_challenge(challenges: Iterable[Challenge]) -> Challenge | None:
    """The challenge to answer: Bearer (with a realm) over Basic; None if neither is offered."""
    found = list(challenges)
    for ch in found:
        if ch.scheme == "bearer" and ch.realm:
            return ch
    for ch in found:
        if ch.scheme == "basic":
            return ch
    return None
