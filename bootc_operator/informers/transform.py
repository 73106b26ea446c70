"""Transforms: functions ``Obj -> Obj`` an informer applies before storing an object.

The default, :func:`strip_bulk`, drops what controllers never read and what
dominates memory at thousands of objects: ``metadata.managedFields`` and the
``kubectl.kubernetes.io/last-applied-configuration`` annotation. A transform
receives a freshly parsed dict the informer owns, so it may edit it in place.
"""

from __future__ import annotations

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
