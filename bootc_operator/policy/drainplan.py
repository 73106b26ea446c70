"""Which pods a drain evicts, and how a drain's outcome is described. Pure functions.

Skipped (they would come straight back, or cannot be evicted): pods owned by a
DaemonSet (the daemon itself among them) and mirror pods of static manifests.
Everything else is evicted, emptyDir data included (the node reboots anyway),
terminal pods too (eviction just deletes them). Pods already terminating are
waited for, not evicted again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    return any(
        ref.get("kind") == "DaemonSet" and ref.get("controller")
        for ref in pod.get("metadata", {}).get("ownerReferences") or ()
    )


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_ANNOTATION in (pod.get("metadata", {}).get("annotations") or {})


def must_leave(pod: Mapping[str, Any]) -> bool:
    """True for pods the drain must get off the node before it reboots."""
    return not (is_daemonset_pod(pod) or is_mirror_pod(pod))


@dataclass(frozen=True, slots=True)
class DrainState:
    evict: tuple[str, ...]  # pods to send an Eviction for now
    terminating: tuple[str, ...]  # already going: wait
    remaining: tuple[str, ...]  # evict + terminating: the drain is done when empty


def drain_state(pods: Iterable[Mapping[str, Any]]) -> DrainState:
    evict: list[str] = []
    terminating: list[str] = []
    for pod in pods:
        if not must_leave(pod):
            continue
        key = pod_key(pod)
        if pod.get("metadata", {}).get("deletionTimestamp"):
            terminating.append(key)
        else:
            evict.append(key)
    evict.sort()
    terminating.sort()
    return DrainState(tuple(evict), tuple(terminating), tuple(sorted(evict + terminating)))


def blocking_message(node: str, remaining: Iterable[str], blocked_by: Mapping[str, str]) -> str:
    """``drain of node-3 blocked by default/web-1 (Cannot evict pod ...), ...``."""
    pods = sorted(remaining)
    parts = []
    for key in pods[:5]:
        why = blocked_by.get(key)
        parts.append(f"{key} ({why})" if why else key)
    if len(pods) > 5:
        parts.append(f"and {len(pods) - 5} more")
    return f"drain of {node} blocked by {', '.join(parts)}" if parts else f"drain of {node} done"
