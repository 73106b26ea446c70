"""The per-node table of a rollout, shared by ``kubectl bootc status`` and the demo's view.

``node_row(name, node, bootc_node)`` summarises one member as a ``NodeRow`` (state,
booted and desired digests, Ready, cordoned, in a reboot slot, its boot assessment,
whether it is a canary, a note); ``table_lines(rows, ...)`` draws them as aligned
columns. ``Screen`` redraws a block of lines in place on a terminal (``-w`` and the
demo). Pure but for ``Screen``, and cheap to import (the plugin starts with it).

A node's state, first match wins:

- ``Degraded``: its BootcNode says so;
- ``RollingBack`` / ``RolledBack``: it failed its health check (``spec.health``) on
  the digest of its ``bootc.dev/health-failed`` annotation and is being pointed back
  at its rollback deployment / runs that again, idle (until the target changes);
- ``Checking`` / ``Unhealthy``: it runs its desired image, idle, and the rollout's
  ``bootc.dev/health-check`` annotation says a check is pending / failed;
- ``UpToDate``: it runs the desired image and is idle;
- the reason of its ``Idle`` condition (``Staging``, ``Staged``, ``Rebooting``);
- ``Leaving``: an autoscaler is removing its Node (its taint; ``policy.autoscaler``)
  and it holds no slot: it is not updated;
- ``Pending`` otherwise (no status yet, idle on an older image before the daemon
  starts staging, or not told the target yet under ``stageAhead``).

The CHECK column is the daemon's ``status.bootAssessment.state`` (systemd's
``boot-complete.target``: Pending, Complete, Failed, Unknown); the line under a row
is the BootcNode's Degraded message, else its health-check note. Canaries are the
nodes labelled ``bootc.dev/canary`` (marked ``*``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from bootc_operator.api import constants as c
from bootc_operator.policy.autoscaler import leaving

STATE_COLORS = {
    "UpToDate": "32",  # green
    "Staging": "36",  # cyan
    "Staged": "33",  # yellow
    "Rebooting": "35",  # magenta
    "Checking": "34",  # blue
    "Degraded": "31",  # red
    "Unhealthy": "31",
    "RollingBack": "31",
    "RolledBack": "33",
    "Leaving": "37",
    "Pending": "37",
}
ROLLING_BACK = "RollingBack"
ROLLED_BACK = "RolledBack"
CHECKING = "Checking"
UNHEALTHY = "Unhealthy"
STATE_WIDTH = 11


def condition_of(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any]:
    """The condition ``ctype`` of ``obj``'s status ({} when absent)."""
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
    message: str = ""  # the Degraded message, else the health-check note
    check: str = ""  # status.bootAssessment.state
    canary: bool = False  # the Node is labelled bootc.dev/canary
    failed_on: str = ""  # the digest it failed its health check on (rolled back from)
    desired: str = ""  # digest of spec.desiredImage

    @property
    def unavailable(self) -> bool:
        return self.cordoned or not self.ready


def _booted_digest(bn: Mapping[str, Any] | None) -> str:
    booted = ((bn or {}).get("status") or {}).get("booted") or {}
    return str(booted.get("imageDigest") or digest_of(booted.get("image")))


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def node_state(bn: Mapping[str, Any] | None) -> str:
    """The node's state (the module docstring lists them)."""
    if bn is None:
        return "Pending"
    if condition_of(bn, c.COND_DEGRADED).get("status") == "True":
        return "Degraded"
    booted = _booted_digest(bn)
    desired = digest_of((bn.get("spec") or {}).get("desiredImage"))
    idle = condition_of(bn, c.COND_IDLE)
    reason = str(idle.get("reason") or "")
    running = idle.get("status") == "True" and bool(booted) and booted == desired
    annotations = _annotations(bn)
    if annotations.get(c.HEALTH_FAILED_ANNOTATION):
        return ROLLED_BACK if running else ROLLING_BACK
    if running:
        note = annotations.get(c.HEALTH_CHECK_ANNOTATION, "")
        if note.startswith("Pending"):
            return CHECKING
        if note.startswith("Failed"):
            return UNHEALTHY
        return "UpToDate"
    if reason in (c.REASON_STAGING, c.REASON_STAGED, c.REASON_REBOOTING):
        return reason
    return "Pending"


def _leaving_or(state: str, node: Mapping[str, Any] | None, annotations: Mapping[str, str]) -> str:
    """``Leaving`` for a node an autoscaler is removing (``autoscaler.leaving``) that is
    not up to date and holds no slot: it gets none; else ``state``."""
    if state in ("UpToDate", "Degraded") or c.IN_REBOOT_SLOT_ANNOTATION in annotations:
        return state
    return "Leaving" if leaving(node) else state


def node_row(name: str, node: Mapping[str, Any] | None, bn: Mapping[str, Any] | None) -> NodeRow:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    ready = condition_of(node, "Ready").get("status") == "True"
    status = (bn or {}).get("status") or {}
    annotations = _annotations(bn)
    degraded = condition_of(bn, c.COND_DEGRADED)
    message = str(degraded.get("message") or "") if degraded.get("status") == "True" else ""
    return NodeRow(
        name=name,
        zone=str(labels.get("topology.kubernetes.io/zone", "")),
        state=_leaving_or(node_state(bn), node, annotations),
        booted=_booted_digest(bn),
        ready=ready,
        cordoned=bool(((node or {}).get("spec") or {}).get("unschedulable")),
        in_slot=c.IN_REBOOT_SLOT_ANNOTATION in annotations,
        message=message or str(annotations.get(c.HEALTH_CHECK_ANNOTATION) or ""),
        check=str((status.get("bootAssessment") or {}).get("state") or ""),
        canary=c.CANARY_LABEL in labels,
        failed_on=str(annotations.get(c.HEALTH_FAILED_ANNOTATION) or ""),
        desired=digest_of(((bn or {}).get("spec") or {}).get("desiredImage")),
    )


def paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def table_lines(
    rows: Sequence[NodeRow],
    *,
    labels: Mapping[str, str] | None = None,
    color: bool = False,
    zone: bool = True,
    desired: bool = False,
    indent: str = "  ",
    name_width: int = 12,
) -> list[str]:
    """The header and one line per row (plus its note, if any, on the next line).

    ``labels`` names known digests (``{"sha256:…": "v2"}``); ``zone`` / ``desired``
    add those columns.
    """
    labels = labels or {}
    width = max([name_width, *(len(r.name) + (2 if r.canary else 0) for r in rows)])

    def digest_cell(digest: str) -> str:
        label = labels.get(digest, "")
        return f"{label} {short(digest)}".strip() if digest else "-"

    head = f"{indent}{'NODE':<{width}} "
    if zone:
        head += f"{'ZONE':<7} "
    head += f"{'STATE':<{STATE_WIDTH}} {'BOOTED':<20} "
    if desired:
        head += f"{'DESIRED':<20} "
    head += f"{'READY':<6} {'CORDONED':<9} {'SLOT':<5} {'CHECK'}"
    lines = [head]
    for row in rows:
        state = paint(f"{row.state:<{STATE_WIDTH}}", STATE_COLORS.get(row.state, "0"), color)
        name = f"{row.name} *" if row.canary else row.name
        line = f"{indent}{name:<{width}} "
        if zone:
            line += f"{row.zone:<7} "
        line += f"{state} {digest_cell(row.booted):<20} "
        if desired:
            line += f"{digest_cell(row.desired):<20} "
        line += (
            f"{'yes' if row.ready else 'NO':<6} {'yes' if row.cordoned else 'no':<9} "
            f"{'yes' if row.in_slot else '-':<5} {row.check or '-'}"
        )
        lines.append(line)
        if row.message:
            lines.append(f"{indent}  {row.message[:100]}")
    if any(row.canary for row in rows):
        lines.append(f"{indent}* canary (bootc.dev/canary): updates first, alone")
    return lines


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
            buf.append("\x1b[2K" + clip(line, width) + "\n")
        buf.append("\x1b[J")  # clear whatever the previous, longer block left below
        self.out.write("".join(buf))
        self.out.flush()
        self.drawn = len(lines)


def clip(line: str, width: int) -> str:
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
