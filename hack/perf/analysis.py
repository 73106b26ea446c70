"""Figures from the observer's timestamped logs: rollout timeline and reaction latencies.

Definitions (all timestamps are the observer's watch events, see ``observer``):

- **release latency** (the headline reaction figure): a node back from its reboot
  reports ``Idle=True`` on the target while it holds a slot (the fleet's write
  that makes the node actionable) → the controller's next write for that node
  (uncordon, or the slot annotation removed, whichever is seen first);
- **handoff**: the i-th slot release of the rollout → the (M+i)-th slot take,
  i.e. how long a freed slot stays unused while Staged nodes wait;
- **drain path**: slot taken (annotation) → ``desiredImageState: Booted``
  (cordon, the drain's Pod LIST+WATCH, the spec write);
- **fleet reaction**: ``desiredImageState: Booted`` → the fleet reports Rebooting
  (the simulated daemon's own delay, to show it is not the bottleneck);
- **slot hold**: slot taken → released (the reboot time R is part of it);
- **slot utilisation**: the time-average of slots held over the rollout / M.
"""

from __future__ import annotations

import math
from typing import Any

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


def rollout_figures(
    bn_log: list[tuple[float, str, BnFacts]],
    node_log: list[tuple[float, str, NodeFacts]],
    t0: float,
    t1: float,
    target: str,
    max_unavailable: int,
) -> dict[str, Any]:
    takes: list[tuple[float, str]] = []
    releases: list[tuple[float, str]] = []
    take_at: dict[str, float] = {}
    booted_req: dict[str, float] = {}
    back_at: dict[str, float] = {}
    drain_path: list[float] = []
    fleet_reaction: list[float] = []
    holds: list[float] = []
    release_latency: list[float] = []
    answered: set[str] = set()

    # Merge both logs in time order; node events only matter for uncordons.
    merged: list[tuple[float, int, str, Any]] = [(t, 0, n, f) for t, n, f in bn_log]
    merged += [(t, 1, n, f) for t, n, f in node_log]
    merged.sort(key=lambda e: (e[0], e[1]))
    prev_bn: dict[str, BnFacts] = {}
    prev_node: dict[str, NodeFacts] = {}
    for t, kind, name, facts in merged:
        if kind == 1:
            old_node = prev_node.get(name)
            prev_node[name] = facts
            if t < t0 or old_node is None:
                continue
            uncordoned = old_node.cordoned and not facts.cordoned
            if uncordoned and name in back_at and name not in answered:
                answered.add(name)
                release_latency.append(t - back_at[name])
            continue
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
            if name in back_at and name not in answered:
                answered.add(name)
                release_latency.append(t - back_at[name])
        if facts.state == "Booted" and old.state != "Booted":
            booted_req[name] = t
            if name in take_at:
                drain_path.append(t - take_at[name])
        if facts.idle == "Rebooting" and old.idle != "Rebooting" and name in booted_req:
            fleet_reaction.append(t - booted_req[name])
        if (
            facts.slot
            and facts.idle == "Idle"
            and facts.booted == target
            and not (old.idle == "Idle" and old.booted == target)
        ):
            back_at[name] = t
    handoff = [
        takes[max_unavailable + i][0] - rel_t
        for i, (rel_t, _) in enumerate(releases)
        if max_unavailable + i < len(takes)
    ]
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
        "release_latency": percentiles(release_latency),
        "handoff": percentiles(handoff),
        "drain_path": percentiles(drain_path),
        "fleet_reaction": percentiles(fleet_reaction),
        "slot_hold": percentiles(holds),
        "slot_utilisation": utilisation,
    }
