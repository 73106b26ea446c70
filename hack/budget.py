"""The test run's budget table: what ``make test`` printed at its end, made from data.

``hack/test.sh`` records into one directory (``$BOOTC_OPERATOR_BUDGET_DIR``):

- ``phases.tsv``: ``NAME<TAB>SECONDS<TAB>STATUS`` per phase, in order (setup, lint and
  types, unit, waiting for builds, e2e, ...): the phases follow each other, so with
  ``total`` they account for the whole run;
- ``total``: the run's wall-clock seconds; ``times``: bash's ``times`` at the end (the
  CPU of the children it waited for: builds, lint, tests);
- ``builds.tsv``: ``TAG<TAB>SECONDS<TAB>WHAT`` per cold build or package install
  (``hack/lib/cache.sh``, ``hack/lib/apt-install.sh`` append one line each when they
  did the work; a warm cache appends nothing). They run in the background, overlapping
  the phases, so they are shown beside them, never added to them;
- ``tests.jsonl``: one JSON object per test (``hack/pytest_budget.py``): node id, tier,
  seconds (setup + call + teardown), outcome, start and stop (epoch seconds), and the
  CPU seconds of the test and the processes it started.

``python -m hack.budget DIR`` prints the table; the budgets are docs/development.md's.
The arithmetic lives in pure functions (``summarize``, ``render``), checked by
``unit/hack/test_budget.py``. Nothing here judges a run: over-budget rows are flagged, the
exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: docs/development.md's budgets, in seconds
BUDGET_COLD = 60 * 60
BUDGET_WARM = 20 * 60
BUDGET_UNIT = 2 * 60
SLOWEST = 15
UNIT_PHASE = "unit"


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    status: str = "ok"


@dataclass(frozen=True)
class Build:
    tag: str
    seconds: float
    what: str = ""


@dataclass(frozen=True)
class Timing:
    nodeid: str
    tier: str
    seconds: float
    outcome: str = "passed"
    start: float = 0.0
    stop: float = 0.0
    cpu: float = 0.0


@dataclass(frozen=True)
class Tier:
    """The tests of one tier: how many, their summed time and the wall-clock span from
    the first one's start to the last one's stop (shorter than the sum when they ran
    in parallel)."""

    name: str
    count: int
    seconds: float
    span: float
    failed: int = 0
    cpu: float = 0.0


@dataclass(frozen=True)
class Summary:
    phases: tuple[Phase, ...]
    #: the run's wall clock minus the phases: what ran between them
    unaccounted: float
    total: float
    #: CPU seconds of the whole run (hack/test.sh's children), 0 when unknown
    total_cpu: float
    cold: bool
    budget: float
    builds: tuple[Build, ...]
    tiers: tuple[Tier, ...]
    slowest: tuple[Timing, ...]
    flags: tuple[str, ...] = field(default=())


def tiers_of(tests: Iterable[Timing]) -> tuple[Tier, ...]:
    """One :class:`Tier` per tier name, in order of first appearance."""
    grouped: dict[str, list[Timing]] = {}
    for t in tests:
        grouped.setdefault(t.tier, []).append(t)
    out = []
    for name, group in grouped.items():
        starts = [t.start for t in group if t.start]
        stops = [t.stop for t in group if t.stop]
        span = max(stops) - min(starts) if starts and stops else sum(t.seconds for t in group)
        failed = sum(1 for t in group if t.outcome == "failed")
        cpu = sum(t.cpu for t in group)
        out.append(Tier(name, len(group), sum(t.seconds for t in group), span, failed, cpu))
    return tuple(out)


def slowest(tests: Iterable[Timing], n: int = SLOWEST) -> tuple[Timing, ...]:
    """The ``n`` slowest tests, slowest first (ties by node id, so the order is stable)."""
    return tuple(sorted(tests, key=lambda t: (-t.seconds, t.nodeid))[:n])


def summarize(
    phases: Sequence[Phase],
    total: float,
    builds: Sequence[Build],
    tests: Sequence[Timing],
    total_cpu: float = 0.0,
) -> Summary:
    """Put the records together; a run that built anything is measured against the
    cold budget, else the warm one."""
    cold = bool(builds)
    budget = BUDGET_COLD if cold else BUDGET_WARM
    flags = []
    if total > budget:
        flags.append(f"the run took {clock(total)}, over its {clock(budget)} budget")
    for p in phases:
        if p.name == UNIT_PHASE and p.seconds > BUDGET_UNIT:
            flags.append(f"the unit tier took {clock(p.seconds)}, over its {clock(BUDGET_UNIT)}")
    return Summary(
        phases=tuple(phases),
        unaccounted=total - sum(p.seconds for p in phases),
        total=total,
        total_cpu=total_cpu,
        cold=cold,
        budget=budget,
        builds=tuple(sorted(builds, key=lambda b: -b.seconds)),
        tiers=tiers_of(tests),
        slowest=slowest(tests),
        flags=tuple(flags),
    )


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour), rounded to the second."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def share(part: float, whole: float) -> str:
    return f"{100 * part / whole:3.0f}%" if whole > 0 else "   -"


def render(s: Summary) -> str:
    """The table, as ``make test`` prints it."""
    kind = "cold (it built)" if s.cold else "warm (nothing to build)"
    lines = [f"== budget: {kind}; budgets in docs/development.md"]
    width = max([len(p.name) for p in s.phases] + [len("between phases"), len("total")])
    for p in s.phases:
        note = "" if p.status == "ok" else f"  {p.status}"
        lines.append(
            f"  {p.name:<{width}}  {clock(p.seconds):>8}  {share(p.seconds, s.total)}{note}"
        )
    lines.append(
        f"  {'between phases':<{width}}  {clock(s.unaccounted):>8}  {share(s.unaccounted, s.total)}"
    )
    cpu = f"; CPU {clock(s.total_cpu)}" if s.total_cpu else ""
    lines.append(f"  {'total':<{width}}  {clock(s.total):>8}  (budget {clock(s.budget)}{cpu})")
    if s.builds:
        lines.append("  cold builds and installs (in the background, beside the phases):")
        bw = max(len(b.tag) for b in s.builds)
        for b in s.builds:
            what = f"  {b.what}" if b.what else ""
            lines.append(f"    {b.tag:<{bw}}  {clock(b.seconds):>8}{what}")
    if s.tiers:
        lines.append("  tiers: tests, summed test time, wall-clock span, CPU:")
        tw = max(len(t.name) for t in s.tiers)
        for t in s.tiers:
            failed = f", {t.failed} failed" if t.failed else ""
            lines.append(
                f"    {t.name:<{tw}}  {t.count:5d} tests  {clock(t.seconds):>8}  "
                f"{clock(t.span):>8}  {clock(t.cpu):>8}{failed}"
            )
    if s.slowest:
        lines.append(f"  the {len(s.slowest)} slowest tests (setup + call + teardown; CPU):")
        lines.extend(f"    {t.seconds:7.1f}s {t.cpu:7.1f}s  {t.nodeid}" for t in s.slowest)
    lines.extend(f"  over budget: {flag}" for flag in s.flags)
    return "\n".join(lines)


# ---------------------------------------------------------------- reading the records


def _rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.split("\t") for line in text.splitlines() if line.strip()]


def read_phases(path: Path) -> list[Phase]:
    return [Phase(r[0], float(r[1]), r[2] if len(r) > 2 else "ok") for r in _rows(path)]


def read_builds(path: Path) -> list[Build]:
    return [Build(r[0], float(r[1]), r[2] if len(r) > 2 else "") for r in _rows(path)]


def read_tests(path: Path) -> list[Timing]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        out.append(
            Timing(
                str(d["nodeid"]),
                str(d["tier"]),
                float(d["seconds"]),
                str(d.get("outcome", "passed")),
                float(d.get("start", 0.0)),
                float(d.get("stop", 0.0)),
                float(d.get("cpu", 0.0)),
            )
        )
    return out


def children_cpu(times: str) -> float:
    """User + system seconds of the children, from bash's ``times`` output (its second
    line, e.g. ``12m3.250s 1m0.125s``); 0 when it is not that."""
    lines = times.strip().splitlines()
    if len(lines) != 2:
        return 0.0
    total = 0.0
    for part in lines[1].split():
        m = re.fullmatch(r"(\d+)m([\d.]+)s", part)
        if m is None:
            return 0.0
        total += int(m.group(1)) * 60 + float(m.group(2))
    return total


def load(directory: Path) -> Summary:
    phases = read_phases(directory / "phases.tsv")
    try:
        total = float((directory / "total").read_text())
    except FileNotFoundError:
        total = sum(p.seconds for p in phases)
    try:
        total_cpu = children_cpu((directory / "times").read_text())
    except FileNotFoundError:
        total_cpu = 0.0
    return summarize(
        phases,
        total,
        read_builds(directory / "builds.tsv"),
        read_tests(directory / "tests.jsonl"),
        total_cpu,
    )


def merged_times(old: dict[str, float], tests: Iterable[Timing]) -> dict[str, float]:
    """The per-test times ``hack/pytest_parallel.py`` orders by: this run's passed tests
    over the last ones (a test run partly, e.g. with ``-k``, keeps the others)."""
    out = dict(old)
    out.update({t.nodeid: round(t.seconds, 2) for t in tests if t.outcome == "passed"})
    return out


def save_times(directory: Path, path: Path) -> None:
    """Merge this run's test times into ``path``, atomically (other checkouts' runs may
    read or write it at the same time)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    if not isinstance(old, dict):
        old = {}
    merged = merged_times(old, read_tests(directory / "tests.jsonl"))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(merged, indent=0, sort_keys=True) + "\n")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.budget", description=__doc__)
    parser.add_argument("dir", type=Path, help="the records (hack/test.sh: .cache/budget)")
    parser.add_argument(
        "--save-times",
        type=Path,
        metavar="FILE",
        help="also merge the tests' times into FILE (hack/pytest_parallel.py's order)",
    )
    args = parser.parse_args(argv)
    print(render(load(args.dir)))
    if args.save_times:
        save_times(args.dir, args.save_times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
