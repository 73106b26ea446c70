"""The demo's live view of a rollout: pure functions from API objects to lines of text.

``snapshot(pool, bootc_nodes, nodes, names)`` turns what the informers hold into a
``Snapshot`` (one ``NodeRow`` per node: state, booted image, Ready, cordoned, in a
reboot slot, its boot assessment, whether it is a canary, a note); ``render(...)``
draws it as a progress bar plus a table; ``changes(before, after)`` lists what
changed between two snapshots (the line-per-change output when stdout is not a
terminal). ``Screen`` redraws a block of lines in place with ANSI cursor movement.

A node's state, first match wins:

- ``Degraded``: its BootcNode says so;
- ``RollingBack`` / ``RolledBack``: it failed its health check (``spec.health``) on
  the digest of its ``bootc.dev/health-failed`` annotation and is being pointed back
  at its rollback deployment / runs that again, idle (until the target changes);
- ``Checking`` / ``Unhealthy``: it runs its desired image, idle, and the rollout's
  ``bootc.dev/health-check`` annotation says a check is pending / failed;
- ``UpToDate``: it runs the desired image and is idle;
- the reason of its ``Idle`` condition (``Staging``, ``Staged``, ``Rebooting``);
- ``Pending`` otherwise (no status yet, idle on an older image before the daemon
  starts staging, or not told the target yet under ``stageAhead``).

The CHECK column is the daemon's ``status.bootAssessment.state`` (systemd's
``boot-complete.target``: Pending, Complete, Failed, Unknown); the line under a row
is the BootcNode's Degraded message, else its health-check note. Canaries are the
nodes labelled ``bootc.dev/canary`` (marked ``*``).

A drain held by a PodDisruptionBudget has no timeout unless the pool sets
``drainTimeoutSeconds``, so the view says what it waits for (``drain_waits``, from
the Pods and PodDisruptionBudgets when the caller passes them): the budget, its
healthy count and the Pods it counts as not healthy, e.g. ``worker-6: drain waits
for PodDisruptionBudget default/web: 0 disruptions allowed (5 of 6 pods healthy, 5
needed); not healthy: default/web-x on worker-2 (Running, Ready=False)``.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from bootc_operator.api import constants as c
from bootc_operator.policy.drainplan import must_leave, pod_key
from bootc_operator.policy.selectors import matches

BAR_WIDTH = 30
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
    "Pending": "37",
}
ROLLING_BACK = "RollingBack"
ROLLED_BACK = "RolledBack"
CHECKING = "Checking"
UNHEALTHY = "Unhealthy"
STATE_WIDTH = 11


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
    message: str = ""  # the Degraded message, else the health-check note
    check: str = ""  # status.bootAssessment.state
    canary: bool = False  # the Node is labelled bootc.dev/canary
    failed_on: str = ""  # the digest it failed its health check on (rolled back from)

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
    degraded: str = ""  # "Degraded=True HealthCheckFailed: ..." ("" unless Degraded)
    degraded_reason: str = ""  # its reason ("" unless Degraded)
    waits: tuple[str, ...] = ()  # what drains held by a PodDisruptionBudget wait for

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


def _booted_digest(bn: Mapping[str, Any] | None) -> str:
    booted = ((bn or {}).get("status") or {}).get("booted") or {}
    return str(booted.get("imageDigest") or digest_of(booted.get("image")))


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def node_state(bn: Mapping[str, Any] | None) -> str:
    """The node's state (the module docstring lists them)."""
    if bn is None:
        return "Pending"
    if _condition(bn, c.COND_DEGRADED).get("status") == "True":
        return "Degraded"
    booted = _booted_digest(bn)
    desired = digest_of((bn.get("spec") or {}).get("desiredImage"))
    idle = _condition(bn, c.COND_IDLE)
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


def node_row(name: str, node: Mapping[str, Any] | None, bn: Mapping[str, Any] | None) -> NodeRow:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    ready = _condition(node, "Ready").get("status") == "True"
    status = (bn or {}).get("status") or {}
    annotations = _annotations(bn)
    degraded = _condition(bn, c.COND_DEGRADED)
    message = str(degraded.get("message") or "") if degraded.get("status") == "True" else ""
    return NodeRow(
        name=name,
        zone=str(labels.get("topology.kubernetes.io/zone", "")),
        state=node_state(bn),
        booted=_booted_digest(bn),
        ready=ready,
        cordoned=bool(((node or {}).get("spec") or {}).get("unschedulable")),
        in_slot=c.IN_REBOOT_SLOT_ANNOTATION in annotations,
        message=message or str(annotations.get(c.HEALTH_CHECK_ANNOTATION) or ""),
        check=str((status.get("bootAssessment") or {}).get("state") or ""),
        canary=c.CANARY_LABEL in labels,
        failed_on=str(annotations.get(c.HEALTH_FAILED_ANNOTATION) or ""),
    )


def _pod_health(pod: Mapping[str, Any]) -> str:
    """Why a Pod does not count as healthy ("" when it does): ``Pending, unscheduled``,
    ``terminating``, ``Running, Ready=False`` (plus the condition's reason, if any)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "terminating"
    ready = _condition(pod, "Ready")
    if status.get("phase") == "Running" and ready.get("status") == "True":
        return ""
    phase = str(status.get("phase") or "Pending")
    if not (pod.get("spec") or {}).get("nodeName"):
        return f"{phase}, unscheduled"
    why = f"{phase}, Ready={ready.get('status') or 'unknown'}"
    return f"{why} ({ready['reason']})" if ready.get("reason") else why


def _covers(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    pdb_meta, pod_meta = pdb.get("metadata") or {}, pod.get("metadata") or {}
    return pdb_meta.get("namespace") == pod_meta.get("namespace") and matches(
        (pdb.get("spec") or {}).get("selector"), pod_meta.get("labels")
    )


def drain_waits(
    rows: Sequence[NodeRow],
    pods: Sequence[Mapping[str, Any]],
    pdbs: Sequence[Mapping[str, Any]],
) -> tuple[str, ...]:
    """One line per draining node (in a slot, cordoned, staged: not told to reboot
    yet) held by a PodDisruptionBudget that allows no disruption now: the budget, its
    counts, the evictions it has just approved (``status.disruptedPods``: they count
    against it until the Pods are gone) and up to 3 of the Pods it covers that are not
    healthy, with where they are and why (the module docstring has an example)."""
    on_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        on_node.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
    lines = []
    for row in rows:
        if not (row.in_slot and row.cordoned and row.state == c.REASON_STAGED):
            continue
        leaving = [p for p in on_node.get(row.name, ()) if must_leave(p)]
        for pdb in pdbs:
            status = pdb.get("status") or {}
            if status.get("disruptionsAllowed", 1) != 0 or not any(
                _covers(pdb, p) for p in leaving
            ):
                continue
            meta = pdb.get("metadata") or {}
            text = (
                f"{row.name}: drain waits for PodDisruptionBudget "
                f"{meta.get('namespace')}/{meta.get('name')}: 0 disruptions allowed "
                f"({status.get('currentHealthy', 0)} of {status.get('expectedPods', 0)} pods "
                f"healthy, {status.get('desiredHealthy', 0)} needed)"
            )
            sick = [(pod, why) for pod in pods if _covers(pdb, pod) and (why := _pod_health(pod))]
            evicted = sorted(status.get("disruptedPods") or {})
            if evicted:  # approved evictions the budget still counts against itself
                ns = meta.get("namespace")
                text += f"; evicting: {', '.join(f'{ns}/{name}' for name in evicted[:3])}"
            if sick:
                named = [
                    f"{pod_key(pod)} on {(pod.get('spec') or {}).get('nodeName') or '-'} ({why})"
                    for pod, why in sorted(sick, key=lambda pw: pod_key(pw[0]))[:3]
                ]
                more = f" and {len(sick) - 3} more" if len(sick) > 3 else ""
                text += f"; not healthy: {', '.join(named)}{more}"
            lines.append(text)
    return tuple(lines)


def snapshot(
    pool: Mapping[str, Any] | None,
    bootc_nodes: Mapping[str, Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    names: Sequence[str],
    target: str | None = None,
    *,
    pods: Sequence[Mapping[str, Any]] = (),
    pdbs: Sequence[Mapping[str, Any]] = (),
) -> Snapshot:
    """The view of ``pool`` and its nodes. With ``target`` (a digest), a pool status
    about another target (the controller has not seen the change yet) counts as
    nothing updated. ``pods`` and ``pdbs`` (every Pod and PodDisruptionBudget) say
    what drains held by a budget wait for."""
    status = (pool or {}).get("status") or {}
    cond = _condition(pool, c.COND_UP_TO_DATE)
    rows = tuple(node_row(n, nodes.get(n), bootc_nodes.get(n)) for n in names)
    waits = drain_waits(rows, pods, pdbs)
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
            waits=waits,
        )
    text = ""
    if cond:
        text = f"UpToDate={cond.get('status')} {cond.get('reason', '')}: {cond.get('message', '')}"
    degraded = _condition(pool, c.COND_DEGRADED)
    bad = degraded.get("status") == "True"
    return Snapshot(
        rows=rows,
        target=current,
        updated=int(status.get("updatedCount") or 0),
        total=int(status.get("nodeCount") or len(names)),
        up_to_date=cond.get("status") == "True",
        condition=text,
        degraded=f"Degraded=True {degraded.get('reason', '')}: {degraded.get('message', '')}"
        if bad
        else "",
        degraded_reason=str(degraded.get("reason") or "") if bad else "",
        waits=waits,
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
    ]
    if snap.degraded:
        lines.append(f"  {_paint(snap.degraded, '31', color)}")
    lines += [
        "",
        f"  {'NODE':<12} {'ZONE':<7} {'STATE':<{STATE_WIDTH}} {'BOOTED':<20} {'READY':<6} "
        f"{'CORDONED':<9} {'SLOT':<5} {'CHECK'}",
    ]
    for row in snap.rows:
        label = labels.get(row.booted, "")
        booted = f"{label} {short(row.booted)}".strip() if row.booted else "-"
        state = _paint(f"{row.state:<{STATE_WIDTH}}", STATE_COLORS.get(row.state, "0"), color)
        name = f"{row.name} *" if row.canary else row.name
        lines.append(
            f"  {name:<12} {row.zone:<7} {state} {booted:<20} "
            f"{'yes' if row.ready else 'NO':<6} {'yes' if row.cordoned else 'no':<9} "
            f"{'yes' if row.in_slot else '-':<5} {row.check or '-'}"
        )
        if row.message:
            lines.append(f"    {row.message[:100]}")
    if any(row.canary for row in snap.rows):
        lines.append("  * canary (bootc.dev/canary): updates first, alone")
    lines += [f"  {_paint(wait, '33', color)}" for wait in snap.waits]
    lines += [
        "",
        f"  unavailable now {snap.unavailable} (max so far {max_unavailable}); "
        f"staging {snap.staging}; in reboot slots {snap.in_slots}; reboots {reboots}",
    ]
    return lines


def describe_row(row: NodeRow, labels: Mapping[str, str]) -> str:
    """``Checking on v2 (cordoned, in slot, boot Pending)``: a boot assessment only
    while it is not Complete (every healthy node's normal state)."""
    booted = labels.get(row.booted) or short(row.booted) or "-"
    flags = [f for f, on in (("cordoned", row.cordoned), ("in slot", row.in_slot)) if on]
    if not row.ready:
        flags.append("NotReady")
    if row.check and row.check != "Complete":
        flags.append(f"boot {row.check}")
    return f"{row.state} on {booted}" + (f" ({', '.join(flags)})" if flags else "")


def changes(before: Snapshot | None, after: Snapshot, labels: Mapping[str, str]) -> list[str]:
    """One line per node whose row changed (``was -> now``, plus its note when that
    changed), one when the pool's progress or Degraded condition changed, and each
    new line of what a drain waits for."""
    out: list[str] = []
    old = {r.name: r for r in before.rows} if before is not None else {}
    for row in after.rows:
        prev = old.get(row.name)
        now = describe_row(row, labels)
        was = describe_row(prev, labels) if prev is not None else None
        noted = row.message and (prev is None or prev.message != row.message)
        if was == now and not noted:
            continue
        line = f"{row.name}: {now}" if was in (None, now) else f"{row.name}: {was} -> {now}"
        out.append(f"{line}: {row.message[:160]}" if noted else line)
    if before is None or (before.updated, before.condition, before.degraded) != (
        after.updated,
        after.condition,
        after.degraded,
    ):
        text = f"pool: {after.updated}/{after.total} updated; {after.condition}"
        out.append(f"{text}; {after.degraded}" if after.degraded else text)
    seen = before.waits if before is not None else ()
    out += [wait for wait in after.waits if wait not in seen]
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
