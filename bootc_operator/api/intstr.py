"""Resolution of int-or-percent fields (``maxUnavailable``, ``maxUnhealthy``,
``stageAhead``) to a node count.

Rules: an integer >= 0 is taken as is (clamped to the pool size); a string must
be a percentage "0%".."100%" of the pool size, rounded **up** (so "10%" of 3
nodes is 1). Strings without "%" ("1"), negatives, fractions, >100% and
non-numbers are errors with a message naming the value. 0 is valid and means
no node may be taken down (the rollout reports it is blocked).
"""

from __future__ import annotations

import json
import re

_PERCENT = re.compile(r"^(\d+)%$")


class InvalidIntOrPercent(ValueError):
    """A value that is neither a non-negative int nor "0%".."100%"."""


def resolve_int_or_percent(
    value: int | str | None, total: int, *, field: str = "maxUnavailable", default: int = 1
) -> int:
    """``value`` (an int, or "N%" of ``total`` rounded up) as a node count, clamped to
    ``total``; ``field`` names it in errors, ``default`` stands for None."""
    if total < 0:
        raise ValueError(f"pool size must be >= 0, got {total}")
    if value is None:
        value = default
    if isinstance(value, bool):
        raise InvalidIntOrPercent(f"{field} {json.dumps(value)} is not an integer or percentage")
    if isinstance(value, int):
        if value < 0:
            raise InvalidIntOrPercent(f"{field} {value} must not be negative")
        return min(value, total)
    if not isinstance(value, str):
        raise InvalidIntOrPercent(f"{field} {json.dumps(value)} is not an integer or percentage")
    match = _PERCENT.match(value.strip())
    if not match:
        if value.strip().lstrip("-").isdigit():
            raise InvalidIntOrPercent(
                f'{field} "{value}" is a string: write a percentage like "25%" '
                f"or the integer {value.strip()} without quotes"
            )
        raise InvalidIntOrPercent(
            f'{field} "{value}" is not a non-negative integer or a percentage like "25%"'
        )
    percent = int(match.group(1))
    if percent > 100:
        raise InvalidIntOrPercent(f'{field} "{value}" must be at most "100%"')
    # ceil(total * percent / 100) in integers
    return -(-total * percent // 100)


def resolve_max_unavailable(value: int | str | None, total: int) -> int:
    """Nodes that may be unavailable at once in a pool of ``total`` nodes."""
    return resolve_int_or_percent(value, total)
