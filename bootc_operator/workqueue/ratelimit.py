"""Rate limiters for requeues (client-go ``workqueue.TypedRateLimiter``).

A rate limiter answers ``when(key)``: how long to wait before the key may be
queued again (each call counts as one more failure/request), ``forget(key)``:
stop tracking it (call on success), ``num_requeues(key)``.

- :class:`ItemExponentialFailureRateLimiter`: ``base * 2**failures``, capped.
- :class:`BucketRateLimiter`: one token bucket for all keys (``qps``,
  ``burst``); a reservation always succeeds and the delay is how long until
  the bucket would have refilled to cover it (``golang.org/x/time/rate``).
- :class:`MaxOfRateLimiter`: asks every limiter, waits the longest.
- :func:`default_controller_rate_limiter`: max of exponential 5 ms .. 1000 s
  and a 10 qps / burst 100 bucket, as client-go's ``DefaultControllerRateLimiter``.

All take time from an injectable :class:`~bootc_operator.workqueue.clock.Clock`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from bootc_operator.workqueue.clock import Clock, RealClock


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float: ...

    def forget(self, key: Hashable) -> None: ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        if exp >= 64:  # 2**64 * base overflows any sane cap
            return self.cap
        return min(self.cap, self.base * 2.0**exp)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    def when(self, key: Hashable) -> float:
        now = self._clock.now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one rate limiter")
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max([lim.when(key) for lim in self.limiters])  # every limiter counts the call

    def forget(self, key: Hashable) -> None:
        for lim in self.limiters:
            lim.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(lim.num_requeues(key) for lim in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock),
    )
