"""Manifest media types, digests and the result of a resolution (``Resolved``).

Owns what the registry client knows about manifests without talking to a
registry: the four media types it accepts, computing and checking content
digests (``sha256``, ``sha512``), reading the per-platform entries of an image
index / manifest list, and the ``Resolved`` value that ``resolve`` returns.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from bootc_operator import safejson

OCI_INDEX: Final = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST: Final = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST: Final = "application/vnd.docker.distribution.manifest.v2+json"

INDEX_MEDIA_TYPES: Final = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
IMAGE_MEDIA_TYPES: Final = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
MANIFEST_MEDIA_TYPES: Final = INDEX_MEDIA_TYPES | IMAGE_MEDIA_TYPES
#: The ``Accept`` header of every manifest request (preference order: index first).
MANIFEST_ACCEPT: Final = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST])
#: Registries refuse bigger manifests (distribution's limit is 4 MiB).
MAX_MANIFEST_BYTES: Final = 4 * 1024 * 1024

_ALGORITHMS: Final = {"sha256": 64, "sha512": 128}


def compute_digest(body: bytes, algorithm: str = "sha256") -> str:
    """``algorithm:hex`` of ``body``; ``ValueError`` for an algorithm other than sha256/sha512."""
    if algorithm not in _ALGORITHMS:
        raise ValueError(f"unsupported digest algorithm {algorithm!r}")
    return f"{algorithm}:{hashlib.new(algorithm, body).hexdigest()}"


def is_digest(text: str) -> bool:
    """True for a well-formed ``sha256:<64 hex>`` or ``sha512:<128 hex>``."""
    algorithm, colon, hexpart = text.partition(":")
    length = _ALGORITHMS.get(algorithm)
    return bool(
        colon
        and length is not None
        and len(hexpart) == length
        and all(c in "0123456789abcdef" for c in hexpart)
    )


def digest_matches(body: bytes, digest: str) -> bool:
    """True when ``digest`` is well formed and is the digest of ``body``."""
    return is_digest(digest) and compute_digest(body, digest.split(":", 1)[0]) == digest


def media_type_of(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header (parameters dropped, lowercased)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class Platform:
    """``os``/``architecture``/``variant`` of one entry of an index."""

    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        text = f"{self.os}/{self.architecture}"
        return f"{text}/{self.variant}" if self.variant else text


@dataclass(frozen=True)
class PlatformManifest:
    """One manifest listed by an index: its digest, media type and platform (if given)."""

    digest: str
    media_type: str
    size: int
    platform: Platform | None = None


def parse_manifest(body: bytes) -> dict[str, Any]:
    """The manifest JSON object; ``ValueError`` when ``body`` is not one (``safejson``:
    also when nested too deep or holding a number too long, which ``json`` lets escape)."""
    doc = safejson.loads(body)
    if not isinstance(doc, dict):
        raise ValueError("the manifest is not a JSON object")
    return doc


def body_media_type(doc: dict[str, Any]) -> str | None:
    """The media type a manifest says it is, or guessed from its shape (OCI allows
    omitting ``mediaType``); None when it is neither an index nor an image manifest."""
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    if isinstance(doc.get("manifests"), list) and "config" not in doc:
        return OCI_INDEX
    if isinstance(doc.get("config"), dict):
        return OCI_MANIFEST
    return None


def index_entries(doc: dict[str, Any]) -> tuple[PlatformManifest, ...]:
    """The ``manifests`` of an index; ``ValueError`` when an entry is malformed."""
    raw = doc.get("manifests")
    if not isinstance(raw, list):
        raise ValueError('the index has no "manifests" list')
    entries: list[PlatformManifest] = []
    for n, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValueError(f"manifests[{n}] is not an object")
        digest = item.get("digest")
        if not isinstance(digest, str) or not is_digest(digest):
            raise ValueError(f"manifests[{n}] has no valid digest")
        size = item.get("size", 0)
        platform_doc = item.get("platform")
        platform: Platform | None = None
        if isinstance(platform_doc, dict) and platform_doc.get("architecture"):
            variant = platform_doc.get("variant")
            platform = Platform(
                os=str(platform_doc.get("os") or ""),
                architecture=str(platform_doc["architecture"]),
                variant=str(variant) if variant else None,
            )
        entries.append(
            PlatformManifest(
                digest=digest,
                media_type=str(item.get("mediaType") or ""),
                size=size if isinstance(size, int) else 0,
                platform=platform,
            )
        )
    return tuple(entries)


@dataclass(frozen=True)
class Resolved:
    """What a reference points at right now.

    ``name`` is ``registry/repository`` as written in the reference (Docker Hub
    names are not rewritten), ``digest`` the manifest digest the registry reports
    (for a tag pointing at an index: the *index* digest), ``media_type`` one of
    the four manifest media types, and ``manifests`` the entries of an index
    (empty for a single-image manifest, or when the index was not fetched).
    """

    name: str
    reference: str
    digest: str
    media_type: str
    manifests: tuple[PlatformManifest, ...] = ()

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_MEDIA_TYPES

    @property
    def pinned(self) -> str:
        """``registry/repository@digest``: the reference to roll out."""
        return f"{self.name}@{self.digest}"

    def manifest_for(
        self, architecture: str, os: str = "linux", variant: str | None = None
    ) -> PlatformManifest | None:
        """The index entry for a platform (``variant`` None: the first of any variant)."""
        for entry in self.manifests:
            p = entry.platform
            if p is None or p.architecture != architecture or (p.os or "linux") != os:
                continue
            if variant is None or p.variant == variant:
                return entry
        return None

    def contains(self, digest: str) -> bool:
        """True when ``digest`` is this manifest's digest or one of its index entries'."""
        return digest == self.digest or any(m.digest == digest for m in self.manifests)
