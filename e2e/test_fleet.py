"""A fleet of clusters rolled out wave by wave, gated on what Flux and Argo CD read
(issue 40 §3, docs/fleets.md).

``hack/sim up --clusters 3 --nodes 6`` starts three simulated clusters (each its own
control plane, controller and six nodes with real daemons; one registry between
them). The test plays the GitOps controller with ``hack.simlib.waves``, which sees
the pools only as kstatus and Argo CD's health code judge them: the pool is applied
to cluster 1, then to cluster 2 once cluster 1's pool is ``Current``/``Healthy``,
and so on; the fleet's wall time is printed. Then an image whose boots fail: cluster
1 halts (kstatus ``Failed``, Argo CD ``Degraded``) and clusters 2 and 3 are never
touched (their pools keep the previous image, no node reboots). ``hack/sim status``
lists every cluster, and ``hack/sim down`` leaves no process behind.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bootc_operator.api import constants as c
from e2e.helpers import condition
from e2e.simenv import run_sim_cli, sim_cli
from hack.bench_fleet import POOL, fleet_pool, untouched
from hack.simlib import AttachedSim, clusters
from hack.simlib.cli import clean
from hack.simlib.images import digest_ref, failing_boot
from hack.simlib.reaper import leftovers
from hack.simlib.sim import SimOps
from hack.simlib.waves import DONE, FAILED, roll_out

# three control planes and 18 daemons start on a shared 2-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

CLUSTERS, NODES, MAX_UNAVAILABLE = 3, 6, 2
WAVE_DEADLINE = 300.0  # per cluster: six simulated reboots on a loaded 2-core machine


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The fleet's directory; ``hack/sim down`` at the end must leave no process."""
    path = tmp_path_factory.mktemp("fleet") / "sim"
    try:
        yield path
    finally:
        down = run_sim_cli(path, "down")
        left = leftovers(path)
        clean(path, quiet=True)  # whatever down left, before failing over it
        assert down.returncode == 0, down.stderr
        assert left == [], f"processes outlived hack/sim down: {left}"


@pytest.fixture(scope="module")
def fleet(root: Path) -> list[tuple[str, SimOps]]:
    out = sim_cli(
        root,
        "up",
        f"--clusters={CLUSTERS}",
        f"--nodes={NODES}",
        "--controllers=1",
        "--reboot-seconds=1",
        "--stage-seconds=0.5",
        timeout=1200,
    )
    assert [line.split("=")[0] for line in out.splitlines()][:CLUSTERS] == [
        f"export KUBECONFIG_{k}" for k in range(1, CLUSTERS + 1)
    ], out
    dirs = clusters.load(root)
    assert dirs == clusters.cluster_dirs(root, CLUSTERS)
    return [(d.name, AttachedSim.open(d)) for d in dirs]


def pool_of(sim: SimOps) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(sim.kubectl("get", "bnp", POOL, "-o", "json").stdout)
    return doc


def test_a_fleet_rolls_out_wave_by_wave_and_a_halted_cluster_stops_the_next_waves(
    root: Path, fleet: list[tuple[str, SimOps]]
) -> None:
    sims = [sim for _, sim in fleet]
    infos = [sim.info for sim in sims]
    # separate clusters, one registry, one first image
    assert len({i.server for i in infos}) == CLUSTERS
    assert {i.registry for i in infos} == {infos[0].registry}
    assert {i.first_image for i in infos} == {infos[0].first_image}
    status = sim_cli(root, "status")
    assert [line for line in status.splitlines() if line.startswith("===")] == [
        f"=== {name}" for name, _ in fleet
    ], status

    good = sims[0].push_image("os:v2")
    load = os.getloadavg()
    waves = roll_out(fleet, fleet_pool(good, MAX_UNAVAILABLE), deadline=WAVE_DEADLINE, say=print)
    total = sum(w.seconds for w in waves)
    print(
        f"fleet rollout: {CLUSTERS} clusters x {NODES} nodes, maxUnavailable {MAX_UNAVAILABLE}: "
        + ", ".join(f"{w.cluster} {w.seconds:.1f}s" for w in waves)
        + f"; {total:.1f}s in all (load {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    assert [(w.cluster, w.outcome) for w in waves] == [(n, DONE) for n, _ in fleet], [
        w.describe() for w in waves
    ]
    for w in waves:  # each wave was seen under way before it was done
        assert w.changes[0][1:] == ("InProgress", "Progressing"), w.describe()
    for sim in sims:
        pool = pool_of(sim)
        assert condition(pool, c.COND_READY)["status"] == "True"
        for node in sim.nodes:
            booted = sim.host(node).state().booted
            assert booted is not None and booted.image == digest_ref(good), node

    bad = sims[0].push_image("os:bad", failing_boot())
    since = time.time()
    generations = [pool_of(sim)["metadata"]["generation"] for sim in sims[1:]]
    waves = roll_out(fleet, fleet_pool(bad, MAX_UNAVAILABLE), deadline=WAVE_DEADLINE, say=print)
    print("bad image: " + "; ".join(w.describe() for w in waves))
    (first,) = waves  # only cluster 1 was touched
    assert (first.outcome, first.kstatus, first.argocd) == (FAILED, "Failed", "Degraded")
    assert first.message.startswith(f"{c.REASON_HEALTH_CHECK_FAILED}: "), first.message
    stalled = condition(pool_of(sims[0]), c.COND_STALLED)
    assert stalled["reason"] == c.REASON_HEALTH_CHECK_FAILED, stalled
    for (name, sim), before in zip(fleet[1:], generations, strict=True):
        assert untouched(sim, good, since) == [], name
        assert pool_of(sim)["metadata"]["generation"] == before, name  # never re-applied
