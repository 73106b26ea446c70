"""Which pool owns which Node: selector matching with deterministic conflict resolution.

A Node belongs to at most one pool. When several pools' selectors match it:

1. the pool that already owns its BootcNode keeps it (no flapping), else
2. the oldest pool (creationTimestamp, then name) wins.

Every other matching pool *loses* that node and reports ``Degraded/NodeConflict``
naming the winner. Pools with an invalid selector or being deleted claim
nothing. Pure function over cache dicts; membership and status both use it so
they always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bootc_operator.policy.selectors import InvalidSelector, matches, validate_selector
from bootc_operator.wording import counted, noun


@dataclass(slots=True)
class Assignment:
    owner: dict[str, str] = field(default_factory=dict)  # node name -> pool name
    # losing pool -> node -> the pool that won it
    conflicts: dict[str, dict[str, str]] = field(default_factory=dict)

    def members(self, pool: str) -> list[str]:
        return sorted(n for n, p in self.owner.items() if p == pool)

    def conflict_message(self, pool: str, limit: int = 5) -> str:
        lost = self.conflicts.get(pool) or {}
        if not lost:
            return ""
        nodes = sorted(lost)
        winners = sorted(set(lost.values()))
        shown = ", ".join(nodes[:limit]) + (
            f" and {len(nodes) - limit} more" if len(nodes) > limit else ""
        )
        return (
            f"{counted(len(nodes), 'node')} matched by this pool "
            f"{noun(len(nodes), 'belongs', 'belong')} to {noun(len(winners), 'pool')} "
            f"{', '.join(winners)}: {shown}"
        )


def claims(pool: Mapping[str, Any]) -> bool:
    """Whether a pool may own nodes: valid selector, not being deleted."""
    if pool.get("metadata", {}).get("deletionTimestamp"):
        return False
    try:
        validate_selector((pool.get("spec") or {}).get("nodeSelector"))
    except InvalidSelector:
        return False
    return "nodeSelector" in (pool.get("spec") or {})


def _age_key(pool: Mapping[str, Any]) -> tuple[str, str]:
    meta = pool.get("metadata", {})
    return (meta.get("creationTimestamp") or "", meta.get("name", ""))


def assign_nodes(
    pools: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    current_owner: Mapping[str, str],
) -> Assignment:
    """``current_owner``: node name -> pool owning its BootcNode today."""
    live = sorted((p for p in pools if claims(p)), key=_age_key)
    result = Assignment()
    for node in nodes:
        meta = node.get("metadata", {})
        name = meta.get("name", "")
        if meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        matching = [
            p["metadata"]["name"] for p in live if matches(p["spec"]["nodeSelector"], labels)
        ]
        if not matching:
            continue
        incumbent = current_owner.get(name)
        winner = incumbent if incumbent is not None and incumbent in matching else matching[0]
        result.owner[name] = winner
        for loser in matching:
            if loser != winner:
                result.conflicts.setdefault(loser, {})[name] = winner
    return result
