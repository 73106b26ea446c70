"""How hack/test.sh's parallel workers get their work (``hack/pytest_parallel.py``):
a module is one unit (its module fixtures made once), ``xdist_group`` joins modules,
``spread`` splits one, units go out longest first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hack.pytest_parallel import (
    DEFAULT_SECONDS,
    SLOW_SECONDS,
    Units,
    order,
    pick,
    read_times,
    read_units,
    unit_of,
    write_units,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_test_belongs_to_its_group_else_itself_when_spread_else_its_module() -> None:
    assert unit_of("e2e/test_a.py::t", [], False) == "e2e/test_a.py"
    assert unit_of("e2e/test_a.py::C::t", [], False) == "e2e/test_a.py"
    assert unit_of("e2e/test_a.py::t[x]", [], True) == "e2e/test_a.py::t[x]"
    assert unit_of("e2e/test_a.py::t", ["net"], True) == "net"
    assert unit_of("e2e/test_a.py::t", ["b", "a"], False) == "a_b"


def test_units_go_out_longest_first_and_keep_their_tests_order() -> None:
    tests = [
        ("a.py::1", "a.py", False),
        ("b.py::1", "b.py", False),
        ("a.py::2", "a.py", False),
        ("c.py::1", "c.py", False),
        ("b.py::2", "b.py", False),
    ]
    times = {"a.py::1": 1, "a.py::2": 2, "b.py::1": 10, "b.py::2": 0.5, "c.py::1": 4}
    ranked = [tests[i][0] for i in order(tests, times)]
    assert ranked == ["b.py::1", "b.py::2", "c.py::1", "a.py::1", "a.py::2"]


def test_without_times_slow_modules_go_first_then_the_bigger_ones() -> None:
    tests = [("f.py::1", "f.py", False), ("f.py::2", "f.py", False), ("s.py::1", "s.py", True)]
    tests += [("g.py::1", "g.py", False)]
    assert SLOW_SECONDS > 2 * DEFAULT_SECONDS
    assert [tests[i][0] for i in order(tests, {})] == ["s.py::1", "f.py::1", "f.py::2", "g.py::1"]
    # ties keep the collection's order
    ties = [("x.py::1", "x.py", False), ("w.py::1", "w.py", False)]
    assert order(ties, {}) == [0, 1]


def test_times_are_read_leniently(tmp_path: Path) -> None:
    assert read_times(None) == {}
    assert read_times(str(tmp_path / "none.json")) == {}
    (tmp_path / "t.json").write_text(json.dumps({"a": 1, "b": "x", "c": 2.5}))
    assert read_times(str(tmp_path / "t.json")) == {"a": 1.0, "c": 2.5}
    (tmp_path / "bad.json").write_text("[")
    assert read_times(str(tmp_path / "bad.json")) == {}


def test_heavy_units_wait_for_room_elsewhere_and_may_queue_behind_their_own() -> None:
    queue = ["chaos", "sim", "crds", "daemon"]
    heavy = {"chaos", "sim"}
    assert pick(queue, heavy, 0, 2) == "chaos"
    assert pick(queue[1:], heavy, 1, 2) == "sim"
    assert pick(queue[1:], heavy, 2, 2) == "crds", "two heavy run elsewhere: a light one"
    assert pick(queue[1:], heavy, 1, 1) == "crds", "one heavy elsewhere, limit 1"
    # this worker's own heavy unit is not counted: the next heavy one queues behind it
    # (refused, a worker holding back its unit's last test would wait forever)
    assert pick(["sim"], heavy, 0, 1) == "sim"
    assert pick(["sim"], heavy, 2, 2) is None, "only heavy left, room taken elsewhere: wait"
    assert pick([], heavy, 0, 2) is None


def test_units_reach_the_scheduler_through_a_file(tmp_path: Path) -> None:
    path = str(tmp_path / "units.json")
    units = Units({"e2e/a.py::t": "e2e/a.py", "e2e/b.py::t": "net"}, frozenset({"net"}))
    write_units(path, units)
    assert read_units(path) == units
    assert read_units(None) == Units({}, frozenset())
    (tmp_path / "bad.json").write_text('{"units": [1], "heavy": 3}')
    assert read_units(str(tmp_path / "bad.json")) == Units({}, frozenset())


SUITE = {
    "conftest.py": """
import os, pytest
@pytest.fixture(scope="module")
def made(request):
    path = os.path.join(os.environ["OUT"], "made-" + request.module.__name__)
    with open(path, "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
""",
    "test_a.py": """
import os
def record(name):
    with open(os.path.join(os.environ["OUT"], name), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
def test_a1(made): record("a1")
def test_a2(made): record("a2")
def test_a3(made): record("a3")
""",
    "test_b.py": """
import pytest
from test_a import record
pytestmark = pytest.mark.xdist_group("shared-thing")
def test_b1(): record("b1")
""",
    "test_c.py": """
import pytest
from test_a import record
pytestmark = pytest.mark.xdist_group("shared-thing")
def test_c1(): record("c1")
@pytest.mark.serial
def test_c2(): record("c2")
""",
    "test_d.py": """
import pytest
from test_a import record
pytestmark = pytest.mark.spread
def test_d1(): record("d1")
def test_d2(): record("d2")
def test_d3(): record("d3")
def test_d4(): record("d4")
""",
}


def run_suite(tmp_path: Path, suite_files: dict[str, str]) -> tuple[Path, str]:
    """``suite_files`` run as hack/test.sh runs the e2e tier (2 workers); the directory
    the tests record into, and pytest's output (it passed)."""
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    for name, text in suite_files.items():
        (suite / name).write_text(text)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "xdist",
            "-p",
            "hack.pytest_parallel",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "--no-loadscope-reorder",
            "-m",
            "not serial",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(suite),
            str(suite),
        ],
        cwd=suite,
        # only the plugins needed: starting three interpreters costs enough
        env={
            **os.environ,
            "OUT": str(out),
            "PYTHONPATH": str(ROOT),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out, res.stdout


def test_under_xdist_a_module_is_one_worker_s_and_groups_share_one(tmp_path: Path) -> None:
    out, _ = run_suite(tmp_path, SUITE)
    ran = {p.name: p.read_text() for p in out.iterdir() if not p.name.startswith("made-")}
    assert sorted(ran) == ["a1", "a2", "a3", "b1", "c1", "d1", "d2", "d3", "d4"]  # c2: serial
    assert ran["a1"] == ran["a2"] == ran["a3"]
    assert (out / "made-test_a").read_text().count("\n") == 1  # the module fixture, once
    assert ran["b1"] == ran["c1"]


HEAVY_SUITE = {
    "test_h.py": """
import os, pytest
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.spread]
def record(name):
    with open(os.path.join(os.environ["OUT"], name), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
def test_h1(): record("h1")
def test_h2(): record("h2")
def test_h3(): record("h3")
""",
}


def test_heavy_units_one_at_a_time_never_stall_the_run(tmp_path: Path) -> None:
    """Only heavy units (one at a time): they queue on one worker, and the run ends.
    (A worker refused more work while its heavy unit's last test waited for more, as
    an xdist worker does, stalled the run until its timeout.)"""
    out, _ = run_suite(tmp_path, HEAVY_SUITE)
    ran = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(ran) == ["h1", "h2", "h3"]
