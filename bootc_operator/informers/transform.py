"""Transforms: functions ``Obj -> Obj`` an informer applies before storing an object.

The default, :func:`strip_bulk`, drops what controllers never read and what
dominates memory at thousands of objects: ``metadata.managedFields`` and the
``kubectl.kubernetes.io/last-applied-configuration`` annotation. A transform
receives a freshly parsed dict the informer owns, so it may edit it in place.

:func:`drop_paths` builds a transform that removes fields a consumer never
reads, e.g. ``chain(strip_bulk, drop_paths(("status", "images")))`` for Nodes
(kubelets report up to 50 images per node: the bulk of a Node object).
:func:`intern_strings` shares repeated keys and short values between cached
objects (Nodes repeat most of theirs).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final

from bootc_operator.informers.objects import Obj

Transform = Callable[[Obj], Obj]

LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"


def strip_bulk(obj: Obj) -> Obj:
    """Drop managedFields and the last-applied annotation (in place; returns ``obj``)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED_ANNOTATION in annotations:
            del annotations[LAST_APPLIED_ANNOTATION]
            if not annotations:
                del meta["annotations"]
    return obj


def identity(obj: Obj) -> Obj:
    return obj


def chain(*transforms: Transform) -> Transform:
    """Apply ``transforms`` left to right."""

    def run(obj: Obj) -> Obj:
        for t in transforms:
            obj = t(obj)
        return obj

    return run


def drop_paths(*paths: tuple[str, ...]) -> Transform:
    """A transform removing each ``("a", "b", "c")`` path (``obj["a"]["b"]["c"]``) if present."""
    for path in paths:
        if not path:
            raise ValueError("empty path")

    def run(obj: Obj) -> Obj:
        for *parents, leaf in paths:
            cur: object = obj
            for part in parents:
                cur = cur.get(part) if isinstance(cur, dict) else None
            if isinstance(cur, dict):
                cur.pop(leaf, None)
        return obj

    return run


def intern_strings(obj: Obj) -> Obj:
    """A copy of ``obj`` whose keys and short string values are interned (shared)."""
    return _intern_dict(obj)


_SHORT = 64


def _intern_any(v: object) -> object:
    if isinstance(v, str):
        return sys.intern(v) if len(v) < _SHORT else v
    if isinstance(v, dict):
        return _intern_dict(v)
    if isinstance(v, list):
        return [_intern_any(x) for x in v]
    return v


def _intern_dict(d: dict[str, object]) -> Obj:
    return {sys.intern(k): _intern_any(v) for k, v in d.items()}
