"""Container image reference parsing (the distribution ``reference`` grammar).

``parse_image_ref("quay.io/org/os:42@sha256:…")`` → ``ImageRef(registry="quay.io",
repository="org/os", tag="42", digest="sha256:…")``.

The operator only accepts *fully qualified* references: the first path
component must be a registry host (it contains "." or ":" or is "localhost").
Short names such as ``myos:latest`` depend on each host's registries.conf
search list, so two nodes could pull different images; they are rejected with
a message saying how to write the reference.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])"
_DOMAIN_RE = re.compile(rf"^{_HOST}(?::[0-9]+)?$")
_PATH_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST_RE = re.compile(r"^(?P<alg>[a-z0-9]+(?:[.+_-][a-z0-9]+)*):(?P<hex>[a-zA-Z0-9=_-]{32,})$")
_KNOWN_DIGESTS = {"sha256": 64, "sha512": 128}

MAX_NAME_LENGTH = 255

# Patterns for the CRDs (RE2 and Python alike: no \\w, no lookaround). A reference
# never begins with "-" (it would reach ``bootc switch`` as an option) and holds no
# whitespace or control character.
_RE2_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_RE2_NAME = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:[.][a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?" + f"(?:/{_RE2_COMPONENT})+"
)
#: BootcNode.spec.desiredImage: ``host[:port]/path[:tag]@sha256:<64 hex>`` (or sha512).
DIGEST_REF_PATTERN = (
    f"^{_RE2_NAME}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    "@sha(?:256:[a-f0-9]{64}|512:[a-f0-9]{128})$"
)
#: A pool's spec.image.ref: the characters of a reference, not beginning with "-"; the
#: controller's ``parse_image_ref`` says precisely what else is wrong (a short name, an
#: unknown digest algorithm) in the pool's status.
POOL_REF_PATTERN = r"^[A-Za-z0-9\[][A-Za-z0-9._:/@+=\[\]-]*$"


class InvalidImageRef(ValueError):
    """An image reference the operator cannot use; the message says why and how to fix it."""


@dataclass(frozen=True, slots=True)
class ImageRef:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """``registry/repository`` without tag or digest."""
        return f"{self.registry}/{self.repository}"

    @property
    def is_digest(self) -> bool:
        return self.digest is not None

    def with_digest(self, digest: str) -> str:
        """``registry/repository@digest`` — the form BootcNode.spec.desiredImage takes."""
        validate_digest(digest)
        return f"{self.name}@{digest}"

    @property
    def reference(self) -> str:
        """The digest if any, else the tag (``latest`` when none was written)."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def validate_digest(digest: str) -> str:
    match = _DIGEST_RE.match(digest)
    if not match:
        raise InvalidImageRef(f'"{digest}" is not a digest like sha256:<64 hex digits>')
    length = _KNOWN_DIGESTS.get(match["alg"])
    if length is None:
        raise InvalidImageRef(
            f'digest "{digest[:80]}" uses algorithm "{match["alg"]}"; only sha256 and sha512 '
            "digests can be pulled"
        )
    if not re.fullmatch(rf"[a-f0-9]{{{length}}}", match["hex"]):
        raise InvalidImageRef(
            f'digest "{digest}" must have {length} lowercase hex digits after "{match["alg"]}:"'
        )
    return digest


def parse_image_ref(text: str) -> ImageRef:
    """Parse a fully qualified image reference or raise ``InvalidImageRef``."""
    ref = text.strip()
    if not ref:
        raise InvalidImageRef("image reference is empty")
    if ref != text or any(ch.isspace() for ch in ref):
        raise InvalidImageRef(f'image reference "{text}" contains whitespace')
    if "://" in ref:
        raise InvalidImageRef(
            f'image reference "{text}" must not have a URL scheme; write host/repo:tag'
        )
    digest: str | None = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
        validate_digest(digest)
    tag: str | None = None
    last_slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > last_slash:
        ref, tag = ref[:colon], ref[colon + 1 :]
        if not _TAG_RE.match(tag):
            raise InvalidImageRef(f'image reference "{text}" has an invalid tag "{tag}"')
    if "/" not in ref:
        raise InvalidImageRef(
            f'image reference "{text}" is a short name; write it fully qualified with a '
            f"registry host, e.g. quay.io/example/{ref}{':' + tag if tag else ''}"
        )
    registry, repository = ref.split("/", 1)
    if not ("." in registry or ":" in registry or registry == "localhost"):
        raise InvalidImageRef(
            f'image reference "{text}" has no registry host ("{registry}" is not a host); '
            f"write it fully qualified, e.g. quay.io/{ref}{':' + tag if tag else ''}"
        )
    if not _DOMAIN_RE.match(registry):
        raise InvalidImageRef(f'image reference "{text}" has an invalid registry "{registry}"')
    if not _PATH_RE.match(repository):
        raise InvalidImageRef(
            f'image reference "{text}" has an invalid repository "{repository}" '
            "(lowercase letters, digits and . _ - separators only)"
        )
    if len(registry) + 1 + len(repository) > MAX_NAME_LENGTH:
        raise InvalidImageRef(
            f'image reference "{text}" is longer than {MAX_NAME_LENGTH} characters'
        )
    return ImageRef(registry=registry, repository=repository, tag=tag, digest=digest)


def digest_of(ref: str) -> str | None:
    """The ``sha256:…`` part of ``repo@sha256:…``, or None for a tag ref."""
    if "@" not in ref:
        return None
    return validate_digest(ref.split("@", 1)[1])


SHORT_DIGEST_LENGTH = 12


def short_digest(digest: str | None) -> str:
    """The first 12 hex digits of ``algorithm:hex`` (what printer columns show); "" for None."""
    if not digest:
        return ""
    return digest.split(":", 1)[-1][:SHORT_DIGEST_LENGTH]


def display_ref(ref: str) -> str:
    """``ref`` as written, its digest (if any) cut to ``@sha256:<12 hex>`` for a column."""
    if "@" not in ref:
        return ref
    name, digest = ref.split("@", 1)
    algorithm = digest.split(":", 1)[0] if ":" in digest else ""
    return f"{name}@{algorithm + ':' if algorithm else ''}{short_digest(digest)}"


def repository_of(ref: str) -> str:
    """``registry/repository`` of any reference (tag and digest dropped)."""
    return parse_image_ref(ref).name


def desired_image_problem(image: str) -> str | None:
    """Why the daemon must not hand ``image`` (``BootcNode.spec.desiredImage``) to bootc,
    or None. The CRD's own rule, checked again on the node: a BootcNode written past an
    older CRD, or by hand, never reaches ``bootc switch`` as an option."""
    if re.fullmatch(DIGEST_REF_PATTERN, image):
        return None
    if image.startswith("-"):
        why = 'begins with "-" (bootc would read it as an option)'
    elif any(ch.isspace() or not ch.isprintable() for ch in image):
        why = "contains whitespace or a control character"
    else:
        why = "is not a digest reference like registry.example.com/os@sha256:<64 hex digits>"
    return f"spec.desiredImage {json.dumps(image[:120])} {why}; not switching to it"
