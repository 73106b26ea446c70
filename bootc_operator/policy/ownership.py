"""Who owns what: a BootcNode's pool, and the shape of the BootcNodes a pool owns.

A BootcNode (named after its Node) belongs to the pool named by its controller
ownerReference (the ``bootc.dev/pool`` label as fallback); ``member_body`` builds
a new one, labelled and owned, for membership and for tools (the bench's bare
client) that must write exactly what membership writes. ``index_by_pool`` is
the BootcNode informer's index of the same relation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.imageref import short_digest

Obj = dict[str, Any]

POOL_INDEX = "pool"


def pool_of(bootc_node: Obj) -> str | None:
    """The pool owning a BootcNode: its controller ownerReference (label as fallback)."""
    meta = bootc_node.get("metadata", {})
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == c.POOL_KIND and ref.get("controller"):
            return str(ref.get("name"))
    return (meta.get("labels") or {}).get(c.POOL_LABEL)


def owner_reference(pool: Obj) -> Obj:
    """The controller ownerReference a pool's BootcNodes carry (garbage collection)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.POOL_KIND,
        "name": pool["metadata"]["name"],
        "uid": pool["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def member_body(pool: Obj, name: str, spec: Obj) -> Obj:
    """A new BootcNode ``name`` of ``pool``: labelled and owned by it, with ``spec``."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": {
            "name": name,
            "labels": {c.POOL_LABEL: pool["metadata"]["name"]}
            | desired_digest_label(spec.get("desiredImage")),
            "ownerReferences": [owner_reference(pool)],
        },
        "spec": spec,
    }


def desired_digest_label(desired_image: str | None) -> dict[str, str]:
    """The ``bootc.dev/desired-digest`` label that goes with ``desiredImage`` (kubectl get)."""
    if not desired_image or "@" not in desired_image:
        return {}
    return {c.DESIRED_DIGEST_LABEL: short_digest(desired_image.split("@", 1)[1])}


def digest_label_patch(labels: Mapping[str, str], desired_image: str | None) -> dict[str, str]:
    """The ``bootc.dev/desired-digest`` label a BootcNode lacks for its desiredImage (one
    written before the label, or by the Go operator): {} when it has it."""
    label = desired_digest_label(desired_image)
    return {} if label.items() <= labels.items() else label


def index_by_pool(bootc_node: Obj) -> list[str]:
    owner = pool_of(bootc_node)
    return [owner] if owner else []


def retarget_patch(desired_image: str) -> Obj:
    """The BootcNode merge patch that points a member at a new image: desiredImage and
    ``desiredImageState: Staged`` in one request (a new image is never paired with
    Booted), its label, and any drain-blocked or health-check mark of the previous
    target cleared."""
    return {
        "spec": {"desiredImage": desired_image, "desiredImageState": "Staged"},
        "metadata": {
            "labels": desired_digest_label(desired_image),
            "annotations": {
                c.DRAIN_BLOCKED_ANNOTATION: None,
                c.DRAIN_SKIPPED_ANNOTATION: None,
                c.HEALTH_FAILED_ANNOTATION: None,
                c.HEALTH_CHECK_ANNOTATION: None,
            },
        },
    }


def retarget_due(
    desired_image: str | None,
    current: str | None,
    *,
    in_slot: bool,
    failed_digest: str | None,
    every_member: bool,
) -> bool:
    """The rollout loop points a member at the pool's target (``desired_image``) now,
    outside its plan: the target is known, the member names another image, it was not
    rolled back from this digest (``failed_digest``: its ``bootc.dev/health-failed``;
    held back until the target changes), and it holds a slot (given back in the same
    write when its drain is void: ``slots.gives_slot_back_on_retarget``) or
    ``every_member`` is due (``slots.retargets_due``: not under stageAhead, whose plan
    retargets the next few as others move on, nor with an invalid selector)."""
    return (
        desired_image is not None
        and current != desired_image
        and (in_slot or every_member)
        and not (failed_digest and desired_image.endswith(f"@{failed_digest}"))
    )
