"""run_workers / process_next: forget on success, backoff on error, requeue-after, shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client import CollectorRegistry

from bootc_operator.workqueue import (
    FakeClock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    process_next,
    run_workers,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> RateLimitingQueue[str]:
    return RateLimitingQueue(
        "worker",
        ItemExponentialFailureRateLimiter(1.0, 60.0),
        clock=clock,
        registry=CollectorRegistry(),
    )


def reconciler(
    result: Callable[[str], float | None],
) -> tuple[Callable[[str], Awaitable[float | None]], list[str]]:
    calls: list[str] = []

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        return result(key)

    return reconcile, calls


async def test_success_forgets_the_key(q: RateLimitingQueue[str]) -> None:
    q.rate_limiter.when("a")
    q.rate_limiter.when("a")
    assert q.num_requeues("a") == 2
    reconcile, calls = reconciler(lambda _: None)
    q.add("a")
    assert await process_next(q, reconcile)
    assert calls == ["a"]
    assert q.num_requeues("a") == 0
    assert not q.is_processing("a") and len(q) == 0 and q.waiting == 0


async def test_exception_requeues_rate_limited_and_logs_the_key(
    q: RateLimitingQueue[str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(key: str) -> float | None:
        raise RuntimeError(f"boom {key}")

    reconcile, calls = reconciler(fail)
    q.add("a")
    with caplog.at_level(logging.ERROR):
        assert await process_next(q, reconcile)
    assert not q.is_processing("a")
    assert q.num_requeues("a") == 1 and q.waiting == 1
    [record] = [r for r in caplog.records if r.getMessage().startswith("reconcile failed")]
    assert record.__dict__["key"] == "a" and record.__dict__["queue"] == "worker"
    assert record.exc_info is not None and "boom a" in str(record.exc_info[1])
    clock.advance(0.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert await process_next(q, reconcile)  # second failure: 2 s
    clock.advance(1.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert calls == ["a", "a"]


async def test_requeue_after_is_honoured_and_forgets(
    q: RateLimitingQueue[str], clock: FakeClock
) -> None:
    q.rate_limiter.when("a")
    reconcile, _ = reconciler(lambda _: 30.0)
    q.add("a")
    assert await process_next(q, reconcile)
    assert q.num_requeues("a") == 0
    assert q.waiting == 1
    clock.advance(29.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert q.get_nowait() == "a"


async def test_process_next_reports_shutdown(q: RateLimitingQueue[str]) -> None:
    reconcile, calls = reconciler(lambda _: None)
    q.shut_down()
    assert not await process_next(q, reconcile)
    assert calls == []


async def test_workers_never_process_one_key_concurrently(q: RateLimitingQueue[str]) -> None:
    active: set[str] = set()
    overlaps: list[str] = []
    calls: list[str] = []
    started = {k: asyncio.Event() for k in "ab"}
    gate = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        if key in active:
            overlaps.append(key)
        active.add(key)
        calls.append(key)
        started[key].set()
        if calls.count(key) == 1:
            await gate.wait()
        active.discard(key)
        return None

    workers = asyncio.create_task(run_workers(q, reconcile, workers=4))
    q.add("a")
    await started["a"].wait()
    q.add("a")  # while "a" is in flight: deferred, not given to an idle worker
    q.add("b")
    await started["b"].wait()
    assert calls == ["a", "b"]
    assert q.is_processing("a") and q.is_dirty("a") and len(q) == 0
    gate.set()
    await q.shut_down_with_drain()
    async with asyncio.timeout(10):  # hang guard
        await workers
    assert overlaps == []
    assert sorted(calls) == ["a", "a", "b"]


async def test_shutdown_lets_in_flight_and_queued_work_finish(q: RateLimitingQueue[str]) -> None:
    gate = asyncio.Event()
    in_flight = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: str) -> float | None:
        if key == "slow":
            in_flight.set()
            await gate.wait()
        finished.append(key)
        return None

    workers = asyncio.create_task(run_workers(q, reconcile, workers=1))
    q.add("slow")
    await in_flight.wait()
    q.add("queued")
    drained = q.shut_down_with_drain()
    q.add("refused")
    assert not drained.done()
    gate.set()
    async with asyncio.timeout(10):  # hang guard
        await drained
        await workers
    assert finished == ["slow", "queued"]


async def test_cancelling_workers_cancels_reconcile_and_marks_done(
    q: RateLimitingQueue[str],
) -> None:
    in_flight = asyncio.Event()
    cancelled = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        in_flight.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    workers = asyncio.create_task(run_workers(q, reconcile, workers=2))
    q.add("a")
    await in_flight.wait()
    workers.cancel()
    with pytest.raises(asyncio.CancelledError):
        await workers
    assert cancelled.is_set()
    assert not q.is_processing("a")


async def test_run_workers_needs_a_worker(q: RateLimitingQueue[str]) -> None:
    reconcile, _ = reconciler(lambda _: None)
    with pytest.raises(ValueError, match="at least one"):
        await run_workers(q, reconcile, workers=0)
