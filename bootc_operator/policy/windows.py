"""Maintenance windows (``spec.rollout.maintenanceWindows``): when new reboot slots may start.

Pure functions over the wire list and an aware ``now``:

- ``parse_windows`` validates every window (days, ``start`` "HH:MM", ``duration``
  like "4h", "90m" or "1h30m", IANA ``timeZone``, default UTC) and returns the
  problems naming the window ("maintenanceWindows[1].timeZone: ...").
- ``window_state(windows, now)`` says whether ``now`` is inside a window, until
  when, and when the next one opens.

Rules (docs/policies.md, `maintenanceWindows`):

- A window belongs to the day it *starts* on, in its time zone: a Fri 22:00 window
  of 4h runs until Sat 02:00. An empty ``days`` list means every day.
- The end is ``start + duration`` in real time: a 4h window is 4 hours long even
  across a DST change.
- A start time that does not exist that day (spring forward: 02:30 in
  America/New_York) starts at the next valid instant (03:00, when the clocks
  jump); a start time that exists twice (fall back: 01:30) starts at the first.
- No windows at all: always open (the behaviour without the field).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bootc_operator.api import constants as c
from bootc_operator.api import defaults

DAYS = c.WINDOW_DAYS
START_PATTERN = c.WINDOW_START_PATTERN
MAX_DURATION = dt.timedelta(days=7)
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?$")


@dataclass(frozen=True, slots=True)
class Window:
    days: frozenset[int]  # 0 = Monday; empty = every day
    start: dt.time
    duration: dt.timedelta
    zone: ZoneInfo

    def opening(self, day: dt.date) -> dt.datetime:
        """The instant the window of local date ``day`` opens (see the DST rule)."""
        return local_instant(day, self.start, self.zone)

    def applies(self, day: dt.date) -> bool:
        return not self.days or day.weekday() in self.days


@dataclass(frozen=True, slots=True)
class WindowState:
    open: bool = True
    closes_at: dt.datetime | None = None  # when open: the end of the current window
    next_opening: dt.datetime | None = None  # when closed: the next window's start
    zone: ZoneInfo | None = None  # the next window's time zone, for messages


ALWAYS_OPEN = WindowState()


def parse_duration(text: str) -> dt.timedelta | None:
    """ "4h", "90m", "1h30m" → timedelta; None when malformed."""
    match = _DURATION.match(text or "")
    if not text or match is None:
        return None
    hours, minutes = (int(g) if g else 0 for g in match.groups())
    return dt.timedelta(hours=hours, minutes=minutes)


def parse_windows(raw: Iterable[Mapping[str, Any]] | None) -> tuple[list[Window], list[str]]:
    """The windows, and a problem per invalid field (an invalid window is dropped)."""
    windows: list[Window] = []
    problems: list[str] = []
    for i, item in enumerate(raw or ()):
        where = f"spec.rollout.maintenanceWindows[{i}]"
        bad = len(problems)
        days: set[int] = set()
        for day in item.get("days") or ():
            if day in DAYS:
                days.add(DAYS.index(day))
            else:
                problems.append(f'{where}.days: "{day}" is not one of {", ".join(DAYS)}')
        start_text = str(item.get("start") or "")
        start = None
        if re.match(START_PATTERN, start_text):
            start = dt.time(int(start_text[:2]), int(start_text[3:]))
        else:
            problems.append(f'{where}.start: "{start_text}" is not a time like "22:00"')
        duration_text = str(item.get("duration") or "")
        duration = parse_duration(duration_text)
        if duration is None or not dt.timedelta(0) < duration <= MAX_DURATION:
            problems.append(
                f'{where}.duration: "{duration_text}" is not a duration like "4h", "90m" or '
                '"1h30m" between 1m and 168h'
            )
        zone_name = str(item.get("timeZone") or defaults.WINDOW_TIME_ZONE)
        try:
            zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            problems.append(f'{where}.timeZone: "{zone_name}" is not a known IANA time zone')
            zone = None
        if len(problems) == bad and start is not None and duration is not None and zone:
            windows.append(Window(frozenset(days), start, duration, zone))
    return windows, problems


def _exists(wall: dt.datetime, zone: ZoneInfo) -> bool:
    aware = wall.replace(tzinfo=zone)
    return aware.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None) == wall


def local_instant(day: dt.date, at: dt.time, zone: ZoneInfo) -> dt.datetime:
    """Local wall time ``day at`` as an aware UTC instant: the first occurrence of an
    ambiguous time, the next valid instant (the end of the gap) for a missing one."""
    wall = dt.datetime.combine(day, at)
    probe = wall
    while not _exists(probe, zone):  # a DST gap is at most a few hours
        probe = (probe + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    return probe.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)


def window_state(windows: Iterable[Window], now: dt.datetime) -> WindowState:
    """Open or not at ``now``; when open until when, when closed the next opening."""
    windows = list(windows)
    if not windows:
        return ALWAYS_OPEN
    closes: dt.datetime | None = None
    upcoming: tuple[dt.datetime, ZoneInfo] | None = None
    for w in windows:
        today = now.astimezone(w.zone).date()
        # windows that started up to their duration ago (plus a day for zone edges)
        back = w.duration.days + 2
        for offset in range(-back, 9):
            day = today + dt.timedelta(days=offset)
            if not w.applies(day):
                continue
            start = w.opening(day)
            end = start + w.duration
            if start <= now < end:
                closes = end if closes is None else max(closes, end)
            elif start > now and (upcoming is None or start < upcoming[0]):
                upcoming = (start, w.zone)
    if closes is not None:
        return WindowState(open=True, closes_at=closes)
    return WindowState(
        open=False,
        next_opening=upcoming[0] if upcoming else None,
        zone=upcoming[1] if upcoming else None,
    )


def describe_opening(state: WindowState) -> str:
    """ "the next maintenance window opens Sat 2026-11-28 22:00 Europe/Berlin" """
    if state.next_opening is None or state.zone is None:
        return "no maintenance window is ahead"
    local = state.next_opening.astimezone(state.zone)
    return (
        f"the next maintenance window opens {DAYS[local.weekday()]} "
        f"{local:%Y-%m-%d %H:%M} {state.zone.key}"
    )
