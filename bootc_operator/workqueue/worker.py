"""Workers: N tasks that take keys from a rate-limiting queue and reconcile them.

``await run_workers(queue, reconcile, workers=N)`` runs until the queue is shut
down and empty (or until cancelled, which cancels the workers). For each key:

- ``reconcile(key)`` raises → the error is logged with the key and the key is
  requeued with ``add_rate_limited`` (per-key exponential backoff);
- it returns ``None`` → ``forget(key)`` (the key's backoff starts over);
- it returns seconds ``s`` → ``forget(key)`` then ``add_after(key, s)``
  (controller-runtime's ``RequeueAfter``);
- in every case ``done(key)`` follows, so a key re-added meanwhile runs again.

Graceful stop: ``await queue.shut_down_with_drain()`` then await the
``run_workers`` task; in-flight reconciles finish, nothing new starts once the
queue is empty.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from bootc_operator.informers.queue import ShutDown
from bootc_operator.informers.ratelimiting_queue import RateLimitingQueue

K = TypeVar("K")

Reconcile = Callable[[K], Awaitable[float | None]]

_log = logging.getLogger(__name__)


async def process_next(
    queue: RateLimitingQueue[K], reconcile: Reconcile[K], log: logging.Logger = _log
) -> bool:
    """Handle one key; ``False`` once the queue is shut down and empty."""
    try:
        key = await queue.get()
    except ShutDown:
        return False
    try:
        requeue_after = await reconcile(key)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception(
            "reconcile failed; retrying with backoff",
            extra={"queue": queue.name, "key": key, "retries": queue.num_requeues(key)},
        )
        queue.add_rate_limited(key)
    else:
        queue.forget(key)
        if requeue_after is not None:
            queue.add_after(key, requeue_after)
    finally:
        queue.done(key)
    return True


async def run_workers(
    queue: RateLimitingQueue[K],
    reconcile: Reconcile[K],
    workers: int = 1,
    *,
    log: logging.Logger = _log,
) -> None:
    if workers < 1:
        raise ValueError("need at least one worker")

    async def worker() -> None:
        while await process_next(queue, reconcile, log):
            pass

    async with asyncio.TaskGroup() as tg:
        for i in range(workers):
            tg.create_task(worker(), name=f"{queue.name}-worker-{i}")
