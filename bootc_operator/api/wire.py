"""The small part of ``node.bootc.dev/v1alpha1`` the node agent reads and writes.

The model base (``WireModel``) and what a daemon puts into BootcNode.status or
reads from its spec: ``ImageInfo``, ``BootAssessment``, and the enums
``DesiredImageState``, ``RebootPolicy``, ``RebootKind``. Kept apart so the daemon
does not build every pool model at start-up (``v1alpha1`` imports and re-exports
all of them: it stays the one source of the CRDs).
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """Base: camelCase aliases, python names accepted too, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_enum_values=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict as the API server stores it (absent fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class RebootPolicy(StrEnum):
    REBOOT_ONLY = "RebootOnly"
    ALLOW_SOFT_REBOOT = "AllowSoftReboot"


class ImageInfo(WireModel):
    """One deployment of a host: an image and what bootc knows of it."""

    image: str = Field(description="the full image reference (repo@sha256:...).")
    image_digest: str = Field(description="the per-architecture manifest digest (sha256:...).")
    version: str | None = Field(default=None, description="the image version, if any.")
    timestamp: dt.datetime | None = Field(default=None, description="the image build time.")
    architecture: str | None = Field(default=None, description='e.g. "amd64".')
    soft_reboot_capable: bool | None = Field(
        default=None, description="a userspace-only restart can apply this deployment."
    )
    incompatible: bool | None = Field(
        default=None, description="local mutations (rpm-ostree layering) bootc cannot manage."
    )


class DesiredImageState(StrEnum):
    STAGED = "Staged"
    BOOTED = "Booted"


class BootAssessmentState(StrEnum):
    PENDING = "Pending"
    COMPLETE = "Complete"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class BootAssessment(WireModel):
    """Whether the current boot reached systemd's boot-complete.target."""

    state: BootAssessmentState = Field(
        description='"Pending": not yet; "Complete": reached; "Failed": the boot finished '
        'without reaching it (a required check failed); "Unknown": could not be read.'
    )
    message: str | None = Field(default=None, description="details, e.g. the failed units.")


class RebootKind(StrEnum):
    SOFT = "Soft"
    FULL = "Full"
