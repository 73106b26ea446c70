"""Per-node rollout steps that were refused, remembered so one node never wedges its pool.

A rollout pass writes to many nodes (``reconcilers.rollout``); a write the API
server refuses as invalid (400, 403, 413, 422), or a slot that cannot be taken
because what it must record does not fit (``autoscaler.UnrecordableProtection``),
fails the same way every time it is tried: retried as part of every pass it would
stop the rest of the pass for good. ``Refusals`` keeps them per pool and node:

- the step and a message naming the node and the cause, for the pool's Degraded
  message (``message``) and one Warning Event per change;
- a retry time with capped exponential backoff (``FIRST_RETRY`` doubling up to
  ``MAX_RETRY``): until then a node whose *take* was refused is no candidate for a
  slot (``excluded``), so the slot goes to the next one instead of being retried
  on the same node pass after pass, unless what the refusal depended on (its
  ``basis``: the Node's autoscaler annotations) changed, which is tried at once; the
  other steps (release, drain) are tried again on every pass, since they finish
  what a slot started;
- ``clear`` once the node's step succeeds, ``retain`` drops nodes gone from the pool,
  ``prune`` the steps no longer due (a node no candidate for a slot any more).

Pure: the caller gives the time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Final

FIRST_RETRY: Final = 5.0
MAX_RETRY: Final = 300.0
TAKE: Final = "take"


@dataclass(frozen=True, slots=True)
class Refusal:
    step: str  # "take", "release", "drain", ...
    message: str  # names the node and why (one line)
    failures: int
    retry_at: dt.datetime
    basis: str = ""  # what it depended on; another basis is worth a try at once


def retry_delay(failures: int) -> float:
    """5 s, 10 s, 20 s ... at most ``MAX_RETRY``."""
    return float(min(MAX_RETRY, FIRST_RETRY * 2.0 ** max(0, failures - 1)))


class Refusals:
    def __init__(self) -> None:
        self._pools: dict[str, dict[str, Refusal]] = {}

    def refuse(
        self, pool: str, node: str, step: str, message: str, now: dt.datetime, basis: str = ""
    ) -> Refusal:
        """Remember that ``node``'s ``step`` was refused (once more)."""
        nodes = self._pools.setdefault(pool, {})
        before = nodes.get(node)
        failures = before.failures + 1 if before is not None else 1
        retry_at = now + dt.timedelta(seconds=retry_delay(failures))
        refusal = Refusal(step, message, failures, retry_at, basis)
        nodes[node] = refusal
        return refusal

    def get(self, pool: str, node: str) -> Refusal | None:
        return self._pools.get(pool, {}).get(node)

    def clear(self, pool: str, node: str) -> bool:
        """The node's step went through: forget its refusal; True if there was one."""
        nodes = self._pools.get(pool)
        if not nodes or nodes.pop(node, None) is None:
            return False
        if not nodes:
            del self._pools[pool]
        return True

    def retain(self, pool: str, members: Collection[str]) -> bool:
        """Forget refusals of nodes not in ``members``; True if any was dropped."""
        nodes = self._pools.get(pool)
        if not nodes:
            return False
        gone = [n for n in nodes if n not in members]
        for node in gone:
            del nodes[node]
        if not nodes:
            del self._pools[pool]
        return bool(gone)

    def prune(self, pool: str, keep: Callable[[str, Refusal], bool]) -> bool:
        """Forget the refusals ``keep(node, refusal)`` says are stale (the step is not
        due any more); True if any was dropped."""
        nodes = self._pools.get(pool)
        if not nodes:
            return False
        stale = [n for n, r in nodes.items() if not keep(n, r)]
        for node in stale:
            del nodes[node]
        if not nodes:
            del self._pools[pool]
        return bool(stale)

    def excluded(
        self, pool: str, now: dt.datetime, basis: Callable[[str], str] = lambda node: ""
    ) -> frozenset[str]:
        """Nodes whose take was refused and may not be tried again yet (``basis``: a
        node's current basis; a refusal on another one does not count)."""
        return frozenset(
            node
            for node, r in self._pools.get(pool, {}).items()
            if r.step == TAKE and now < r.retry_at and r.basis == basis(node)
        )

    def next_retry(self, pool: str, now: dt.datetime) -> float | None:
        """Seconds until the earliest retry of a refused take (None: none waits)."""
        waits = [
            (r.retry_at - now).total_seconds()
            for r in self._pools.get(pool, {}).values()
            if r.step == TAKE and now < r.retry_at
        ]
        return min(waits) + 0.1 if waits else None

    def message(self, pool: str, limit: int = 5) -> str:
        """The refusals of ``pool``, one per node (up to ``limit``), "" when none."""
        nodes = self._pools.get(pool, {})
        shown = [nodes[n].message for n in sorted(nodes)[:limit]]
        if len(nodes) > limit:
            shown.append(f"and {len(nodes) - limit} more nodes refused")
        return "; ".join(shown)
