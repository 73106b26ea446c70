"""``merge_patch``: a JSON merge patch (RFC 7386) applied in memory, as the API server
applies one; for unit tests that stand in for the API server's writes."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` merged in (a null removes its key); a new object,
    ``target`` is left as it was."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
