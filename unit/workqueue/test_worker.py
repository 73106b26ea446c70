"""run_workers / process_next: forget on success, backoff on error, requeue-after, shutdown;
the reconcile wrapper: controller-runtime's reconcile metrics, the conflict requeue."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from bootc_operator.kube import ApiError
from bootc_operator.workqueue import (
    CONFLICT_REQUEUE,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    instrumented,
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


def reconciles(controller: str, result: str) -> float | None:
    """One sample of the global registry's ``controller_runtime_reconcile_total``."""
    return REGISTRY.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller, "result": result}
    )


def all_reconciles() -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        for sample in metric.samples
        if sample.name == "controller_runtime_reconcile_total"
    )


async def test_instrumented_counts_results_and_requeues_a_conflict_soon(
    q: RateLimitingQueue[str], clock: FakeClock
) -> None:
    def outcome(key: str) -> float | None:
        if key == "conflict":
            raise ApiError(409, "Conflict", "the object has been modified")
        if key == "denied":
            raise ApiError(403, "Forbidden", "no")
        if key == "boom":
            raise RuntimeError("boom")
        return 30.0 if key == "later" else None

    reconcile, calls = reconciler(outcome)
    wrapped = instrumented("unit-results", reconcile)
    labels = {"controller": "unit-results"}
    # exported at 0 before any error, like controller-runtime's
    assert REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", labels) == 0
    keys = ["ok", "later", "conflict", "denied", "boom"]
    for key in keys:
        q.add(key)
    for _ in keys:
        assert await process_next(q, wrapped)
    assert calls == keys
    assert reconciles("unit-results", "success") == 1
    assert reconciles("unit-results", "requeue_after") == 1
    assert reconciles("unit-results", "requeue") == 1
    assert reconciles("unit-results", "error") == 2
    assert REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", labels) == 2
    assert REGISTRY.get_sample_value("controller_runtime_reconcile_time_seconds_count", labels) == 5
    # A conflict is no failure: no backoff, the key comes back after CONFLICT_REQUEUE.
    assert q.num_requeues("conflict") == 0
    assert q.num_requeues("denied") == 1 and q.num_requeues("boom") == 1
    clock.advance(CONFLICT_REQUEUE * 0.9)
    assert len(q) == 0
    clock.advance(CONFLICT_REQUEUE * 0.2)  # the others wait for 1 s or longer
    assert q.get_nowait() == "conflict"
    assert len(q) == 0


async def one_pass(q: RateLimitingQueue[str], controller: str | None) -> None:
    """Run workers on ``q`` (named ``controller`` or not) until key "a" was reconciled once."""
    seen = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        seen.set()
        return None

    workers = asyncio.create_task(run_workers(q, reconcile, controller=controller))
    q.add("a")
    async with asyncio.timeout(10):  # hang guard
        await seen.wait()
        await q.shut_down_with_drain()
        await workers


async def test_run_workers_instruments_a_named_controller_only(
    q: RateLimitingQueue[str], clock: FakeClock
) -> None:
    before = all_reconciles()
    await one_pass(q, None)
    assert all_reconciles() == before
    named = RateLimitingQueue[str]("named", clock=clock, registry=CollectorRegistry())
    await one_pass(named, "unit-named")
    assert reconciles("unit-named", "success") == 1
    assert all_reconciles() == before + 1
