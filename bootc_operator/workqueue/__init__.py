"""bootc-operator's workqueues and workers for asyncio (client-go ``util/workqueue``).

Semantics follow client-go; the :mod:`bootc_operator.informers` side only
enqueues through its event handlers, and nothing here imports it.

Queues
    :class:`WorkQueue` ⊂ :class:`DelayingQueue` ⊂ :class:`RateLimitingQueue`
    (``queue``, ``delaying``, ``ratelimiting_queue``); rate limiters
    :class:`ItemExponentialFailureRateLimiter`, :class:`BucketRateLimiter`,
    :class:`MaxOfRateLimiter`, :func:`default_controller_rate_limiter`
    (``ratelimit``).

Workers (``worker``)
    :func:`run_workers` runs ``async reconcile(key) -> requeue_after | None`` on
    N workers; with ``controller=NAME`` it is wrapped by :func:`instrumented`
    (controller-runtime's ``controller_runtime_reconcile_*`` metrics, a 409
    Conflict requeued after ``CONFLICT_REQUEUE`` seconds).

Time and metrics
    A :class:`Clock` (``clock``: :class:`RealClock`, :class:`FakeClock` for
    tests) drives delays and rate limits; :func:`workqueue_metrics`
    (``metrics``) holds the ``workqueue_*`` collectors, one set per registry.
"""

from bootc_operator.workqueue.clock import Clock, FakeClock, RealClock
from bootc_operator.workqueue.delaying import DelayingQueue
from bootc_operator.workqueue.metrics import workqueue_metrics
from bootc_operator.workqueue.queue import ShutDown, WorkQueue
from bootc_operator.workqueue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from bootc_operator.workqueue.ratelimiting_queue import RateLimitingQueue
from bootc_operator.workqueue.worker import (
    CONFLICT_REQUEUE,
    Reconcile,
    instrumented,
    process_next,
    run_workers,
)

__all__ = [
    "CONFLICT_REQUEUE",
    "BucketRateLimiter",
    "Clock",
    "DelayingQueue",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RateLimitingQueue",
    "RealClock",
    "Reconcile",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
    "instrumented",
    "process_next",
    "run_workers",
    "workqueue_metrics",
]
