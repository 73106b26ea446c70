"""Registry authentication: answering a registry's ``401`` challenge, and remembering the answer.

Challenges: ``parse_www_authenticate`` turns header values such as::

    Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:os:pull"
    Basic realm="Registry Realm"

into ``Challenge`` objects (RFC 7235). One header value may carry several
challenges and a response may carry several headers; scheme and parameter names
are case-insensitive (lowercased here), parameter values keep their case; quoted
strings may contain commas and backslash escapes; a ``token68`` credential
(``Negotiate abc==``) is kept as ``Challenge.token68``. Garbage never raises: the
parser skips what it cannot read, and the caller decides what no usable challenge
means. ``pick_challenge`` prefers Bearer (with a realm) over Basic.

Answers: ``Authenticator.answer`` turns a challenge into an ``Authorization``
value: Basic from the target's credentials, or a Bearer token from the
challenge's realm with ``service`` and ``scope=repository:<repo>:<actions>`` (the
Basic credentials sent to the token service when there are any and
``may_send_credentials`` allows it: never in cleartext to another machine unless
the registry is listed insecure; a token without ``expires_in`` is good for 60 s,
the distribution token spec; none is trusted for more than
``MAX_TOKEN_LIFETIME``). Answers are cached per (registry, repository, actions,
credentials) until shortly before they expire, so later requests go out
pre-authorised. ``Authenticator.failure`` is the ``NoCredentials`` /
``CredentialsRejected`` for a final 401 or 403, its detail scrubbed of every token
and password (``secrets``).

The HTTP exchange itself is the client's (``RegistryClient``), handed in as
``Transport``.
"""

from __future__ import annotations

import ipaddress
import math
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from bootc_operator.registry.errors import (
    CredentialsRejected,
    MalformedResponse,
    NoCredentials,
    RegistryAuthError,
    RegistryHTTPError,
    one_line,
    scrub,
)
from bootc_operator.registry.manifest import parse_manifest
from bootc_operator.registry.types import Reply, Target

#: Bearer tokens without ``expires_in`` are good for 60 s (distribution token spec).
DEFAULT_TOKEN_LIFETIME: Final = 60.0
#: A token is trusted at most this long whatever its ``expires_in`` says (``Infinity``
#: and ``1e308`` would otherwise cache it for the life of the process).
MAX_TOKEN_LIFETIME: Final = 3600.0
#: Re-authenticate this long before a token expires.
TOKEN_EXPIRY_MARGIN: Final = 10.0
TOKEN_BODY_LIMIT: Final = 1024 * 1024
_AUTH_CACHE_SIZE: Final = 1024

AuthKey = tuple[str, str, str, str]

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


def is_loopback(host: str) -> bool:
    """True for ``localhost`` (and ``*.localhost``) and loopback addresses (no port)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(netloc: str) -> str:
    return urllib.parse.urlsplit(f"//{netloc}").hostname or ""


def may_send_credentials(registry: str, realm_url: str, *, insecure: bool) -> bool:
    """Whether a registry's Basic credentials may go to the token service ``realm_url``.

    Over https always (the token service is verified unless listed insecure itself).
    Over plain http only when the admin listed the registry as insecure (its own
    requests carry the credentials in cleartext anyway), or when the registry and
    the realm are both on loopback, so cleartext never leaves the machine. A 401
    naming ``http://token-collector.example.net/`` otherwise gets nothing.
    """
    parts = urllib.parse.urlsplit(realm_url)
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if insecure:
        return True
    return is_loopback(_hostname(registry)) and is_loopback(parts.hostname or "")


def token_lifetime(expires_in: object) -> float:
    """Seconds a token is trusted, from a token answer's ``expires_in``.

    Absent, not a number, not positive or not finite (``Infinity``, ``NaN``): the
    spec's default; more than ``MAX_TOKEN_LIFETIME`` (``1e308``, or an integer too
    big for a float): that maximum. Compared before converting, so no
    ``OverflowError``.
    """
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        return DEFAULT_TOKEN_LIFETIME
    if isinstance(expires_in, float) and not math.isfinite(expires_in):
        return DEFAULT_TOKEN_LIFETIME
    if expires_in <= 0:
        return DEFAULT_TOKEN_LIFETIME
    return float(min(expires_in, MAX_TOKEN_LIFETIME))


class Transport(Protocol):
    """The client's one HTTP exchange (``RegistryClient._http``)."""

    def __call__(
        self,
        method: str,
        url: str,
        *,
        registry: str,
        what: str,
        headers: Mapping[str, str],
        max_body: int,
        verify: bool,
    ) -> Awaitable[Reply]: ...


class Authenticator:
    """Answers challenges for one client and caches the answers (see the module docstring)."""

    def __init__(self, http: Transport, is_insecure: Callable[[str], bool]) -> None:
        self._http = http
        self._is_insecure = is_insecure
        self._cache: dict[AuthKey, tuple[str, float]] = {}

    @staticmethod
    def key(target: Target, actions: tuple[str, ...]) -> AuthKey:
        fingerprint = target.credentials.fingerprint() if target.credentials else ""
        return (target.registry, target.repository, ",".join(actions), fingerprint)

    def cached(self, key: AuthKey) -> str | None:
        """The ``Authorization`` value still good for ``key``, if any."""
        cached = self._cache.get(key)
        if cached is None:
            return None
        value, expires = cached
        if time.monotonic() >= expires:
            del self._cache[key]
            return None
        return value

    def forget(self, key: AuthKey) -> None:
        self._cache.pop(key, None)

    def _store(self, key: AuthKey, value: str, expires: float) -> None:
        now = time.monotonic()
        for old in [k for k, (_, exp) in self._cache.items() if exp <= now]:
            del self._cache[old]
        while len(self._cache) >= _AUTH_CACHE_SIZE:
            del self._cache[next(iter(self._cache))]
        self._cache[key] = (value, expires)

    def secrets(self, target: Target | None) -> list[str]:
        """Every cached token and ``target``'s password: never in a message."""
        found = [v.split(" ", 1)[1] for v, _ in self._cache.values() if v.startswith("Bearer ")]
        if target is not None and target.credentials is not None:
            found.extend(target.credentials.secrets())
        return found

    def failure(self, target: Target, what: str, detail: str, *, status: int) -> RegistryAuthError:
        """The error for a final 401/403: no credentials, or credentials rejected."""
        detail = one_line(scrub(detail, self.secrets(target)))
        if target.credentials is None:
            return NoCredentials(
                f"no credentials for host {target.registry}: the registry requires "
                f"authentication for {what} (HTTP {status}: {detail})",
                registry=target.registry,
            )
        # No user name: for some registries it is itself a token (secrets() has it).
        return CredentialsRejected(
            f"credentials rejected: registry {target.registry} refused the credentials "
            f"for {what} (HTTP {status}: {detail})",
            registry=target.registry,
        )

    async def answer(
        self,
        key: AuthKey,
        target: Target,
        challenges: list[Challenge],
        actions: tuple[str, ...],
        what: str,
    ) -> str:
        """An ``Authorization`` value answering ``challenges``, cached under ``key``."""
        challenge = pick_challenge(challenges)
        if challenge is None:
            schemes = ", ".join(sorted({c.scheme for c in challenges})) or "none"
            raise RegistryAuthError(
                f"registry {target.registry} asks for an unsupported authentication scheme "
                f"({schemes}) for {what}",
                registry=target.registry,
            )
        if challenge.scheme == "basic":
            if target.credentials is None:
                raise self.failure(target, what, "authentication required", status=401)
            value, expires = target.credentials.basic_authorization(), float("inf")
        else:
            value, expires = await self._bearer_token(target, challenge, actions, what)
        self._store(key, value, expires)
        return value

    async def _bearer_token(
        self, target: Target, challenge: Challenge, actions: tuple[str, ...], what: str
    ) -> tuple[str, float]:
        """A token from the challenge's token service (``_token_request``), checked
        (``_token_of``); with the monotonic time it expires, less a margin."""
        url, headers, service = self._token_request(target, challenge, actions, what)
        reply = await self._http(
            "GET",
            url,
            registry=target.registry,
            what=f"a token from {service} for {what}",
            headers=headers,
            max_body=TOKEN_BODY_LIMIT,
            verify=not self._is_insecure(service),
        )
        token, seconds = self._token_of(reply, target, what, service)
        return f"Bearer {token}", time.monotonic() + max(seconds - TOKEN_EXPIRY_MARGIN, 1.0)

    def _token_request(
        self, target: Target, challenge: Challenge, actions: tuple[str, ...], what: str
    ) -> tuple[str, dict[str, str], str]:
        """(URL, headers, the token service's host) of the token request; the pull
        secret's credentials go along only where they may (never in cleartext)."""
        realm = challenge.realm or ""
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise MalformedResponse(
                f"registry {target.registry} sent a Bearer challenge with an unusable realm "
                f"{one_line(realm, 100)!r}",
                registry=target.registry,
            )
        query: list[tuple[str, str]] = []
        if challenge.service:
            query.append(("service", challenge.service))
        query.append(("scope", f"repository:{target.repository}:{','.join(actions)}"))
        sep = "&" if parts.query else "?"
        url = realm + sep + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        if target.credentials is not None:
            insecure = self._is_insecure(target.registry) or self._is_insecure(target.endpoint)
            if not may_send_credentials(target.registry, realm, insecure=insecure):
                raise RegistryAuthError(
                    f"registry {target.registry} sends {what} to the plain-HTTP token service "
                    f"{parts.netloc}; the pull secret's credentials are not sent there in "
                    "cleartext (list the registry as insecure if that is intended)",
                    registry=target.registry,
                )
            headers["Authorization"] = target.credentials.basic_authorization()
        return url, headers, parts.netloc

    def _token_of(self, reply: Reply, target: Target, what: str, service: str) -> tuple[str, float]:
        """The token service's answer: (token, its lifetime in seconds), or the error."""
        if reply.status in (401, 403):
            code, message = reply.registry_error()
            detail = message or code or reply.reason or "unauthorized"
            raise self.failure(
                target, f"{what} (token service {service})", detail, status=reply.status
            )
        if reply.status != 200:
            raise RegistryHTTPError(
                f"token service {service} of registry {target.registry} answered HTTP "
                f"{reply.status} {reply.reason} for {what}",
                registry=target.registry,
                status=reply.status,
            )
        try:
            doc = parse_manifest(reply.body)
        except ValueError as exc:
            raise MalformedResponse(
                f"token service {service} of registry {target.registry} sent an unusable "
                f"answer for {what}: {one_line(str(exc), 100)}",
                registry=target.registry,
            ) from None
        token = doc.get("token") or doc.get("access_token")
        if not isinstance(token, str) or not token:
            raise MalformedResponse(
                f"token service {service} of registry {target.registry} sent no token for {what}",
                registry=target.registry,
            )
        return token, token_lifetime(doc.get("expires_in"))
