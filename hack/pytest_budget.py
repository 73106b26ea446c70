"""A pytest plugin that records each test's time for the budget table (``hack/budget.py``).

Loaded by pyproject's ``addopts`` (``-p hack.pytest_budget``); it writes only when
``$BOOTC_OPERATOR_BUDGET_DIR`` is set (``hack/test.sh`` sets it): one JSON line per test
to ``tests.jsonl`` there, with its node id, tier, seconds (setup + call + teardown),
outcome, start, stop and CPU seconds (:func:`tree_cpu`: the test process and everything
it started). Under pytest-xdist it runs in the controlling process, which
receives every worker's reports, so one process appends.

The tier: ``$BOOTC_OPERATOR_TEST_TIER`` when set (a phase of ``hack/test.sh`` that runs
one tier, e.g. ``real-bootc``); else ``unit`` under ``unit/``; else ``real-bootc`` for a
test marked ``realbootc``; else ``slow: MODULE`` for a test marked ``slow``; else ``e2e``.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

DIR_ENV = "BOOTC_OPERATOR_BUDGET_DIR"
TIER_ENV = "BOOTC_OPERATOR_TEST_TIER"


def tier_of(nodeid: str, keywords: object, forced: str | None = None) -> str:
    """The budget table's tier of a test (see the module docstring)."""
    if forced:
        return forced
    path = nodeid.split("::", 1)[0]
    if path.startswith("unit/"):
        return "unit"
    marked = keywords if isinstance(keywords, dict | set | frozenset) else ()
    if "realbootc" in marked:  # in the e2e phase too, when the bootc build was there
        return "real-bootc"
    if "slow" in marked:
        stem = Path(path).stem.removeprefix("test_")
        return f"slow: {stem}"
    return "e2e"


def plain_nodeid(nodeid: str) -> str:
    """The node id without the ``@group`` pytest-xdist's ``loadgroup`` appends."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def _cpu_of(pid: int) -> float:
    """User + system seconds of ``pid`` and of its children it has reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # from the state on: utime is field 14
    return sum(int(f) for f in fields[11:15]) / _TICK


def _descendants(pid: int) -> list[int]:
    """The live processes under ``pid`` (through /proc/PID/task/TID/children)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            found.extend(int(c) for c in children)
            todo.extend(int(c) for c in children)
    return found


def tree_cpu() -> float:
    """CPU seconds used so far by this process and everything it started: itself, the
    children it reaped, and every live descendant with what those reaped. Between two
    calls, the CPU a test cost (its share of session processes, such as the control
    plane, included; a process that left the tree, e.g. double-forked, is lost)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    return total + sum(_cpu_of(p) for p in _descendants(os.getpid()))


_TICK = os.sysconf("SC_CLK_TCK")
_CPU_KEY = "budget_cpu_seconds"


class CpuMeter:
    """In the process that runs the tests (an xdist worker, or pytest alone): each test's
    CPU (:func:`tree_cpu` before its setup, after its teardown) travels to the recorder
    in its teardown report's ``user_properties``."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.started[item.nodeid] = tree_cpu()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "teardown" and item.nodeid in self.started:
            used = tree_cpu() - self.started.pop(item.nodeid)
            report.user_properties.append((_CPU_KEY, round(used, 3)))
        return report


class Recorder:
    def __init__(self, out: Path, forced_tier: str | None) -> None:
        self.out = out
        self.forced_tier = forced_tier
        self.pending: dict[str, dict[str, object]] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = plain_nodeid(report.nodeid)
        rec = self.pending.setdefault(
            report.nodeid,
            {
                "nodeid": nodeid,
                "tier": tier_of(nodeid, dict(report.keywords), self.forced_tier),
                "seconds": 0.0,
                "outcome": "passed",
                "start": report.start,
                "stop": report.stop,
                "cpu": 0.0,
            },
        )
        for key, value in report.user_properties:
            if key == _CPU_KEY and isinstance(value, int | float):
                rec["cpu"] = float(value)
        rec["seconds"] = float(rec["seconds"]) + report.duration  # type: ignore[arg-type]
        rec["stop"] = report.stop
        if report.failed:
            rec["outcome"] = "failed"
        elif report.skipped and report.when != "teardown":
            rec["outcome"] = "skipped"
        if report.when == "teardown":
            del self.pending[report.nodeid]
            with self.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    directory = os.environ.get(DIR_ENV)
    if not directory:
        return
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no":
        config.pluginmanager.register(CpuMeter(), "budget-cpu-meter")  # tests run here
    if hasattr(config, "workerinput"):  # an xdist worker: its controller writes
        return
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    config.pluginmanager.register(
        Recorder(out / "tests.jsonl", os.environ.get(TIER_ENV) or None), "budget-recorder"
    )
