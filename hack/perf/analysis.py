"""Figures from the observer's timestamped logs: rollout timeline and reaction latencies.

Definitions (all timestamps are the observer's watch events, see ``observer``):

- **reaction latency** (the issue's figure 3): a BootcNode *status* change
  (the fleet's write: Idle reason, booted or staged digest) → the controller's
  next write *for that node* (BootcNode spec or annotations, the Node's
  cordon or label). Every controller write during the rollout is paired with
  the latest status change of its node since the controller's previous write
  to that node; a write with no such change (a slot handed to a node Staged
  before the rollout began) is not a reaction and is not counted. In this
  benchmark the answered changes are "back from the reboot, Idle on the
  target" → uncordon / slot released;
- **handoff**: the i-th slot release of the rollout → the (M+i)-th slot take,
  i.e. how long a freed slot stays unused while Staged nodes wait;
- **drain path**: slot taken (annotation) → ``desiredImageState: Booted``
  (cordon, the drain's Pod LIST+WATCH, the spec write);
- **fleet reaction**: ``desiredImageState: Booted`` → the fleet reports Rebooting
  (the simulated daemon's own delay, to show it is not the bottleneck);
- **slot hold**: slot taken → released (the reboot time R is part of it);
- **slot utilisation**: the time-average of slots held over the rollout / M;
- **peak staging**: the most BootcNodes reporting ``Idle=False/Staging`` at
  the same time (pulling the image) during a rollout, the figure
  ``spec.rollout.stageAhead`` bounds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from bootc_operator.api import constants as c
from hack.perf.observer import BnFacts, NodeFacts


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None, "mean": None}
    ordered = sorted(values)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]

    return {
        "n": len(ordered),
        "p50": q(0.5),
        "p99": q(0.99),
        "max": ordered[-1],
        "mean": sum(ordered) / len(ordered),
    }


def _status_changed(old: BnFacts, new: BnFacts) -> bool:
    return (old.idle, old.booted, old.staged) != (new.idle, new.booted, new.staged)


def _controller_wrote_bn(old: BnFacts, new: BnFacts) -> bool:
    return (old.owned, old.slot, old.state, old.desired) != (
        new.owned,
        new.slot,
        new.state,
        new.desired,
    )


def _controller_wrote_node(old: NodeFacts, new: NodeFacts) -> bool:
    return (old.managed, old.cordoned) != (new.managed, new.cordoned)


def reaction_latencies(
    bn_log: list[tuple[float, str, BnFacts]],
    node_log: list[tuple[float, str, NodeFacts]],
    t0: float,
    t1: float,
) -> list[float]:
    """Status change → the controller's next write for that node, within [t0, t1]."""
    merged: list[tuple[float, int, str, Any]] = [(t, 0, n, f) for t, n, f in bn_log]
    merged += [(t, 1, n, f) for t, n, f in node_log]
    merged.sort(key=lambda e: (e[0], e[1]))
    prev: dict[tuple[int, str], Any] = {}
    unanswered: dict[str, float] = {}  # node -> time of its latest unanswered status change
    out: list[float] = []
    for t, kind, name, facts in merged:
        old = prev.get((kind, name))
        prev[(kind, name)] = facts
        if old is None or t < t0 or t > t1:
            continue
        if kind == 0 and _status_changed(old, facts):
            unanswered[name] = t
        if kind == 0:
            wrote = _controller_wrote_bn(old, facts)
        else:
            wrote = _controller_wrote_node(old, facts)
        if wrote:
            since = unanswered.pop(name, None)
            if since is not None:
                out.append(t - since)
    return out


def handoffs(takes: list[float], releases: list[float], max_unavailable: int) -> list[float]:
    """The i-th slot release (in time order) -> the (M+i)-th take: how long a freed
    slot stayed unused."""
    return [
        takes[max_unavailable + i] - released
        for i, released in enumerate(releases)
        if max_unavailable + i < len(takes)
    ]


def rollout_figures(
    bn_log: list[tuple[float, str, BnFacts]],
    node_log: list[tuple[float, str, NodeFacts]],
    t0: float,
    t1: float,
    max_unavailable: int,
) -> dict[str, Any]:
    takes: list[tuple[float, str]] = []
    releases: list[tuple[float, str]] = []
    take_at: dict[str, float] = {}
    booted_req: dict[str, float] = {}
    drain_path: list[float] = []
    fleet_reaction: list[float] = []
    holds: list[float] = []

    prev_bn: dict[str, BnFacts] = {}
    for t, name, facts in bn_log:  # appended in arrival order
        old = prev_bn.get(name)
        prev_bn[name] = facts
        if t < t0 or old is None:
            continue
        if facts.slot and not old.slot:
            takes.append((t, name))
            take_at[name] = t
        if old.slot and not facts.slot:
            releases.append((t, name))
            if name in take_at:
                holds.append(t - take_at[name])
        if facts.state == "Booted" and old.state != "Booted":
            booted_req[name] = t
            if name in take_at:
                drain_path.append(t - take_at[name])
        if facts.idle == "Rebooting" and old.idle != "Rebooting" and name in booted_req:
            fleet_reaction.append(t - booted_req[name])
    handoff = handoffs([t for t, _ in takes], [t for t, _ in releases], max_unavailable)
    # slot utilisation: integrate the number of slots held over [t0, t1]
    held, area, last = 0, 0.0, t0
    for t, delta in sorted([(t, 1) for t, _ in takes] + [(t, -1) for t, _ in releases]):
        if t > t1:
            break
        area += held * (t - last)
        held, last = held + delta, t
    area += held * max(0.0, t1 - last)
    utilisation = area / (max_unavailable * (t1 - t0)) if t1 > t0 else None
    return {
        "takes": len(takes),
        "releases": len(releases),
        "reaction_latency": percentiles(reaction_latencies(bn_log, node_log, t0, t1)),
        "handoff": percentiles(handoff),
        "drain_path": percentiles(drain_path),
        "fleet_reaction": percentiles(fleet_reaction),
        "slot_hold": percentiles(holds),
        "slot_utilisation": utilisation,
    }


def peak_count(
    bn_log: list[tuple[float, str, BnFacts]],
    t0: float,
    t1: float,
    counted: Callable[[BnFacts], bool],
) -> int:
    """The most BootcNodes whose facts were ``counted`` at the same time within [t0, t1].

    Entries before ``t0`` set each node's state at ``t0`` (a node already
    counted then counts from the start); entries after ``t1`` are ignored.
    """
    now: set[str] = set()
    peak: int | None = None  # None until the first entry at or after t0
    for t, name, facts in bn_log:  # appended in arrival order
        if t > t1:
            break
        if t >= t0 and peak is None:
            peak = len(now)  # the state at t0
        if counted(facts):
            now.add(name)
        else:
            now.discard(name)
        if peak is not None:
            peak = max(peak, len(now))
    return len(now) if peak is None else peak


def peak_staging(bn_log: list[tuple[float, str, BnFacts]], t0: float, t1: float) -> int:
    """The most nodes staging (``Idle=False/Staging``) at once within [t0, t1]."""
    return peak_count(bn_log, t0, t1, lambda f: f.idle == c.REASON_STAGING)


CHAIN_STEPS = (
    ("take_to_cordon", "slot taken -> Node cordoned"),
    ("cordon_to_booted", "cordoned -> desiredImageState Booted (drain)"),
    ("booted_to_rebooting", "Booted -> the fleet reports Rebooting"),
    ("rebooting_to_back", "Rebooting -> Idle on the target (contains R)"),
    ("back_to_uncordon", "Idle on the target -> Node uncordoned"),
    ("uncordon_to_release", "uncordoned -> slot released"),
    ("release_to_next_take", "slot released -> the next slot taken (handoff)"),
)


def wave_chain(
    bn_log: list[tuple[float, str, BnFacts]],
    node_log: list[tuple[float, str, NodeFacts]],
    t0: float,
    t1: float,
    max_unavailable: int,
    reboot_seconds: float,
) -> dict[str, Any]:
    """Where a slot's time goes, step by step (percentiles, s), plus the start and end.

    Each node that held a slot in [t0, t1] contributes one sample per step of its
    chain: take → cordon → Booted → Rebooting → back Idle on the target →
    uncordon → release; the handoff pairs the i-th release with the (M+i)-th
    take. ``start`` is t0 → the M-th take (the first wave is in flight), ``end``
    the last release → t1. ``overhead_per_wave`` = (actual - ideal) / waves.
    """
    marks: dict[str, dict[str, float]] = {}
    merged: list[tuple[float, int, str, Any]] = [(t, 0, n, f) for t, n, f in bn_log]
    merged += [(t, 1, n, f) for t, n, f in node_log]
    merged.sort(key=lambda e: (e[0], e[1]))
    prev: dict[tuple[int, str], Any] = {}
    takes: list[float] = []
    releases: list[float] = []
    for t, kind, name, facts in merged:
        old = prev.get((kind, name))
        prev[(kind, name)] = facts
        if old is None or t < t0 or t > t1:
            continue
        m = marks.setdefault(name, {})
        if kind == 1:
            if facts.cordoned and not old.cordoned and "take" in m:
                m.setdefault("cordon", t)
            if old.cordoned and not facts.cordoned and "back" in m:
                m.setdefault("uncordon", t)
            continue
        if facts.slot and not old.slot:
            m["take"] = t
            takes.append(t)
        if old.slot and not facts.slot:
            m.setdefault("release", t)
            releases.append(t)
        if facts.state == "Booted" and old.state != "Booted" and "take" in m:
            m.setdefault("booted", t)
        if facts.idle == "Rebooting" and old.idle != "Rebooting" and "booted" in m:
            m.setdefault("rebooting", t)
        back = facts.idle == c.REASON_IDLE and facts.booted == facts.desired
        if back and "rebooting" in m:
            m.setdefault("back", t)
    order = ("take", "cordon", "booted", "rebooting", "back", "uncordon", "release")
    out: dict[str, Any] = {}
    for (key, _), (a, b) in zip(CHAIN_STEPS, itertools.pairwise(order), strict=False):
        out[key] = percentiles([m[b] - m[a] for m in marks.values() if a in m and b in m])
    takes.sort()
    releases.sort()
    out["release_to_next_take"] = percentiles(handoffs(takes, releases, max_unavailable))
    waves = math.ceil(len(takes) / max_unavailable) if takes else 0
    out["start_ms"] = (
        round((takes[min(len(takes), max_unavailable) - 1] - t0) * 1000) if takes else None
    )
    out["end_ms"] = round((t1 - releases[-1]) * 1000) if releases else None
    out["overhead_per_wave_ms"] = (
        round(((t1 - t0) - waves * reboot_seconds) * 1000 / waves) if waves else None
    )
    return out
