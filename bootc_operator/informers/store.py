"""The indexed in-memory cache behind an informer (client-go's ``cache.Indexer``).

Objects are kept by key (``namespace/name`` or ``name``, see
:func:`~bootc_operator.informers.objects.object_key`). Named indexers map an
object to zero or more index values; ``by_index(name, value)`` returns the
objects that produced ``value``. Index functions must be pure: they are re-run
on the old object to remove it from the index.

Reads: ``get``, ``keys``, ``list``, ``by_index``, ``index_keys``,
``index_values``, ``len()``/``in``. Writes (the informer's alone): ``upsert``,
``delete``, ``replace``. All operations are synchronous and O(1) per object
and index value, so a reader on the event loop always sees a consistent store.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping

from bootc_operator.informers.objects import KeyFunc, Obj, object_key

IndexFunc = Callable[[Obj], Iterable[str]]


class Store:
    def __init__(
        self, key_func: KeyFunc = object_key, indexers: Mapping[str, IndexFunc] | None = None
    ) -> None:
        self._key = key_func
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> index value -> keys (a dict used as an ordered set)
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        if indexers:
            self.add_indexers(indexers)

    # ------------------------------------------------------------ reads

    def key(self, obj: Obj) -> str:
        return self._key(obj)

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        return list(self._items)

    def list(self) -> list[Obj]:
        return list(self._items.values())

    def snapshot(self) -> dict[str, Obj]:
        """A shallow copy of key → object (the objects themselves are shared)."""
        return dict(self._items)

    def index_names(self) -> builtins.list[str]:
        return list(self._indexers)

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        return list(self._index(name).get(value, ()))

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return [self._items[k] for k in self._index(name).get(value, ())]

    def index_values(self, name: str) -> builtins.list[str]:
        """Every value the index currently holds at least one object under."""
        return list(self._index(name))

    def _index(self, name: str) -> dict[str, dict[str, None]]:
        try:
            return self._indices[name]
        except KeyError:
            raise KeyError(f"no indexer named {name!r}") from None

    # ------------------------------------------------------------ writes

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add named indexers; existing objects are indexed at once.

        Re-adding the same function under a name is a no-op; another function
        under a taken name is an error (two consumers would disagree).
        """
        for name, func in indexers.items():
            if name in self._indexers:
                if self._indexers[name] is not func:
                    raise ValueError(f"indexer {name!r} already exists with another function")
                continue
            self._indexers[name] = func
            index: dict[str, dict[str, None]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in func(obj):
                    index.setdefault(value, {})[key] = None

    def upsert(self, obj: Obj) -> Obj | None:
        """Insert or replace ``obj``; returns the object it replaced, if any."""
        key = self._key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._reindex(key, obj)
        return old

    def delete(self, key: str) -> Obj | None:
        """Remove ``key``; returns the removed object, if it was there."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(self, objs: Iterable[Obj]) -> None:
        """Make the store hold exactly ``objs``."""
        self._items = {self._key(o): o for o in objs}
        for name, func in self._indexers.items():
            index: dict[str, dict[str, None]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in func(obj):
                    index.setdefault(value, {})[key] = None

    def _reindex(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                index.setdefault(value, {})[key] = None

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                bucket = index.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del index[value]
