"""Workers: N tasks that take keys from a rate-limiting queue and reconcile them.

``await run_workers(queue, reconcile, workers=N)`` runs until the queue is shut
down and empty (or until cancelled, which cancels the workers). For each key:

- ``reconcile(key)`` raises → the error is logged with the key and the key is
  requeued with ``add_rate_limited`` (per-key exponential backoff);
- it returns ``None`` → ``forget(key)`` (the key's backoff starts over);
- it returns seconds ``s`` → ``forget(key)`` then ``add_after(key, s)``
  (controller-runtime's ``RequeueAfter``);
- in every case ``done(key)`` follows, so a key re-added meanwhile runs again.

``run_workers(..., controller=NAME)`` first wraps the reconcile with
:func:`instrumented`: controller-runtime's reconcile metrics, labelled
``controller=NAME``, which existing dashboards use:
``controller_runtime_reconcile_total{controller,result}`` (``success``,
``requeue_after``, ``requeue``, ``error``),
``controller_runtime_reconcile_errors_total{controller}``,
``controller_runtime_reconcile_time_seconds{controller}``. A 409 Conflict is
not an error there: a write based on a stale cache lost a race, so the key
runs again after ``CONFLICT_REQUEUE`` seconds, without backoff.

Graceful stop: ``await queue.shut_down_with_drain()`` then await the
``run_workers`` task; in-flight reconciles finish, nothing new starts once the
queue is empty.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, Protocol, TypeVar, runtime_checkable

from prometheus_client import Counter, Histogram

from bootc_operator.workqueue.queue import ShutDown
from bootc_operator.workqueue.ratelimiting_queue import RateLimitingQueue

K = TypeVar("K")

Reconcile = Callable[[K], Awaitable[float | None]]

CONFLICT_REQUEUE: Final = 0.2

RECONCILE_TOTAL: Final = Counter(
    "controller_runtime_reconcile_total", "Reconciles by result", ["controller", "result"]
)
RECONCILE_ERRORS: Final = Counter(
    "controller_runtime_reconcile_errors_total", "Reconcile errors", ["controller"]
)
RECONCILE_TIME: Final = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Time per reconcile",
    ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


@runtime_checkable
class Conflict(Protocol):
    """An error that may say a write lost a race (``kube.ApiError``'s 409 Conflict).

    All the workqueue needs of the API client's errors, so it does not import the
    client: an exception with a true ``conflict`` requeues, any other is an error.
    """

    @property
    def conflict(self) -> bool: ...


_log = logging.getLogger(__name__)


def instrumented(
    controller: str, reconcile: Reconcile[K], log: logging.Logger = _log
) -> Reconcile[K]:
    """Wrap a reconcile with controller-runtime's reconcile metrics and the conflict requeue."""
    # controller-runtime exports the error counter at 0 from the start: a healthy
    # controller's "errors" panel shows 0, not "no data"
    RECONCILE_ERRORS.labels(controller)

    async def run(key: K) -> float | None:
        start = time.perf_counter()
        try:
            result = await reconcile(key)
        except Exception as err:
            if not (isinstance(err, Conflict) and err.conflict):
                RECONCILE_TOTAL.labels(controller, "error").inc()
                RECONCILE_ERRORS.labels(controller).inc()
                raise
            # A write based on a stale cache lost a race (409): normal; read again soon.
            # (The controller's keys are pool names.)
            log.debug("conflict; requeueing", extra={"controller": controller, "pool": key})
            RECONCILE_TOTAL.labels(controller, "requeue").inc()
            return CONFLICT_REQUEUE
        finally:
            RECONCILE_TIME.labels(controller).observe(time.perf_counter() - start)
        RECONCILE_TOTAL.labels(controller, "success" if result is None else "requeue_after").inc()
        return result

    return run


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
    controller: str | None = None,
    log: logging.Logger = _log,
) -> None:
    """Run ``reconcile`` on ``workers`` tasks; instrumented as ``controller`` when named."""
    if workers < 1:
        raise ValueError("need at least one worker")
    if controller is not None:
        reconcile = instrumented(controller, reconcile, log)

    async def worker() -> None:
        while await process_next(queue, reconcile, log):
            pass

    async with asyncio.TaskGroup() as tg:
        for i in range(workers):
            tg.create_task(worker(), name=f"{queue.name}-worker-{i}")
