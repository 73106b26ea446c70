"""Registry credentials from a dockerconfigjson (a pull secret), and which host they are for.

Owns parsing ``.dockerconfigjson`` content and matching its entries to a registry.

Format (what ``kubectl create secret docker-registry`` and ``podman login`` write)::

    {"auths": {"quay.io": {"auth": "<base64 user:password>"},
               "registry.example.com:5000": {"username": "u", "password": "p"},
               "https://index.docker.io/v1/": {"auth": "..."}}}

The legacy ``.dockercfg`` form (the ``auths`` object itself at the top level) is
accepted too. ``auth`` wins over ``username``/``password`` when both are present;
entries with neither (left behind by credential helpers) are ignored;
``identitytoken``/``registrytoken`` are not supported.

Keys are normalised the way the Docker CLI and containers/image do:

- a URL form (``https://host[:port]/anything``) stands for ``host[:port]``;
- a key without a scheme may carry a repository path (``host/org`` or
  ``host/org/repo``): it applies to that namespace only and is more specific than
  the bare host;
- host names are case-insensitive; ``:443`` is the default port and is dropped;
- Docker Hub's names ``docker.io``, ``index.docker.io``, ``registry-1.docker.io``
  and ``registry.hub.docker.com`` are one registry, and a single-component Docker
  Hub repository means ``library/<name>``;
- ports must match: ``host:5000`` credentials are not sent to ``host``.

When two keys normalise to the same thing, a key already written in normal form
wins over one that needed rewriting; otherwise the first one in the file wins.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bootc_operator import safejson
from bootc_operator.registry.errors import InvalidDockerConfig

DOCKER_HUB = "docker.io"
#: Every name Docker Hub goes by; credentials for any of them are Docker Hub's.
DOCKER_HUB_ALIASES = frozenset(
    {"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}
)
#: Where Docker Hub's registry API actually answers.
DOCKER_HUB_ENDPOINT = "registry-1.docker.io"


@dataclass(frozen=True)
class Credentials:
    """A user name and password (or token) for one registry; the password never prints."""

    username: str
    password: str = field(repr=False)

    def basic_authorization(self) -> str:
        """The ``Authorization`` header value for HTTP Basic."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def fingerprint(self) -> str:
        """A stable, non-reversible identity (cache keys; never shown)."""
        return hashlib.sha256(f"{self.username}\0{self.password}".encode()).hexdigest()[:16]

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never appear in a message (the user name too: some
        registries take a token there, with an empty or fixed password)."""
        return (self.password, self.username, self.basic_authorization().split(" ", 1)[1])


def normalize_registry(host: str) -> str:
    """``Index.Docker.io`` → ``docker.io``; ``quay.io:443`` → ``quay.io``; others lowercased."""
    host = host.strip().lower().rstrip("/")
    if host.endswith(":443"):
        host = host[: -len(":443")]
    if host in DOCKER_HUB_ALIASES:
        return DOCKER_HUB
    return host


def is_docker_hub(registry: str) -> bool:
    return normalize_registry(registry) == DOCKER_HUB


def api_repository(registry: str, repository: str) -> str:
    """The repository name the registry API uses: Docker Hub's ``nginx`` is ``library/nginx``."""
    if is_docker_hub(registry) and "/" not in repository:
        return f"library/{repository}"
    return repository


def api_endpoint(registry: str) -> str:
    """The ``host[:port]`` to connect to: Docker Hub answers at ``registry-1.docker.io``."""
    return DOCKER_HUB_ENDPOINT if is_docker_hub(registry) else registry


def normalize_key(key: str) -> tuple[str, bool]:
    """An ``auths`` key in normal form (``host[:port][/path]``) and whether it already was."""
    text = key.strip()
    _scheme, sep, rest = text.partition("://")
    if sep:
        host = rest.split("/", 1)[0]
        return normalize_registry(host), False
    host, slash, path = text.partition("/")
    path = path.strip("/")
    normal = normalize_registry(host)
    if slash and path:
        if normal == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        result = f"{normal}/{path}"
    else:
        result = normal
    return result, result == text


def _credentials(key: str, entry: Any) -> Credentials | None:
    if not isinstance(entry, Mapping):
        raise InvalidDockerConfig(f'the auths entry for "{key}" is not a JSON object')
    auth = entry.get("auth")
    if auth:
        if not isinstance(auth, str):
            raise InvalidDockerConfig(f'the "auth" value for "{key}" is not a string')
        try:
            decoded = base64.b64decode(auth.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidDockerConfig(
                f'the "auth" value for "{key}" is not base64 of "user:password"'
            ) from None
        user, colon, password = decoded.partition(":")
        if not colon:
            raise InvalidDockerConfig(
                f'the "auth" value for "{key}" does not decode to "user:password" (no colon)'
            )
        return Credentials(user, password)
    username = entry.get("username")
    if username:
        secret = entry.get("password")
        if not isinstance(username, str) or not isinstance(secret, str | None):
            raise InvalidDockerConfig(f'the username/password for "{key}" are not strings')
        return Credentials(username, secret or "")
    return None


@dataclass(frozen=True)
class DockerConfig:
    """Parsed credentials keyed by normalised registry (``host[:port][/path]``)."""

    entries: Mapping[str, Credentials] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"DockerConfig(registries={sorted(self.entries)!r})"

    def credentials_for(self, registry: str, repository: str = "") -> Credentials | None:
        """The most specific entry for ``registry``/``repository``: the longest
        repository-path prefix first, then the host alone; None when nothing matches."""
        host = normalize_registry(registry)
        repo = api_repository(host, repository) if repository else ""
        parts = repo.split("/") if repo else []
        for n in range(len(parts), 0, -1):
            creds = self.entries.get(f"{host}/{'/'.join(parts[:n])}")
            if creds is not None:
                return creds
        return self.entries.get(host)

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for c in self.entries.values() for s in c.secrets())


EMPTY_CONFIG = DockerConfig()


def parse_docker_config(
    data: bytes | str | Mapping[str, Any] | DockerConfig | None,
) -> DockerConfig:
    """Parse dockerconfigjson content (bytes/str JSON or an already-decoded object).

    None means "no credentials". Raises ``InvalidDockerConfig`` with a message naming
    what is wrong (never the credentials themselves).
    """
    if data is None:
        return EMPTY_CONFIG
    if isinstance(data, DockerConfig):
        return data
    doc: Any
    if isinstance(data, bytes | str):
        try:
            doc = safejson.loads(data)
        except safejson.JSONInputError as exc:
            raise InvalidDockerConfig(f"the docker config is not valid JSON ({exc})") from None
    else:
        doc = data
    if not isinstance(doc, Mapping):
        raise InvalidDockerConfig("the docker config is not a JSON object")
    if "auths" in doc:
        auths = doc["auths"]
        if auths is None:
            return EMPTY_CONFIG
        if not isinstance(auths, Mapping):
            raise InvalidDockerConfig('"auths" in the docker config is not a JSON object')
    elif doc and all(
        isinstance(v, Mapping) and ("auth" in v or "username" in v) for v in doc.values()
    ):
        auths = doc  # legacy .dockercfg: the auths object itself
    else:
        return EMPTY_CONFIG
    entries: dict[str, Credentials] = {}
    exact: set[str] = set()
    for key, entry in auths.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidDockerConfig("the docker config has an empty registry key")
        creds = _credentials(key, entry)
        if creds is None:
            continue
        normal, was_normal = normalize_key(key)
        if normal in entries and (normal in exact or not was_normal):
            continue
        entries[normal] = creds
        if was_normal:
            exact.add(normal)
    return DockerConfig(entries)
