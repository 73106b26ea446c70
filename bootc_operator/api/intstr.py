"""Resolution of ``spec.rollout.maxUnavailable`` (int or "N%") to a node count.

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
    """A maxUnavailable value that is neither a non-negative int nor "0%".."100%"."""


def resolve_max_unavailable(value: int | str | None, total: int) -> int:
    """Nodes that may be unavailable at once in a pool of ``total`` nodes."""
    if total < 0:
        raise ValueError(f"pool size must be >= 0, got {total}")
    if value is None:
        value = 1
    if isinstance(value, bool):
        raise InvalidIntOrPercent(
            f"maxUnavailable {json.dumps(value)} is not an integer or percentage"
        )
    if isinstance(value, int):
        if value < 0:
            raise InvalidIntOrPercent(f"maxUnavailable {value} must not be negative")
        return min(value, total)
    if not isinstance(value, str):
        raise InvalidIntOrPercent(
            f"maxUnavailable {json.dumps(value)} is not an integer or percentage"
        )
    match = _PERCENT.match(value.strip())
    if not match:
        if value.strip().lstrip("-").isdigit():
            raise InvalidIntOrPercent(
                f'maxUnavailable "{value}" is a string: write a percentage like "25%" '
                f"or the integer {value.strip()} without quotes"
            )
        raise InvalidIntOrPercent(
            f'maxUnavailable "{value}" is not a non-negative integer or a percentage like "25%"'
        )
    percent = int(match.group(1))
    if percent > 100:
        raise InvalidIntOrPercent(f'maxUnavailable "{value}" must be at most "100%"')
    # ceil(total * percent / 100) in integers
    return -(-total * percent // 100)
