"""What informers hold: API objects as plain dicts, their keys, and tombstones.

- ``Obj``: a JSON object exactly as the API server sent it (after the
  informer's transform). Cached objects are shared: treat them as read-only.
- :func:`object_key`: ``namespace/name`` for namespaced objects, ``name``
  otherwise (client-go's ``MetaNamespaceKeyFunc``); :func:`split_key` inverts it.
- :class:`DeletedFinalStateUnknown`: handed to delete handlers when an object
  vanished while the watch was broken, so its final state was never seen;
  ``obj`` is the last state the informer knew. :func:`unwrap` and
  :func:`key_of` accept either form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
KeyFunc = Callable[[Obj], str]


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    ns = meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """``"ns/name"`` → ``("ns", "name")``; ``"name"`` → ``(None, "name")``."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, key)


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """A delete observed only by its absence from a re-LIST."""

    key: str
    obj: Obj


def unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    """The object itself, or the last known state inside a tombstone."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def key_of(obj: Obj | DeletedFinalStateUnknown) -> str:
    return obj.key if isinstance(obj, DeletedFinalStateUnknown) else object_key(obj)


def resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
