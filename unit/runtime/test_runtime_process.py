"""The process shape both modes share (bootc_operator.runtime.process): stop signals,
the probe server's lifetime around the work, waiting for a task or the stop."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import aiohttp
import pytest

from bootc_operator.runtime.process import serve, unless_stopped, wait_first
from hack.testenv.controlplane import free_port


def probe_args(port: int) -> argparse.Namespace:
    return argparse.Namespace(
        metrics_bind_address="0", health_probe_bind_address=f"127.0.0.1:{port}"
    )


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_wait_first_returns_on_the_task_or_the_stop_and_cancels_nothing() -> None:
    stop = asyncio.Event()
    done = asyncio.create_task(asyncio.sleep(0))
    await wait_first(stop, done)
    assert done.done()

    running = asyncio.create_task(asyncio.Event().wait())
    stop.set()
    await wait_first(stop, running)
    assert not running.done(), "the task keeps running"
    running.cancel()


async def test_unless_stopped_true_when_the_task_finished() -> None:
    stop = asyncio.Event()
    assert await unless_stopped(asyncio.create_task(asyncio.sleep(0)), stop) is True


async def test_unless_stopped_cancels_the_task_when_the_stop_comes_first() -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(asyncio.Event().wait())
    asyncio.get_running_loop().call_soon(stop.set)
    assert await unless_stopped(task, stop) is False
    assert task.cancelled(), "the task is gone when unless_stopped returns"


async def test_serve_runs_the_work_with_probes_up_and_sigterm_stops_it() -> None:
    port = free_port()
    closed: list[str] = []
    seen: list[tuple[int, str]] = []

    async def work(stop: asyncio.Event) -> int:
        seen.append(await get(f"http://127.0.0.1:{port}/readyz"))
        os.kill(os.getpid(), signal.SIGTERM)
        await stop.wait()
        return 3

    async def close(name: str) -> None:
        # The server is down before the API clients close.
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(f"http://127.0.0.1:{port}/healthz")
        closed.append(name)

    code = await serve(
        probe_args(port),
        work,
        ready=lambda: "caches not synced",
        close=(lambda: close("api"), lambda: close("watch api")),
    )
    assert code == 3
    assert seen == [(503, "caches not synced\n")]
    assert closed == ["api", "watch api"]


async def test_serve_stops_the_server_and_closes_when_the_work_fails() -> None:
    port = free_port()
    closed: list[str] = []

    async def work(_stop: asyncio.Event) -> int:
        raise RuntimeError("boom")

    async def close() -> None:
        closed.append("api")

    with pytest.raises(RuntimeError, match="boom"):
        await serve(probe_args(port), work, ready=lambda: True, close=(close,))
    assert closed == ["api"]
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(f"http://127.0.0.1:{port}/healthz")
