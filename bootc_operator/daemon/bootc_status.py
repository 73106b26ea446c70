"""Parsing ``bootc status --format=json --format-version=1`` and mapping it into BootcNode.status.

Owns the daemon's view of bootc's host document (bootc-dev/bootc ``spec.rs``):
``{"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata", "spec":
{"image", "bootOrder"}, "status": {"staged", "booted", "rollback", "otherDeployments",
"rollbackQueued", "type"}}``, each deployment entry ``{"image": {"image": {"image",
"transport", "signature"}, "version", "timestamp", "imageDigest", "architecture"},
"cachedUpdate", "incompatible", "pinned", "softRebootCapable", "downloadOnly", "store",
"ostree" | "composefs"}``.

Tolerant of every variant real bootc prints: the canonical one-line JSON and older
pretty output; optional fields absent or ``null`` (``null`` flags read as false);
``signature`` absent, a string (``"insecure"``, ``"containerPolicy"``) or an object
(``{"ostreeRemote": "fedora"}``); ``otherDeployments`` absent when empty; composefs
entries (``ostree: null`` plus ``composefs``); an entry whose ``image`` is ``null``
(plain ostree commit, or rpm-ostree layering: ``incompatible: true``); an unparseable
timestamp (read as unknown); unknown fields of newer bootc (``usrOverlay``,
``storage``, ...) ignored; the older ``org.containers.bootc/v1alpha1`` apiVersion;
a host bootc does not manage (``booted: null``, which bootc also prints when it
believes it runs in a container; or ``status`` absent / ``null``).

``parse_status(text)`` raises ``BootcStatusError`` (one readable line with a short
excerpt of the output) for empty output, non-JSON (``safejson``: also nesting too
deep and numbers too long), JSON that is not an object, a
document of another kind, or one whose required fields (an entry's ``imageDigest``,
an image's ``image``) are missing.

Mapping to ``ImageInfo``: ``image`` is the reference **exactly as bootc reports it**
(the ``bootc switch`` target; non-registry transports prefixed, e.g.
``oci:/var/mnt/img``), never rewritten to ``repo@imageDigest``. For a tag ref that
keeps the tag, with the digest in ``imageDigest``; for a pool pinned to a multi-arch
*index* digest it keeps the index digest, while ``imageDigest`` is the
per-architecture manifest digest. Rewriting would lose that link, which is how a
desired index digest is recognised as booted (``image_matches``).
``softRebootCapable`` and ``incompatible`` are copied from the entry. An entry with
``image: null`` has no ``ImageInfo``; ``HostStatus.unmanageable_reason()`` then says
why the host cannot be managed (not bootc, incompatible, not a container image).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from bootc_operator import safejson
from bootc_operator.api.wire import ImageInfo

API_GROUP_PREFIX = "org.containers.bootc/"
KIND = "BootcHost"
EXCERPT_CHARS = 80
#: The longest "where: why" of an unusable document (see ``_Invalid.describe``).
DESCRIBE_CHARS = 200

# Read by hand into frozen dataclasses rather than with pydantic: the daemon runs on
# every node, and pydantic (with its compiled core and the models' schemas) was
# about 9 MiB of its RSS and 80 ms of its start-up for this one document.

Loc = tuple[str | int, ...]  # where in the document: JSON keys and list indexes


class BootcStatusError(ValueError):
    """``bootc status`` printed something this daemon cannot use; the message is one line."""


class _Invalid(Exception):
    """A field of the document is unusable: where (JSON keys) and why."""

    def __init__(self, path: Loc, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message

    def describe(self) -> str:
        """``where: why``, cut to ``DESCRIBE_CHARS``: a quoted value (an ``apiVersion`` of
        90,000 characters) must not make the condition message too long to write."""
        where = ".".join(str(part) for part in self.path) or "document"
        text = f"{where}: {self.message}"
        return text if len(text) <= DESCRIBE_CHARS else text[: DESCRIBE_CHARS - 3] + "..."


def _object(value: Any, path: Loc) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(path, f"should be an object, not {type(value).__name__}")
    return value


def _nested(doc: dict[str, Any], key: str, path: Loc) -> dict[str, Any] | None:
    """An optional object field (absent or null: None)."""
    value = doc.get(key)
    return None if value is None else _object(value, (*path, key))


def _string(doc: dict[str, Any], key: str, path: Loc, *, required: bool = False) -> str | None:
    if key not in doc or (doc[key] is None and not required):
        if required:
            raise _Invalid((*path, key), "Field required")
        return None
    value = doc[key]
    if not isinstance(value, str):
        raise _Invalid((*path, key), f"should be a string, not {type(value).__name__}")
    return value


def _required_string(doc: dict[str, Any], key: str, path: Loc, *, non_empty: bool = False) -> str:
    value = _string(doc, key, path, required=True)
    assert value is not None
    if non_empty and not value:
        raise _Invalid((*path, key), "should not be empty")
    return value


_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}


def _flag(doc: dict[str, Any], key: str, path: Loc) -> bool:
    """A boolean; absent or null reads as false. Accepts what JSON-ish tools print for
    booleans (0/1, "true"/"false", ...), like the model it replaced."""
    value = doc.get(key)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise _Invalid((*path, key), f"should be a boolean, not {value!r}"[:120])


def _integer(doc: dict[str, Any], key: str, path: Loc) -> int:
    value = doc.get(key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)
    raise _Invalid((*path, key), f"should be an integer, not {value!r}"[:120])


def _lenient_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 time; anything else (bootc has printed odd ones) reads as unknown."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class ImageReference:
    """A container image reference with its transport and signature policy."""

    image: str
    transport: str = "registry"
    #: absent/None, "insecure", "containerPolicy", or {"ostreeRemote": "<remote>"}
    signature: str | dict[str, Any] | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> ImageReference:
        signature = doc.get("signature")
        if signature is not None and not isinstance(signature, str | dict):
            raise _Invalid((*path, "signature"), "should be a string or an object")
        return cls(
            image=_required_string(doc, "image", path),
            transport=_string(doc, "transport", path) or "registry",
            signature=signature,
        )

    @property
    def pullspec(self) -> str:
        """``image`` for the registry transport, else ``transport:image``."""
        return self.image if self.transport == "registry" else f"{self.transport}:{self.image}"

    @property
    def signature_policy(self) -> str | None:
        """``"insecure"``, ``"containerPolicy"``, ``"ostreeRemote:<remote>"`` or None."""
        sig = self.signature
        if sig is None or isinstance(sig, str):
            return sig
        return ",".join(f"{k}:{v}" if v not in (None, True) else k for k, v in sig.items())


@dataclass(frozen=True, kw_only=True)
class ImageStatus:
    """What bootc knows of a deployment's image."""

    image: ImageReference
    version: str | None = None
    timestamp: dt.datetime | None = None
    image_digest: str
    architecture: str | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> ImageStatus:
        if doc.get("image") is None:
            raise _Invalid((*path, "image"), "Field required")
        return cls(
            image=ImageReference.read(_object(doc["image"], (*path, "image")), (*path, "image")),
            version=_string(doc, "version", path),
            timestamp=_lenient_time(doc.get("timestamp")),
            image_digest=_required_string(doc, "imageDigest", path, non_empty=True),
            architecture=_string(doc, "architecture", path),
        )


@dataclass(frozen=True, kw_only=True)
class OstreeInfo:
    checksum: str
    deploy_serial: int = 0
    stateroot: str | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> OstreeInfo:
        return cls(
            checksum=_required_string(doc, "checksum", path),
            deploy_serial=_integer(doc, "deploySerial", path),
            stateroot=_string(doc, "stateroot", path),
        )


@dataclass(frozen=True, kw_only=True)
class ComposefsInfo:
    verity: str | None = None
    boot_type: str | None = None
    bootloader: str | None = None
    boot_digest: str | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> ComposefsInfo:
        return cls(
            verity=_string(doc, "verity", path),
            boot_type=_string(doc, "bootType", path),
            bootloader=_string(doc, "bootloader", path),
            boot_digest=_string(doc, "bootDigest", path),
        )


def _image_status(doc: dict[str, Any], key: str, path: Loc) -> ImageStatus | None:
    found = _nested(doc, key, path)
    return None if found is None else ImageStatus.read(found, (*path, key))


@dataclass(frozen=True, kw_only=True)
class BootEntry:
    """One deployment (booted, staged, rollback or other)."""

    image: ImageStatus | None = None
    cached_update: ImageStatus | None = None
    incompatible: bool = False
    pinned: bool = False
    soft_reboot_capable: bool = False
    download_only: bool = False
    store: str | None = None
    ostree: OstreeInfo | None = None
    composefs: ComposefsInfo | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> BootEntry:
        ostree = _nested(doc, "ostree", path)
        composefs = _nested(doc, "composefs", path)
        return cls(
            image=_image_status(doc, "image", path),
            cached_update=_image_status(doc, "cachedUpdate", path),
            incompatible=_flag(doc, "incompatible", path),
            pinned=_flag(doc, "pinned", path),
            soft_reboot_capable=_flag(doc, "softRebootCapable", path),
            download_only=_flag(doc, "downloadOnly", path),
            store=_string(doc, "store", path),
            ostree=None if ostree is None else OstreeInfo.read(ostree, (*path, "ostree")),
            composefs=(
                None if composefs is None else ComposefsInfo.read(composefs, (*path, "composefs"))
            ),
        )

    @property
    def backend(self) -> str | None:
        """``"ostree"``, ``"composefs"`` or None when bootc said neither."""
        if self.ostree is not None:
            return "ostree"
        return "composefs" if self.composefs is not None else None

    @property
    def image_digest(self) -> str | None:
        return self.image.image_digest if self.image is not None else None

    def image_info(self) -> ImageInfo | None:
        """This entry as BootcNode ``ImageInfo``; None when bootc reports no image."""
        if self.image is None:
            return None
        img = self.image
        return ImageInfo(
            image=img.image.pullspec,
            image_digest=img.image_digest,
            version=img.version,
            timestamp=img.timestamp,
            architecture=img.architecture,
            soft_reboot_capable=self.soft_reboot_capable,
            incompatible=self.incompatible,
        )


def _entry(doc: dict[str, Any], key: str, path: Loc) -> BootEntry | None:
    found = _nested(doc, key, path)
    return None if found is None else BootEntry.read(found, (*path, key))


@dataclass(frozen=True, kw_only=True)
class HostSpec:
    image: ImageReference | None = None
    boot_order: str = "default"

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> HostSpec:
        image = _nested(doc, "image", path)
        return cls(
            image=None if image is None else ImageReference.read(image, (*path, "image")),
            boot_order=_string(doc, "bootOrder", path) or "default",
        )


@dataclass(frozen=True, kw_only=True)
class HostStatusBody:
    staged: BootEntry | None = None
    booted: BootEntry | None = None
    rollback: BootEntry | None = None
    other_deployments: list[BootEntry] = field(default_factory=list)
    rollback_queued: bool = False
    type: str | None = None

    @classmethod
    def read(cls, doc: dict[str, Any], path: Loc) -> HostStatusBody:
        others = doc.get("otherDeployments") or []
        where = (*path, "otherDeployments")
        if not isinstance(others, list):
            raise _Invalid(where, f"should be a list, not {type(others).__name__}")
        return cls(
            staged=_entry(doc, "staged", path),
            booted=_entry(doc, "booted", path),
            rollback=_entry(doc, "rollback", path),
            other_deployments=[
                BootEntry.read(_object(item, (*where, i)), (*where, i))
                for i, item in enumerate(others)
            ],
            rollback_queued=_flag(doc, "rollbackQueued", path),
            type=_string(doc, "type", path),
        )


@dataclass(frozen=True)
class DeploymentImages:
    """The booted / staged / rollback ``ImageInfo`` for BootcNode.status."""

    booted: ImageInfo | None
    staged: ImageInfo | None
    rollback: ImageInfo | None

    def to_wire(self) -> dict[str, dict[str, Any] | None]:
        """For a merge patch of ``status``: absent deployments are explicit nulls (cleared)."""
        return {
            "booted": self.booted.to_wire() if self.booted else None,
            "staged": self.staged.to_wire() if self.staged else None,
            "rollback": self.rollback.to_wire() if self.rollback else None,
        }


@dataclass(frozen=True, kw_only=True)
class HostStatus:
    """A parsed ``BootcHost`` document."""

    api_version: str
    kind: str
    metadata: dict[str, Any] = field(default_factory=dict)
    spec: HostSpec = field(default_factory=HostSpec)
    status: HostStatusBody = field(default_factory=HostStatusBody)

    @classmethod
    def read(cls, doc: dict[str, Any]) -> HostStatus:
        """The document as bootc printed it (parsed JSON); ``_Invalid`` names what is wrong."""
        api_version = _required_string(doc, "apiVersion", ())
        if not api_version.startswith(API_GROUP_PREFIX):
            raise _Invalid(
                ("apiVersion",), f"apiVersion is {api_version!r}, not {API_GROUP_PREFIX}..."
            )
        kind = _required_string(doc, "kind", ())
        if kind != KIND:
            raise _Invalid(("kind",), f"kind is {kind!r}, not {KIND!r}")
        return cls(
            api_version=api_version,
            kind=kind,
            metadata=_nested(doc, "metadata", ()) or {},
            spec=HostSpec.read(_nested(doc, "spec", ()) or {}, ("spec",)),
            status=HostStatusBody.read(_nested(doc, "status", ()) or {}, ("status",)),
        )

    @property
    def booted(self) -> BootEntry | None:
        return self.status.booted

    @property
    def staged(self) -> BootEntry | None:
        return self.status.staged

    @property
    def rollback(self) -> BootEntry | None:
        return self.status.rollback

    @property
    def rollback_queued(self) -> bool:
        """``bootc rollback`` ran: the rollback deployment boots next (``bootOrder: rollback``)."""
        return self.status.rollback_queued

    @property
    def is_bootc_host(self) -> bool:
        """False when bootc reports no booted deployment (not bootc, or "in a container")."""
        return self.status.booted is not None

    @property
    def incompatible(self) -> bool:
        """The booted or staged deployment carries rpm-ostree local modifications."""
        return any(e is not None and e.incompatible for e in (self.booted, self.staged))

    def unmanageable_reason(self) -> str | None:
        """Why bootc cannot manage this host (never switch it), or None when it can."""
        booted = self.status.booted
        if booted is None:
            return (
                "bootc reports no booted deployment (status.booted is null): the host was not "
                "booted from a bootc image, or bootc believes it is running inside a container"
            )
        for slot, entry in (("booted", booted), ("staged", self.status.staged)):
            if entry is not None and entry.incompatible:
                return (
                    f"the {slot} deployment has local rpm-ostree modifications "
                    "(incompatible: true), which bootc cannot manage; run `rpm-ostree reset` "
                    "on the host to remove them"
                )
        if booted.image is None:
            return (
                "the booted deployment is not a container image (bootc reports image: null): "
                "bootc cannot update it"
            )
        return None

    def images(self) -> DeploymentImages:
        return DeploymentImages(
            booted=booted.image_info() if (booted := self.status.booted) else None,
            staged=staged.image_info() if (staged := self.status.staged) else None,
            rollback=rollback.image_info() if (rollback := self.status.rollback) else None,
        )

    def reported_images(self) -> DeploymentImages:
        """The deployments as BootcNode.status reports them: ``staged`` is the
        deployment that boots next, so a queued rollback is reported there too (bootc
        leaves ``staged`` empty and sets ``rollbackQueued``). A controller — ours, or
        the Go one — then sees a target that is the rollback deployment staged, as
        it would after a ``bootc switch`` to it."""
        images = self.images()
        if self.rollback_queued and images.staged is None and images.rollback is not None:
            return replace(images, staged=images.rollback)
        return images


def _excerpt(text: str) -> str:
    """A short, single-line, printable rendering of the start of ``text``."""
    return repr(text[:EXCERPT_CHARS]) + ("..." if len(text) > EXCERPT_CHARS else "")


def parse_document(doc: dict[str, Any], *, text: str | None = None) -> HostStatus:
    """An already decoded ``BootcHost`` document; ``BootcStatusError`` when unusable
    (quoting the start of ``text``, the output it came from, when given)."""
    try:
        return HostStatus.read(doc)
    except _Invalid as exc:
        quoted = f"; output starts: {_excerpt(text)}" if text is not None else ""
        raise BootcStatusError(
            f"bootc status JSON is not a usable BootcHost document: {exc.describe()}{quoted}"
        ) from None


def parse_status(text: str | bytes) -> HostStatus:
    """Parse bootc's JSON status; raises ``BootcStatusError`` with a one-line reason."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise BootcStatusError("bootc status printed nothing")
    try:
        doc = safejson.loads(stripped)
    except safejson.JSONInputError as exc:
        raise BootcStatusError(
            f"bootc status output is not JSON ({exc.reason}); output starts: {_excerpt(stripped)}"
        ) from None
    if not isinstance(doc, dict):
        raise BootcStatusError(
            f"bootc status printed a JSON {type(doc).__name__}, not an object; "
            f"output starts: {_excerpt(stripped)}"
        )
    return parse_document(doc, text=stripped)


def _repository(ref: str) -> str:
    name = ref.split("@", 1)[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    return name[:colon] if colon > slash else name


def image_matches(info: ImageInfo | None, desired: str) -> bool:
    """True when deployment ``info`` runs ``desired`` (a ``repo@sha256:...`` ref).

    Either bootc was pointed at exactly ``desired`` (this also covers a multi-arch
    index digest, whose per-architecture manifest digest is what ``imageDigest``
    shows), or ``desired`` names the same repository and ``imageDigest`` itself.
    """
    if info is None:
        return False
    if info.image == desired:
        return True
    _, sep, digest = desired.partition("@")
    return (
        bool(sep)
        and digest == info.image_digest
        and (_repository(info.image) == _repository(desired))
    )
