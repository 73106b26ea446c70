"""Read-your-writes over an informer cache (client-go's ``MutationCache`` idea).

A reconciler that just wrote an object must not decide again from the stale
cached copy: right after taking a reboot slot, the next pass would otherwise
see the slot as free and take another one. Every successful write records the
server's answer here; reads return it until the informer has caught up (its
copy has the same or a newer resourceVersion), then the entry is dropped.
Deletions are recorded as tombstones the same way.

resourceVersions are compared as integers (etcd revisions); an unparsable one
is treated as "caught up" so the overlay can never hide the cache for long.
Entries also expire after ``ttl`` seconds as a safety net.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bootc_operator.informers.objects import Obj


def _rv(obj: Obj | None) -> int | None:
    if obj is None:
        return None
    try:
        return int(obj.get("metadata", {}).get("resourceVersion", ""))
    except ValueError:
        return None


class Overlay:
    def __init__(self, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[str, tuple[Obj | None, int, float]] = {}
        self._ttl = ttl
        self._clock = clock

    def wrote(self, key: str, obj: Obj) -> None:
        rv = _rv(obj)
        if rv is not None:
            self._entries[key] = (obj, rv, self._clock())

    def deleted(self, key: str, last_rv: str | None = None) -> None:
        try:
            rv = int(last_rv or "")
        except ValueError:
            rv = 0
        self._entries[key] = (None, rv, self._clock())

    def read(self, key: str, cached: Obj | None) -> Obj | None:
        entry = self._entries.get(key)
        if entry is None:
            return cached
        obj, rv, at = entry
        if self._clock() - at > self._ttl:
            del self._entries[key]
            return cached
        if obj is None:  # we deleted it
            cached_rv = _rv(cached)
            if cached is None or (cached_rv is not None and cached_rv > rv > 0):
                # gone from the cache, or re-created since: the cache is right again
                del self._entries[key]
                return cached
            return None
        cached_rv = _rv(cached)
        if cached_rv is None and cached is not None:
            del self._entries[key]
            return cached
        if cached_rv is not None and cached_rv >= rv:
            del self._entries[key]
            return cached
        return obj

    def __len__(self) -> int:
        return len(self._entries)
