"""Kubernetes timestamps on the wire: written as metav1.Time or metav1.MicroTime, read back.

- ``now_rfc3339(t=None)``: a ``metav1.Time`` (whole seconds, UTC, ``…T10:00:00Z``) for
  ``t``, or for now: condition ``lastTransitionTime``, annotations, core v1 Event
  ``firstTimestamp`` / ``lastTimestamp``, ``status.nextTagResolutionTime``.
- ``micro_time(t=None)``: a ``metav1.MicroTime`` (microseconds, ``…T10:00:00.123456Z``):
  Lease ``acquireTime`` / ``renewTime``, Event ``eventTime`` and series times.
- ``parse_time(text)``: either form back to an aware ``datetime``; None for an absent
  or malformed value (a hand-edited annotation must not stop a reconcile).
"""

from __future__ import annotations

import datetime as dt


def now_rfc3339(t: dt.datetime | None = None) -> str:
    """``t`` (default: now) as metav1.Time serialises it: seconds precision, UTC."""
    t = (t or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(microsecond=0)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: dt.datetime | None = None) -> str:
    """``t`` (default: now) as metav1.MicroTime serialises it: microseconds, UTC."""
    t = (t or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> dt.datetime | None:
    """A metav1.Time or MicroTime string as an aware datetime; None if absent or malformed."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
