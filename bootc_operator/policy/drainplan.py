"""Which pods a drain evicts, and how a drain's outcome is described. Pure functions.

Skipped (they would come straight back, or cannot be evicted): pods owned by a
DaemonSet (the daemon itself among them) and mirror pods of static manifests.
Everything else is evicted, terminal pods too (eviction just deletes them).
Pods already terminating are waited for, not evicted again.

Pods with emptyDir data (``spec.rollout.drain.deleteEmptyDirData``, as
``kubectl drain --delete-emptydir-data``): unset or true, they are evicted like
any other pod (unset is what this operator has always done: the node reboots
anyway); false, a running pod with an emptyDir volume is held (``DrainState.held``):
never evicted nor deleted, not even by ``onTimeout: Force`` (as ``kubectl drain
--force --disable-eviction`` still refuses it), and the drain is blocked by it
with the named reason ``EmptyDirData`` until the pod goes or the setting
changes. A finished pod (Succeeded, Failed) may go: its data is no one's.

What a drain past its timeout does (``timeout_action``), from
``spec.rollout.drain.onTimeout`` (``DrainPolicy``):

- unset (``GIVE_UP``, what ``drainTimeoutSeconds`` alone has always done): the
  node gives its slot back, is uncordoned and marked ``bootc.dev/drain-blocked``
  (Degraded) until its target changes; the rollout goes around it;
- ``Halt``: the node keeps its slot and cordon and its drain goes on; no new
  slots start in the pool until it drains;
- ``Skip``: the node gives its slot back, is uncordoned and marked
  ``bootc.dev/drain-skipped`` (how many times); it competes again after every
  node skipped fewer times. ``MAX_TRIES`` drains in all: the last one past its
  timeout gives the node up as above (``MAX_TRIES - 1`` skips, never a fourth
  cordon and drain);
- ``Force``: the pods left are deleted without the Eviction API (PDBs bypassed).

An eviction refused for another reason than a PodDisruptionBudget (an admission
webhook or policy denies it: 400/403/422/500...) is retried with the same capped
backoff as a 429, never treated as fatal (``refusal_kind`` names which).

An eviction a PodDisruptionBudget refused (429) waits for that budget instead:
``budget_covers`` says which PDBs cover a pod (its namespace, their selector: in
policy/v1 an empty selector covers every pod of the namespace, none covers none),
``budget_allows`` when one allows a disruption again (``status.disruptionsAllowed``
positive, for its current generation); ``slim_budget`` is what the drains' PDB
cache keeps of one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.policy.selectors import InvalidSelector, matches, validate_selector

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


def emptydir_volumes(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the pod's emptyDir volumes (its data lost when it goes)."""
    return tuple(
        str(vol.get("name", ""))
        for vol in (pod.get("spec") or {}).get("volumes") or ()
        if isinstance(vol, Mapping) and "emptyDir" in vol
    )


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


#: the named reason of a drain blocked by a pod's emptyDir data
EMPTYDIR_REASON: Final = "EmptyDirData"


def keeps_emptydir_data(pod: Mapping[str, Any], delete_emptydir_data: bool | None) -> bool:
    """True for a pod the drain may not remove: emptyDir data of a pod not finished,
    under ``deleteEmptyDirData: false`` (unset and true let it go)."""
    return delete_emptydir_data is False and bool(emptydir_volumes(pod)) and not is_finished(pod)


def emptydir_block(pod: Mapping[str, Any]) -> str:
    """Why the drain cannot remove ``pod``, for its ``blocked_by`` entry."""
    volumes = ", ".join(emptydir_volumes(pod))
    return (
        f"{EMPTYDIR_REASON}: its emptyDir volume(s) {volumes} would be lost and "
        "spec.rollout.drain.deleteEmptyDirData is false"
    )


@dataclass(frozen=True, slots=True)
class DrainState:
    evict: tuple[str, ...]  # pods to send an Eviction for now
    terminating: tuple[str, ...]  # already going: wait
    remaining: tuple[str, ...]  # evict + terminating + held: the drain is done when empty
    #: pods the drain may not remove (emptyDir data, deleteEmptyDirData false) -> why
    held: Mapping[str, str] = field(default_factory=dict)


def drain_state(
    pods: Iterable[Mapping[str, Any]], delete_emptydir_data: bool | None = None
) -> DrainState:
    evict: list[str] = []
    terminating: list[str] = []
    held: dict[str, str] = {}
    for pod in pods:
        if not must_leave(pod):
            continue
        key = pod_key(pod)
        if pod.get("metadata", {}).get("deletionTimestamp"):
            terminating.append(key)
        elif keeps_emptydir_data(pod, delete_emptydir_data):
            held[key] = emptydir_block(pod)
        else:
            evict.append(key)
    evict.sort()
    terminating.sort()
    remaining = tuple(sorted([*evict, *terminating, *held]))
    return DrainState(tuple(evict), tuple(terminating), remaining, dict(sorted(held.items())))


def unblocked(blocked: Iterable[str], state: DrainState, held_before: Iterable[str]) -> set[str]:
    """Pods named as blocking the drain that block it no more: gone, already going
    (terminating: evicted, or deleted by someone), or held before and let go since
    (the setting changed). Only a pod still to evict, or still held, blocks."""
    still = set(state.evict) | set(state.held)
    named = set(blocked)
    return (named - still) | ((set(held_before) - set(state.held)) & named)


def blocking_message(node: str, remaining: Iterable[str], blocked_by: Mapping[str, str]) -> str:
    """``drain of node-3 blocked by default/web-1 (Cannot evict pod ...), ...``: the
    pods that block it, each with why, and only those (a pod being evicted, or
    terminating, blocks nothing); with none blocked, the pods it waits for to go
    (``drain of node-3 waiting for default/web-0 to go``)."""
    blocked = sorted(blocked_by)
    if blocked:
        return f"drain of {node} blocked by {named(blocked, blocked_by)}"
    going = sorted(remaining)
    if going:
        return f"drain of {node} waiting for {named(going, blocked_by)} to go"
    return f"drain of {node} done"


def named(pods: list[str], why: Mapping[str, str]) -> str:
    """The first five pods, each with its reason when it has one, and how many more."""
    parts = [f"{key} ({why[key]})" if why.get(key) else key for key in pods[:5]]
    if len(pods) > 5:
        parts.append(f"and {len(pods) - 5} more")
    return ", ".join(parts)


#: how many drains ``onTimeout: Skip`` gives a node in all (the CRD and docs say
#: "at most 3 tries"): the first ``MAX_TRIES - 1`` past their timeout are skipped,
#: the last one gives the node up
MAX_TRIES: Final = 3


class TimeoutAction(StrEnum):
    """What happens to a drain past its timeout; the values are the outcome metric's."""

    GIVE_UP = "GiveUp"
    HALT = "Halt"
    SKIP = "Skip"
    FORCE = "Force"


#: the shortest grace period a drain gives a pod: ``gracePeriodSeconds: 0`` is taken
#: as 1, as ``kubectl delete`` does without ``--force``. 0 removes the pod from the
#: API at once, before its kubelet has stopped its containers (a StatefulSet's
#: replacement could run beside it); 1 still waits for the kubelet's confirmation.
MIN_GRACE_PERIOD: Final = 1


@dataclass(frozen=True, slots=True)
class DrainPolicy:
    """``spec.rollout.drain`` (and ``drainTimeoutSeconds``) as the drain decisions read it."""

    timeout: float | None = None  # seconds; None: no limit
    on_timeout: str | None = None  # Halt | Skip | Force; None: give up (drainTimeoutSeconds)
    #: seconds given to each evicted or deleted pod (at least MIN_GRACE_PERIOD); None: its own
    grace_period: int | None = None
    #: deleteEmptyDirData; None (unset) evicts such pods, as always
    delete_emptydir_data: bool | None = None


def timeout_action(policy: DrainPolicy, skips: int) -> TimeoutAction:
    """What a drain past its timeout does; ``skips``: times Skip already let the node go
    (so this drain is try ``skips + 1`` of ``MAX_TRIES``)."""
    if policy.on_timeout == "Halt":
        return TimeoutAction.HALT
    if policy.on_timeout == "Force":
        return TimeoutAction.FORCE
    if policy.on_timeout == "Skip" and skips + 1 < MAX_TRIES:
        return TimeoutAction.SKIP
    return TimeoutAction.GIVE_UP


def refusal_kind(status: int) -> str:
    """``pdb`` for a PodDisruptionBudget's 429, ``denied`` for any other refusal."""
    return "pdb" if status == 429 else "denied"


def budget_covers(pdb: Mapping[str, Any], namespace: str, labels: Mapping[str, str] | None) -> bool:
    """Whether PodDisruptionBudget ``pdb`` covers a pod of ``namespace`` with ``labels``."""
    if (pdb.get("metadata") or {}).get("namespace") != namespace:
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    try:
        validate_selector(selector)
    except InvalidSelector:
        return False
    return matches(selector, labels)


def budget_allows(pdb: Mapping[str, Any]) -> bool:
    """Whether ``pdb`` allows a disruption now, as its status says for its generation."""
    status = pdb.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    generation = (pdb.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    current = generation is None or (isinstance(observed, int) and observed >= generation)
    return isinstance(allowed, int) and allowed > 0 and current


def slim_budget(pdb: dict[str, Any]) -> dict[str, Any]:
    """What the drains read of a PodDisruptionBudget (``budget_covers``, ``budget_allows``)."""
    meta = pdb.get("metadata") or {}
    status = pdb.get("status") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "resourceVersion", "generation") if k in meta
        },
        "spec": {"selector": (pdb.get("spec") or {}).get("selector")},
        "status": {
            k: status[k] for k in ("disruptionsAllowed", "observedGeneration") if k in status
        },
    }


def overdue_drains(
    views: Iterable[NodeView], now: dt.datetime, policy: DrainPolicy
) -> tuple[str, ...]:
    """Slot holders still draining past the timeout, by name (the drain is the one
    step between taking a slot and being told to reboot, so the slot's age is the
    drain's)."""
    if policy.timeout is None:
        return ()
    return tuple(
        sorted(
            v.name
            for v in views
            if v.in_slot
            and v.state is NodeState.STAGED
            and v.desired_image_state == "Staged"
            and v.spec_in_sync
            and v.slot_since is not None
            and (now - v.slot_since).total_seconds() >= policy.timeout
        )
    )


def halting_drains(
    views: Iterable[NodeView], now: dt.datetime, policy: DrainPolicy
) -> tuple[str, ...]:
    """Holders whose overdue drain halts the pool (``onTimeout: Halt``)."""
    if policy.on_timeout != "Halt":
        return ()
    return overdue_drains(views, now, policy)


def halt_message(halting: Iterable[str], blocking: Mapping[str, str]) -> str:
    """The pool's RolloutHalted message for drains past their timeout under Halt;
    ``blocking``: node -> its drain's ``blocking_message`` (when this process knows)."""
    names = sorted(halting)
    why = "; ".join(blocking.get(n) or f"drain of {n} not finished" for n in names[:5])
    nodes = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"drain timed out on {nodes} (onTimeout: Halt), no new reboots until it ends: {why}"
