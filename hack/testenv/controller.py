"""The real controller in-process: ``running_controller(api)``.

Runs :class:`bootc_operator.controller.Controller` (informers, queues, reconcilers;
no leader election) on the caller's event loop, for the e2e tests and
``hack/bench_queries.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.controller import Controller

SYNC_DEADLINE = 60.0


@contextlib.asynccontextmanager
async def running_controller(
    api: ApiClient, workers: int = 2, **options: Any
) -> AsyncIterator[Controller]:
    """The real controller on this loop; ``options`` go to :class:`Controller`."""
    ctl = Controller(api, identity=f"test-{uuid.uuid4().hex[:6]}", workers=workers, **options)
    ctl.factory.start()
    try:
        async with asyncio.timeout(SYNC_DEADLINE):
            await ctl.factory.wait_for_cache_sync()
    except TimeoutError:
        await ctl.factory.stop()
        raise AssertionError(f"controller caches not synced within {SYNC_DEADLINE}s") from None
    task = asyncio.create_task(ctl.run_workers())
    try:
        yield ctl
    finally:
        await ctl.shutdown()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await ctl.factory.stop()
