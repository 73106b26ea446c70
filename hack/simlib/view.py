"""The demo's live view of a rollout: pure functions from API objects to lines of text.

``snapshot(pool, bootc_nodes, nodes, names)`` turns what the informers hold into a
``Snapshot`` (one ``NodeRow`` per node); ``render(...)`` draws it as a progress bar
plus the node table; ``changes(before, after)`` lists what changed between two
snapshots (the line-per-change output when stdout is not a terminal).

The rows, their states and the table itself are ``bootc_operator.kubectl.table``'s
(``kubectl bootc status`` draws the same table). Every text taken from the cluster
(the rows, the pool's conditions, what a drain waits for) is cleaned as ``kubectl
bootc`` cleans it (``kubectl.safetext.clean``: no control character reaches the
terminal); only ``render``'s own colours are escape sequences.

A drain held by a PodDisruptionBudget has no timeout unless the pool sets
``drainTimeoutSeconds``, so the view says what it waits for (``drain_waits``, from
the Pods and PodDisruptionBudgets when the caller passes them): the budget, its
healthy count and the Pods it counts as not healthy, e.g. ``worker-6: drain waits
for PodDisruptionBudget default/web: 0 disruptions allowed (5 of 6 pods healthy, 5
needed); not healthy: default/web-x on worker-2 (Running, Ready=False)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.kubectl.safetext import clean
from bootc_operator.kubectl.table import (
    NodeRow,
    condition_of,
    node_row,
    paint,
    short,
    table_lines,
)
from bootc_operator.policy.drainplan import must_leave, pod_key
from bootc_operator.policy.selectors import matches

BAR_WIDTH = 30


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


def _pod_health(pod: Mapping[str, Any]) -> str:
    """Why a Pod does not count as healthy ("" when it does): ``Pending, unscheduled``,
    ``terminating``, ``Running, Ready=False`` (plus the condition's reason, if any)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "terminating"
    ready = condition_of(pod, "Ready")
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
    cond = condition_of(pool, c.COND_UP_TO_DATE)
    rows = tuple(_clean_row(node_row(n, nodes.get(n), bootc_nodes.get(n))) for n in names)
    waits = tuple(clean(wait) for wait in drain_waits(rows, pods, pdbs))
    current = clean(str(status.get("targetDigest") or ""))
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
    degraded = condition_of(pool, c.COND_DEGRADED)
    bad = degraded.get("status") == "True"
    return Snapshot(
        rows=rows,
        target=current,
        updated=int(status.get("updatedCount") or 0),
        total=int(status.get("nodeCount") or len(names)),
        up_to_date=cond.get("status") == "True",
        condition=clean(text),
        degraded=clean(f"Degraded=True {degraded.get('reason', '')}: {degraded.get('message', '')}")
        if bad
        else "",
        degraded_reason=clean(str(degraded.get("reason") or "")) if bad else "",
        waits=waits,
    )


def _clean_row(row: NodeRow) -> NodeRow:
    """``row`` with every text cleaned (``safetext.clean``); the same row when clean."""
    text = {f.name: getattr(row, f.name) for f in fields(row)}
    cleaned: dict[str, Any] = {
        k: clean(v) for k, v in text.items() if isinstance(v, str) and clean(v) != v
    }
    return replace(row, **cleaned) if cleaned else row


def bar(done: int, total: int, width: int = BAR_WIDTH, *, ascii_only: bool = False) -> str:
    filled = 0 if total <= 0 else round(width * min(done, total) / total)
    full, empty = ("#", "-") if ascii_only else ("█", "░")
    return "[" + full * filled + empty * (width - filled) + "]"


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
        lines.append(f"  {paint(snap.degraded, '31', color)}")
    lines += ["", *table_lines(snap.rows, labels=labels, color=color)]
    lines += [f"  {paint(wait, '33', color)}" for wait in snap.waits]
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
