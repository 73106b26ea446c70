"""The admin's order of reboots (``spec.rollout.order``): which waiting node takes
the next reboot slot.

``order_key`` sorts the candidates (after the canaries, inside the current
domain of a topology), most significant first:

1. ``controlPlane``: ``First`` or ``Last`` puts the nodes labelled
   ``node-role.kubernetes.io/control-plane`` before or after all others;
2. ``byLabel``: the label's value, lower first; a value that is a number
   compares numerically (``2`` before ``10``) and numbers go before words;
   nodes without the label go after those with it;
3. ``by``: ``Name``; ``OldestBootFirst``, the node Ready the longest (its Ready
   condition's lastTransitionTime: a reboot turns it NotReady, so this is when
   it last came up) first; ``NewestFirst``, the most recently created Node
   first. A node without the time goes after those with it;
4. the name, so the order is always deterministic.

Without ``spec.rollout.order`` the slot order stays ``slots.slot_order``
(already-cordoned first, then staged longest, then by name). ``describe`` says
the order in words for the status message.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from bootc_operator.api import constants as c
from bootc_operator.policy.nodestate import NodeView

BY_NAME = "Name"
OLDEST_BOOT_FIRST = "OldestBootFirst"
NEWEST_FIRST = "NewestFirst"
FIRST = "First"
LAST = "Last"


@dataclass(frozen=True, slots=True)
class Order:
    """``spec.rollout.order`` as the decisions read it."""

    by: str = BY_NAME
    by_label: str | None = None
    control_plane: str | None = None  # First, Last or None

    def describe(self) -> str:
        """The order in words, e.g. ``control plane last, by label rack, oldest boot first``."""
        parts = []
        if self.control_plane:
            parts.append(f"control plane {self.control_plane.lower()}")
        if self.by_label:
            parts.append(f"by label {self.by_label}")
        parts.append(
            {OLDEST_BOOT_FIRST: "oldest boot first", NEWEST_FIRST: "newest node first"}.get(
                self.by, "by name"
            )
        )
        return ", ".join(parts)


def is_control_plane(v: NodeView) -> bool:
    return v.label(c.CONTROL_PLANE_LABEL) is not None


def label_rank(value: str | None) -> tuple[int, float, str]:
    """Numbers first (numerically), then words, then no label."""
    if value is None:
        return (2, 0.0, "")
    try:
        number = float(value)
    except ValueError:
        return (1, 0.0, value)
    if math.isnan(number):
        return (1, 0.0, value)
    return (0, number, "")


def _seconds(at: dt.datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def order_key(order: Order, v: NodeView) -> tuple[int, tuple[int, float, str], float, str]:
    """The sort key of candidate ``v`` (module doc)."""
    cp = 0
    if order.control_plane is not None:
        first = order.control_plane == FIRST
        cp = 0 if is_control_plane(v) == first else 1
    label = label_rank(v.label(order.by_label)) if order.by_label else (0, 0.0, "")
    by = 0.0
    if order.by == OLDEST_BOOT_FIRST:
        since = _seconds(v.ready_since)
        by = math.inf if since is None else since
    elif order.by == NEWEST_FIRST:
        created = _seconds(v.created)
        by = math.inf if created is None else -created
    return (cp, label, by, v.name)


def order_news(order: Order, next_up: tuple[str, ...], limit: int = 5) -> str:
    """The progress note: the nodes waiting for a slot, in the order they go."""
    shown = ", ".join(next_up[:limit])
    more = f" and {len(next_up) - limit} more" if len(next_up) > limit else ""
    return f"next ({order.describe()}): {shown}{more}"
