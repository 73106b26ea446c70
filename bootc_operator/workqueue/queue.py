"""The basic workqueue (client-go ``workqueue.Typed``), for asyncio.

Interface: ``add(key)``, ``await get() -> key``, ``done(key)``, ``len()``,
``shut_down()``, ``await shut_down_with_drain()``, ``shutting_down``,
``is_processing(key)``, ``is_dirty(key)``, ``get_nowait()``.

Guarantees, as in client-go:

- A key is handed out by ``get()`` to one worker at a time: until that worker
  calls ``done(key)`` the key is *processing* and no other ``get()`` returns it.
- Adding a key that is already queued is a no-op (duplicates coalesce).
- Adding a key that is processing marks it *dirty*; ``done(key)`` then queues
  it again, once, however many adds happened meanwhile.
- Keys come out in the order they were first queued.
- After ``shut_down()`` adds are ignored; ``get()`` still hands out keys that
  were queued and raises :class:`ShutDown` once the queue is empty.
  ``shut_down_with_drain()`` additionally waits until no key is processing.

Every operation except ``get()``/``shut_down_with_drain()`` is synchronous, so
event handlers can enqueue from their callbacks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry

from bootc_operator.workqueue.clock import Clock, RealClock
from bootc_operator.workqueue.metrics import workqueue_metrics

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """``get()`` on a queue that is shut down and empty."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name = name
        self.clock: Clock = clock or RealClock()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        # metrics bookkeeping
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        m = workqueue_metrics(registry)
        self._m_depth = m.depth.labels(name=name)
        self._m_adds = m.adds.labels(name=name)
        self._m_queue_duration = m.queue_duration.labels(name=name)
        self._m_work_duration = m.work_duration.labels(name=name)
        self._m_retries = m.retries.labels(name=name)
        self._m_unfinished = m.unfinished_work.labels(name=name)
        self._m_longest = m.longest_running.labels(name=name)
        self._m_unfinished.set_function(self._unfinished_seconds)
        self._m_longest.set_function(self._longest_running_seconds)

    # ------------------------------------------------------------ interface

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._m_adds.inc()
        self._m_depth.inc()
        self._added_at.setdefault(key, self.clock.now())
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    async def get(self) -> K:
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                woken = waiter.done() and not waiter.cancelled()
                waiter.cancel()
                if waiter in self._getters:
                    self._getters.remove(waiter)
                if woken and self._queue:
                    self._wake_one()  # pass our wake-up on to another getter
                raise
        return self._pop()

    def get_nowait(self) -> K | None:
        """A queued key, or ``None`` if none is queued (never waits)."""
        return self._pop() if self._queue else None

    def done(self, key: K) -> None:
        started = self._started_at.pop(key, None)
        if started is not None:
            self._m_work_duration.observe(self.clock.now() - started)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()
        elif not self._processing:
            for f in self._drainers:
                if not f.done():
                    f.set_result(None)
            self._drainers.clear()

    def shut_down(self) -> None:
        """Stop intake; blocked ``get()`` calls return queued keys or raise ShutDown."""
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def shut_down_with_drain(self) -> asyncio.Future[None]:
        """``shut_down()`` now; the returned future resolves once no key is processing.

        Use as ``await queue.shut_down_with_drain()`` (needs a running loop).
        """
        self.shut_down()
        drained = asyncio.get_running_loop().create_future()
        if self._processing:
            self._drainers.append(drained)
        else:
            drained.set_result(None)
        return drained

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys queued and not handed out yet."""
        return len(self._queue)

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def is_dirty(self, key: K) -> bool:
        """Queued, or re-added while processing (will be queued on ``done``)."""
        return key in self._dirty

    # ------------------------------------------------------------ internals

    def _pop(self) -> K:
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = self.clock.now()
        self._m_depth.dec()
        self._started_at[key] = now
        added = self._added_at.pop(key, None)
        if added is not None:
            self._m_queue_duration.observe(now - added)
        return key

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _unfinished_seconds(self) -> float:
        now = self.clock.now()
        return sum(now - t for t in self._started_at.values())

    def _longest_running_seconds(self) -> float:
        now = self.clock.now()
        return max((now - t for t in self._started_at.values()), default=0.0)
