"""How the test tiers are cut into units of work for parallel workers (pytest-xdist).

Loaded by pyproject's ``addopts`` (``-p hack.pytest_parallel``); ``hack/test.sh`` runs
the e2e tier with ``-n N --dist loadgroup``. Each worker is its own pytest session, so
session fixtures (``control_plane``, the registries) exist once per worker: a test
restarting *its* apiserver disturbs only the tests of its worker, which run one after
the other.

- A unit of work is a module: its tests run on one worker, in order, and its module
  fixtures are made once. ``pytestmark = pytest.mark.spread`` makes each test of a
  module its own unit, for long modules of independent tests (their module fixtures,
  if any, are then made on every worker that runs one of them).
- ``pytest.mark.xdist_group("NAME")`` (on tests or modules) puts tests of several modules
  in one unit: they run one after another on one worker, never beside each other (two
  modules using the same machine-wide thing).
- ``pytest.mark.serial``: the test must run with no other test beside it (it changes
  something every test sees, or loads the whole machine). ``hack/test.sh`` leaves it out
  of the parallel phase and runs it afterwards, alone.
- Units are handed out longest first (what keeps the workers finishing together): the
  times of the last run on this machine (``$BOOTC_OPERATOR_TEST_TIMES``, a snapshot
  ``hack/test.sh`` takes of its cache's ``test-times.json`` so every worker reads the
  same), else modules marked ``slow`` first, then by number of tests. The order is a
  pure function of the collection and that file, the same on every worker (xdist
  requires it).
- ``pytest.mark.heavy``: the unit takes about a core for its whole time (a whole
  simulated cluster of real daemon processes, a real kubelet node). At most
  ``$BOOTC_OPERATOR_TEST_HEAVY`` (1) heavy units run at once; the other workers take
  lighter units meanwhile. ``slow`` alone (a long test that mostly waits) is not heavy.

The units reach the scheduler through a file: pytest-xdist's own ``loadgroup`` tells
its scheduler a test's group by appending ``@group`` to the node id in the worker,
which pytest 9.2's structured node ids no longer allow (pytest-xdist issue 1386: the
groups are silently ignored). Here each worker writes node id → unit to
``$BOOTC_OPERATOR_XDIST_UNITS`` (a file the controlling process names) before it
reports its collection, and :class:`UnitScheduling`, xdist's scope scheduler keyed by
that map, replaces ``loadgroup``'s.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TIMES_ENV = "BOOTC_OPERATOR_TEST_TIMES"
#: the guess for a test without a recorded time
DEFAULT_SECONDS = 5.0
#: the guess for a test marked slow, without a recorded time
SLOW_SECONDS = 60.0


def unit_of(nodeid: str, groups: Sequence[str], spread: bool) -> str:
    """The unit of work of a test: its xdist groups, else itself (``spread``), else its module."""
    if groups:
        return "_".join(sorted(groups))
    if spread:
        return nodeid
    return nodeid.split("::", 1)[0]


def order(tests: Sequence[tuple[str, str, bool]], times: Mapping[str, float]) -> list[int]:
    """Indices of ``tests`` (node id, unit, marked slow) in the order to run them: units
    by their expected time, longest first, each unit's tests in their own order; ties
    keep the collection's order."""
    expected: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, (nodeid, unit, slow) in enumerate(tests):
        guess = SLOW_SECONDS if slow else DEFAULT_SECONDS
        expected[unit] = expected.get(unit, 0.0) + times.get(nodeid, guess)
        first.setdefault(unit, i)
    rank = sorted(expected, key=lambda u: (-expected[u], first[u]))
    position = {u: r for r, u in enumerate(rank)}
    return sorted(range(len(tests)), key=lambda i: (position[tests[i][1]], i))


def read_times(path: str | None) -> dict[str, float]:
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


UNITS_ENV = "BOOTC_OPERATOR_XDIST_UNITS"
HEAVY_ENV = "BOOTC_OPERATOR_TEST_HEAVY"
#: heavy units (with a test marked ``heavy``: about a core for their whole time, e.g.
#: 20 real daemon processes) at once: one, on the CI machine's 2 cores, so two never
#: starve each other, nor the other workers' tests, of CPU
DEFAULT_HEAVY = 1
SEED_ENV = "BOOTC_OPERATOR_COLLECTION_SEED"


def collection_random() -> random.Random:
    """Randomness for what a module draws while it is collected (e.g. parameters):
    fresh each run, but the same in every parallel worker of a run, which must collect
    the same tests (the controlling process draws ``$BOOTC_OPERATOR_COLLECTION_SEED``
    for them)."""
    seed = os.environ.get(SEED_ENV)
    return random.Random(int(seed)) if seed else random.Random()


def plain_nodeid(nodeid: str) -> str:
    """The node id without an ``@group`` an older pytest-xdist may have appended."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def pick(
    queue: Iterable[str], heavy: Collection[str], heavy_elsewhere: int, limit: int
) -> str | None:
    """The next unit for a worker: the first in ``queue`` (longest first), unless it is
    heavy and ``limit`` heavy units already run on the other workers; None when only
    such units are left.

    A heavy unit may queue behind this worker's own (they run one after the other):
    an xdist worker holds back its last test until it is sent more work or told to
    stop, so a worker refused everything while its heavy unit's last test waits would
    wait forever, and the other worker with it (a run stalled so, issue 36)."""
    for unit in queue:
        if unit not in heavy or heavy_elsewhere < limit:
            return unit
    return None


def make_scheduler_plugin() -> object:
    """The controller's side: ``loadgroup`` scheduled by the units the workers wrote."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 (only under xdist)

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's scope scheduling (one unit at a time to a worker that is nearly
        done), its scopes being our units, in the workers' collection order, with at
        most ``$BOOTC_OPERATOR_TEST_HEAVY`` heavy units at once."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # the workers ordered the units
            self._units: Units | None = None
            self.limit = int(os.environ.get(HEAVY_ENV) or DEFAULT_HEAVY)

        @property
        def units(self) -> Units:
            if self._units is None:
                self._units = read_units(os.environ.get(UNITS_ENV))
            return self._units

        def _split_scope(self, nodeid: str) -> str:
            plain = plain_nodeid(nodeid)
            return self.units.of.get(plain) or plain.split("::", 1)[0]

        def _heavy_running(self, node: Any = None) -> int:
            return sum(
                1
                for n, work in self.assigned_work.items()
                if node is None or n is node
                for unit, tests in work.items()
                if unit in self.units.heavy and not all(tests.values())
            )

        def _assign_work_unit(self, node: Any) -> None:
            unit = pick(
                self.workqueue,
                self.units.heavy,
                self._heavy_running() - self._heavy_running(node),
                self.limit,
            )
            if unit is None:
                return  # a heavy unit finishing elsewhere reschedules this worker
            work_unit = self.workqueue.pop(unit)
            self.assigned_work.setdefault(node, {})[unit] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some(
                [collection.index(nodeid) for nodeid, done in work_unit.items() if not done]
            )

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in self.nodes:  # a heavy unit done may let a waiting worker go
                if other is not node:
                    self._reschedule(other)

    class Maker:
        @pytest.hookimpl(tryfirst=True)
        def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
            if config.getvalue("dist") != "loadgroup":
                return None
            return UnitScheduling(config, log)

    return Maker()


@dataclass(frozen=True)
class Units:
    """What the workers tell the scheduler: each test's unit, and the heavy units."""

    of: dict[str, str]
    heavy: frozenset[str]


def read_units(path: str | None) -> Units:
    try:
        data = json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    of, heavy = data.get("units"), data.get("heavy")
    return Units(
        {str(k): str(v) for k, v in of.items()} if isinstance(of, dict) else {},
        frozenset(str(u) for u in heavy) if isinstance(heavy, list) else frozenset(),
    )


def write_units(path: str, units: Units) -> None:
    """Atomically: every worker writes the same map, the scheduler may read any time after."""
    tmp = Path(f"{path}.{os.getpid()}")
    tmp.write_text(json.dumps({"units": units.of, "heavy": sorted(units.heavy)}))
    tmp.replace(path)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    os.environ.setdefault(SEED_ENV, str(random.SystemRandom().randrange(2**63)))
    if not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getvalue("dist") == "loadgroup":
        directory = tempfile.mkdtemp(prefix="bootc-operator-xdist-")
        config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))
        os.environ[UNITS_ENV] = str(Path(directory) / "units.json")  # the workers inherit it
        config.pluginmanager.register(make_scheduler_plugin(), "bootc-operator-units")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: nothing to hand out
        return
    described = []
    heavy_units: set[str] = set()
    for item in items:
        groups = [
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        ]
        unit = unit_of(item.nodeid, groups, item.get_closest_marker("spread") is not None)
        described.append((item.nodeid, unit, item.get_closest_marker("slow") is not None))
        if item.get_closest_marker("heavy") is not None:
            heavy_units.add(unit)
    ranked = order(described, read_times(os.environ.get(TIMES_ENV)))
    items[:] = [items[i] for i in ranked]
    if path := os.environ.get(UNITS_ENV):
        heavy = frozenset(heavy_units)
        write_units(path, Units({nodeid: unit for nodeid, unit, _ in described}, heavy))
