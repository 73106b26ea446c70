"""The demo's decisions (``hack.simlib.demo``): its pools, when a step is finished, what
the reboots of the bad-image scenario say; and the labelled images it pushes
(``hack.simlib.images``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bootc_operator.kubectl.table import NodeRow
from hack.simlib.common import SimConfig, SimInfo
from hack.simlib.demo import (
    BadImageRun,
    Step,
    bad_image_problems,
    bad_image_report,
    canaries_first,
    canary_node,
    demo_pool,
    health_story,
    rollback_finished,
)
from hack.simlib.images import ImageError, failing_boot, parse_label, push_image
from hack.simlib.policy import add_pool_arguments
from hack.simlib.view import Snapshot

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
D3 = "sha256:" + "3" * 64
REPO = "127.0.0.1:5000/bootc/os"
V1 = f"{REPO}:v1@{D1}"
NAMES = ["worker-1", "worker-2", "worker-3"]


def parse(*argv: str, scenario: str = "bad-image") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_pool_arguments(parser)
    args = parser.parse_args(list(argv))
    args.scenario = scenario
    return args


def test_the_bad_image_pool_has_a_rollback_gate_and_one_canary(tmp_path: Path) -> None:
    spec = demo_pool(parse(), V1)["spec"]
    assert spec["health"] == {"bootComplete": True, "timeoutSeconds": 60, "onFailure": "Rollback"}
    assert spec["rollout"] == {"maxUnavailable": 2, "canary": {"nodes": 1}}
    assert health_story(spec) == (
        "health: bootComplete, timeout 60s, onFailure Rollback; canary: 1 node"
    )
    assert "health" not in demo_pool(parse(scenario="rollout"), V1)["spec"], "default unchanged"
    # a pool file tunes the gate and the canaries; the story's needs win
    path = tmp_path / "pool.yaml"
    path.write_text(
        "spec:\n"
        "  health: {onFailure: Halt, timeoutSeconds: 30, minReadySeconds: 5}\n"
        "  rollout: {canary: {nodes: 2, requireApproval: false}}\n"
    )
    spec = demo_pool(parse(f"--pool-file={path}"), V1)["spec"]
    assert spec["health"] == {
        "bootComplete": True,
        "timeoutSeconds": 30,
        "minReadySeconds": 5,
        "onFailure": "Rollback",
    }
    assert spec["rollout"]["canary"] == {"nodes": 2, "requireApproval": False}
    assert health_story(spec).endswith("canary: 2 nodes")
    assert canary_node(NAMES) == "worker-2" and canary_node(["worker-1"]) == "worker-1"


def row(name: str, state: str = "Staged", **kw: Any) -> NodeRow:
    fields: dict[str, Any] = {
        "zone": "zone-a",
        "booted": D1,
        "ready": True,
        "cordoned": False,
        "in_slot": False,
    }
    fields.update(kw)
    return NodeRow(name=name, state=state, **fields)


def snap(
    *rows: NodeRow, degraded_reason: str = "HealthCheckFailed", how: str = "was rolled back"
) -> Snapshot:
    return Snapshot(
        rows=rows,
        target=D2,
        updated=0,
        total=len(rows),
        up_to_date=False,
        condition="UpToDate=False HealthCheckFailed: ...",
        degraded=f"Degraded=True HealthCheckFailed: worker-2 failed its health check on {D2} "
        f"and {how} (bootComplete: ...); no new reboots until the target changes"
        if degraded_reason
        else "",
        degraded_reason=degraded_reason,
    )


def pool(target: str = D2, observed: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "workers", "generation": 2},
        "status": {"observedGeneration": observed, "targetDigest": target},
    }


def test_the_bad_image_step_ends_when_the_rolled_back_canary_is_released() -> None:
    back = row("worker-2", "RolledBack", failed_on=D2)
    done = snap(row("worker-1"), back, row("worker-3"))
    assert rollback_finished(pool(), done, D2)
    assert not rollback_finished(None, done, D2)
    assert not rollback_finished(pool(observed=1), done, D2), "status of an older generation"
    assert not rollback_finished(pool(target=D1), done, D2)
    assert not rollback_finished(pool(), snap(row("worker-1"), back, degraded_reason=""), D2)
    # the BootcNode released, the pool's status not updated yet
    assert not rollback_finished(
        pool(), snap(row("worker-1"), back, how="is being rolled back"), D2
    )
    for still in (
        row("worker-2", "RolledBack", failed_on=D2, in_slot=True),  # not released yet
        row("worker-2", "RolledBack", failed_on=D2, cordoned=True),
        row("worker-2", "RollingBack", failed_on=D2, ready=False),
        row("worker-2", "RolledBack", failed_on=D3),  # another target's failure
    ):
        assert not rollback_finished(pool(), snap(row("worker-1"), still), D2), still


def reboot(node: str, booted: str, at: float) -> dict[str, Any]:
    return {"node": node, "booted": f"{REPO}@{booted}", "requested": at, "down": at, "up": at + 4}


def test_bad_image_problems_and_canaries_first() -> None:
    bad, old = f"{REPO}@{D2}", f"{REPO}@{D1}"
    good = [reboot("worker-2", D2, 10), reboot("worker-2", D1, 20)]
    assert bad_image_problems(good, ["worker-2"], bad, old) == []
    assert bad_image_problems([], [], bad, old) == ["no node was rolled back"]
    [problem] = bad_image_problems(good[:1], ["worker-2"], bad, old)
    assert "not the bad image then the old one" in problem
    [problem] = bad_image_problems([*good, reboot("worker-1", D2, 15)], ["worker-2"], bad, old)
    assert "worker-1" in problem and "other than the canary" in problem

    v3 = [reboot("worker-2", D3, 30), reboot("worker-1", D3, 35), reboot("worker-3", D3, 35)]
    assert canaries_first(v3, ["worker-2"])
    assert not canaries_first(v3, ["worker-1"]), "worker-2 rebooted before it was back"
    assert not canaries_first(v3, []), "no canary: nothing went first"


def test_the_bad_image_report() -> None:
    failed = "Failed: bootComplete: the boot did not reach boot-complete.target"
    halted = Step(
        12.5,
        snap(
            row("worker-1"),
            row("worker-2", "RolledBack", failed_on=D2, message=failed, canary=True),
            row("worker-3"),
        ),
        [reboot("worker-2", D2, 10), reboot("worker-2", D1, 20)],
        max_unavailable=1,
        max_slots=1,
    )
    done = Snapshot(
        rows=tuple(row(n, "UpToDate", booted=D3, canary=n == "worker-2") for n in NAMES),
        target=D3,
        updated=3,
        total=3,
        up_to_date=True,
        condition="UpToDate=True AllUpdated: ...",
    )
    v3 = [reboot("worker-2", D3, 30), reboot("worker-1", D3, 35), reboot("worker-3", D3, 35)]
    fixed = Step(20.0, done, v3, max_unavailable=2, max_slots=2)
    run = BadImageRun(NAMES, halted, fixed, f"{REPO}@{D2}", f"{REPO}@{D1}", budget=2)
    lines, problems = bad_image_report(run)
    assert problems == []
    text = "\n".join(lines)
    assert "worker-2 (the canary) rebooted into it" in text and "12.5s" in text
    assert f"  worker-2: {failed}" in lines
    assert "the other 2 nodes: 2 staged v2, 0 rebooted" in text
    assert "halted: HealthCheckFailed: worker-2 failed its health check" in text
    assert "3/3 nodes updated in 20.0s; the canary worker-2 first" in text
    assert "worker-1 1, worker-2 3, worker-3 1 (5 in all" in text
    assert "max unavailable at once 2 nodes" in text

    # the canary not first, a node missing, too many unavailable: each is a problem
    late = [reboot("worker-1", D3, 29), *v3]
    worse = Step(20.0, replace(done, updated=2), late, max_unavailable=3, max_slots=2)
    _, problems = bad_image_report(replace(run, fixed=worse))
    assert len(problems) == 3, problems
    _, problems = bad_image_report(replace(run, fixed=Step(20.0, done, late), one_canary=False))
    assert problems == [], "several canaries: going first is not checked"


def test_labelled_images(tmp_path: Path) -> None:
    assert failing_boot() == {"fakebootc.boot-assessment": "fail"}
    assert failing_boot("cni.service") == {"fakebootc.boot-assessment": "fail:cni.service"}
    assert parse_label("a.b/c=x=y") == ("a.b/c", "x=y")
    with pytest.raises(ImageError):
        parse_label("novalue")
    # without a registry the label becomes the catalog entry's bootAssessment
    catalog = tmp_path / "catalog.json"
    info = SimInfo(state_dir=str(tmp_path), config=SimConfig(), owner=0, catalog=str(catalog))
    ref = push_image(info, "os:bad", failing_boot())
    plain = push_image(info, "os:good")
    images = json.loads(catalog.read_text())["images"]
    bad_entry = images[ref.rsplit("@", 1)[0]]
    assert bad_entry["bootAssessment"] == "fail" and bad_entry["digest"] == ref.rsplit("@")[1]
    assert "bootAssessment" not in images[plain.rsplit("@", 1)[0]]
    with pytest.raises(ImageError):
        push_image(info, "os:odd", {"fakebootc.boot-assessment": "sometimes"})
