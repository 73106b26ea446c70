"""A pytest plugin that records each test's time for the budget table (``hack/budget.py``).

Loaded by pyproject's ``addopts`` (``-p hack.pytest_budget``); it writes only when
``$BOOTC_OPERATOR_BUDGET_DIR`` is set (``hack/test.sh`` sets it): one JSON line per test
to ``tests.jsonl`` there, with its node id, tier, seconds (setup + call + teardown),
outcome, start and stop. Under pytest-xdist it runs in the controlling process, which
receives every worker's reports, so one process appends.

The tier: ``$BOOTC_OPERATOR_TEST_TIER`` when set (a phase of ``hack/test.sh`` that runs
one tier, e.g. ``real-bootc``); else ``unit`` under ``unit/``; else ``slow: MODULE`` for
a test marked ``slow``; else ``e2e``.
"""

from __future__ import annotations

import json
import os
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
    if isinstance(keywords, dict | set | frozenset) and "slow" in keywords:
        stem = Path(path).stem.removeprefix("test_")
        return f"slow: {stem}"
    return "e2e"


def plain_nodeid(nodeid: str) -> str:
    """The node id without the ``@group`` pytest-xdist's ``loadgroup`` appends."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


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
            },
        )
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
    if not directory or hasattr(config, "workerinput"):  # an xdist worker: its controller writes
        return
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    config.pluginmanager.register(
        Recorder(out / "tests.jsonl", os.environ.get(TIER_ENV) or None), "budget-recorder"
    )
