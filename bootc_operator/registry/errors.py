"""The registry client's exceptions: one class per failure an operator user must tell apart.

Every exception carries a one-line, human-readable message that is safe to put in
a pool condition, an Event or a log line: it names the registry host, the
repository and the reference, never a password, a token or an ``auth`` value
(``scrub`` removes any secret the client knows of from text a registry sent back).

    RegistryError                     base class; ``.registry`` is the host[:port]
    ├── RegistryUnreachable           DNS failure, connection refused/reset
    │   └── RegistryTimeout           no answer within the configured timeout
    ├── RegistryTLSError              handshake / certificate verification failed
    ├── RegistryAuthError             401 / 403
    │   ├── NoCredentials             the registry wants credentials; none match the host
    │   └── CredentialsRejected       credentials were sent and refused
    ├── ManifestNotFound              tag (or digest, or repository) unknown
    ├── MalformedResponse             not a registry answer we can use (bad JSON, digest
    │                                 mismatch, unknown manifest type, missing header, ...)
    ├── RegistryHTTPError             any other unexpected status (5xx, 429, ...)
    └── InvalidDockerConfig           a dockerconfigjson that cannot be used

``InvalidReference`` (a ``ValueError``) is raised for image references that cannot
be resolved at all; it is not a ``RegistryError`` because no registry was asked.
"""

from __future__ import annotations

from collections.abc import Iterable

_MAX_DETAIL = 200


def one_line(text: str, limit: int = _MAX_DETAIL) -> str:
    """Collapse whitespace (newlines included) and cut ``text`` to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every (non-trivial) secret replaced by ``<redacted>``."""
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "<redacted>")
    return text


class RegistryError(Exception):
    """A registry operation failed; ``str(exc)`` is one readable line without secrets."""

    def __init__(self, message: str, *, registry: str = "") -> None:
        super().__init__(one_line(message, 1000))
        self.registry = registry

    @property
    def message(self) -> str:
        return str(self)


class RegistryUnreachable(RegistryError):
    """Nothing answered: the host name does not resolve, or the connection failed."""


class RegistryTimeout(RegistryUnreachable):
    """The registry did not answer within the timeout."""


class RegistryTLSError(RegistryError):
    """TLS failed: untrusted or invalid certificate, or the server does not speak TLS."""


class RegistryAuthError(RegistryError):
    """The registry refused access (HTTP 401 or 403)."""


class NoCredentials(RegistryAuthError):
    """The registry requires authentication and no credentials match its host."""


class CredentialsRejected(RegistryAuthError):
    """Credentials were sent and the registry (or its token service) refused them."""


class ManifestNotFound(RegistryError):
    """The tag, digest or repository does not exist (``MANIFEST_UNKNOWN``/``NAME_UNKNOWN``)."""


class MalformedResponse(RegistryError):
    """The registry answered with something that is not a usable registry reply."""


class RegistryHTTPError(RegistryError):
    """The registry answered with an unexpected HTTP status (server error, rate limit, ...)."""

    def __init__(self, message: str, *, registry: str = "", status: int = 0) -> None:
        super().__init__(message, registry=registry)
        self.status = status


class InvalidDockerConfig(RegistryError):
    """A dockerconfigjson (pull secret content) cannot be parsed; says why, not what it holds."""


class InvalidReference(ValueError):
    """An image reference the client cannot resolve (unparseable)."""
