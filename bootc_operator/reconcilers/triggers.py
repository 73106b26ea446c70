"""Which pools an informer event concerns. Pure functions; handlers only enqueue.

- a pool event concerns that pool, unless only its status moved (our own
  status writes) — except ``status.targetDigest``: a new target for the loops;
- a BootcNode event concerns its owning pool;
- a Node event concerns the pools whose selector matches its old or new labels
  and the pool owning its BootcNode, and only when something the controller
  reads changed: labels, the Ready condition, ``spec.unschedulable``, deletion, an
  autoscaler's taint saying it removes the node (``autoscaler.leaving``), the
  autoscaler annotations a slot holder carries (``autoscaler.protection``: removed,
  they are written again; our own writes change them with the cordon, in one event).

Membership reads only the BootcNodes' spec (but rollout's fields), owner, labels and
``status.sealingKey`` and the Nodes' labels: ``membership_changed`` /
``node_membership_changed`` tell
whether an update concerns it at all. The bulk of updates at scale (the daemons' status
writes, rollout's annotations, Ready flips during reboots) do not, and a
membership pass costs O(nodes) even when it writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import node_ready_status
from bootc_operator.policy.autoscaler import leaving, protection
from bootc_operator.policy.selectors import InvalidSelector, matches, validate_selector

Obj = Mapping[str, Any]


def pool_changed(old: Obj, new: Obj) -> bool:
    om, nm = old.get("metadata", {}), new.get("metadata", {})
    if om.get("generation") != nm.get("generation"):
        return True
    for key in ("deletionTimestamp", "finalizers", "labels"):
        if om.get(key) != nm.get(key):
            return True
    return (old.get("status") or {}).get("targetDigest") != (new.get("status") or {}).get(
        "targetDigest"
    )


def node_changed(old: Obj, new: Obj) -> bool:
    om, nm = old.get("metadata", {}), new.get("metadata", {})
    return (
        om.get("labels") != nm.get("labels")
        or om.get("deletionTimestamp") != nm.get("deletionTimestamp")
        or bool(old.get("spec", {}).get("unschedulable"))
        != bool(new.get("spec", {}).get("unschedulable"))
        or node_ready_status(old) != node_ready_status(new)
        or leaving(old) != leaving(new)
        or protection(old) != protection(new)
    )


#: a BootcNode's fields the rollout loop writes: membership never reads them, so
#: rollout's writes (Booted, a release, a retarget) do not wake it
ROLLOUT_SPEC_FIELDS = frozenset({"desiredImage", "desiredImageState"})
ROLLOUT_LABELS = frozenset({c.DESIRED_DIGEST_LABEL})


def membership_changed(old: Obj, new: Obj) -> bool:
    """A BootcNode update that membership must look at: its spec fields (not the
    rollout loop's: ``ROLLOUT_SPEC_FIELDS``), owner, labels (but the desired-digest
    label), deletion, and the daemon's ``status.sealingKey`` (the pull secret is sealed
    to it). Every rollout write to the spec moves ``metadata.generation``: compared
    instead, it woke a membership pass, O(nodes) under the pool lock, per write."""
    om, nm = old.get("metadata", {}), new.get("metadata", {})
    # Most updates are the daemons' status writes: the spec (its generation) and the
    # labels did not move, and nothing is copied to tell.
    spec_moved = om.get("generation") != nm.get("generation") and _without(
        old.get("spec"), ROLLOUT_SPEC_FIELDS
    ) != _without(new.get("spec"), ROLLOUT_SPEC_FIELDS)
    labels_moved = om.get("labels") != nm.get("labels") and _without(
        om.get("labels"), ROLLOUT_LABELS
    ) != _without(nm.get("labels"), ROLLOUT_LABELS)
    return (
        spec_moved
        or labels_moved
        or any(om.get(key) != nm.get(key) for key in ("ownerReferences", "deletionTimestamp"))
        or (old.get("status") or {}).get("sealingKey")
        != (new.get("status") or {}).get("sealingKey")
    )


def _without(fields: Mapping[str, Any] | None, drop: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in (fields or {}).items() if k not in drop}


def node_membership_changed(old: Obj, new: Obj) -> bool:
    """A Node update that membership must look at: labels or deletion."""
    om, nm = old.get("metadata", {}), new.get("metadata", {})
    return any(om.get(key) != nm.get(key) for key in ("labels", "deletionTimestamp"))


def pools_selecting(pools: Iterable[Obj], *label_sets: Mapping[str, str] | None) -> set[str]:
    """Pools whose (valid) selector matches any of ``label_sets``."""
    names: set[str] = set()
    for pool in pools:
        selector = (pool.get("spec") or {}).get("nodeSelector")
        try:
            validate_selector(selector)
        except InvalidSelector:
            continue
        if any(matches(selector, labels or {}) for labels in label_sets):
            names.add(pool["metadata"]["name"])
    return names
