"""Maintenance windows: parsing and open/next decisions at given instants (a fake clock)."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bootc_operator.policy.windows import (
    DAYS,
    describe_opening,
    local_instant,
    parse_duration,
    parse_windows,
    window_state,
)

UTC = dt.UTC
NY = ZoneInfo("America/New_York")


def windows(*raw: dict[str, Any]) -> Any:
    parsed, problems = parse_windows(raw)
    assert not problems, problems
    return parsed


def at(text: str, zone: ZoneInfo | dt.timezone = UTC) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=zone)


def test_no_windows_is_always_open() -> None:
    state = window_state([], at("2026-11-23T12:00"))
    assert state.open and state.next_opening is None


@pytest.mark.parametrize("day", DAYS)
def test_every_weekday_opens_only_on_its_day(day: str) -> None:
    w = windows({"days": [day], "start": "10:00", "duration": "2h"})
    # 2026-11-23 is a Monday
    for offset, name in enumerate(DAYS):
        date = dt.date(2026, 11, 23) + dt.timedelta(days=offset)
        inside = window_state(w, at(f"{date}T11:00"))
        assert inside.open is (name == day), (day, name)
        before = window_state(w, at(f"{date}T09:59"))
        assert not before.open
        if name == day:
            assert before.next_opening == at(f"{date}T10:00")
            assert inside.closes_at == at(f"{date}T12:00")
        assert not window_state(w, at(f"{date}T12:00")).open  # the end is exclusive


def test_an_empty_day_list_means_every_day() -> None:
    w = windows({"days": [], "start": "01:00", "duration": "30m"})
    for offset in range(7):
        date = dt.date(2026, 11, 23) + dt.timedelta(days=offset)
        assert window_state(w, at(f"{date}T01:15")).open
        assert not window_state(w, at(f"{date}T01:30")).open


def test_a_window_crossing_midnight_belongs_to_the_day_it_starts() -> None:
    w = windows({"days": ["Fri"], "start": "22:00", "duration": "4h"})
    assert window_state(w, at("2026-11-27T23:00")).open  # Friday night
    assert window_state(w, at("2026-11-28T01:59")).open  # Saturday, still Friday's window
    assert not window_state(w, at("2026-11-28T02:00")).open
    assert not window_state(w, at("2026-11-28T23:00")).open  # Saturday night: no window
    # Thursday 23:30: closed, the next opening is Friday 22:00
    state = window_state(w, at("2026-11-26T23:30"))
    assert not state.open and state.next_opening == at("2026-11-27T22:00")


def test_time_zones_are_the_windows_own() -> None:
    w = windows({"start": "09:00", "duration": "1h", "timeZone": "Asia/Tokyo"})
    assert window_state(w, at("2026-11-23T00:30")).open  # 09:30 in Tokyo
    state = window_state(w, at("2026-11-23T01:00"))
    assert state.next_opening == at("2026-11-24T00:00")
    assert describe_opening(state) == (
        "the next maintenance window opens Tue 2026-11-24 09:00 Asia/Tokyo"
    )


def test_dst_spring_forward_a_missing_start_opens_at_the_next_valid_instant() -> None:
    # 2026-03-08: New York's clocks jump from 02:00 EST to 03:00 EDT
    assert local_instant(dt.date(2026, 3, 8), dt.time(2, 30), NY) == at("2026-03-08T07:00")
    w = windows({"start": "02:30", "duration": "1h", "timeZone": "America/New_York"})
    state = window_state(w, at("2026-03-08T06:59"))
    assert not state.open and state.next_opening == at("2026-03-08T07:00")  # 03:00 EDT
    assert window_state(w, at("2026-03-08T07:30")).open
    assert not window_state(w, at("2026-03-08T08:00")).open  # one real hour
    # the day before and after, 02:30 exists as usual
    assert local_instant(dt.date(2026, 3, 9), dt.time(2, 30), NY) == at("2026-03-09T06:30")


def test_dst_fall_back_an_ambiguous_start_opens_at_its_first_occurrence() -> None:
    # 2026-11-01: 01:00-02:00 happens twice in New York (EDT, then EST)
    assert local_instant(dt.date(2026, 11, 1), dt.time(1, 30), NY) == at("2026-11-01T05:30")
    w = windows({"start": "01:30", "duration": "2h", "timeZone": "America/New_York"})
    assert window_state(w, at("2026-11-01T05:30")).open
    assert window_state(w, at("2026-11-01T07:29")).open  # two real hours, across fall back
    assert not window_state(w, at("2026-11-01T07:30")).open


def test_overlapping_windows_open_while_either_is_open() -> None:
    w = windows(
        {"days": ["Mon"], "start": "10:00", "duration": "2h"},
        {"days": ["Mon"], "start": "11:00", "duration": "2h"},
    )
    assert window_state(w, at("2026-11-23T11:30")).closes_at == at("2026-11-23T13:00")
    assert window_state(w, at("2026-11-23T12:30")).open
    assert not window_state(w, at("2026-11-23T13:00")).open
    state = window_state(w, at("2026-11-23T09:00"))
    assert state.next_opening == at("2026-11-23T10:00")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4h", dt.timedelta(hours=4)), ("90m", dt.timedelta(minutes=90)), ("1h30m", 5400.0)],
)
def test_durations(text: str, expected: dt.timedelta | float) -> None:
    got = parse_duration(text)
    assert got is not None
    if isinstance(expected, float):
        assert got.total_seconds() == expected
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("window", "fragment"),
    [
        ({"start": "25:00", "duration": "1h"}, 'maintenanceWindows[0].start: "25:00"'),
        ({"start": "9:00", "duration": "1h"}, "start"),
        ({"start": "09:00", "duration": "1d"}, "duration"),
        ({"start": "09:00", "duration": "0h"}, "duration"),
        ({"start": "09:00", "duration": "169h"}, "duration"),
        ({"start": "09:00", "duration": ""}, "duration"),
        ({"start": "09:00", "duration": "1h", "days": ["Monday"]}, '"Monday" is not one of'),
        (
            {"start": "09:00", "duration": "1h", "timeZone": "Mars/Base"},
            'maintenanceWindows[0].timeZone: "Mars/Base" is not a known IANA time zone',
        ),
    ],
)
def test_bad_windows_are_named(window: dict[str, Any], fragment: str) -> None:
    parsed, problems = parse_windows([window])
    assert not parsed
    assert any(fragment in p for p in problems), problems


def test_no_window_ahead() -> None:
    state = window_state([], at("2026-11-23T00:00"))
    assert describe_opening(state) == "no maintenance window is ahead"
