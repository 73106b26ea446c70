"""What the registry client and its authentication both speak of: a ``Target``
(one repository of one registry, with its credentials) and a ``Reply`` (one HTTP
response). Their own module so that ``auth`` and ``client`` share them without
importing each other (``client`` uses ``auth``; ``auth`` is handed a client's
request function and reads these types only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from multidict import CIMultiDictProxy

from bootc_operator.registry.credentials import Credentials, api_endpoint
from bootc_operator.registry.manifest import parse_manifest


@dataclass(frozen=True)
class Target:
    """One repository of one registry, and the credentials to use for it.

    ``registry`` is ``host[:port]`` as written in the image reference (messages,
    insecure list, credentials); ``repository`` is the API name (``library/``
    added on Docker Hub).
    """

    registry: str
    repository: str
    credentials: Credentials | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return api_endpoint(self.registry)

    @property
    def display(self) -> str:
        return f"{self.registry}/{self.repository}"


@dataclass(frozen=True)
class Reply:
    """One HTTP response: status, headers and (for non-HEAD requests) the body."""

    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes
    url: str

    def registry_error(self) -> tuple[str, str]:
        """``(code, message)`` of the first entry of a registry error body, or empty strings."""
        try:
            doc = parse_manifest(self.body)
            first = doc["errors"][0]
            return str(first.get("code") or ""), str(first.get("message") or "")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return "", ""
