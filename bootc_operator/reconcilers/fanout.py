"""Bounded fan-out of independent per-node API writes within one reconcile pass.

A rollout wave or a membership pass writes to hundreds of nodes; one request
at a time, a pass takes (nodes x round trip), during which every other
reconcile of the pool waits. ``each`` runs the per-node steps concurrently,
at most ``limit`` at once, and keeps the sequential version's failure rule:
after a step fails no further step starts, the ones in flight finish (a write
in flight may or may not land, so none is cancelled), then the first error
is raised and the pass is retried from fresh caches.

``settle`` runs every step whatever the others do and returns each one's result
or error: for steps of one node that must not wait on another's (a node whose
write the API server refuses must not keep the others from being drained or
released).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Final, TypeVar

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)

WRITE_CONCURRENCY: Final = 16


async def each(
    items: Sequence[T], step: Callable[[T], Awaitable[R]], limit: int = WRITE_CONCURRENCY
) -> list[R]:
    """``step(item)`` for every item, at most ``limit`` at once; results in item order."""
    if len(items) <= 1:
        return [await step(item) for item in items]
    results: dict[int, R] = {}
    errors: list[Exception] = []
    pending = iter(enumerate(items))

    async def worker() -> None:
        for index, item in pending:
            if errors:
                return
            try:
                results[index] = await step(item)
            except Exception as err:
                errors.append(err)

    await asyncio.gather(*(worker() for _ in range(min(limit, len(items)))))
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(items))]


async def settle(
    items: Sequence[K], step: Callable[[K], Awaitable[R]], limit: int = WRITE_CONCURRENCY
) -> tuple[dict[K, R], dict[K, Exception]]:
    """``step(item)`` for every item, at most ``limit`` at once, each whatever the
    others do: (results, errors), by item."""
    results: dict[K, R] = {}
    errors: dict[K, Exception] = {}
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            try:
                results[item] = await step(item)
            except Exception as err:
                errors[item] = err

    await asyncio.gather(*(worker() for _ in range(min(limit, len(items)))))
    return results, errors
