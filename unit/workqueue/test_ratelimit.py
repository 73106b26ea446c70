"""Rate limiters: exponential per key, token bucket, max-of, and the rate-limiting queue."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from bootc_operator.workqueue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_per_key() -> None:
    lim = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [lim.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert lim.num_requeues("a") == 4
    assert lim.when("b") == 0.005, "keys are independent"
    lim.forget("a")
    assert lim.num_requeues("a") == 0
    assert lim.when("a") == 0.005


def test_exponential_is_capped() -> None:
    lim = ItemExponentialFailureRateLimiter(1.0, 10.0)
    assert [lim.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_exponential_default_reaches_cap_without_overflow() -> None:
    lim = ItemExponentialFailureRateLimiter()
    delays = [lim.when("a") for _ in range(2000)]
    assert delays[0] == 0.005
    assert delays[17] == 0.005 * 2**17  # 655.36 s, still below the cap
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0


def test_bucket_allows_burst_then_spaces_by_qps() -> None:
    clock = FakeClock()
    lim = BucketRateLimiter(qps=10.0, burst=3, clock=clock)
    assert [lim.when(k) for k in "abc"] == [0.0, 0.0, 0.0]
    assert lim.when("d") == pytest.approx(0.1)
    assert lim.when("e") == pytest.approx(0.2)
    clock.advance(0.2)  # refills two tokens: the debt is paid, the bucket is empty
    assert lim.when("f") == pytest.approx(0.1)
    assert lim.num_requeues("a") == 0
    lim.forget("a")  # no per-key state


def test_bucket_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    lim = BucketRateLimiter(qps=1.0, burst=2, clock=clock)
    clock.advance(3600.0)
    assert [lim.when("x") for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]


def test_max_of_takes_the_longest_and_asks_every_limiter() -> None:
    clock = FakeClock()
    exp = ItemExponentialFailureRateLimiter(1.0, 100.0)
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    lim = MaxOfRateLimiter(exp, bucket)
    assert lim.when("a") == 1.0  # exponential 1, bucket 0
    assert lim.when("b") == 1.0  # exponential 1, bucket 1
    assert lim.when("c") == 2.0  # exponential 1, bucket 2: the bucket dominates
    clock.advance(10.0)
    assert lim.when("a") == 2.0  # exponential 2, bucket 0: exponential dominates
    assert lim.num_requeues("a") == 2
    lim.forget("a")
    assert lim.num_requeues("a") == 0 and exp.num_requeues("a") == 0


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    lim = default_controller_rate_limiter(clock)
    assert lim.when("k0") == 0.005
    for i in range(1, 100):
        lim.when(f"k{i}")  # burst of 100 used up
    assert lim.when("k100") == pytest.approx(0.1)  # 10 qps
    assert lim.when("k0") == pytest.approx(0.2)  # bucket beats 0.01 s
    clock.advance(60.0)
    assert lim.when("k0") == 0.02  # bucket refilled; third failure of k0


def test_rate_limiting_queue_requeues_with_backoff_and_forgets() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        "rl", ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock, registry=registry
    )
    q.add_rate_limited("a")
    q.add_rate_limited("a")  # second failure: 2 s, but the earlier 1 s entry wins
    assert q.num_requeues("a") == 2
    clock.advance(1.0)
    assert q.get_nowait() == "a"
    q.done("a")
    q.add_rate_limited("a")  # third failure: 4 s
    clock.advance(3.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert registry.get_sample_value("workqueue_retries_total", {"name": "rl"}) == 3


def test_rate_limiting_queue_default_limiter_uses_the_queue_clock() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue("rl2", clock=clock, registry=CollectorRegistry())
    q.add_rate_limited("a")
    clock.advance(0.005)
    assert q.get_nowait() == "a"
