"""The demo's live view (``hack.simlib.view``): node states, snapshots, changes, drawing."""

from __future__ import annotations

import io
from typing import Any

import pytest

from bootc_operator.kubectl.table import Screen, node_row, node_state
from bootc_operator.kubectl.table import clip as _clip
from hack.simlib.common import node_names, zone_of
from hack.simlib.images import ImageError, digest_ref, qualify
from hack.simlib.view import bar, changes, render, snapshot

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
REPO = "127.0.0.1:5000/os"


def bn(
    booted: str = D1,
    desired: str = D1,
    idle: tuple[str, str] = ("True", "Idle"),
    degraded: str | None = None,
    slot: bool = False,
) -> dict[str, Any]:
    conditions = [
        {"type": "Idle", "status": idle[0], "reason": idle[1]},
        {
            "type": "Degraded",
            "status": "True" if degraded else "False",
            "reason": "Error" if degraded else "Healthy",
            "message": degraded or "",
        },
    ]
    annotations = {"bootc.dev/in-reboot-slot": "2024-01-01T00:00:00Z"} if slot else {}
    return {
        "metadata": {"name": "n", "annotations": annotations},
        "spec": {"desiredImage": f"{REPO}@{desired}", "desiredImageState": "Staged"},
        "status": {
            "booted": {"image": f"{REPO}@{booted}", "imageDigest": booted},
            "conditions": conditions,
        },
    }


def node(ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": "zone-a"}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pool(target: str, updated: int, total: int, up: bool, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "workers", "generation": generation},
        "status": {
            "observedGeneration": 1,
            "targetDigest": target,
            "updatedCount": updated,
            "nodeCount": total,
            "conditions": [
                {
                    "type": "UpToDate",
                    "status": "True" if up else "False",
                    "reason": "AllUpdated" if up else "RolloutInProgress",
                    "message": f"{updated}/{total} updated",
                }
            ],
        },
    }


def test_node_states() -> None:
    assert node_state(None) == "Pending"
    assert node_state(bn()) == "UpToDate"
    assert node_state(bn(desired=D2)) == "Pending"  # idle on the old image, not staging yet
    assert node_state(bn(desired=D2, idle=("False", "Staging"))) == "Staging"
    assert node_state(bn(desired=D2, idle=("False", "Staged"))) == "Staged"
    assert node_state(bn(desired=D2, idle=("False", "Rebooting"))) == "Rebooting"
    assert node_state(bn(desired=D2, degraded="pull failed")) == "Degraded"


def test_a_node_an_autoscaler_removes_shows_leaving_until_it_holds_a_slot_or_is_done() -> None:
    going = node()
    going["spec"]["taints"] = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    staged = bn(desired=D2, idle=("False", "Staged"))
    assert node_row("n", going, staged).state == "Leaving"
    assert node_row("n", node(), staged).state == "Staged"
    assert node_row("n", going, bn(desired=D2, idle=("False", "Staged"), slot=True)).state == (
        "Staged"
    )
    assert node_row("n", going, bn()).state == "UpToDate"


def test_snapshot_counts_unavailable_and_slots() -> None:
    names = ["a", "b", "c"]
    bns = {"a": bn(D2, D2), "b": bn(D1, D2, ("False", "Rebooting"), slot=True), "c": bn(D1, D2)}
    nodes = {"a": node(), "b": node(ready=False, cordoned=True), "c": node(cordoned=True)}
    snap = snapshot(pool(D2, 1, 3, False), bns, nodes, names, D2)
    assert (snap.updated, snap.total, snap.unavailable, snap.in_slots) == (1, 3, 2, 1)
    assert [r.state for r in snap.rows] == ["UpToDate", "Rebooting", "Pending"]
    assert not snap.settled
    # the controller has not seen the new target yet: nothing counts as updated
    stale = snapshot(pool(D1, 3, 3, True), bns, nodes, names, D2)
    assert stale.updated == 0 and "waiting" in stale.condition
    done = snapshot(
        pool(D2, 3, 3, True), {n: bn(D2, D2) for n in names}, {n: node() for n in names}, names
    )
    assert done.settled


def test_changes_lists_rows_and_progress() -> None:
    names = ["a"]
    before = snapshot(pool(D2, 0, 1, False), {"a": bn(D1, D2)}, {"a": node()}, names)
    after = snapshot(
        pool(D2, 0, 1, False),
        {"a": bn(D1, D2, ("False", "Rebooting"), slot=True)},
        {"a": node(ready=False, cordoned=True)},
        names,
    )
    labels = {D1: "v1", D2: "v2"}
    assert changes(before, after, labels) == [
        "a: Pending on v1 -> Rebooting on v1 (cordoned, in slot, NotReady)"
    ]
    assert changes(None, before, labels)[-1].startswith("pool: 0/1 updated")


def test_render_and_screen() -> None:
    names = ["worker-1", "worker-2"]
    snap = snapshot(
        pool(D2, 1, 2, False),
        {"worker-1": bn(D2, D2), "worker-2": bn(D1, D2, ("False", "Staged"))},
        {"worker-1": node(), "worker-2": node()},
        names,
    )
    lines = render(snap, elapsed=65, labels={D2: "v2"}, max_unavailable=1, reboots=1)
    assert lines[0].startswith(bar(1, 2)) and "1/2 updated   01:05" in lines[0]
    assert any(
        "worker-1" in line and "UpToDate" in line and "v2 222222222222" in line for line in lines
    )
    out = io.StringIO()
    screen = Screen(out)
    screen.draw(["one", "two"])
    screen.draw(["three"])
    assert out.getvalue().count("\x1b[2F") == 1  # back up over the two lines drawn before
    assert _clip("\x1b[32mabcdef\x1b[0m", 3) == "\x1b[32mabc\x1b[0m"
    assert bar(1, 4, 8, ascii_only=True) == "[##------]"


def test_names_zones_and_image_refs() -> None:
    assert node_names(3) == ["worker-1", "worker-2", "worker-3"]
    assert node_names(12)[0] == "worker-01"
    assert [zone_of(i) for i in range(4)] == ["zone-a", "zone-b", "zone-c", "zone-a"]
    assert qualify("os:v2", "127.0.0.1:5000") == ("127.0.0.1:5000/os", "v2")
    assert qualify("quay.io/org/os", "127.0.0.1:5000") == ("quay.io/org/os", "latest")
    assert digest_ref(f"{REPO}:v2@{D2}") == f"{REPO}@{D2}"
    with pytest.raises(ImageError):
        qualify(f"os@{D2}", "127.0.0.1:5000")


def health_bn(
    booted: str,
    desired: str,
    *,
    note: str = "",
    failed_on: str = "",
    idle: tuple[str, str] = ("True", "Idle"),
    assessment: str = "",
    slot: bool = True,
) -> dict[str, Any]:
    obj = bn(booted, desired, idle, slot=slot)
    annotations = obj["metadata"]["annotations"]
    if note:
        annotations["bootc.dev/health-check"] = note
    if failed_on:
        annotations["bootc.dev/health-failed"] = failed_on
    if assessment:
        obj["status"]["bootAssessment"] = {"state": assessment}
    return obj


def test_health_check_and_rollback_states() -> None:
    pending = "Pending: bootComplete: boot-complete.target not reached yet"
    failed = "Failed: bootComplete: the boot did not reach boot-complete.target"
    assert node_state(health_bn(D2, D2, note=pending)) == "Checking"
    assert node_state(health_bn(D2, D2, note=failed)) == "Unhealthy"  # onFailure Halt
    assert node_state(health_bn(D2, D2, note="Passed: all checks passed")) == "UpToDate"
    # pointed back at D1 (its rollback deployment) while still on D2, then rebooting
    assert node_state(health_bn(D2, D1, note=failed, failed_on=D2)) == "RollingBack"
    rebooting = health_bn(D2, D1, failed_on=D2, idle=("False", "Rebooting"))
    assert node_state(rebooting) == "RollingBack"
    # back on D1, idle: rolled back (released, the note kept) until the target changes
    assert node_state(health_bn(D1, D1, note=failed, failed_on=D2, slot=False)) == "RolledBack"
    # a Degraded BootcNode says so first
    degraded = health_bn(D1, D1, failed_on=D2)
    degraded["status"]["conditions"][1].update(status="True", message="bootc rollback failed")
    assert node_state(degraded) == "Degraded"


def halted_pool() -> dict[str, Any]:
    obj = pool(D2, 0, 2, False)
    obj["status"]["conditions"].append(
        {
            "type": "Degraded",
            "status": "True",
            "reason": "HealthCheckFailed",
            "message": f"worker-1 failed its health check on {D2} and was rolled back",
        }
    )
    return obj


def test_rows_show_the_boot_check_the_note_and_canaries() -> None:
    names = ["worker-1", "worker-2"]
    failed = "Failed: bootComplete: the boot did not reach boot-complete.target"
    canary = node()
    canary["metadata"]["labels"]["bootc.dev/canary"] = ""
    bns = {
        "worker-1": health_bn(D1, D1, note=failed, failed_on=D2, assessment="Complete", slot=False),
        "worker-2": bn(D1, D2, ("False", "Staged")),
    }
    snap = snapshot(halted_pool(), bns, {"worker-1": canary, "worker-2": node()}, names, D2)
    row = snap.rows[0]
    assert (row.state, row.check, row.canary, row.failed_on) == ("RolledBack", "Complete", True, D2)
    assert row.message == failed
    assert snap.degraded_reason == "HealthCheckFailed"
    assert snap.degraded.startswith("Degraded=True HealthCheckFailed: worker-1 failed")
    lines = render(snap, elapsed=3, labels={D1: "v1"}, max_unavailable=1, reboots=2)
    assert any("Degraded=True HealthCheckFailed" in line for line in lines[:3])
    table = next(line for line in lines if "worker-1 *" in line)
    assert "RolledBack" in table and "v1 111111111111" in table and table.endswith("Complete")
    assert f"    {failed}" in lines
    assert lines[-3].startswith("  * canary (bootc.dev/canary)")
    # the plain output: the check and the note in the row's line, the pool's Degraded too
    before = snapshot(pool(D2, 0, 2, False), {}, {}, names, D2)
    out = changes(before, snap, {D1: "v1", D2: "v2"})
    assert out[0] == f"worker-1: Pending on - (NotReady) -> RolledBack on v1: {failed}"
    assert out[-1].endswith(snap.degraded) and out[-1].startswith("pool: 0/2 updated;")
    # only what changed: a note said once, a boot assessment only while not Complete
    checking = health_bn(D2, D2, note="Pending: bootComplete: not yet", assessment="Pending")
    passed = health_bn(D2, D2, assessment="Complete", slot=False)
    first = snapshot(pool(D2, 0, 1, False), {"worker-1": checking}, {"worker-1": node()}, names[:1])
    again = snapshot(pool(D2, 0, 1, False), {"worker-1": checking}, {"worker-1": node()}, names[:1])
    done = snapshot(pool(D2, 1, 1, False), {"worker-1": passed}, {"worker-1": node()}, names[:1])
    labels = {D2: "v2"}
    assert changes(first, again, labels) == []
    assert changes(again, done, labels) == [
        "worker-1: Checking on v2 (in slot, boot Pending) -> UpToDate on v2",
        "pool: 1/1 updated; UpToDate=False RolloutInProgress: 1/1 updated",
    ]
    noted = health_bn(D2, D2, note="Pending: bootComplete: still not", assessment="Pending")
    later = snapshot(pool(D2, 0, 1, False), {"worker-1": noted}, {"worker-1": node()}, names[:1])
    assert changes(again, later, labels) == [
        "worker-1: Checking on v2 (in slot, boot Pending): Pending: bootComplete: still not"
    ]


def web_pod(name: str, node: str, ready: str = "True", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}, **meta},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
    }


def web_pdb(allowed: int, healthy: int = 5) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": 5,
            "expectedPods": 6,
        },
    }


def test_a_drain_held_by_a_budget_says_what_it_waits_for() -> None:
    names = ["worker-2", "worker-6"]
    draining = bn(desired=D2, idle=("False", "Staged"), slot=True)
    bns = {"worker-2": bn(desired=D2, idle=("False", "Staged")), "worker-6": draining}
    nodes = {"worker-2": node(), "worker-6": node(cordoned=True)}
    pods = [
        web_pod("web-a", "worker-6"),
        web_pod("web-b", "worker-2", ready="False"),  # marked NotReady: holds the budget
        web_pod("web-c", "worker-2"),
        {**web_pod("web-d", "worker-6"), "metadata": {"name": "other", "namespace": "kube"}},
    ]
    view = snapshot(pool(D2, 0, 2, False), bns, nodes, names, pods=pods, pdbs=[web_pdb(0)])
    assert view.waits == (
        "worker-6: drain waits for PodDisruptionBudget default/web: 0 disruptions allowed "
        "(5 of 6 pods healthy, 5 needed); not healthy: default/web-b on worker-2 "
        "(Running, Ready=False)",
    )
    assert f"  {view.waits[0]}" in render(view, elapsed=1, labels={}, max_unavailable=1, reboots=0)
    # plain output: the line once, when it appears
    before = snapshot(pool(D2, 0, 2, False), bns, nodes, names)
    assert changes(before, view, {})[-1] == view.waits[0]
    assert view.waits[0] not in changes(view, view, {})

    # A budget that allows a disruption, or a node that is not draining, waits for nothing.
    assert (
        snapshot(pool(D2, 0, 2, False), bns, nodes, names, pods=pods, pdbs=[web_pdb(1)]).waits == ()
    )
    bns_rebooting = {**bns, "worker-6": bn(desired=D2, idle=("False", "Rebooting"), slot=True)}
    assert (
        snapshot(
            pool(D2, 0, 2, False), bns_rebooting, nodes, names, pods=pods, pdbs=[web_pdb(0)]
        ).waits
        == ()
    )


def test_why_a_pod_is_not_healthy() -> None:
    names = ["worker-6"]
    bns = {"worker-6": bn(desired=D2, idle=("False", "Staged"), slot=True)}
    nodes = {"worker-6": node(cordoned=True)}
    unscheduled = web_pod("web-p", "")
    unscheduled["status"] = {"phase": "Pending"}
    going = web_pod("web-t", "worker-1", deletionTimestamp="2026-01-01T00:00:00Z")
    pods = [web_pod("web-a", "worker-6"), unscheduled, going]
    pods += [web_pod(f"web-n{i}", "worker-3", ready="False") for i in range(3)]
    (line,) = snapshot(None, bns, nodes, names, pods=pods, pdbs=[web_pdb(0, healthy=1)]).waits
    assert line.endswith(
        "not healthy: default/web-n0 on worker-3 (Running, Ready=False), "
        "default/web-n1 on worker-3 (Running, Ready=False), "
        "default/web-n2 on worker-3 (Running, Ready=False) and 2 more"
    ), line
    (line,) = snapshot(
        None, bns, nodes, names, pods=[pods[0], unscheduled, going], pdbs=[web_pdb(0)]
    ).waits
    assert line.endswith(
        "default/web-p on - (Pending, unscheduled), default/web-t on worker-1 (terminating)"
    ), line


def test_a_budget_that_just_approved_an_eviction_names_it() -> None:
    names = ["worker-6"]
    bns = {"worker-6": bn(desired=D2, idle=("False", "Staged"), slot=True)}
    nodes = {"worker-6": node(cordoned=True)}
    pdb = web_pdb(0, healthy=6)
    pdb["status"]["disruptedPods"] = {"web-x": "2026-01-01T00:00:00Z"}
    pods = [web_pod("web-a", "worker-6")]
    (line,) = snapshot(None, bns, nodes, names, pods=pods, pdbs=[pdb]).waits
    assert line.endswith("(6 of 6 pods healthy, 5 needed); evicting: default/web-x"), line


def _controls(line: str) -> list[str]:
    return [ch for ch in line if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0]


def test_cluster_text_reaches_the_terminal_without_its_control_characters() -> None:
    """Issue 37 follow-up (§8 for ``hack/sim``): what the view prints of the cluster (the
    pool's conditions, a node's Degraded message, a Pod's Ready reason) is cleaned as
    ``kubectl bootc`` cleans it (``kubectl.safetext.clean``): no ESC, BEL, CR, newline
    or C1 CSI reaches the terminal, nor forges a line."""
    hostile = "\x1b]0;owned\x07 bad\r\nforged row \x9b31m"
    names = ["worker-2", "worker-6"]
    sick = bn(desired=D2, degraded=f"pull failed: {hostile}")
    bns = {"worker-2": sick, "worker-6": bn(desired=D2, idle=("False", "Staged"), slot=True)}
    nodes = {"worker-2": node(), "worker-6": node(cordoned=True)}
    the_pool = pool(D2, 0, 2, False)
    the_pool["status"]["conditions"][0]["message"] = f"0/2 updated; {hostile}"
    the_pool["status"]["conditions"].append(
        {"type": "Degraded", "status": "True", "reason": "NodeDegraded", "message": hostile}
    )
    held = web_pod("web-b", "worker-2", ready="False")
    held["status"]["conditions"][0]["reason"] = hostile
    pods = [web_pod("web-a", "worker-6"), held]
    snap = snapshot(the_pool, bns, nodes, names, pods=pods, pdbs=[web_pdb(0)])
    printed = [
        *render(snap, elapsed=1, labels={}, max_unavailable=1, reboots=0),
        *changes(None, snap, {}),
    ]
    assert not [(line, _controls(line)) for line in printed if _controls(line)]
    shown = "^[]0;owned^G bad  forged row <U+009B>31m"
    assert any(shown in line for line in changes(None, snap, {})), printed
    assert shown in snap.condition and shown in snap.degraded
    assert any(shown in wait for wait in snap.waits), snap.waits
    assert shown in next(r for r in snap.rows if r.name == "worker-2").message
