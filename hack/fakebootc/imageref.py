"""Image reference handling for the simulated host (standard library only).

Just what bootc does with a ``bootc switch`` target: split ``name[:tag][@digest]``,
find the registry host (docker.io when the first component is not a host, as
containers/image normalises short names), and canonicalise ``name:tag@digest`` to
``name@digest`` (bootc drops the tag when both are given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$")
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


class BadReference(ValueError):
    """Not an image reference."""


@dataclass(frozen=True)
class Ref:
    """A parsed registry image reference."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None
    #: the name exactly as written (without tag/digest), e.g. "quay.io/org/os".
    name: str

    @property
    def reference(self) -> str:
        """What goes after ``/manifests/``: the digest, else the tag (``latest``)."""
        return self.digest or self.tag or "latest"

    @property
    def canonical(self) -> str:
        """``name@digest`` when a digest is present, else ``name[:tag]``."""
        if self.digest:
            return f"{self.name}@{self.digest}"
        return f"{self.name}:{self.tag}" if self.tag else self.name

    @property
    def host(self) -> str:
        """The registry host without the port."""
        reg = self.registry
        if reg.startswith("["):
            return reg[: reg.index("]") + 1]
        return reg.rsplit(":", 1)[0] if ":" in reg else reg


def parse_ref(text: str) -> Ref:
    """Parse ``[registry/]repo[:tag][@digest]``; raises ``BadReference``."""
    text = text.strip()
    if not text or any(c.isspace() for c in text):
        raise BadReference(f"invalid image reference {text!r}")
    name, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        raise BadReference(f"invalid digest {digest!r} in image reference {text!r}")
    tag: str | None = None
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not tag:
            raise BadReference(f"empty tag in image reference {text!r}")
    if not name or name.endswith("/") or "//" in name:
        raise BadReference(f"invalid image reference {text!r}")
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, repository = first, rest
    else:
        registry = "docker.io"
        repository = name if sep else f"library/{name}"
    if repository.lower() != repository:
        raise BadReference(f"repository name must be lowercase in {text!r}")
    return Ref(registry=registry, repository=repository, tag=tag, digest=digest or None, name=name)


def canonicalize(text: str) -> str:
    """``quay.io/os:1@sha256:…`` → ``quay.io/os@sha256:…``; other forms unchanged."""
    try:
        ref = parse_ref(text)
    except BadReference:
        return text
    if ref.tag and ref.digest:
        return f"{ref.name}@{ref.digest}"
    return text


def is_loopback(registry: str) -> bool:
    host = registry
    if host.startswith("["):
        host = host[: host.index("]") + 1]
    elif ":" in host:
        host = host.rsplit(":", 1)[0]
    return host in _LOOPBACK_HOSTS or host.startswith("127.") or host.endswith(".localhost")
