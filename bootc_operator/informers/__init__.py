"""bootc-operator's informer/workqueue library on kubernetes_asyncio.

Semantics follow client-go's ``tools/cache`` and ``util/workqueue``; objects
are plain dicts parsed straight from the API server's JSON.

Informers (cache side)
    :class:`Informer` — LIST+WATCH one resource into an indexed :class:`Store`
    and call :class:`EventHandler` s; :class:`SharedInformerFactory` — one
    informer per (resource, namespace, selectors) per process.
    Helpers: :func:`object_key`, :func:`split_key`, :func:`key_of`,
    :func:`unwrap`, :class:`DeletedFinalStateUnknown`, index functions
    (:func:`by_owner_uid`, :func:`by_controller_uid`, :func:`by_label`,
    :func:`by_field`, :func:`by_namespace`), transforms (:func:`strip_bulk`,
    :func:`drop_paths`, :func:`intern_strings`, :func:`chain`), update filters
    (:func:`generation_changed`, :func:`resource_version_changed`), :func:`diff_relist`.

Workqueues (work side)
    :class:`WorkQueue` ⊂ :class:`DelayingQueue` ⊂ :class:`RateLimitingQueue`;
    rate limiters :class:`ItemExponentialFailureRateLimiter`,
    :class:`BucketRateLimiter`, :class:`MaxOfRateLimiter`,
    :func:`default_controller_rate_limiter`; :func:`run_workers` runs
    ``async reconcile(key) -> requeue_after | None`` on N workers.

Time comes from a :class:`Clock` (:class:`RealClock`, :class:`FakeClock` for tests).
"""

from bootc_operator.informers.backoff import Backoff
from bootc_operator.informers.clock import Clock, FakeClock, RealClock
from bootc_operator.informers.delaying import DelayingQueue
from bootc_operator.informers.factory import SharedInformerFactory
from bootc_operator.informers.handlers import (
    EventHandler,
    generation_changed,
    resource_version_changed,
)
from bootc_operator.informers.indexers import (
    by_controller_uid,
    by_field,
    by_label,
    by_namespace,
    by_owner_uid,
)
from bootc_operator.informers.informer import Informer
from bootc_operator.informers.metrics import informer_metrics, workqueue_metrics
from bootc_operator.informers.objects import (
    DeletedFinalStateUnknown,
    Obj,
    key_of,
    object_key,
    split_key,
    unwrap,
)
from bootc_operator.informers.queue import ShutDown, WorkQueue
from bootc_operator.informers.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from bootc_operator.informers.ratelimiting_queue import RateLimitingQueue
from bootc_operator.informers.relist import Delta, DeltaType, diff_relist
from bootc_operator.informers.store import IndexFunc, Store
from bootc_operator.informers.transform import (
    Transform,
    chain,
    drop_paths,
    intern_strings,
    strip_bulk,
)
from bootc_operator.informers.worker import process_next, run_workers

__all__ = [
    "Backoff",
    "BucketRateLimiter",
    "Clock",
    "DelayingQueue",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaType",
    "EventHandler",
    "FakeClock",
    "IndexFunc",
    "Informer",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "Obj",
    "RateLimiter",
    "RateLimitingQueue",
    "RealClock",
    "SharedInformerFactory",
    "ShutDown",
    "Store",
    "Transform",
    "WorkQueue",
    "by_controller_uid",
    "by_field",
    "by_label",
    "by_namespace",
    "by_owner_uid",
    "chain",
    "default_controller_rate_limiter",
    "diff_relist",
    "drop_paths",
    "generation_changed",
    "informer_metrics",
    "intern_strings",
    "key_of",
    "object_key",
    "process_next",
    "resource_version_changed",
    "run_workers",
    "split_key",
    "strip_bulk",
    "unwrap",
    "workqueue_metrics",
]
