"""maxUnavailable resolution table (percent rounds up; bad values are errors)."""

from __future__ import annotations

import pytest

from bootc_operator.api.intstr import InvalidIntOrPercent, resolve_max_unavailable


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        (1, 10, 1),
        (3, 10, 3),
        (0, 10, 0),
        (20, 10, 10),
        (None, 10, 1),
        ("10%", 10, 1),
        ("10%", 3, 1),
        ("25%", 10, 3),
        ("50%", 5, 3),
        ("0%", 10, 0),
        ("100%", 10, 10),
        ("1%", 1000, 10),
        ("1%", 1001, 11),
        ("33%", 0, 0),
        (2, 0, 0),
    ],
)
def test_resolves(value: int | str | None, total: int, expected: int) -> None:
    assert resolve_max_unavailable(value, total) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1", "without quotes"),
        ("150%", "at most"),
        ("-1", "without quotes"),
        (-1, "negative"),
        ("abc", "percentage"),
        ("", "percentage"),
        ("1.5%", "percentage"),
        ("%", "percentage"),
        (True, "not an integer"),
        (1.5, "not an integer"),
    ],
)
def test_rejects_with_clear_message(value: object, fragment: str) -> None:
    with pytest.raises(InvalidIntOrPercent, match=fragment):
        resolve_max_unavailable(value, 10)  # type: ignore[arg-type]
