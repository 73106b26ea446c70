"""Small helpers for e2e tests: unique object names, and ``wait_for`` (re-exported)."""

from __future__ import annotations

import uuid

from hack.testenv.waiting import wait_for

__all__ = ["unique_name", "wait_for"]


def unique_name(prefix: str) -> str:
    """A DNS-1123 name unique within the session (``prefix-1a2b3c4d``)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
