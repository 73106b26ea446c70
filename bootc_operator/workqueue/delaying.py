"""A workqueue with delayed adds (client-go ``DelayingInterface``).

``add_after(key, delay)`` queues ``key`` once ``delay`` seconds have passed
(immediately if ``delay <= 0``). Waiting keys live in a heap ordered by ready
time, with one timer armed for the earliest; no task or timer per key. A key
already waiting keeps the earlier of its two ready times. Waiting keys are
separate from queued ones: when a key becomes ready it is ``add()``-ed and
coalesces as usual. ``shut_down()`` drops every waiting key.

Every ``add_after`` counts in ``workqueue_retries_total`` (as in client-go).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic

from prometheus_client import CollectorRegistry

from bootc_operator.workqueue.clock import Clock, TimerHandle
from bootc_operator.workqueue.queue import K, WorkQueue


class DelayingQueue(WorkQueue[K], Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(name, clock=clock, registry=registry)
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0

    def add_after(self, key: K, delay: float) -> None:
        if self.shutting_down:
            return
        self._m_retries.inc()
        if delay <= 0:
            self.add(key)
            return
        ready = self.clock.now() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready:
            return
        self._waiting[key] = ready
        heapq.heappush(self._heap, (ready, next(self._seq), key))
        self._arm()

    @property
    def waiting(self) -> int:
        """Keys waiting for their delay to pass."""
        return len(self._waiting)

    def shut_down(self) -> None:
        super().shut_down()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()
        self._waiting.clear()

    # ------------------------------------------------------------ internals

    def _head(self) -> float | None:
        """Earliest live ready time, dropping superseded heap entries on the way."""
        while self._heap:
            ready, _, key = self._heap[0]
            if self._waiting.get(key) == ready:
                return ready
            heapq.heappop(self._heap)
        return None

    def _arm(self) -> None:
        head = self._head()
        if head is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        if self._timer is not None:
            if self._timer_at <= head:
                return  # fires no later than needed; it re-arms itself
            self._timer.cancel()
        self._timer_at = head
        self._timer = self.clock.call_at(head, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.clock.now()
        while (head := self._head()) is not None and head <= now:
            _, _, key = heapq.heappop(self._heap)
            del self._waiting[key]
            self.add(key)
        self._arm()
