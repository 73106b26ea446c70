"""One set of Prometheus collectors per registry (``per_registry``).

A library module (informers, workqueue) creates its collectors on first use for
the registry it is given and returns the same objects afterwards; ``None``
means prometheus-client's global registry. Tests pass their own
``CollectorRegistry`` so nothing collides. Kept apart so both packages can use
it without importing each other.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry

M = TypeVar("M")


class PerRegistry(Generic[M]):
    """``get(registry)``: ``build(registry)`` the first time, the same result afterwards."""

    def __init__(self, build: Callable[[CollectorRegistry], M]) -> None:
        self._build = build
        self._made: weakref.WeakKeyDictionary[CollectorRegistry, M] = weakref.WeakKeyDictionary()

    def __call__(self, registry: CollectorRegistry | None = None) -> M:
        reg = REGISTRY if registry is None else registry
        found = self._made.get(reg)
        if found is None:
            found = self._made[reg] = self._build(reg)
        return found


per_registry = PerRegistry
