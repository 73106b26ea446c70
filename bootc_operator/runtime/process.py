"""The process shape both modes share: stop signals, the probe/metrics server, waiting.

``serve`` runs one mode's work: SIGTERM and SIGINT set a stop event, the probe and
metrics server is up for as long as the work runs, and afterwards (whatever
happened) the server stops before the API clients close, so a probe never
answers from a half-closed process. The work owns its own shutdown and returns
the exit code::

    async def work(stop: asyncio.Event) -> int:
        ...
        if not await unless_stopped(start_syncing(), stop):
            return 0
        ...

    return await serve(args, work, ready=..., healthy=..., close=(api.close,))

``wait_first`` and ``unless_stopped`` are the one way to wait for a task *or*
the stop signal, whichever comes first.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bootc_operator.runtime.httpserver import ProbeServer

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def wait_first(stop: asyncio.Event, *tasks: asyncio.Future[Any]) -> None:
    """Return once one of ``tasks`` is done or ``stop`` is set; the tasks keep running."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()


async def unless_stopped(task: asyncio.Future[Any], stop: asyncio.Event) -> bool:
    """Wait for ``task`` unless ``stop`` comes first; True if ``task`` finished.

    When the stop comes first the task is cancelled, and is gone when this returns.
    A task that finished is left for the caller to read (a lease acquired just
    as the stop came is still released by the caller's shutdown).
    """
    await wait_first(stop, task)
    if task.done():
        return True
    task.cancel()
    # asyncio.wait, not ``await task``: a cancellation of *this* task must propagate.
    await asyncio.wait([task])
    return False


async def serve(
    args: argparse.Namespace,
    work: Callable[[asyncio.Event], Awaitable[int]],
    *,
    ready: Callable[[], bool | str],
    healthy: Callable[[], bool | str] = lambda: True,
    close: Sequence[Callable[[], Awaitable[object]]] = (),
) -> int:
    """Run ``work(stop)`` with the probe/metrics server up; its exit code.

    ``args`` carries ``--metrics-bind-address`` and ``--health-probe-bind-address``;
    ``close`` (the API clients) runs in order once the server has stopped.
    """
    server = ProbeServer(ready=ready, healthy=healthy)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start(args.metrics_bind_address, args.health_probe_bind_address)
        return await work(stop)
    finally:
        await server.stop()
        for closer in close:
            await closer()
