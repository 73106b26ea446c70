"""The budget table ``make test`` ends with (``hack/budget.py``): its arithmetic, from
records written the way ``hack/test.sh``, the build scripts and the pytest plugin
write them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from hack.budget import (
    BUDGET_COLD,
    BUDGET_WARM,
    Build,
    Phase,
    Timing,
    children_cpu,
    clock,
    load,
    render,
    slowest,
    summarize,
    tiers_of,
)
from hack.pytest_budget import plain_nodeid, tier_of, tree_cpu

ROOT = Path(__file__).resolve().parents[2]


def timings(n: int) -> list[Timing]:
    """``n`` tests taking 1..n seconds, alternately unit and e2e, the e2e ones two at once."""
    out = []
    for i in range(1, n + 1):
        tier = "unit" if i % 2 else "e2e"
        start = 1000.0 + (i // 2) * 100
        out.append(
            Timing(f"{tier}/test_m.py::test_{i}", tier, float(i), "passed", start, start + i)
        )
    return out


def test_phases_and_the_rest_add_up_to_the_total() -> None:
    phases = [Phase("setup", 30), Phase("lint + types", 90), Phase("unit", 100)]
    s = summarize(phases, 300.0, [], [])
    assert s.unaccounted == 300.0 - 220.0
    assert sum(p.seconds for p in s.phases) + s.unaccounted == s.total
    table = render(s)
    assert "  setup" in table and "0:30" in table and " 10%" in table
    assert re.search(r"between phases\s+1:20\s+27%", table), table  # 80 s of 300
    assert re.search(r"total\s+5:00\s+\(budget 20:00\)", table), table


def test_a_run_that_built_is_held_to_the_cold_budget() -> None:
    warm = summarize([Phase("e2e", 10)], 10.0, [], [])
    cold = summarize([Phase("e2e", 10)], 10.0, [Build("build-binaries", 400, "built")], [])
    assert (warm.cold, warm.budget) == (False, BUDGET_WARM)
    assert (cold.cold, cold.budget) == (True, BUDGET_COLD)
    assert "build-binaries" in render(cold) and "6:40" in render(cold)
    assert "cold builds" not in render(warm)


def test_over_budget_is_flagged_not_failed() -> None:
    s = summarize([Phase("unit", 121), Phase("e2e", 1200)], 21 * 60 + 1, [], [])
    assert s.flags == (
        "the run took 21:01, over its 20:00 budget",
        "the unit tier took 2:01, over its 2:00",
    )
    assert not summarize([Phase("unit", 120)], 1200, [], []).flags


def test_the_slowest_are_the_top_fifteen_slowest_first() -> None:
    ts = timings(40)
    top = slowest(ts)
    assert [t.seconds for t in top] == [float(i) for i in range(40, 25, -1)]
    ties = [Timing("b", "e2e", 5), Timing("a", "e2e", 5), Timing("c", "e2e", 6)]
    assert [t.nodeid for t in slowest(ties, 2)] == ["c", "a"]


def test_tiers_sum_their_tests_and_span_first_start_to_last_stop() -> None:
    ts = timings(6)  # unit: 1, 3, 5; e2e: 2, 4, 6
    unit, e2e = tiers_of(ts)
    assert (unit.name, unit.count, unit.seconds) == ("unit", 3, 9.0)
    assert (e2e.name, e2e.count, e2e.seconds) == ("e2e", 3, 12.0)
    # e2e: test_2 at 1100..1102, test_4 at 1200..1204, test_6 at 1300..1306
    assert e2e.span == 206.0
    assert tiers_of([Timing("x", "e2e", 3.0, "failed")])[0].failed == 1


def test_clock() -> None:
    assert [clock(x) for x in (0, 59.4, 59.6, 61, 3599, 3600, 3725)] == [
        "0:00",
        "0:59",
        "1:00",
        "1:01",
        "59:59",
        "1:00:00",
        "1:02:05",
    ]


def test_tiers_of_tests() -> None:
    assert tier_of("unit/test_x.py::t", {}) == "unit"
    assert tier_of("unit/policy/test_x.py::t", {}) == "unit"
    assert tier_of("e2e/test_x.py::t", {"test_x.py": 1}) == "e2e"
    assert tier_of("e2e/test_chaos.py::t", {"slow": 1}) == "slow: chaos"
    assert tier_of("e2e/test_daemon.py::t[real]", {}, "real-bootc") == "real-bootc"
    # a real-bootc test run in the e2e phase (the bootc build was there) is still one
    assert tier_of("e2e/test_daemon.py::t[real]", {"realbootc": 1}) == "real-bootc"
    assert tier_of("e2e/test_realnode.py::t", {"realbootc": 1, "slow": 1}) == "real-bootc"
    assert plain_nodeid("e2e/test_x.py::t@e2e/test_x.py") == "e2e/test_x.py::t"
    assert plain_nodeid("e2e/test_x.py::t[a@b]") == "e2e/test_x.py::t[a@b]"


def test_the_table_from_records_as_the_scripts_write_them(tmp_path: Path) -> None:
    (tmp_path / "phases.tsv").write_text("setup\t12.5\tok\nunit\t60.0\tfailed (1)\n")
    (tmp_path / "total").write_text("80.0")
    # hack/lib/budget.sh's own line, from bash
    subprocess.run(
        [
            "bash",
            "-c",
            f"source {ROOT}/hack/lib/budget.sh; s=$EPOCHREALTIME; "
            'budget_note build-helm "$s" built',
        ],
        env={
            "BOOTC_OPERATOR_BUDGET_DIR": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        },
        check=True,
    )
    rows = [json.dumps(t.__dict__) for t in timings(3)]
    (tmp_path / "tests.jsonl").write_text("\n".join(rows) + "\n")
    s = load(tmp_path)
    assert [p.name for p in s.phases] == ["setup", "unit"]
    assert s.total == 80.0 and s.unaccounted == 7.5
    assert [(b.tag, b.what) for b in s.builds] == [("build-helm", "built")]
    assert 0.0 <= s.builds[0].seconds < 60.0
    assert s.cold
    assert [t.seconds for t in s.slowest] == [3.0, 2.0, 1.0]
    assert "failed (1)" in render(s)


def test_a_build_into_another_cache_is_not_the_runs(tmp_path: Path) -> None:
    """A test's own scratch build (another $BOOTC_OPERATOR_CACHE) is left out."""
    script = f'source {ROOT}/hack/lib/budget.sh; s=$EPOCHREALTIME; budget_note build-x "$s" built'
    env = {"BOOTC_OPERATOR_BUDGET_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    env["BOOTC_OPERATOR_BUDGET_CACHE"] = "/the/runs/cache"
    subprocess.run(
        ["bash", "-c", script], env={**env, "BOOTC_OPERATOR_CACHE": "/scratch"}, check=True
    )
    assert not (tmp_path / "builds.tsv").exists()
    subprocess.run(
        ["bash", "-c", script],
        env={**env, "BOOTC_OPERATOR_CACHE": "/the/runs/cache"},
        check=True,
    )
    assert (tmp_path / "builds.tsv").read_text().startswith("build-x\t")


def test_cpu_adds_up_per_tier_and_for_the_run() -> None:
    ts = [Timing("a", "e2e", 5, cpu=1.5), Timing("b", "e2e", 1, cpu=2.0)]
    (e2e,) = tiers_of(ts)
    assert e2e.cpu == 3.5
    assert children_cpu("0m0.010s 0m0.002s\n12m3.250s 1m0.125s\n") == 12 * 60 + 3.25 + 60.125
    assert children_cpu("garbage") == 0.0
    s = summarize([Phase("e2e", 6)], 6.0, [], ts, total_cpu=61.0)
    assert "CPU 1:01" in render(s)
    assert "    6.0s     2.0s" not in render(s)  # each test's own: wall, then CPU
    assert "      5.0s     1.5s  a" in render(s)


def test_a_test_s_cpu_counts_the_processes_it_started() -> None:
    """``tree_cpu`` sees a child's CPU while it runs, and after it was reaped."""
    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\n"
        "print('burnt', flush=True)\n"
        "sys.stdin.read()\n"
    )
    before = tree_cpu()
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "burnt\n"
        assert tree_cpu() - before >= 0.3  # alive: a descendant
    finally:
        child.communicate(timeout=30)
    assert tree_cpu() - before >= 0.3  # reaped: in this process's RUSAGE_CHILDREN
