"""A delaying workqueue that spaces out retries (client-go ``RateLimitingInterface``).

``add_rate_limited(key)`` = ``add_after(key, limiter.when(key))``;
``forget(key)`` resets the key's failure history (call it when a key was
processed successfully); ``num_requeues(key)`` tells how often it failed.
The default limiter is :func:`~bootc_operator.workqueue.ratelimit.default_controller_rate_limiter`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic

from prometheus_client import CollectorRegistry

from bootc_operator.workqueue.clock import Clock
from bootc_operator.workqueue.delaying import DelayingQueue
from bootc_operator.workqueue.queue import K
from bootc_operator.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[K], Generic[K]):
    def __init__(
        self,
        name: str,
        rate_limiter: RateLimiter | None = None,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(name, clock=clock, registry=registry)
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(self.clock)

    def add_rate_limited(self, key: K) -> None:
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: Hashable) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self.rate_limiter.num_requeues(key)
