"""``kubectl bootc``'s output: the status block, its data for ``-o json|yaml``, Events.

Pure: from ``explain.PoolReport`` (and Event objects) to lines of text or plain dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bootc_operator.api.imageref import display_ref
from bootc_operator.kubectl.explain import PoolReport, waits_for
from bootc_operator.kubectl.table import NodeRow, paint, short, table_lines


def row_data(row: NodeRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "state": row.state,
        "booted": row.booted,
        "desired": row.desired,
        "ready": row.ready,
        "cordoned": row.cordoned,
        "slot": row.in_slot,
        "check": row.check,
        "canary": row.canary,
        "note": row.message,
    }


def pool_data(r: PoolReport) -> dict[str, Any]:
    """What ``status`` shows of one pool, for scripts (``-o json|yaml``)."""
    wait = waits_for(r)
    return {
        "name": r.name,
        "phase": r.phase,
        "updated": r.counts.updated,
        "total": r.counts.total,
        "image": r.image,
        "target": r.target,
        "maxUnavailable": r.max_unavailable,
        "waitsFor": {"kind": wait.kind, "message": wait.message},
        "nodes": [row_data(row) for row in r.rows],
    }


def pool_lines(r: PoolReport, *, color: bool = False) -> list[str]:
    """The status block of one pool: a header, what it waits for, the node table."""
    wait = waits_for(r)
    target = f" (target {short(r.target)})" if r.target else ""
    phase = paint(r.phase, "32" if r.phase == "UpToDate" else "33", color)
    lines = [
        f"Pool {r.name}: {phase}, {r.counts.updated}/{r.counts.total} updated, "
        f"image {display_ref(r.image)}{target}",
        f"  waits for: {wait.message}",
    ]
    if r.rows:
        lines += ["", *table_lines(r.rows, color=color, zone=False, desired=True)]
    return lines


def status_lines(reports: Sequence[PoolReport], *, color: bool = False) -> list[str]:
    if not reports:
        return ["No BootcNodePools."]
    lines: list[str] = []
    for r in reports:
        if lines:
            lines.append("")
        lines += pool_lines(r, color=color)
    return lines


def event_time(ev: Mapping[str, Any]) -> str:
    """When an Event last happened (RFC 3339; core/v1 keeps it in several fields)."""
    return str(
        ev.get("lastTimestamp")
        or (ev.get("series") or {}).get("lastObservedTime")
        or ev.get("eventTime")
        or ev.get("firstTimestamp")
        or (ev.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def events_lines(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """``TIME TYPE REASON OBJECT MESSAGE``, oldest first."""
    if not events:
        return ["No Events."]
    ordered = sorted(events, key=lambda ev: (event_time(ev)[:19], event_time(ev)))
    rows = []
    for ev in ordered:
        obj = ev.get("involvedObject") or {}
        count = int(ev.get("count") or 1)
        reason = str(ev.get("reason") or "")
        rows.append(
            (
                event_time(ev).replace("T", " ").removesuffix("Z")[:19],
                str(ev.get("type") or ""),
                reason + (f" (x{count})" if count > 1 else ""),
                f"{str(obj.get('kind') or '').lower()}/{obj.get('name', '')}",
                str(ev.get("message") or ev.get("note") or ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = ("TIME", "TYPE", "REASON", "OBJECT")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return [fmt.format(*head, "MESSAGE"), *(fmt.format(*r) for r in rows)]
