"""Living alongside cluster autoscalers (Cluster Autoscaler, Karpenter): pure rules.

- **Holding a slot.** While a node holds a reboot slot (cordoned, draining,
  rebooting, under health check) its Node carries ``PROTECT``: Cluster
  Autoscaler's ``scale-down-disabled`` and Karpenter's ``do-not-disrupt``, both
  ``"true"``, so neither removes a node half-way through its update. What the
  Node carried under those keys before is recorded on the BootcNode
  (``bootc.dev/autoscaler-prior``, JSON of the keys that were present) in the
  same write that takes the slot, as ``was-cordoned`` records a prior cordon; a
  restarted or newly elected controller restores from it. Giving the slot back
  restores exactly that: an admin's own value (whatever it was) comes back, a key
  the Node did not have is removed. The record is bounded (``MAX_RECORD``
  characters of JSON, where a control character takes six): a Node whose values
  do not fit (a node writing kilobytes of them on its own Node) cannot be given
  back as it was, so it gets no slot (``UnrecordableProtection`` names the keys and
  sizes) rather than an annotation the API server refuses or a value lost. A slot
  without the record (taken by the Go operator or an older controller) never had
  ours written: nothing is restored.
  Removed or changed by someone while the slot is held, they are written again
  (``protection_to_reapply``), as a removed cordon is; a slot without the record
  gets none (its release would not take them off).
- **Going away.** A Node an autoscaler is removing (``leaving``: Cluster
  Autoscaler's ``ToBeDeletedByClusterAutoscaler`` taint, Karpenter's
  ``karpenter.sh/disrupted`` (v1) or ``karpenter.sh/disruption`` (older) taint)
  gets no slot: updating it would only delay its removal. It is counted and
  shown as leaving.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from bootc_operator.api import constants as c

SCALE_DOWN_DISABLED: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
#: what a slot holder's Node carries
PROTECT: Final[Mapping[str, str]] = {SCALE_DOWN_DISABLED: "true", DO_NOT_DISRUPT: "true"}

#: the taint Cluster Autoscaler puts on a Node it is about to remove
CLUSTER_AUTOSCALER_TAINT: Final = "ToBeDeletedByClusterAutoscaler"
#: taint key -> who is removing the node
LEAVING_TAINTS: Final[Mapping[str, str]] = {
    CLUSTER_AUTOSCALER_TAINT: "the cluster autoscaler",
    "karpenter.sh/disrupted": "Karpenter",
    "karpenter.sh/disruption": "Karpenter",
}


#: The longest ``prior_record``: far beyond "true"/"false", far below the 256 KiB all
#: of a BootcNode's annotations may hold together.
MAX_RECORD: Final = 4096


class UnrecordableProtection(ValueError):
    """The Node's values under ``PROTECT``'s keys are too long to record (and so to
    put back after the slot); the message names the keys and their sizes."""


def prior_record(node_annotations: Mapping[str, str]) -> str:
    """The BootcNode record of what the Node carried under ``PROTECT``'s keys;
    ``UnrecordableProtection`` when it would be longer than ``MAX_RECORD``."""
    prior = {k: str(node_annotations[k]) for k in PROTECT if k in node_annotations}
    record = json.dumps(prior, sort_keys=True, separators=(",", ":"))
    if len(record) > MAX_RECORD:
        sizes = ", ".join(f"{k} ({len(v)} characters)" for k, v in sorted(prior.items()))
        raise UnrecordableProtection(
            f"its Node annotations {sizes} take {len(record)} characters to record, more "
            f"than the {MAX_RECORD} the operator keeps to put them back after a reboot slot"
        )
    return record


def parse_record(record: str) -> dict[str, str]:
    """``prior_record`` read back; a record that is not ours restores as "had none"."""
    try:
        prior = json.loads(record)
    except ValueError:
        return {}
    if not isinstance(prior, dict):
        return {}
    return {k: str(v) for k, v in prior.items() if k in PROTECT}


def protection_to_reapply(
    node_annotations: Mapping[str, str], bootc_node_annotations: Mapping[str, str]
) -> dict[str, str]:
    """The ``PROTECT`` annotations a slot holder's Node lost (someone removed or
    changed them while the slot is held), to write again; empty when none is
    missing, the node holds no slot, or its slot has no ``prior_record`` (it never
    had ours written, and giving it back would not remove them)."""
    if (
        c.IN_REBOOT_SLOT_ANNOTATION not in bootc_node_annotations
        or c.AUTOSCALER_PRIOR_ANNOTATION not in bootc_node_annotations
    ):
        return {}
    return {k: v for k, v in PROTECT.items() if node_annotations.get(k) != v}


def protection(node: Mapping[str, Any]) -> dict[str, str | None]:
    """What the Node carries under ``PROTECT``'s keys (None: absent)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return {k: annotations.get(k) for k in PROTECT}


def restore_annotations(bootc_node_annotations: Mapping[str, str]) -> dict[str, str | None]:
    """The Node merge-patch annotations that give back what the slot covered
    (empty: the slot has no record, so it never wrote ours)."""
    record = bootc_node_annotations.get(c.AUTOSCALER_PRIOR_ANNOTATION)
    if record is None:
        return {}
    prior = parse_record(record)
    return {k: prior.get(k) for k in PROTECT}


def leaving(node: Mapping[str, Any] | None) -> str:
    """Why the Node is going away ("" if it is not): an autoscaler's taint on it."""
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    for taint in taints:
        key = taint.get("key") if isinstance(taint, Mapping) else None
        if isinstance(key, str) and key in LEAVING_TAINTS:
            return f"being removed by {LEAVING_TAINTS[key]} (taint {key})"
    return ""
