"""Capped exponential backoff with jitter, as a small pure state machine.

``next()`` returns the next delay: ``base * (1 + jitter * rand())`` capped at
``cap``, then doubles ``base`` (also capped); ``reset()`` starts over. The
defaults are client-go's reflector backoff (800 ms doubling up to 30 s, jitter
1.0). ``rand`` is injectable so tests get exact numbers.
"""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or cap < initial or factor < 1 or jitter < 0:
            raise ValueError("need 0 < initial <= cap, factor >= 1, jitter >= 0")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self._base = initial
        self.failures = 0

    def next(self) -> float:
        delay = min(self.cap, self._base * (1.0 + self.jitter * self._rand()))
        self._base = min(self.cap, self._base * self.factor)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self._base = self.initial
        self.failures = 0
