"""Time as the workqueue and rate limiters see it: an injectable clock.

``Clock`` has two operations: ``now()`` (monotonic seconds) and
``call_at(when, callback)`` (run ``callback`` once ``now() >= when``; returns a
handle with ``cancel()``). :class:`RealClock` maps them onto the running event
loop; :class:`FakeClock` only moves when a test calls ``advance()``, which runs
every callback that became due, in deadline order, before returning — so a test
observes the effect of time passing synchronously, without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class RealClock:
    """``time.monotonic`` and the running loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - time.monotonic()), callback)


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that stands still until ``advance()``; for tests."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward, firing due timers in order (time steps to each deadline)."""
        if seconds < 0:
            raise ValueError("time does not run backwards")
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback()
        self._now = target

    @property
    def pending_timers(self) -> int:
        """Armed, not cancelled timers (a test can assert there is exactly one)."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)
