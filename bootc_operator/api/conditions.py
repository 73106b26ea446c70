"""metav1.Condition semantics over plain lists of condition dicts.

Reconcilers hold status as wire dicts (straight from the informer cache), so the
helpers work on ``list[dict]`` and return new lists, never mutating the input:

- ``set_condition``: add or replace by type; ``lastTransitionTime`` changes only
  when ``status`` changes (a reason/message change keeps it), like
  apimachinery's ``meta.SetStatusCondition``.
- ``get_condition`` / ``is_true``: look-ups by type.
- ``node_ready_status``: the status of a Node's ``Ready`` condition, the one
  reader of it (the controller's node view and its event triggers).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from bootc_operator.api.timefmt import now_rfc3339

Conditions = list[dict[str, Any]]


def get_condition(
    conditions: Iterable[Mapping[str, Any]] | None, cond_type: str
) -> Mapping[str, Any] | None:
    for cond in conditions or ():
        if cond.get("type") == cond_type:
            return cond
    return None


def is_true(conditions: Iterable[Mapping[str, Any]] | None, cond_type: str) -> bool:
    cond = get_condition(conditions, cond_type)
    return cond is not None and cond.get("status") == "True"


def node_ready_status(node: Mapping[str, Any] | None) -> str | None:
    """A Node's ``Ready`` condition status ("True", "False", "Unknown"); None without one."""
    cond = get_condition(((node or {}).get("status") or {}).get("conditions"), "Ready")
    return None if cond is None else str(cond.get("status"))


def condition_reason(conditions: Iterable[Mapping[str, Any]] | None, cond_type: str) -> str | None:
    cond = get_condition(conditions, cond_type)
    return None if cond is None else cond.get("reason")


def set_condition(
    conditions: Iterable[Mapping[str, Any]] | None,
    cond_type: str,
    status: bool | str,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
    now: dt.datetime | None = None,
) -> Conditions:
    """Return a new list with ``cond_type`` set; order of other conditions is kept."""
    status_text = ("True" if status else "False") if isinstance(status, bool) else status
    if status_text not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    if not reason:
        raise ValueError("condition reason must not be empty")
    result: Conditions = []
    found = False
    for cond in conditions or ():
        if cond.get("type") != cond_type:
            result.append(dict(cond))
            continue
        found = True
        new = dict(cond)
        if cond.get("status") != status_text or not cond.get("lastTransitionTime"):
            new["lastTransitionTime"] = now_rfc3339(now)
        new.update(status=status_text, reason=reason, message=message)
        if observed_generation is not None:
            new["observedGeneration"] = observed_generation
        result.append(new)
    if not found:
        new = {
            "type": cond_type,
            "status": status_text,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now_rfc3339(now),
        }
        if observed_generation is not None:
            new["observedGeneration"] = observed_generation
        result.append(new)
    return result


def remove_condition(conditions: Iterable[Mapping[str, Any]] | None, cond_type: str) -> Conditions:
    return [dict(c) for c in conditions or () if c.get("type") != cond_type]


def conditions_equal_ignoring_time(
    a: Iterable[Mapping[str, Any]] | None, b: Iterable[Mapping[str, Any]] | None
) -> bool:
    """True when both lists say the same thing (used to skip no-op status writes)."""

    def key(conds: Iterable[Mapping[str, Any]] | None) -> list[tuple[Any, ...]]:
        return sorted(
            (
                c.get("type"),
                c.get("status"),
                c.get("reason"),
                c.get("message", ""),
                c.get("observedGeneration"),
            )
            for c in conds or ()
        )

    return key(a) == key(b)
