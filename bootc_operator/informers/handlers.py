"""Event handlers: what an informer calls when its cache changes.

An :class:`EventHandler` bundles optional ``on_add(obj)``,
``on_update(old, new)`` and ``on_delete(obj_or_tombstone)`` callbacks. They are
called synchronously on the event loop, right after the cache changed, so they
must be quick and must not block: the usual body enqueues a key on a
workqueue. A delete may carry a
:class:`~bootc_operator.informers.objects.DeletedFinalStateUnknown`.

``predicate`` filters like client-go's ``FilteringResourceEventHandler``: an
update whose old object passes and new one does not arrives as a delete (of
the old object), the reverse as an add, neither as nothing. ``update_predicate``
further filters updates where both pass (e.g. :func:`generation_changed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bootc_operator.informers.objects import DeletedFinalStateUnknown, Obj, unwrap

Predicate = Callable[[Obj], bool]
UpdatePredicate = Callable[[Obj, Obj], bool]
AddFunc = Callable[[Obj], None]
UpdateFunc = Callable[[Obj, Obj], None]
DeleteFunc = Callable[[Obj | DeletedFinalStateUnknown], None]


@dataclass(frozen=True, eq=False)
class EventHandler:
    on_add: AddFunc | None = None
    on_update: UpdateFunc | None = None
    on_delete: DeleteFunc | None = None
    predicate: Predicate | None = None
    update_predicate: UpdatePredicate | None = None

    def _passes(self, obj: Obj) -> bool:
        return self.predicate is None or self.predicate(obj)

    def add(self, obj: Obj) -> None:
        if self.on_add is not None and self._passes(obj):
            self.on_add(obj)

    def update(self, old: Obj, new: Obj) -> None:
        was, now = self._passes(old), self._passes(new)
        if was and now:
            if self.on_update is not None and (
                self.update_predicate is None or self.update_predicate(old, new)
            ):
                self.on_update(old, new)
        elif now:
            if self.on_add is not None:
                self.on_add(new)
        elif was and self.on_delete is not None:
            self.on_delete(old)

    def delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        if self.on_delete is not None and self._passes(unwrap(obj)):
            self.on_delete(obj)


def generation_changed(old: Obj, new: Obj) -> bool:
    """Update filter: spec changed (``metadata.generation`` moved); status-only writes pass not."""
    return (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get(
        "generation"
    )


def resource_version_changed(old: Obj, new: Obj) -> bool:
    """Update filter that drops periodic resyncs (old and new are the same version)."""
    return (old.get("metadata") or {}).get("resourceVersion") != (new.get("metadata") or {}).get(
        "resourceVersion"
    )
