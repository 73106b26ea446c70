"""The demo's live view of a rollout: pure functions from API objects to lines of text.

``snapshot(pool, bootc_nodes, nodes, names)`` turns what the informers hold into a
``Snapshot`` (one ``NodeRow`` per node: state, booted image, Ready, cordoned, in a
reboot slot); ``render(...)`` draws it as a progress bar plus a table;
``changes(before, after)`` lists what changed between two snapshots (the
line-per-change output when stdout is not a terminal). ``Screen`` redraws a block
of lines in place with ANSI cursor movement.

A node's state: ``UpToDate`` when it runs the pool's target and is idle, else the
reason of its BootcNode ``Idle`` condition (``Staging``, ``Staged``,
``Rebooting``), ``Degraded`` when its BootcNode says so, ``Pending`` otherwise
(no status yet, idle on an older image before the daemon starts staging, or not
told the target yet under ``stageAhead``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from bootc_operator.api import constants as c

BAR_WIDTH = 30
STATE_COLORS = {
    "UpToDate": "32",  # green
    "Staging": "36",  # cyan
    "Staged": "33",  # yellow
    "Rebooting": "35",  # magenta
    "Degraded": "31",  # red
    "Pending": "37",
}


def _condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


def digest_of(ref: str | None) -> str:
    """The ``sha256:...`` part of ``repo@sha256:...`` ("" when there is none)."""
    return ref.rsplit("@", 1)[1] if ref and "@" in ref else ""


def short(digest: str) -> str:
    """``sha256:0123456789abcdef…`` → ``0123456789ab``."""
    return digest.split(":", 1)[-1][:12]


@dataclass(frozen=True)
class NodeRow:
    name: str
    zone: str
    state: str
    booted: str  # digest
    ready: bool
    cordoned: bool
    in_slot: bool
    message: str = ""

    @property
    def unavailable(self) -> bool:
        return self.cordoned or not self.ready


@dataclass(frozen=True)
class Snapshot:
    rows: tuple[NodeRow, ...]
    target: str  # digest the pool wants
    updated: int
    total: int
    up_to_date: bool
    condition: str  # "UpToDate=False RolloutInProgress: ..."

    @property
    def unavailable(self) -> int:
        return sum(r.unavailable for r in self.rows)

    @property
    def staging(self) -> int:
        """Nodes pulling the image now (what ``stageAhead`` bounds)."""
        return sum(r.state == c.REASON_STAGING for r in self.rows)

    @property
    def in_slots(self) -> int:
        return sum(r.in_slot for r in self.rows)

    @property
    def settled(self) -> bool:
        """Every node updated, the pool UpToDate, no slot held, nothing cordoned."""
        return (
            self.up_to_date
            and self.updated == self.total == len(self.rows)
            and all(
                r.state == "UpToDate" and not r.unavailable and not r.in_slot for r in self.rows
            )
        )


def node_state(bn: Mapping[str, Any] | None) -> str:
    if bn is None:
        return "Pending"
    if _condition(bn, c.COND_DEGRADED).get("status") == "True":
        return "Degraded"
    status = bn.get("status") or {}
    booted = digest_of((status.get("booted") or {}).get("image"))
    booted = (status.get("booted") or {}).get("imageDigest") or booted
    desired = digest_of((bn.get("spec") or {}).get("desiredImage"))
    idle = _condition(bn, c.COND_IDLE)
    reason = str(idle.get("reason") or "")
    if idle.get("status") == "True" and booted and booted == desired:
        return "UpToDate"
    if reason in (c.REASON_STAGING, c.REASON_STAGED, c.REASON_REBOOTING):
        return reason
    return "Pending"


def node_row(name: str, node: Mapping[str, Any] | None, bn: Mapping[str, Any] | None) -> NodeRow:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    ready = _condition(node, "Ready").get("status") == "True"
    status = (bn or {}).get("status") or {}
    booted = (status.get("booted") or {}).get("imageDigest") or digest_of(
        (status.get("booted") or {}).get("image")
    )
    annotations = ((bn or {}).get("metadata") or {}).get("annotations") or {}
    degraded = _condition(bn, c.COND_DEGRADED)
    return NodeRow(
        name=name,
        zone=str(labels.get("topology.kubernetes.io/zone", "")),
        state=node_state(bn),
        booted=str(booted or ""),
        ready=ready,
        cordoned=bool(((node or {}).get("spec") or {}).get("unschedulable")),
        in_slot=c.IN_REBOOT_SLOT_ANNOTATION in annotations,
        message=str(degraded.get("message") or "") if degraded.get("status") == "True" else "",
    )


def snapshot(
    pool: Mapping[str, Any] | None,
    bootc_nodes: Mapping[str, Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    names: Sequence[str],
    target: str | None = None,
) -> Snapshot:
    """The view of ``pool`` and its nodes. With ``target`` (a digest), a pool status
    about another target (the controller has not seen the change yet) counts as
    nothing updated."""
    status = (pool or {}).get("status") or {}
    cond = _condition(pool, c.COND_UP_TO_DATE)
    rows = tuple(node_row(n, nodes.get(n), bootc_nodes.get(n)) for n in names)
    current = str(status.get("targetDigest") or "")
    generation = ((pool or {}).get("metadata") or {}).get("generation")
    if target is not None and (current != target or status.get("observedGeneration") != generation):
        return Snapshot(
            rows=rows,
            target=target,
            updated=0,
            total=len(names),
            up_to_date=False,
            condition="(waiting for the controller to pick up the new image)",
        )
    text = ""
    if cond:
        text = f"UpToDate={cond.get('status')} {cond.get('reason', '')}: {cond.get('message', '')}"
    return Snapshot(
        rows=rows,
        target=current,
        updated=int(status.get("updatedCount") or 0),
        total=int(status.get("nodeCount") or len(names)),
        up_to_date=cond.get("status") == "True",
        condition=text,
    )


def bar(done: int, total: int, width: int = BAR_WIDTH, *, ascii_only: bool = False) -> str:
    filled = 0 if total <= 0 else round(width * min(done, total) / total)
    full, empty = ("#", "-") if ascii_only else ("█", "░")
    return "[" + full * filled + empty * (width - filled) + "]"


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def render(
    snap: Snapshot,
    *,
    elapsed: float,
    labels: Mapping[str, str],
    max_unavailable: int,
    reboots: int,
    color: bool = False,
    ascii_only: bool = False,
) -> list[str]:
    """The live view: progress bar, pool condition, node table, running totals.

    ``labels`` names known digests (``{"sha256:…": "v2"}``).
    """
    minutes, seconds = divmod(int(elapsed), 60)
    lines = [
        f"{bar(snap.updated, snap.total, ascii_only=ascii_only)} "
        f"{snap.updated}/{snap.total} updated   {minutes:02d}:{seconds:02d}",
        f"  {snap.condition}" if snap.condition else "  (no status yet)",
        "",
        f"  {'NODE':<12} {'ZONE':<7} {'STATE':<10} {'BOOTED':<20} {'READY':<6} "
        f"{'CORDONED':<9} {'REBOOT SLOT'}",
    ]
    for row in snap.rows:
        label = labels.get(row.booted, "")
        booted = f"{label} {short(row.booted)}".strip() if row.booted else "-"
        state = _paint(f"{row.state:<10}", STATE_COLORS.get(row.state, "0"), color)
        lines.append(
            f"  {row.name:<12} {row.zone:<7} {state} {booted:<20} "
            f"{'yes' if row.ready else 'NO':<6} {'yes' if row.cordoned else 'no':<9} "
            f"{'yes' if row.in_slot else '-'}"
        )
        if row.message:
            lines.append(f"    {row.message[:100]}")
    lines += [
        "",
        f"  unavailable now {snap.unavailable} (max so far {max_unavailable}); "
        f"staging {snap.staging}; in reboot slots {snap.in_slots}; reboots {reboots}",
    ]
    return lines


def describe_row(row: NodeRow, labels: Mapping[str, str]) -> str:
    booted = labels.get(row.booted) or short(row.booted) or "-"
    flags = [f for f, on in (("cordoned", row.cordoned), ("in slot", row.in_slot)) if on]
    if not row.ready:
        flags.append("NotReady")
    return f"{row.state} on {booted}" + (f" ({', '.join(flags)})" if flags else "")


def changes(before: Snapshot | None, after: Snapshot, labels: Mapping[str, str]) -> list[str]:
    """One line per node whose row changed, plus one when the pool's progress changed."""
    out: list[str] = []
    old = {r.name: r for r in before.rows} if before is not None else {}
    for row in after.rows:
        prev = old.get(row.name)
        if prev is None or prev != row:
            was = f"{describe_row(prev, labels)} -> " if prev is not None else ""
            out.append(f"{row.name}: {was}{describe_row(row, labels)}")
    if before is None or (before.updated, before.condition) != (after.updated, after.condition):
        out.append(f"pool: {after.updated}/{after.total} updated; {after.condition}")
    return out


class Screen:
    """Redraws a block of lines in place on a terminal (ANSI cursor movement)."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.drawn = 0

    def draw(self, lines: Sequence[str]) -> None:
        width = max(20, shutil.get_terminal_size((120, 40)).columns - 1)
        buf = []
        if self.drawn:
            buf.append(f"\x1b[{self.drawn}F")  # to the start of the block's first line
        for line in lines:
            buf.append("\x1b[2K" + _clip(line, width) + "\n")
        buf.append("\x1b[J")  # clear whatever the previous, longer block left below
        self.out.write("".join(buf))
        self.out.flush()
        self.drawn = len(lines)


def _clip(line: str, width: int) -> str:
    """Cut ``line`` to ``width`` visible characters (ANSI color codes do not count)."""
    visible = 0
    out = []
    i = 0
    while i < len(line):
        if line[i] == "\x1b":
            end = line.find("m", i)
            if end == -1:
                break
            out.append(line[i : end + 1])
            i = end + 1
            continue
        if visible >= width:
            break
        out.append(line[i])
        visible += 1
        i += 1
    text = "".join(out)
    return text + "\x1b[0m" if "\x1b[" in text and not text.endswith("\x1b[0m") else text
