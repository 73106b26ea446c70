"""Placement decisions (pure): which managed labels a Node should carry.

A Node carries ``MANAGED_LABEL`` (the DaemonSet's selector) exactly while it
has a BootcNode; ``LEGACY_MANAGED_LABEL`` (what a kubelet could set itself)
never. See ``placement`` for the reconciler that applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bootc_operator.api import constants as c

Obj = Mapping[str, Any]


def managed_label_patch(labels: Mapping[str, str], managed: bool) -> dict[str, Any]:
    """The Node label changes (merge patch, None deletes) making it ``managed`` or not.

    Empty when nothing changes. The legacy label goes either way: it marks nothing.
    """
    patch: dict[str, Any] = {}
    if managed and labels.get(c.MANAGED_LABEL) != "":
        patch[c.MANAGED_LABEL] = ""
    if not managed and c.MANAGED_LABEL in labels:
        patch[c.MANAGED_LABEL] = None
    if c.LEGACY_MANAGED_LABEL in labels:
        patch[c.LEGACY_MANAGED_LABEL] = None
    return patch


def wants_look(node: Obj | None, has_bootc_node: bool) -> bool:
    """A Node that carries a managed label but has no BootcNode: placement must look."""
    if node is None or has_bootc_node:
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    return c.MANAGED_LABEL in labels or c.LEGACY_MANAGED_LABEL in labels
