"""bootc-operator's informer library (client-go ``tools/cache``) over ``kube.rest``.

Semantics follow client-go's ``tools/cache``; objects are plain dicts parsed
straight from the API server's JSON. Work queues and workers are
:mod:`bootc_operator.workqueue` (event handlers only enqueue there; nothing
here imports it).

Informers
    :class:`Informer` (``informer``, fed by the ``reflector``) — LIST+WATCH one
    resource into an indexed :class:`Store` (``store``) and call
    :class:`EventHandler` s (``handlers``); :class:`SharedInformerFactory`
    (``factory``) — one informer per (resource, namespace, selectors) per
    process; :func:`informer_metrics` (``metrics``).
    Helpers: :func:`object_key`, :func:`split_key`, :func:`key_of`,
    :func:`unwrap`, :class:`DeletedFinalStateUnknown` (``objects``), index
    functions (``indexers``: :func:`by_owner_uid`, :func:`by_controller_uid`,
    :func:`by_label`, :func:`by_field`, :func:`by_namespace`), transforms
    (``transform``: :func:`strip_bulk`, :func:`drop_paths`,
    :func:`intern_strings`, :func:`chain`), update filters
    (:func:`generation_changed`, :func:`resource_version_changed`),
    :func:`diff_relist` (``relist``), capped jittered :class:`Backoff`
    (``backoff``).

Read-your-writes
    :class:`Overlay` (``overlay``) shadows a cache with the server's answers to
    one's own writes until the informer catches up (client-go's
    ``MutationCache`` idea); used by the controller's gateway and the daemon.
"""

from bootc_operator.informers.backoff import Backoff
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
from bootc_operator.informers.metrics import informer_metrics
from bootc_operator.informers.objects import (
    DeletedFinalStateUnknown,
    Obj,
    key_of,
    object_key,
    split_key,
    unwrap,
)
from bootc_operator.informers.overlay import Overlay
from bootc_operator.informers.relist import Delta, DeltaType, diff_relist
from bootc_operator.informers.store import IndexFunc, Store
from bootc_operator.informers.transform import (
    Transform,
    chain,
    drop_paths,
    intern_strings,
    strip_bulk,
)

__all__ = [
    "Backoff",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaType",
    "EventHandler",
    "IndexFunc",
    "Informer",
    "Obj",
    "Overlay",
    "SharedInformerFactory",
    "Store",
    "Transform",
    "by_controller_uid",
    "by_field",
    "by_label",
    "by_namespace",
    "by_owner_uid",
    "chain",
    "diff_relist",
    "drop_paths",
    "generation_changed",
    "informer_metrics",
    "intern_strings",
    "key_of",
    "object_key",
    "resource_version_changed",
    "split_key",
    "strip_bulk",
    "unwrap",
]
