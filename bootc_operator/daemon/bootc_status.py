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
excerpt of the output) for empty output, non-JSON, JSON that is not an object, a
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

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)
from pydantic.alias_generators import to_camel

from bootc_operator.api.wire import ImageInfo

API_GROUP_PREFIX = "org.containers.bootc/"
KIND = "BootcHost"
EXCERPT_CHARS = 80


class BootcStatusError(ValueError):
    """``bootc status`` printed something this daemon cannot use; the message is one line."""


def _false_if_null(value: Any) -> Any:
    return False if value is None else value


def _empty_if_null(value: Any) -> Any:
    return [] if value is None else value


def _lenient_time(value: Any, handler: ValidatorFunctionWrapHandler) -> dt.datetime | None:
    try:
        result: dt.datetime | None = handler(value)
    except ValidationError:
        return None
    return result


Flag = Annotated[bool, BeforeValidator(_false_if_null)]
LenientTime = Annotated[dt.datetime | None, WrapValidator(_lenient_time)]


class _BootcModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class ImageReference(_BootcModel):
    """A container image reference with its transport and signature policy."""

    image: str
    transport: Annotated[str, BeforeValidator(lambda v: v or "registry")] = "registry"
    #: absent/None, "insecure", "containerPolicy", or {"ostreeRemote": "<remote>"}
    signature: str | dict[str, Any] | None = None

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


class ImageStatus(_BootcModel):
    """What bootc knows of a deployment's image."""

    image: ImageReference
    version: str | None = None
    timestamp: LenientTime = None
    image_digest: str = Field(min_length=1)
    architecture: str | None = None


class OstreeInfo(_BootcModel):
    checksum: str
    deploy_serial: int = 0
    stateroot: str | None = None


class ComposefsInfo(_BootcModel):
    verity: str | None = None
    boot_type: str | None = None
    bootloader: str | None = None
    boot_digest: str | None = None


class BootEntry(_BootcModel):
    """One deployment (booted, staged, rollback or other)."""

    image: ImageStatus | None = None
    cached_update: ImageStatus | None = None
    incompatible: Flag = False
    pinned: Flag = False
    soft_reboot_capable: Flag = False
    download_only: Flag = False
    store: str | None = None
    ostree: OstreeInfo | None = None
    composefs: ComposefsInfo | None = None

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


class HostSpec(_BootcModel):
    image: ImageReference | None = None
    boot_order: Annotated[str, BeforeValidator(lambda v: v or "default")] = "default"


class HostStatusBody(_BootcModel):
    staged: BootEntry | None = None
    booted: BootEntry | None = None
    rollback: BootEntry | None = None
    other_deployments: Annotated[list[BootEntry], BeforeValidator(_empty_if_null)] = Field(
        default_factory=list
    )
    rollback_queued: Flag = False
    type: str | None = None


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


class HostStatus(_BootcModel):
    """A parsed ``BootcHost`` document."""

    api_version: str
    kind: str
    metadata: Annotated[dict[str, Any], BeforeValidator(lambda v: v or {})] = Field(
        default_factory=dict
    )
    spec: Annotated[HostSpec, BeforeValidator(lambda v: v or {})] = Field(default_factory=HostSpec)
    status: Annotated[HostStatusBody, BeforeValidator(lambda v: v or {})] = Field(
        default_factory=HostStatusBody
    )

    @field_validator("kind")
    @classmethod
    def _is_bootc_host(cls, kind: str) -> str:
        if kind != KIND:
            raise ValueError(f"kind is {kind!r}, not {KIND!r}")
        return kind

    @field_validator("api_version")
    @classmethod
    def _is_bootc_api(cls, api_version: str) -> str:
        if not api_version.startswith(API_GROUP_PREFIX):
            raise ValueError(f"apiVersion is {api_version!r}, not {API_GROUP_PREFIX}...")
        return api_version

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

    def to_bootc_node_status_fields(self) -> dict[str, ImageInfo | None]:
        """``{"booted", "staged", "rollback"}`` for ``BootcNodeStatus(**fields, ...)``."""
        images = self.images()
        return {"booted": images.booted, "staged": images.staged, "rollback": images.rollback}


def _excerpt(text: str) -> str:
    """A short, single-line, printable rendering of the start of ``text``."""
    return repr(text[:EXCERPT_CHARS]) + ("..." if len(text) > EXCERPT_CHARS else "")


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "document"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}{more}"


def parse_status(text: str | bytes) -> HostStatus:
    """Parse bootc's JSON status; raises ``BootcStatusError`` with a one-line reason."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise BootcStatusError("bootc status printed nothing")
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError as exc:
        what = exc.msg.removesuffix(" at")  # "Invalid control character at"
        raise BootcStatusError(
            f"bootc status output is not JSON ({what} at line {exc.lineno} column "
            f"{exc.colno}); output starts: {_excerpt(stripped)}"
        ) from None
    if not isinstance(doc, dict):
        raise BootcStatusError(
            f"bootc status printed a JSON {type(doc).__name__}, not an object; "
            f"output starts: {_excerpt(stripped)}"
        )
    try:
        return HostStatus.model_validate(doc)
    except ValidationError as exc:
        raise BootcStatusError(
            f"bootc status JSON is not a usable BootcHost document: {_describe(exc)}; "
            f"output starts: {_excerpt(stripped)}"
        ) from None


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
