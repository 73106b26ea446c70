"""Ready-made index functions for :class:`~bootc_operator.informers.store.Store`.

Each is a pure ``Obj -> list[str]``: ``by_namespace``, ``by_owner_uid`` (every
ownerReference), ``by_controller_uid`` (the controlling ownerReference only),
``by_label(key)`` (the label's value), ``by_field("spec", "nodeName")`` (a
string field, e.g. Pods by node).

``by_label`` and ``by_field`` return the same function for the same arguments,
so consumers sharing an informer can each register "their" indexer safely.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from bootc_operator.informers.objects import Obj


def by_namespace(obj: Obj) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def by_owner_uid(obj: Obj) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [r["uid"] for r in refs if r.get("uid")]


def by_controller_uid(obj: Obj) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [r["uid"] for r in refs if r.get("controller") and r.get("uid")]


@functools.cache
def by_label(key: str) -> Callable[[Obj], list[str]]:
    """Index by the value of label ``key`` (objects without it are not indexed)."""

    def index(obj: Obj) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(key)
        return [value] if value is not None else []

    index.__name__ = f"by_label({key})"
    return index


@functools.cache
def by_field(*path: str) -> Callable[[Obj], list[str]]:
    """Index by the string at ``path`` (e.g. ``by_field("spec", "nodeName")``)."""

    def index(obj: Obj) -> list[str]:
        cur: object = obj
        for part in path:
            if not isinstance(cur, dict):
                return []
            cur = cur.get(part)
        return [cur] if isinstance(cur, str) and cur else []

    index.__name__ = f"by_field({'.'.join(path)})"
    return index
