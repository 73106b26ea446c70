"""What the controller's shared informers keep of each Node and BootcNode.

Both kinds come one per node, so at thousands of nodes their caches are most of
the controller's memory after its imports. Each object passes through one of the
transforms below before it is stored (and before event handlers compare old and
new, so a change to a field dropped here wakes nobody):

- ``NODE_TRANSFORM`` keeps only what the reconcilers read of a Node
  (``slim_node``): its name, uid, resourceVersion, creation and deletion times,
  labels (pool selectors, topology, canaries), the autoscaler annotations a slot
  records and restores (``policy.autoscaler.PROTECT``), ``spec.unschedulable``,
  ``spec.taints`` (an autoscaler removing the node) and the ``Ready`` condition's
  status and transition time. Everything else a kubelet writes (addresses,
  capacity, nodeInfo, images, the other conditions and every heartbeat, other
  annotations) is dropped: a Node read from this cache is *not* the whole Node.
- ``BOOTC_NODE_TRANSFORM`` drops ``managedFields``, the sealed pull secret's
  ciphertext (never read back; its keyID is) and the kstatus conditions the
  daemon writes for GitOps tools (``Ready``, ``Reconciling``, ``Stalled``: the
  controller reads ``Idle`` and ``Degraded``).

Both then share repeated keys and short values between objects
(``intern_strings``). ``hack.perf.cachesize`` measures the bytes per object.
"""

from __future__ import annotations

from typing import Any, Final

from bootc_operator.api import constants as c
from bootc_operator.informers import Transform, chain, drop_paths, intern_strings, strip_bulk
from bootc_operator.informers.objects import Obj
from bootc_operator.policy.autoscaler import PROTECT

#: the Node metadata the reconcilers read
NODE_METADATA: Final = (
    "name",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)
#: the BootcNode conditions the reconcilers read (the daemon writes kstatus's too)
BOOTC_NODE_CONDITIONS: Final = frozenset({c.COND_IDLE, c.COND_DEGRADED})


def slim_node(obj: Obj) -> Obj:
    """The parts of a Node the reconcilers read (module docstring); a new dict."""
    meta = obj.get("metadata") or {}
    slim_meta: dict[str, Any] = {k: meta[k] for k in NODE_METADATA if k in meta}
    annotations = meta.get("annotations") or {}
    kept = {k: annotations[k] for k in PROTECT if k in annotations}
    if kept:
        slim_meta["annotations"] = kept
    slim: Obj = {"metadata": slim_meta}
    spec = obj.get("spec") or {}
    slim_spec = {k: spec[k] for k in ("unschedulable", "taints") if spec.get(k)}
    if slim_spec:
        slim["spec"] = slim_spec
    conditions = ((obj.get("status") or {}).get("conditions")) or ()
    ready = [
        {k: cond[k] for k in ("type", "status", "lastTransitionTime") if k in cond}
        for cond in conditions
        if isinstance(cond, dict) and cond.get("type") == "Ready"
    ]
    if ready:
        slim["status"] = {"conditions": ready}
    return slim


def _read_conditions_only(obj: Obj) -> Obj:
    status = obj.get("status")
    if not isinstance(status, dict):
        return obj
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        status["conditions"] = [
            cond
            for cond in conditions
            if not isinstance(cond, dict) or cond.get("type") in BOOTC_NODE_CONDITIONS
        ]
    return obj


NODE_TRANSFORM: Final[Transform] = chain(slim_node, intern_strings)
BOOTC_NODE_TRANSFORM: Final[Transform] = chain(
    strip_bulk,
    drop_paths(("spec", "sealedPullSecret", "data")),
    _read_conditions_only,
    intern_strings,
)
