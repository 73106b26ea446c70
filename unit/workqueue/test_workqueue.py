"""WorkQueue: client-go semantics (dedupe, one worker per key, deferred re-adds, shutdown)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from bootc_operator.workqueue import FakeClock, ShutDown, WorkQueue


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(registry: CollectorRegistry, clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue("test", clock=clock, registry=registry)


def drain(q: WorkQueue[str]) -> list[str]:
    out = []
    while (key := q.get_nowait()) is not None:
        out.append(key)
    return out


def test_duplicates_coalesce_and_order_is_first_add(q: WorkQueue[str]) -> None:
    for key in ["a", "b", "a", "c", "b", "a"]:
        q.add(key)
    assert len(q) == 3
    assert drain(q) == ["a", "b", "c"]


def test_key_is_not_handed_out_twice_while_processing(q: WorkQueue[str]) -> None:
    q.add("a")
    assert q.get_nowait() == "a"
    assert q.is_processing("a")
    q.add("a")
    assert len(q) == 0, "a re-add while processing must wait for done()"
    assert q.get_nowait() is None
    assert q.is_dirty("a")
    q.done("a")
    assert not q.is_processing("a")
    assert q.get_nowait() == "a"


def test_many_re_adds_during_processing_yield_one_more_run(q: WorkQueue[str]) -> None:
    q.add("a")
    assert q.get_nowait() == "a"
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert drain(q) == ["b"]
    q.done("a")
    assert drain(q) == ["a"]
    q.done("a")
    q.done("b")
    assert drain(q) == []


def test_done_without_re_add_forgets_the_key(q: WorkQueue[str]) -> None:
    q.add("a")
    assert q.get_nowait() == "a"
    q.done("a")
    assert not q.is_dirty("a") and not q.is_processing("a")
    assert len(q) == 0
    q.add("a")
    assert len(q) == 1


def test_other_keys_flow_while_one_is_processing(q: WorkQueue[str]) -> None:
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("b")
    q.add("c")
    assert drain(q) == ["b", "c"]


async def test_blocked_get_wakes_on_add(q: WorkQueue[str]) -> None:
    getter = asyncio.create_task(q.get())
    q.add("x")
    assert await getter == "x"


async def test_each_waiting_getter_gets_a_distinct_key(q: WorkQueue[str]) -> None:
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    for key in ["a", "b", "c", "a"]:
        q.add(key)
    assert sorted(await asyncio.gather(*getters)) == ["a", "b", "c"]


async def test_cancelled_getter_does_not_swallow_a_key(q: WorkQueue[str]) -> None:
    cancelled = asyncio.create_task(q.get())
    other = asyncio.create_task(q.get())
    cancelled.cancel()
    q.add("a")
    assert await other == "a"
    with pytest.raises(asyncio.CancelledError):
        await cancelled


async def test_shutdown_ignores_adds_hands_out_queued_keys_then_raises(
    q: WorkQueue[str],
) -> None:
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("c")
    assert q.shutting_down
    assert await q.get() == "a"
    assert await q.get() == "b"
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_wakes_blocked_getters(q: WorkQueue[str]) -> None:
    getters = [asyncio.create_task(q.get()) for _ in range(2)]
    q.shut_down()
    for g in getters:
        with pytest.raises(ShutDown):
            await g


async def test_shutdown_with_drain_waits_for_in_flight_work(q: WorkQueue[str]) -> None:
    q.add("a")
    q.add("b")
    assert q.get_nowait() == "a"
    assert q.get_nowait() == "b"
    drained = q.shut_down_with_drain()
    assert q.shutting_down
    assert not drained.done()
    q.add("c")
    assert len(q) == 0, "no intake after shutdown"
    q.done("a")
    assert not drained.done(), "b is still processing"
    q.done("b")
    assert drained.done()
    await drained


async def test_shutdown_with_drain_of_an_idle_queue_is_immediate(q: WorkQueue[str]) -> None:
    await q.shut_down_with_drain()


async def test_dirty_key_is_requeued_on_done_even_after_shutdown(q: WorkQueue[str]) -> None:
    # client-go: the re-add happened before shutdown, so it is not lost.
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    q.shut_down()
    q.done("a")
    assert await q.get() == "a"
    q.done("a")
    with pytest.raises(ShutDown):
        await q.get()


def test_metrics(q: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock) -> None:
    def sample(name: str) -> float | None:
        return registry.get_sample_value(name, {"name": "test"})

    q.add("a")
    q.add("a")
    q.add("b")
    assert sample("workqueue_adds_total") == 2
    assert sample("workqueue_depth") == 2
    clock.advance(2.0)
    assert q.get_nowait() == "a"
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert sample("workqueue_queue_duration_seconds_sum") == 2.0
    clock.advance(3.0)
    assert q.get_nowait() == "b"
    clock.advance(1.0)
    assert sample("workqueue_unfinished_work_seconds") == 4.0 + 1.0
    assert sample("workqueue_longest_running_processor_seconds") == 4.0
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_work_duration_seconds_sum") == 4.0
    assert sample("workqueue_longest_running_processor_seconds") == 1.0
    q.done("b")
    assert sample("workqueue_unfinished_work_seconds") == 0.0
    assert sample("workqueue_longest_running_processor_seconds") == 0.0
    assert sample("workqueue_depth") == 0
