"""PromQL checks of a pool: health queries per node and preconditions per pool. Pure.

Two users, one rule ("a query passes while its result is non-empty"):

- ``spec.health.queries`` (``HealthQuery``): after its reboot a node passes the
  ``queries`` check of the health gate (``health.evaluate``) only once every query,
  with ``$node`` replaced by the node's name (``for_node``), has returned a
  non-empty result continuously for its ``for``. ``observe`` folds one answer
  into a ``QueryState`` (since when it has held, or why not); ``queries_check``
  turns the states into the check's verdict. A query never fails the gate by
  itself: a node still not passing at ``health.timeoutSeconds`` has failed, and
  ``onFailure`` (Halt or Rollback) applies as for any other check.
- ``spec.rollout.preconditions`` (``Precondition``): no new reboot slot while any
  returns an empty result or cannot be asked (fail closed), like the alert gate.
  ``precondition_gate`` names the ones not met.

``parse_hold`` reads a ``for`` ("30s", "5m", "1m30s"); ``label_value`` escapes a
node name for a double-quoted PromQL string.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from bootc_operator.api import constants as c
from bootc_operator.gates.alerts import AlertGate

CHECK_QUERIES: Final = "queries"
#: ``$node`` not followed by a name character (``$nodes`` is left alone)
_NODE_VAR: Final = re.compile(r"\$node(?![A-Za-z0-9_])")
_HOLD: Final = re.compile(c.QUERY_FOR_PATTERN)
NO_PROMETHEUS: Final = "the controller was started without --prometheus-url"


@dataclass(frozen=True, slots=True)
class HealthQuery:
    """One ``spec.health.queries`` entry, checked (``poolspec``)."""

    name: str
    expr: str
    hold: float = 0.0  # ``for``, in seconds


@dataclass(frozen=True, slots=True)
class Precondition:
    """One ``spec.rollout.preconditions`` entry."""

    name: str
    expr: str


@dataclass(frozen=True, slots=True)
class QueryState:
    """What the last answer to one query said, and since when it has held."""

    #: the first of the unbroken run of non-empty answers (None: the last was not)
    holding_since: dt.datetime | None = None
    #: why the last answer does not count ("" when it came): Prometheus' error
    error: str = ""


@dataclass(frozen=True, slots=True)
class NodeQueries:
    """What is known of one node's health queries: query name → state; or why none
    can be asked (``unavailable``: no Prometheus)."""

    states: Mapping[str, QueryState] = field(default_factory=dict)
    unavailable: str = ""


def parse_hold(text: str | None) -> float | None:
    """``"1m30s"`` → 90.0; unset → 0.0; None when malformed."""
    if text is None or text == "":
        return 0.0
    match = _HOLD.match(text)
    if match is None:
        return None
    hours, minutes, seconds = (int(g[:-1]) if g else 0 for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def label_value(text: str) -> str:
    """``text`` escaped for the inside of a double-quoted PromQL string."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("'", "\\'")
    return out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def for_node(expr: str, node: str) -> str:
    """``expr`` with every ``$node`` replaced by ``node``, escaped for a label value."""
    value = label_value(node)
    return _NODE_VAR.sub(lambda _m: value, expr)


def observe(
    previous: QueryState | None,
    result: Sequence[Any] | None,
    now: dt.datetime,
    error: str = "",
) -> QueryState:
    """Fold one answer into the state: a non-empty ``result`` keeps (or starts) the
    run; an empty one, or an ``error`` (``result`` None), breaks it."""
    if error or result is None:
        return QueryState(None, error or "no answer")
    if not result:
        return QueryState()
    since = previous.holding_since if previous is not None else None
    return QueryState(since if since is not None else now)


def queries_check(
    queries: Sequence[HealthQuery], known: NodeQueries | None, now: dt.datetime
) -> tuple[bool, str, float | None]:
    """(passed, why not, seconds until a ``for`` is met by time alone).

    ``known``: the node's query states (a query missing, or None: not asked yet).
    The queries not passing are named (up to three) with how many pass.
    """
    if not queries:
        return True, "", None
    states = known.states if known is not None else {}
    if known is not None and (unavailable := known.unavailable):
        return False, f"{unavailable}; cannot ask {_names([q.name for q in queries])}", None
    waiting: list[str] = []
    waits: list[float] = []
    passed = 0
    for q in queries:
        state = states.get(q.name)
        if state is None:
            waiting.append(f"{q.name}: not asked yet")
        elif state.error:
            waiting.append(f"{q.name}: {state.error}")
        elif state.holding_since is None:
            waiting.append(f"{q.name}: empty result")
        else:
            held = max(0.0, (now - state.holding_since).total_seconds())
            if held >= q.hold:
                passed += 1
                continue
            waits.append(q.hold - held)
            waiting.append(f"{q.name}: non-empty for {int(held)}s of {int(q.hold)}s")
    if not waiting:
        return True, "", None
    message = "; ".join(waiting[:3]) + (
        f"; and {len(waiting) - 3} more" if len(waiting) > 3 else ""
    )
    return False, f"{message} ({passed}/{len(queries)} pass)", min(waits) if waits else None


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


#: a precondition's answer: its result (None when it could not be asked) and the error
Answer = tuple[Sequence[Any] | None, str]


def precondition_gate(
    preconditions: Sequence[Precondition], answers: Mapping[str, Answer]
) -> AlertGate:
    """Blocked, naming every precondition whose result was empty or that could not be
    asked (a missing answer too: fail closed); open when all hold."""
    empty = [p.name for p in preconditions if (answers.get(p.name) or (None, ""))[0] == []]
    failed = {
        p.name: answers[p.name][1] if p.name in answers else "not asked yet"
        for p in preconditions
        if (answers.get(p.name) or (None, ""))[0] is None
    }
    if not empty and not failed:
        return AlertGate(False, reason=c.REASON_PRECONDITION_NOT_MET)
    said = []
    if empty:
        verb = "is" if len(empty) == 1 else "are"
        said.append(f"precondition {_names(empty)} {verb} not met (empty result)")
    for name, error in list(failed.items())[:3]:
        said.append(f"precondition {name} could not be checked: {error} (fail closed)")
    if len(failed) > 3:
        said.append(f"and {len(failed) - 3} more could not be checked")
    return AlertGate(
        True, "; ".join(said) + "; no new reboots until it holds", c.REASON_PRECONDITION_NOT_MET
    )


def preconditions_of(pool: Mapping[str, Any]) -> list[Precondition]:
    """``spec.rollout.preconditions`` (entries without a name or expr are skipped:
    the CRD rejects them)."""
    raw = ((pool.get("spec") or {}).get("rollout") or {}).get("preconditions") or []
    return [
        Precondition(str(p["name"]), str(p["expr"]))
        for p in raw
        if isinstance(p, Mapping) and p.get("name") and p.get("expr")
    ]
