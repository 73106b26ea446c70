"""The small part of ``node.bootc.dev/v1alpha1`` the node agent writes, without pydantic.

What a daemon puts into BootcNode.status or reads from its spec: ``ImageInfo`` and
``BootAssessment`` (frozen dataclasses that render their own wire dicts) and the
enums ``DesiredImageState``, ``RebootPolicy``, ``RebootKind``,
``BootAssessmentState``. Kept apart, and free of pydantic, so the daemon on every
node pays neither pydantic's import (about 9 MiB with its compiled core) nor the
models' schema builds. ``v1alpha1`` holds the pydantic models of the same shapes,
which generate the CRDs; a unit test pins
that each dataclass renders exactly what its ``v1alpha1`` model accepts and
writes back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RebootPolicy(StrEnum):
    REBOOT_ONLY = "RebootOnly"
    ALLOW_SOFT_REBOOT = "AllowSoftReboot"


class DesiredImageState(StrEnum):
    STAGED = "Staged"
    BOOTED = "Booted"


class BootAssessmentState(StrEnum):
    PENDING = "Pending"
    COMPLETE = "Complete"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class RebootKind(StrEnum):
    SOFT = "Soft"
    FULL = "Full"


def wire_time(t: dt.datetime) -> str:
    """RFC 3339 as the API server (and pydantic's JSON mode) writes it: UTC as ``Z``."""
    text = t.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _drop_none(doc: dict[str, Any], nulls: bool) -> dict[str, Any]:
    return doc if nulls else {k: v for k, v in doc.items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class ImageInfo:
    """One deployment of a host: an image and what bootc knows of it."""

    image: str
    image_digest: str
    version: str | None = None
    timestamp: dt.datetime | None = None
    architecture: str | None = None
    soft_reboot_capable: bool | None = None
    incompatible: bool | None = None

    def to_wire(self, *, nulls: bool = False) -> dict[str, Any]:
        """The camelCase dict; absent fields omitted, or null with ``nulls``."""
        doc = {
            "image": self.image,
            "imageDigest": self.image_digest,
            "version": self.version,
            "timestamp": None if self.timestamp is None else wire_time(self.timestamp),
            "architecture": self.architecture,
            "softRebootCapable": self.soft_reboot_capable,
            "incompatible": self.incompatible,
        }
        return _drop_none(doc, nulls)


@dataclass(frozen=True, kw_only=True)
class BootAssessment:
    """Whether the current boot reached systemd's boot-complete.target."""

    state: BootAssessmentState
    message: str | None = None

    def to_wire(self, *, nulls: bool = False) -> dict[str, Any]:
        return _drop_none({"state": self.state.value, "message": self.message}, nulls)
