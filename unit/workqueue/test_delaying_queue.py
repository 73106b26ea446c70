"""DelayingQueue: add_after ordering, earliest-wins, one timer, shutdown (fake clock)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from bootc_operator.workqueue import DelayingQueue, FakeClock, RealClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def q(clock: FakeClock, registry: CollectorRegistry) -> DelayingQueue[str]:
    return DelayingQueue("delaying", clock=clock, registry=registry)


def drain(q: DelayingQueue[str]) -> list[str]:
    out = []
    while (key := q.get_nowait()) is not None:
        out.append(key)
    return out


def test_key_becomes_ready_exactly_at_its_delay(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("a", 5.0)
    assert len(q) == 0 and q.waiting == 1
    clock.advance(4.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1 and q.waiting == 0
    assert drain(q) == ["a"]


def test_keys_come_out_in_ready_time_order(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("a", 3.0)
    q.add_after("b", 1.0)
    q.add_after("c", 2.0)
    q.add_after("d", 2.0)
    clock.advance(10.0)
    assert drain(q) == ["b", "c", "d", "a"]


def test_partial_advance_releases_only_due_keys(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("late", 10.0)
    q.add_after("soon", 1.0)
    clock.advance(1.0)
    assert drain(q) == ["soon"]
    clock.advance(8.0)
    assert drain(q) == []
    clock.advance(1.0)
    assert drain(q) == ["late"]


def test_earlier_ready_time_wins(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("a", 10.0)
    q.add_after("a", 2.0)
    assert q.waiting == 1
    clock.advance(2.0)
    assert drain(q) == ["a"]
    clock.advance(10.0)
    assert drain(q) == [], "the superseded later entry must not fire again"


def test_later_ready_time_does_not_postpone(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("a", 2.0)
    q.add_after("a", 10.0)
    clock.advance(2.0)
    assert drain(q) == ["a"]


def test_one_timer_for_all_waiting_keys(q: DelayingQueue[str], clock: FakeClock) -> None:
    for i in range(50):
        q.add_after(f"k{i}", 100.0 - i)
    assert q.waiting == 50
    assert clock.pending_timers == 1
    clock.advance(100.0)
    assert len(drain(q)) == 50
    assert clock.pending_timers == 0


def test_non_positive_delay_adds_now(q: DelayingQueue[str]) -> None:
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert drain(q) == ["a", "b"]


def test_ready_key_coalesces_with_queued_key(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add("a")
    q.add_after("a", 1.0)
    clock.advance(1.0)
    assert drain(q) == ["a"]


def test_key_ready_while_processing_waits_for_done(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add("a")
    assert q.get_nowait() == "a"
    q.add_after("a", 1.0)
    clock.advance(1.0)
    assert len(q) == 0 and q.is_dirty("a")
    q.done("a")
    assert drain(q) == ["a"]


def test_shutdown_drops_waiting_keys_and_timer(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("a", 1.0)
    q.shut_down()
    q.add_after("b", 1.0)
    assert q.waiting == 0 and clock.pending_timers == 0
    clock.advance(5.0)
    assert len(q) == 0


def test_every_add_after_counts_as_a_retry(
    q: DelayingQueue[str], registry: CollectorRegistry
) -> None:
    q.add_after("a", 1.0)
    q.add_after("a", 2.0)
    q.add_after("b", 0)
    assert registry.get_sample_value("workqueue_retries_total", {"name": "delaying"}) == 3


async def test_real_clock_delivers_to_a_waiting_getter() -> None:
    q: DelayingQueue[str] = DelayingQueue("real", clock=RealClock(), registry=CollectorRegistry())
    q.add_after("b", 0.02)
    q.add_after("a", 0.01)
    async with asyncio.timeout(10):  # a hang guard, not a timing assertion
        assert await q.get() == "a"
        assert await q.get() == "b"
    q.shut_down()
