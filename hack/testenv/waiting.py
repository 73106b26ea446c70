"""Waiting with a deadline: the only way tests synchronise with the system under test.

``wait_for`` polls a predicate (plain function or coroutine function) until it
returns something truthy, and fails with an ``AssertionError`` naming what was
awaited, the last value seen and the last exception ignored. Never use a bare
``asyncio.sleep`` to "let things settle".
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]],
    timeout: float,  # noqa: ASYNC109
    what: str,
    *,
    interval: float = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T],
    timeout: float,  # noqa: ASYNC109
    what: str,
    *,
    interval: float = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float,  # noqa: ASYNC109 (a polling deadline, not a cancellation scope)
    what: str,
    *,
    interval: float = 0.1,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """Poll ``predicate`` until it returns a truthy value and return that value.

    ``predicate`` may be sync or async. Exceptions of the types in ``ignore``
    count as "not yet" (e.g. ``ApiException`` while an object does not exist);
    others propagate. Raises ``AssertionError`` mentioning ``what`` after
    ``timeout`` seconds. The predicate is always evaluated at least once, and
    once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    last_error: BaseException | None = None
    while True:
        expired = time.monotonic() >= deadline
        try:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            last, last_error = result, None
        except ignore as e:
            last_error = e
        if expired:
            detail = f"last error: {last_error!r}" if last_error else f"last value: {last!r}"
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} ({detail})")
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
