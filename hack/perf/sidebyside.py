"""This controller beside the Go bootc-operator (``hack/bench --go-controller BIN``).

Both run, alternating, against the same harness apiserver and simulated fleet
(``hack.perf.scale``); every figure compared is one that can be measured from
outside either process: latencies from the observer's watch, CPU and peak RSS
from /proc, start to ready (caches synced), and API requests as the *apiserver*
counted them. kube-apiserver's ``apiserver_request_total`` has no label naming
the client (user agent or user), so a controller's requests are the apiserver's
count less what every other client (the fleet, the harness) counted of its own
(:func:`controller_requests`); for this controller that agrees with its own
request metric (the run's cross-check).

The pure part: the figures of one run (:func:`figures`), their median over rounds
and the side-by-side table with ratios ours / Go (:func:`table`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

Requests = Counter[tuple[str, str]]  # (verb, resource[/subresource]) -> count


def controller_requests(server: Requests, others: Requests, resources: Iterable[str]) -> Requests:
    """A controller's requests: the apiserver's count less every other client's own,
    for ``resources`` (by the part before a subresource), WATCH left out (the apiserver
    counts an open watch only when it ends). Never below zero."""
    wanted = set(resources)
    out: Requests = Counter()
    for (verb, res), value in server.items():
        if verb == "WATCH" or res.split("/")[0] not in wanted:
            continue
        mine = value - others.get((verb, res), 0)
        if mine > 0:
            out[(verb, res)] = mine
    return out


def _p50_ms(d: dict[str, Any]) -> float | None:
    p50 = (d or {}).get("p50")
    return None if p50 is None else p50 * 1000


def _requests_not_events(r: dict[str, Any]) -> int:
    return sum(v for k, v in r["controller"]["requests"].items() if "events" not in k)


#: (label, unit, the figure from one size's result of hack.perf.scale)
FIGURES: list[tuple[str, str, Callable[[dict[str, Any]], float | None]]] = [
    ("membership convergence", "s", lambda r: r["membership"]["seconds"]),
    ("rollout", "s", lambda r: r["rollout"]["actual_seconds"]),
    ("hand-off p50 (slot freed -> next taken)", "ms", lambda r: _p50_ms(r["rollout"]["handoff"])),
    ("drain path p50 (slot -> Booted)", "ms", lambda r: _p50_ms(r["rollout"]["drain_path"])),
    ("reaction p50", "ms", lambda r: _p50_ms(r["rollout"]["reaction_latency"])),
    ("controller CPU, whole run", "s", lambda r: r["controller"]["cpu_seconds"]),
    ("peak RSS", "MiB", lambda r: r["controller"]["peak_rss_mib"]),
    ("start to ready (caches synced)", "s", lambda r: r["controller_start"]["seconds_to_ready"]),
    ("CPU to ready", "s", lambda r: r["controller_start"]["cpu_seconds"]),
    ("API requests, not Events", "", _requests_not_events),
    ("  GET nodes", "", lambda r: r["controller"]["requests"].get("GET nodes", 0)),
    (
        "  Events",
        "",
        lambda r: sum(v for k, v in r["controller"]["requests"].items() if "events" in k),
    ),
]


def figures(result: dict[str, Any]) -> dict[str, float | None]:
    """Every figure of :data:`FIGURES` from one run (None where it is missing)."""
    out: dict[str, float | None] = {}
    for label, _, get in FIGURES:
        try:
            value = get(result)
        except (KeyError, TypeError):
            value = None
        out[label] = None if value is None else float(value)
    return out


def median(runs: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each figure's median over the runs that have it."""
    out: dict[str, float | None] = {}
    for label, _, _ in FIGURES:
        values = [v for run in runs if (v := run.get(label)) is not None]
        out[label] = statistics.median(values) if values else None
    return out


def ratio(ours: float | None, go: float | None) -> float | None:
    """ours / Go; None when either is missing or Go's is zero."""
    if ours is None or go is None or go == 0:
        return None
    return ours / go


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("ms", "") or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def table(n: int, ours: list[dict[str, float | None]], go: list[dict[str, float | None]]) -> str:
    """The side-by-side table for size ``n``: medians, each run's value, ours / Go."""
    mo, mg = median(ours), median(go)
    rows = [
        (
            f"{label} ({unit})" if unit else label,
            _fmt(mo[label], unit),
            _fmt(mg[label], unit),
            "-" if (q := ratio(mo[label], mg[label])) is None else f"{q:.2f}x",
            " / ".join(_fmt(run.get(label), unit) for run in ours),
            " / ".join(_fmt(run.get(label), unit) for run in go),
        )
        for label, unit, _ in FIGURES
    ]
    head = (
        f"N = {n}: median of {len(ours)} / {len(go)}",
        "ours",
        "Go",
        "ours/Go",
        "ours, each run",
        "Go, each run",
    )
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = []
    for row in [head, *rows]:
        rest = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in rest]
        lines.append("  ".join(cells))
    return "\n".join(lines)
