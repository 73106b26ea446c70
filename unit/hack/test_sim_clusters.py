"""A fleet of simulations (``hack/sim up --clusters N``): its layout, the commands'
``--cluster K``, and the waves' gate (``hack.simlib.waves``) with scripted verdicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

from hack.simlib import clusters
from hack.simlib.cli import build_parser, main
from hack.simlib.common import SIM_FILE
from hack.simlib.sim import SimOps
from hack.simlib.waves import DONE, FAILED, TIMEOUT, roll_out


def test_the_fleet_layout_round_trips(tmp_path: Path) -> None:
    dirs = clusters.cluster_dirs(tmp_path, 3)
    assert [d.name for d in dirs] == ["cluster-1", "cluster-2", "cluster-3"]
    assert clusters.load(tmp_path) is None and not clusters.is_fleet(tmp_path)
    clusters.save(tmp_path, dirs)
    assert clusters.load(tmp_path) == dirs and clusters.is_fleet(tmp_path)
    (tmp_path / SIM_FILE).write_text("{}")  # a simulation's own directory is no fleet
    assert not clusters.is_fleet(tmp_path)


def test_clusters_and_cluster_parse() -> None:
    args = build_parser().parse_args(["up", "--clusters", "3", "--nodes", "6"])
    assert (args.clusters, args.nodes) == (3, 6)
    args = build_parser().parse_args(["--cluster", "2", "kubectl", "get", "bnp"])
    assert (args.cluster, args.args) == (2, ["get", "bnp"])
    assert build_parser().parse_args(["up"]).clusters == 1


def test_a_command_on_a_fleet_names_its_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters.save(tmp_path, clusters.cluster_dirs(tmp_path, 2))
    assert main(["--dir", str(tmp_path), "kubectl", "get", "bnp"]) == 2
    assert "a fleet of 2 clusters: choose one with --cluster K" in capsys.readouterr().err
    # with --cluster K the command goes to DIR/cluster-K (here: no simulation there yet)
    assert main(["--dir", str(tmp_path), "--cluster", "2", "kubectl", "get", "bnp"]) == 1
    assert f"no simulation in {tmp_path / 'cluster-2'}" in capsys.readouterr().err


def test_up_clusters_refuses_pool_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dir", str(tmp_path / "f"), "up", "--clusters", "2", "--stage-ahead", "1"]) != 0
    assert "apply pools cluster by cluster" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()  # nothing was started


class FakeCluster:
    """Records the applies; answers the pool as applied, named after the cluster."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.applied: list[dict[str, Any]] = []

    def kubectl(self, *args: str, input: str | None = None, **_: Any) -> Any:
        if args[0] == "apply":
            self.applied.append(json.loads(input or "{}"))
            return subprocess.CompletedProcess(args, 0, "", "")
        pool = {**self.applied[-1], "cluster": self.name}
        return subprocess.CompletedProcess(args, 0, json.dumps(pool), "")


POOL = {"metadata": {"name": "fleet"}, "spec": {"image": {"ref": "r@sha256:1"}}}


def run(
    script: dict[str, list[tuple[str, str]]], deadline: float = 60.0
) -> tuple[list[Any], dict[str, FakeCluster]]:
    """roll_out over three fake clusters whose pools read as ``script`` says, verdict
    after verdict (the last one repeats)."""
    fleet = {name: FakeCluster(name) for name in ("c1", "c2", "c3")}
    left = {name: list(v) for name, v in script.items()}

    def judge(pool: Any) -> tuple[str, str, str]:
        queue = left[pool["cluster"]]
        return (*(queue.pop(0) if len(queue) > 1 else queue[0]), "")

    clusters_ = cast(list[tuple[str, SimOps]], list(fleet.items()))
    waves = roll_out(clusters_, POOL, deadline=deadline, poll=0.0, judge=judge)
    return waves, fleet


GOING = ("InProgress", "Progressing")
DONE_V = ("Current", "Healthy")


def test_each_wave_waits_for_current_and_healthy() -> None:
    # c2: Current but Argo CD not yet Healthy is not done (both tools must agree)
    script = {
        "c1": [GOING, GOING, DONE_V],
        "c2": [GOING, ("Current", "Progressing"), DONE_V],
        "c3": [DONE_V],
    }
    waves, fleet = run(script)
    assert [(w.cluster, w.outcome) for w in waves] == [("c1", DONE), ("c2", DONE), ("c3", DONE)]
    assert [v[1:] for v in waves[1].changes] == [GOING, ("Current", "Progressing"), DONE_V]
    assert all(len(c.applied) == 1 for c in fleet.values())


def test_a_failed_pool_stops_the_fleet_and_the_next_clusters_are_never_touched() -> None:
    # a degraded node (Argo CD Degraded, kstatus InProgress) holds the wave, then a halt
    script = {
        "c1": [GOING, ("InProgress", "Degraded"), ("Failed", "Degraded")],
        "c2": [DONE_V],
        "c3": [DONE_V],
    }
    waves, fleet = run(script)
    assert [(w.cluster, w.outcome, w.kstatus, w.argocd) for w in waves] == [
        ("c1", FAILED, "Failed", "Degraded")
    ]
    assert (fleet["c2"].applied, fleet["c3"].applied) == ([], [])


def test_a_wave_that_never_ends_stops_at_its_deadline() -> None:
    # paused: InProgress/Suspended for good
    waves, fleet = run({"c1": [("InProgress", "Suspended")], "c2": [DONE_V]}, deadline=0.0)
    assert [(w.cluster, w.outcome) for w in waves] == [("c1", TIMEOUT)]
    assert fleet["c2"].applied == []
