"""Pool status aggregation: counts, progress message and the two pool conditions.

Pure functions: ``count_states`` tallies ``NodeView``s; ``progress_message``
renders ``7/10 updated; 2 staging, 1 rebooting``; ``degraded_condition`` picks
the highest-precedence problem (DESIGN §2: NodeDegraded < NodeConflict <
RolloutHalted < PullSecretError < InvalidSpec < TagResolutionError);
``up_to_date_condition`` says AllUpdated / Paused / RolloutInProgress.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bootc_operator.api import constants as c
from bootc_operator.reconcilers.nodestate import NodeState, NodeView


@dataclass(frozen=True, slots=True)
class Counts:
    total: int = 0
    updated: int = 0
    pending: int = 0
    staging: int = 0
    staged: int = 0  # staged, waiting for a reboot slot
    draining: int = 0  # staged and holding a slot, not yet told to reboot
    rebooting: int = 0  # told to reboot (Booted) or reporting Rebooting
    degraded: int = 0

    @property
    def updating(self) -> int:
        return self.staging + self.staged + self.draining + self.rebooting


def count_states(views: Iterable[NodeView]) -> Counts:
    tally = dict.fromkeys(
        ("total", "updated", "pending", "staging", "staged", "draining", "rebooting", "degraded"),
        0,
    )
    for v in views:
        tally["total"] += 1
        if v.state is NodeState.DEGRADED:
            tally["degraded"] += 1
        elif v.state is NodeState.UP_TO_DATE:
            tally["updated"] += 1
        elif v.state is NodeState.REBOOTING or (v.in_slot and v.desired_image_state == "Booted"):
            tally["rebooting"] += 1
        elif v.state is NodeState.STAGED:
            tally["draining" if v.in_slot else "staged"] += 1
        elif v.state is NodeState.STAGING:
            tally["staging"] += 1
        else:
            tally["pending"] += 1
    return Counts(**tally)


def progress_message(counts: Counts) -> str:
    text = f"{counts.updated}/{counts.total} updated"
    parts = [
        f"{n} {label}"
        for n, label in (
            (counts.pending, "pending"),
            (counts.staging, "staging"),
            (counts.staged, "staged"),
            (counts.draining, "draining"),
            (counts.rebooting, "rebooting"),
            (counts.degraded, "degraded"),
        )
        if n
    ]
    return f"{text}; {', '.join(parts)}" if parts else text


def up_to_date_condition(counts: Counts, *, paused: bool) -> tuple[bool, str, str]:
    """(status, reason, message) of the pool's UpToDate condition."""
    message = progress_message(counts)
    if counts.updated == counts.total:
        return True, c.REASON_ALL_UPDATED, message
    if paused:
        return False, c.REASON_PAUSED, f"rollout paused: {message}"
    return False, c.REASON_ROLLOUT_IN_PROGRESS, message


def degraded_condition(problems: Mapping[str, str]) -> tuple[bool, str, str]:
    """(status, reason, message): the highest-precedence problem, or Healthy.

    ``problems`` maps a Degraded reason to its message. Lower-precedence problems
    are appended to the message so nothing is hidden.
    """
    present = [r for r in reversed(c.DEGRADED_PRECEDENCE) if problems.get(r)]
    unknown = sorted(set(problems) - set(c.DEGRADED_PRECEDENCE))
    if unknown:
        raise ValueError(f"unknown Degraded reasons: {unknown}")
    if not present:
        return False, c.REASON_HEALTHY, "all nodes healthy"
    top, *rest = present
    message = problems[top]
    if rest:
        message += "; also: " + "; ".join(f"{r}: {problems[r]}" for r in rest)
    return True, top, message


def degraded_nodes_message(views: Iterable[NodeView], limit: int = 5) -> str:
    """``node-a: error: ...; node-b: ...`` naming up to ``limit`` degraded nodes."""
    bad = sorted((v for v in views if v.state is NodeState.DEGRADED), key=lambda v: v.name)
    shown = [f"{v.name}: {v.degraded_message or 'degraded'}" for v in bad[:limit]]
    if len(bad) > limit:
        shown.append(f"and {len(bad) - limit} more")
    return "; ".join(shown)
