"""Placement decisions (pure): which managed labels a Node should carry.

A Node carries ``MANAGED_LABEL`` (the DaemonSet's selector) only while it has
a BootcNode or a pool selects it. ``LEGACY_MANAGED_LABEL`` (the Go operator's
``bootc.dev/managed``, part of the API) goes with it: members carry it for the
admins and tools that select on it, but since a kubelet may set it on its own
Node it places nothing, and it is stripped with the other. See ``placement``
for the reconciler that applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bootc_operator.api import constants as c

Obj = Mapping[str, Any]


def managed_label_patch(labels: Mapping[str, str], managed: bool) -> dict[str, Any]:
    """The Node label changes (merge patch, None deletes) making it ``managed`` or not.

    Empty when nothing changes. Both labels move together.
    """
    patch: dict[str, Any] = {}
    for label in (c.MANAGED_LABEL, c.LEGACY_MANAGED_LABEL):
        if managed and labels.get(label) != "":
            patch[label] = ""
        if not managed and label in labels:
            patch[label] = None
    return patch


def wants_look(node: Obj | None, has_bootc_node: bool, *, selected: bool = False) -> bool:
    """A Node that carries a managed label but has no BootcNode: strip it.

    Not while a pool selects the Node (``selected``): its membership pass is
    about to create the BootcNode, or a BootcNode was just deleted by one pool
    handing the Node over to another, which keeps the label so the daemon is
    not restarted in between.
    """
    if node is None or has_bootc_node or selected:
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    return c.MANAGED_LABEL in labels or c.LEGACY_MANAGED_LABEL in labels
