"""Re-LIST reconciliation as a pure function: old cache + fresh list → deltas.

After a watch was lost (410 Gone), the informer LISTs again and must tell its
handlers what changed meanwhile. :func:`diff_relist` compares by key:

- in the list, not cached → ``ADDED``
- in both, resourceVersion differs → ``UPDATED`` (with the cached ``old``)
- in both, same resourceVersion → nothing (the object did not change)
- cached, not in the list → ``DELETED`` carrying a
  :class:`~bootc_operator.informers.objects.DeletedFinalStateUnknown`
  (the object's final state was never observed)

Order: the list's order for ADDED/UPDATED, then deletions in cache order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from bootc_operator.informers.objects import (
    DeletedFinalStateUnknown,
    KeyFunc,
    Obj,
    object_key,
    resource_version,
)


class DeltaType(StrEnum):
    ADDED = "ADDED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Delta:
    type: DeltaType
    key: str
    obj: Obj | DeletedFinalStateUnknown
    old: Obj | None = None


def _changed(old: Obj, new: Obj) -> bool:
    rv_old, rv_new = resource_version(old), resource_version(new)
    if rv_old and rv_new:
        return rv_old != rv_new
    return old != new


def diff_relist(
    cached: Mapping[str, Obj], listed: Iterable[Obj], key_func: KeyFunc = object_key
) -> list[Delta]:
    deltas: list[Delta] = []
    seen: set[str] = set()
    for obj in listed:
        key = key_func(obj)
        seen.add(key)
        old = cached.get(key)
        if old is None:
            deltas.append(Delta(DeltaType.ADDED, key, obj))
        elif _changed(old, obj):
            deltas.append(Delta(DeltaType.UPDATED, key, obj, old))
    for key, old in cached.items():
        if key not in seen:
            deltas.append(Delta(DeltaType.DELETED, key, DeletedFinalStateUnknown(key, old)))
    return deltas
