"""Classification of one BootcNode (plus its Node) into the controller's state table.

DESIGN §3: Degraded, UpToDate, Pending, Staging, Staged, Rebooting. Pure
functions over the wire dicts held in the informer caches; ``NodeView`` is the
typed summary every other decision (slots, status) works from.

"Up to date" and "staged" are judged against a *set* of target digests, and a
deployment matches when either of its two digests is in it: ``imageDigest``
(bootc reports the per-architecture manifest digest there) or the digest of
``image`` (the reference bootc was switched to — for a pool pinned to a
multi-arch index that is ``repo@<index digest>``). This is where the
index → per-arch mapping is checked, without asking the registry.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Container, Mapping, Sized
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import get_condition, node_ready_status
from bootc_operator.api.timefmt import parse_time
from bootc_operator.policy.autoscaler import leaving
from bootc_operator.policy.ownership import digest_label_patch


class NodeState(StrEnum):
    DEGRADED = "Degraded"
    UP_TO_DATE = "UpToDate"
    PENDING = "Pending"
    STAGING = "Staging"
    STAGED = "Staged"
    REBOOTING = "Rebooting"


def _digest(ref: str | None) -> str | None:
    if not ref or "@" not in ref:
        return None
    return ref.split("@", 1)[1]


def _image_digest(info: Mapping[str, Any] | None) -> str | None:
    if not info:
        return None
    return info.get("imageDigest") or _digest(info.get("image"))


def deployment_matches(info: Mapping[str, Any] | None, targets: frozenset[str]) -> bool:
    """True when a deployment runs one of ``targets`` (per-arch or index digest)."""
    if not info:
        return False
    return info.get("imageDigest") in targets or _digest(info.get("image")) in targets


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the controller needs to know about one member of a pool."""

    name: str
    state: NodeState
    desired_image: str
    desired_image_state: str
    spec_in_sync: bool  # desiredImage names one of the pool's target digests
    in_slot: bool
    was_cordoned: bool
    ready: bool
    unschedulable: bool
    idle: bool  # Idle condition True
    idle_since: dt.datetime | None  # lastTransitionTime of the Idle condition
    degraded_message: str
    booted_digest: str | None
    staged_digest: str | None
    #: when it took its reboot slot / was told to reboot (the rollout's annotations)
    slot_since: dt.datetime | None = None
    reboot_requested_at: dt.datetime | None = None
    #: since when the Node's Ready condition has its current status
    ready_since: dt.datetime | None = None
    #: status.bootAssessment as the daemon reported it (state "" when absent)
    boot_assessment: str = ""
    boot_assessment_message: str = ""
    #: the target digest it failed its health check on and was rolled back from
    #: (``bootc.dev/health-failed``), and whether that is one of the current targets
    health_failed: str | None = None
    held_back: bool = False
    health_note: str = ""  # ``bootc.dev/health-check``
    #: the rollback deployment as a digest ref (what a rollback writes to desiredImage)
    rollback_image: str | None = None
    booted_desired: bool = False  # the booted deployment runs spec.desiredImage
    canary_label: bool = False  # the Node carries ``bootc.dev/canary``
    #: when the Node was created (metadata.creationTimestamp)
    created: dt.datetime | None = None
    #: the Node's labels, sorted (a tuple, so views stay hashable)
    labels: tuple[tuple[str, str], ...] = ()
    #: why an autoscaler is removing its Node ("" if none is): ``autoscaler.leaving``
    leaving: str = ""

    def label(self, key: str) -> str | None:
        """The Node's label ``key`` (None: absent)."""
        for name, value in self.labels:
            if name == key:
                return value
        return None

    drain_skips: int = 0  # times onTimeout Skip let it go (``bootc.dev/drain-skipped``)
    #: the BootcNode carries the desired-digest label of its desiredImage (one written
    #: before the label, or by the Go operator, does not: the rollout loop adds it)
    digest_labelled: bool = True

    @property
    def departing(self) -> bool:
        """An autoscaler is removing it, and it neither holds a slot nor runs the
        target: it is not updated (no slot, no canary, not staged ahead)."""
        return bool(self.leaving) and not self.in_slot and self.state is not NodeState.UP_TO_DATE

    @property
    def rolling_back(self) -> bool:
        """Held back from the target while still holding the slot it failed in."""
        return self.held_back and self.in_slot


def classify(bootc_node: Mapping[str, Any], targets: frozenset[str]) -> NodeState:
    """The state-table row of one BootcNode with respect to the target digests."""
    status = bootc_node.get("status") or {}
    conditions = status.get("conditions")
    degraded = get_condition(conditions, c.COND_DEGRADED)
    if degraded is not None and degraded.get("status") == "True":
        return NodeState.DEGRADED
    annotations = bootc_node.get("metadata", {}).get("annotations") or {}
    if c.DRAIN_BLOCKED_ANNOTATION in annotations:
        return NodeState.DEGRADED
    booted = _image_digest(status.get("booted"))
    idle = get_condition(conditions, c.COND_IDLE)
    idle_reason = idle.get("reason") if idle else None
    if deployment_matches(status.get("booted"), targets) and idle_reason != c.REASON_REBOOTING:
        return NodeState.UP_TO_DATE
    if booted is None or idle is None:
        return NodeState.PENDING
    if idle_reason == c.REASON_REBOOTING:
        return NodeState.REBOOTING
    if idle_reason == c.REASON_STAGING:
        return NodeState.STAGING
    if idle_reason == c.REASON_STAGED:
        staged_ok = deployment_matches(status.get("staged"), targets)
        return NodeState.STAGED if staged_ok else NodeState.PENDING
    return NodeState.PENDING


def _degraded_message(degraded: Mapping[str, Any] | None, annotations: Mapping[str, str]) -> str:
    if degraded is not None and degraded.get("status") == "True":
        return str(degraded.get("message", ""))
    return annotations.get(c.DRAIN_BLOCKED_ANNOTATION, "")


def rollback_ref(info: Mapping[str, Any] | None) -> str | None:
    """A deployment as ``repo@digest`` (desiredImage of a rollback), None if unknown.

    The digest of the reference bootc switched to when that was a digest ref (a
    multi-arch index stays its index), else the per-architecture ``imageDigest``.
    """
    if not info:
        return None
    image = str(info.get("image") or "")
    if "@" in image:
        return image
    digest = info.get("imageDigest")
    if not image or not digest:
        return None
    repo = image
    slash = repo.rfind("/")
    if ":" in repo[slash + 1 :]:
        repo = repo[: slash + 1] + repo[slash + 1 :].split(":", 1)[0]
    return f"{repo}@{digest}"


def _ready_since(node: Mapping[str, Any] | None) -> dt.datetime | None:
    ready = get_condition(((node or {}).get("status") or {}).get("conditions"), "Ready")
    return parse_time(ready.get("lastTransitionTime")) if ready else None


def view(
    bootc_node: Mapping[str, Any], node: Mapping[str, Any] | None, targets: frozenset[str]
) -> NodeView:
    meta = bootc_node.get("metadata", {})
    annotations = meta.get("annotations") or {}
    spec = bootc_node.get("spec") or {}
    status = bootc_node.get("status") or {}
    conditions = status.get("conditions")
    idle = get_condition(conditions, c.COND_IDLE)
    degraded = get_condition(conditions, c.COND_DEGRADED)
    desired = spec.get("desiredImage", "")
    assessment = status.get("bootAssessment") or {}
    health_failed = annotations.get(c.HEALTH_FAILED_ANNOTATION)
    held_back = bool(health_failed) and health_failed in targets
    state = classify(bootc_node, targets)
    if held_back and state is NodeState.UP_TO_DATE:
        state = NodeState.PENDING  # it failed there: runs it only until rolled back
    desired_digest = _digest(desired)
    node_labels: Mapping[str, str] = ((node or {}).get("metadata") or {}).get("labels") or {}
    return NodeView(
        name=meta.get("name", ""),
        state=state,
        desired_image=desired,
        desired_image_state=spec.get("desiredImageState", ""),
        spec_in_sync=_digest(desired) in targets,
        in_slot=c.IN_REBOOT_SLOT_ANNOTATION in annotations,
        was_cordoned=annotations.get(c.WAS_CORDONED_ANNOTATION) == "true",
        ready=node_ready_status(node) == "True",
        unschedulable=bool((node or {}).get("spec", {}).get("unschedulable")),
        idle=bool(idle and idle.get("status") == "True"),
        idle_since=parse_time(idle.get("lastTransitionTime")) if idle else None,
        degraded_message=_degraded_message(degraded, annotations),
        booted_digest=_image_digest(status.get("booted")),
        staged_digest=_image_digest(status.get("staged")),
        slot_since=parse_time(annotations.get(c.IN_REBOOT_SLOT_ANNOTATION)),
        reboot_requested_at=parse_time(annotations.get(c.REBOOT_REQUESTED_ANNOTATION)),
        ready_since=_ready_since(node),
        boot_assessment=str(assessment.get("state") or ""),
        boot_assessment_message=str(assessment.get("message") or ""),
        health_failed=health_failed,
        held_back=held_back,
        health_note=annotations.get(c.HEALTH_CHECK_ANNOTATION, ""),
        rollback_image=rollback_ref(status.get("rollback")),
        booted_desired=desired_digest is not None
        and deployment_matches(status.get("booted"), frozenset({desired_digest})),
        canary_label=c.CANARY_LABEL in node_labels,
        labels=tuple(sorted(node_labels.items())),
        created=parse_time(((node or {}).get("metadata") or {}).get("creationTimestamp")),
        leaving=leaving(node),
        drain_skips=drain_skips_of(annotations.get(c.DRAIN_SKIPPED_ANNOTATION)),
        digest_labelled=not digest_label_patch(meta.get("labels") or {}, desired),
    )


def drain_skips_of(value: str | None) -> int:
    """``bootc.dev/drain-skipped``'s count (it starts the value); 0 when absent."""
    head = (value or "").split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


class _Live(Container[str], Sized, Protocol):
    """The names still present (an informer's store)."""


class ViewCache:
    """Memoised ``view``s: rollout and status classify every node of a pool on every
    pass, and between two passes few nodes changed.

    A view depends only on the two objects and the targets, and a resourceVersion
    names an object's content, so a view is reused while both resourceVersions and
    the targets are the same. Objects without a resourceVersion are never cached.
    """

    def __init__(self) -> None:
        # node name -> ((BootcNode rv, Node rv, targets), its NodeView)
        self._views: dict[str, tuple[tuple[str, str, frozenset[str]], NodeView]] = {}

    def view(
        self,
        bootc_node: Mapping[str, Any],
        node: Mapping[str, Any] | None,
        targets: frozenset[str],
        *,
        live: _Live | None = None,
    ) -> NodeView:
        """``view(bootc_node, node, targets)``; ``live`` (names still present) bounds the memo."""
        name = bootc_node["metadata"]["name"]
        bn_rv = str(bootc_node["metadata"].get("resourceVersion") or "")
        node_rv = "" if node is None else str(node["metadata"].get("resourceVersion") or "")
        if not bn_rv or (node is not None and not node_rv):
            return view(bootc_node, node, targets)  # no version to key on
        key = (bn_rv, node_rv, targets)
        cached = self._views.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        result = view(bootc_node, node, targets)
        if live is not None and len(self._views) > 2 * len(live) + 100:
            self._views = {k: v for k, v in self._views.items() if k in live}
        self._views[name] = (key, result)
        return result
