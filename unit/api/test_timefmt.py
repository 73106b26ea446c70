"""Wire timestamps (bootc_operator.api.timefmt) and the one Node Ready reader
(bootc_operator.api.conditions.node_ready_status)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from bootc_operator.api.conditions import node_ready_status
from bootc_operator.api.timefmt import micro_time, now_rfc3339, parse_time

T = dt.datetime(2026, 11, 21, 10, 0, 5, 123456, tzinfo=dt.UTC)


def test_metav1_time_has_whole_seconds_in_utc() -> None:
    assert now_rfc3339(T) == "2026-11-21T10:00:05Z"
    cet = T.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert now_rfc3339(cet) == "2026-11-21T10:00:05Z"


def test_micro_time_keeps_microseconds() -> None:
    assert micro_time(T) == "2026-11-21T10:00:05.123456Z"


def test_both_forms_read_back() -> None:
    assert parse_time(micro_time(T)) == T
    assert parse_time(now_rfc3339(T)) == T.replace(microsecond=0)


def test_now_by_default() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    got = parse_time(now_rfc3339())
    assert got is not None and before <= got <= dt.datetime.now(dt.UTC)


@pytest.mark.parametrize("text", [None, "", "yesterday", "2026-13-01T00:00:00Z"])
def test_absent_or_malformed_is_none(text: str | None) -> None:
    assert parse_time(text) is None


def node(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"conditions": list(conditions)}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (node({"type": "Ready", "status": "True"}), "True"),
        (
            node(
                {"type": "MemoryPressure", "status": "True"}, {"type": "Ready", "status": "False"}
            ),
            "False",
        ),
        (node({"type": "Ready", "status": "Unknown"}), "Unknown"),
        (node({"type": "MemoryPressure", "status": "True"}), None),
        ({"status": {}}, None),
        ({}, None),
        (None, None),
    ],
)
def test_node_ready_status(obj: dict[str, Any] | None, expected: str | None) -> None:
    assert node_ready_status(obj) == expected
