"""kubectl bootc's retry of 429 answers (``bootc_operator.kubectl.cluster``).

Right after an apiserver restart or a CRD install the apiserver answers a list of
the custom resource with ``429 TooManyRequests: storage is (re)initializing``;
kubectl waits and asks again, and so must the plugin, a bounded number of times."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.kube.lite import Access, LiteClient
from bootc_operator.kube.resources import BOOTC_NODES
from bootc_operator.kube.rest import ApiError
from bootc_operator.kubectl import cluster
from bootc_operator.kubectl.cluster import (
    LONGEST_RETRY_AFTER,
    RETRIES_ON_429,
    Cluster,
    PluginError,
    retry_delay,
)


def status_429(retry_after: Any = None) -> ApiError:
    body: dict[str, Any] = {"kind": "Status", "reason": "TooManyRequests"}
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return ApiError(429, "TooManyRequests", "storage is (re)initializing", body)


@pytest.mark.parametrize(
    ("err", "attempt", "delay"),
    [
        (status_429(), 0, 1.0),
        (status_429(2), 0, 2.0),
        (status_429(2), RETRIES_ON_429 - 1, 2.0),
        (status_429(2), RETRIES_ON_429, None),
        (status_429(3600), 0, LONGEST_RETRY_AFTER),
        (status_429(0), 0, 1.0),
        (status_429(-4), 0, 1.0),
        (status_429("soon"), 0, 1.0),
        (status_429(True), 0, 1.0),
        (ApiError(429, "TooManyRequests", "no Status body"), 0, 1.0),
        (ApiError(403, "Forbidden", "no"), 0, None),
        (ApiError(500, "InternalError", "boom"), 0, None),
        (ApiError(503, "ServiceUnavailable", "down"), 0, None),
    ],
)
def test_retry_delay(err: ApiError, attempt: int, delay: float | None) -> None:
    assert retry_delay(err, attempt) == delay


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []

    async def record(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(cluster, "pause", record)
    return recorded


def answers(*outcomes: ApiError | str) -> tuple[list[int], Any]:
    """A request that fails with the given errors in turn, then returns the string."""
    calls: list[int] = []

    async def request() -> str:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    return calls, request


async def test_a_429_is_sent_again_after_the_wait_it_asks_for(waits: list[float]) -> None:
    calls, request = answers(status_429(2), status_429(), "items")
    got = await Cluster(LiteClient(Access(server="https://127.0.0.1:1")))._call(
        "GET", BOOTC_NODES, None, request
    )
    assert got == "items" and len(calls) == 3 and waits == [2.0, 1.0]


async def test_a_429_that_lasts_is_one_line_naming_it(waits: list[float]) -> None:
    calls, request = answers(*[status_429()] * (RETRIES_ON_429 + 1))
    with pytest.raises(PluginError) as failed:
        await Cluster(LiteClient(Access(server="https://127.0.0.1:1")))._call(
            "GET", BOOTC_NODES, None, request
        )
    assert len(calls) == RETRIES_ON_429 + 1 and len(waits) == RETRIES_ON_429
    assert str(failed.value) == (
        "cannot list bootcnodes.node.bootc.dev: 429 TooManyRequests: storage is (re)initializing"
    )


async def test_other_errors_are_not_sent_again(waits: list[float]) -> None:
    calls, request = answers(ApiError(403, "Forbidden", "nope"), "never")
    with pytest.raises(PluginError):
        await Cluster(LiteClient(Access(server="https://127.0.0.1:1")))._call(
            "GET", BOOTC_NODES, None, request
        )
    assert len(calls) == 1 and waits == []
