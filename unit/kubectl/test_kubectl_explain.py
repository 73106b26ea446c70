"""``kubectl bootc``'s pure parts: what a pool waits for, why a node is where it is,
approval, the status block and its data, one-line API errors."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.kube.resources import BOOTC_NODE_POOLS, NODES
from bootc_operator.kube.rest import ApiError
from bootc_operator.kubectl import explain as e
from bootc_operator.kubectl.cluster import event_queries, explain_api_error
from bootc_operator.kubectl.render import events_lines, pool_data, pool_lines

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
REPO = "registry.example.com/os"
NOW = dt.datetime(2026, 11, 25, 20, 0, tzinfo=dt.UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def bn(
    name: str,
    pool: str = "workers",
    *,
    booted: str = D1,
    idle: tuple[str, str] = ("False", c.REASON_STAGED),
    staged: str | None = D2,
    desired: str = D2,
    state: str = "Staged",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "booted": {"image": f"{REPO}@{booted}", "imageDigest": booted},
        "conditions": [
            {
                "type": "Idle",
                "status": idle[0],
                "reason": idle[1],
                "lastTransitionTime": ts(300),
            },
            {"type": "Degraded", "status": "False", "reason": "Healthy"},
        ],
    }
    if staged:
        status["staged"] = {"image": f"{REPO}@{staged}", "imageDigest": staged}
    return {
        "metadata": {
            "name": name,
            "labels": {c.POOL_LABEL: pool},
            "annotations": annotations or {},
        },
        "spec": {"desiredImage": f"{REPO}@{desired}", "desiredImageState": state},
        "status": status,
    }


def updated(name: str, **kw: Any) -> dict[str, Any]:
    return bn(name, booted=D2, idle=("True", c.REASON_IDLE), staged=None, **kw)


def node(
    name: str, *, ready: bool = True, cordoned: bool = False, ready_for: float = 3600
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": ts(ready_for),
                }
            ]
        },
    }


def pool(
    rollout: dict[str, Any] | None = None,
    *,
    phase: str = "Progressing",
    up: tuple[str, str] = ("RolloutInProgress", ""),
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "workers", "generation": 1},
        "spec": {
            "nodeSelector": {"matchLabels": {"pool": "workers"}},
            "image": {"ref": f"{REPO}@{D2}"},
            "rollout": {"maxUnavailable": 1, **(rollout or {})},
            **spec,
        },
        "status": {
            "phase": phase,
            "targetDigest": D2,
            "conditions": [
                {"type": "UpToDate", "status": "False", "reason": up[0], "message": up[1]}
            ],
        },
    }


def report(p: dict[str, Any], bns: list[dict[str, Any]], **nodes: Any) -> e.PoolReport:
    by_name = {
        b["metadata"]["name"]: nodes.get(b["metadata"]["name"]) or node(b["metadata"]["name"])
        for b in bns
    }
    return e.pool_report(p, bns, by_name, NOW)


def holding(since: float, **kw: Any) -> dict[str, str]:
    return {c.IN_REBOOT_SLOT_ANNOTATION: ts(since), c.WAS_CORDONED_ANNOTATION: "false", **kw}


def test_age() -> None:
    assert [e.age(s) for s in (-3, 0, 40, 192, 7980, 100800)] == [
        "0s",
        "0s",
        "40s",
        "3m12s",
        "2h13m",
        "1d4h",
    ]


def test_a_drain_uses_the_budget_the_staged_nodes_wait_for() -> None:
    r = report(
        pool(),
        [bn("n0", annotations=holding(40)), bn("n1"), bn("n2")],
        n0=node("n0", cordoned=True),
    )
    wait = e.waits_for(r)
    assert wait == e.Wait(
        e.BUDGET, "a reboot slot for n1, n2: maxUnavailable 1 is used by n0 (draining, 40s)"
    )
    assert e.why_node(r, "n1") == (
        "n1 is staged and waits for a reboot slot: maxUnavailable 1 is used by n0 (draining, 40s)."
    )
    assert e.why_node(r, "n0") == (
        "n0 holds a reboot slot since 40s ago and is draining; once drained it is told to "
        f"reboot into {D2[7:19]}."
    )
    assert e.why_pool(r) == (
        f"Pool workers is Progressing: 0/3 nodes updated to {D2[7:19]}. It waits for "
        f"{wait.message}."
    )


def test_a_not_ready_member_outside_the_rollout_is_named_as_using_the_budget() -> None:
    r = report(pool(), [bn("n0"), bn("n1", booted=D1, staged=None, idle=("True", "Idle"))],
               n1=node("n1", ready=False))  # fmt: skip
    assert e.waits_for(r) == e.Wait(
        e.BUDGET, "a reboot slot for n0: maxUnavailable 1 is used by n1 (NotReady)"
    )
    assert "It is NotReady, so it counts against maxUnavailable 1." in e.why_node(r, "n1")


def test_a_closed_window_names_the_next_opening() -> None:
    windows = [{"start": "22:00", "duration": "4h", "timeZone": "Europe/Berlin"}]
    r = report(pool({"maintenanceWindows": windows}), [bn("n0"), bn("n1")])
    assert e.waits_for(r) == e.Wait(
        e.WINDOW,
        "a maintenance window: the next maintenance window opens Wed 2026-11-25 22:00 "
        "Europe/Berlin (in 1h00m)",
    )


def test_the_issues_example_an_open_window_and_two_slot_holders() -> None:
    windows = [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "start": "19:00", "duration": "4h",
                "timeZone": "Europe/Berlin"}]  # fmt: skip
    rebooting = holding(95, **{c.REBOOT_REQUESTED_ANNOTATION: ts(20)})
    r = report(
        pool({"maxUnavailable": 2, "maintenanceWindows": windows}),
        [
            bn("worker-1", annotations=holding(40)),
            bn("worker-2", annotations=rebooting, state="Booted", idle=("False", "Rebooting")),
            bn("worker-3"),
        ],
        **{"worker-1": node("worker-1", cordoned=True), "worker-2": node("worker-2", ready=False)},
    )
    assert e.why_node(r, "worker-3") == (
        "worker-3 is staged and waits for a reboot slot: maxUnavailable 2 is used by worker-1 "
        "(draining, 40s), worker-2 (rebooting, 20s). The window Mon-Fri 19:00 4h Europe/Berlin "
        "is open for 2h00m more."
    )


def test_paused_alerts_and_preconditions_as_the_controller_published_them() -> None:
    r = report(pool({"paused": True}), [bn("n0")])
    assert e.waits_for(r).kind == e.PAUSED
    assert "kubectl bootc resume workers" in e.waits_for(r).message
    message = "NodeDown fires; no new reboots until resolved; 0/1 updated"
    r = report(pool(up=(c.REASON_BLOCKED_BY_ALERTS, message)), [bn("n0")])
    assert e.waits_for(r) == e.Wait(e.ALERT, f"alerts to resolve: {message}")
    message = "precondition ceph-ok is not met (empty result); no new reboots until it holds"
    r = report(pool(up=(c.REASON_PRECONDITION_NOT_MET, message)), [bn("n0")])
    assert e.waits_for(r) == e.Wait(e.PRECONDITION, f"preconditions to hold: {message}")


def canary_pool() -> dict[str, Any]:
    return pool({"canary": {"nodes": 1, "requireApproval": True}})


def test_approval_of_the_digest_the_canary_ran() -> None:
    r = report(canary_pool(), [updated("n0"), bn("n1"), bn("n2")])
    assert e.waits_for(r) == e.Wait(
        e.APPROVAL, f"approval of {D2}: 1 canary (n0) passed; kubectl bootc approve workers"
    )
    ok = e.approval(r, None)
    assert ok.ok and ok.digest == D2
    assert ok.lines == (
        f"Pool workers: target {D2}",
        "Canaries:",
        f"  n0: runs {D2[7:19]}, UpToDate; health: no health checks (spec.health unset)",
        f"Approving {D2}",
    )
    other = "sha256:" + "3" * 64
    refused = e.approval(r, other)
    assert not refused.ok
    assert refused.refusal == f"no canary ran {other} and passed its health check"


def test_no_approval_while_the_canary_is_on_its_way_or_without_canaries() -> None:
    r = report(canary_pool(), [bn("n0", annotations=holding(5)), bn("n1")])
    assert not e.approval(r, None).ok
    assert e.waits_for(r) == e.Wait(e.CANARIES, "canaries first: n0 (0 of 1 updated and healthy)")
    assert e.why_node(r, "n1") == (
        "n1 is staged and waits for the canaries to go first: n0 (0 of 1 updated and healthy)."
    )
    r = report(pool(), [bn("n0")])
    assert e.approval(r, None).refusal == "pool workers has no canaries (spec.rollout.canary)"


def test_a_running_health_check_and_its_time_left() -> None:
    arrived = holding(120, **{c.REBOOT_REQUESTED_ANNOTATION: ts(100)})
    p = pool(health={"minReadySeconds": 300, "timeoutSeconds": 600})
    r = report(
        p,
        [updated("n0", annotations=arrived), bn("n1")],
        n0=node("n0", cordoned=True, ready_for=30),
    )
    assert e.waits_for(r) == e.Wait(
        e.HEALTH_CHECK,
        "a health check: n0 (minReadySeconds: Ready for 30s of 300s; 8m20s left before it fails)",
    )
    assert e.why_node(r, "n0") == (
        f"n0 runs {D2[7:19]} and keeps its reboot slot until its health check passes: "
        "minReadySeconds: Ready for 30s of 300s; it fails in 8m20s (timeoutSeconds 600)."
    )
    assert r.rows[0].state == "UpToDate"  # the annotation is written by the controller


def test_a_pods_check_without_listed_pods_uses_the_controllers_note() -> None:
    note = "Pending: pods: default/web is not Ready (0/1 Ready)"
    arrived = holding(
        120, **{c.REBOOT_REQUESTED_ANNOTATION: ts(100), c.HEALTH_CHECK_ANNOTATION: note}
    )
    p = pool(health={"pods": {"selector": {"matchLabels": {"app": "web"}}}})
    r = report(p, [updated("n0", annotations=arrived), bn("n1")])
    assert e.pods_wanted(r) == ["n0"]
    assert "n0 (pods: default/web is not Ready (0/1 Ready); " in e.waits_for(r).message


def test_a_queries_check_uses_the_controllers_note() -> None:
    """The plugin does not ask Prometheus: the controller's last verdict is shown."""
    note = "Pending: queries: ceph-osds-up: non-empty for 40s of 120s (0/1 pass)"
    queries = {"queries": [{"name": "ceph-osds-up", "expr": "x", "for": "2m"}]}
    arrived = holding(
        120, **{c.REBOOT_REQUESTED_ANNOTATION: ts(100), c.HEALTH_CHECK_ANNOTATION: note}
    )
    r = report(pool(health=queries), [updated("n0", annotations=arrived), bn("n1")])
    assert r.gates["n0"].check == "queries"
    assert "n0 (queries: ceph-osds-up: non-empty for 40s of 120s (0/1 pass); " in (
        e.waits_for(r).message
    )
    # no note yet: the plugin says the queries were not asked, never that they pass
    bare = holding(120, **{c.REBOOT_REQUESTED_ANNOTATION: ts(100)})
    r = report(pool(health=queries), [updated("n0", annotations=bare), bn("n1")])
    assert "ceph-osds-up: not asked yet" in e.waits_for(r).message


def test_a_failed_boot_halts_and_two_unhealthy_holders_halt() -> None:
    arrived = holding(120, **{c.REBOOT_REQUESTED_ANNOTATION: ts(100)})
    failed = updated("n0", annotations=arrived)
    failed["status"]["bootAssessment"] = {"state": "Failed", "message": "greenboot failed"}
    r = report(pool(health={"bootComplete": True}), [failed, bn("n1")])
    wait = e.waits_for(r)
    assert wait.kind == e.HEALTH_FAILED
    assert wait.message.startswith(
        f"the nodes to recover or a new target: n0 failed its health check on {D2}: "
        "bootComplete: greenboot failed; it keeps its reboot slot"
    ), wait.message
    degraded = [bn(n, annotations=holding(60), idle=("False", "Staged")) for n in ("n0", "n1")] + [
        bn("n2")
    ]
    for b in degraded[:2]:
        b["status"]["conditions"][1] = {
            "type": "Degraded", "status": "True", "reason": "Error", "message": "disk full"
        }  # fmt: skip
    r = report(pool({"maxUnavailable": 2}), degraded)
    assert e.waits_for(r) == e.Wait(
        e.HALTED,
        "2 nodes holding reboot slots are unhealthy (n0, n1; maxUnhealthy is 2); no new "
        "reboots until they recover",
    )
    assert e.why_node(r, "n0") == (
        "n0 is degraded (disk full); it takes no reboot slot until it recovers."
    )


def test_done_and_invalid() -> None:
    r = report(pool(phase="UpToDate"), [updated("n0"), updated("n1")])
    assert e.waits_for(r) == e.Wait(e.NOTHING, f"nothing: all 2 nodes run {D2[7:19]}")
    assert e.why_node(r, "n0") == f"n0 is up to date: it runs {D2[7:19]} and is out of its slot."
    bad = pool({"maxUnavailable": "lots"})
    assert e.waits_for(report(bad, [bn("n0")])).kind == e.INVALID_SPEC


def test_status_block_and_its_data() -> None:
    r = report(pool(), [bn("n0", annotations=holding(40)), bn("n1")], n0=node("n0", cordoned=True))
    lines = pool_lines(r)
    assert lines[0] == (
        f"Pool workers: Progressing, 0/2 updated, image {REPO}@sha256:{D2[7:19]} "
        f"(target {D2[7:19]})"
    )
    assert (
        lines[1]
        == "  waits for: a reboot slot for n1: maxUnavailable 1 is used by n0 (draining, 40s)"
    )
    assert lines[3].split() == [
        "NODE",
        "STATE",
        "BOOTED",
        "DESIRED",
        "READY",
        "CORDONED",
        "SLOT",
        "CHECK",
    ]
    assert lines[4].split() == ["n0", "Staged", D1[7:19], D2[7:19], "yes", "yes", "yes", "-"]
    data = pool_data(r)
    assert data["waitsFor"] == {"kind": e.BUDGET, "message": lines[1].removeprefix("  waits for: ")}
    assert (data["updated"], data["total"], data["maxUnavailable"]) == (0, 2, 1)
    assert data["nodes"][0] == {
        "name": "n0", "state": "Staged", "booted": D1, "desired": D2, "ready": True,
        "cordoned": True, "slot": True, "check": "", "canary": False, "note": "",
    }  # fmt: skip


def test_events_oldest_first() -> None:
    def ev(reason: str, at: str, count: int = 1) -> dict[str, Any]:
        return {
            "type": "Normal",
            "reason": reason,
            "lastTimestamp": at,
            "count": count,
            "message": f"{reason} happened",
            "involvedObject": {"kind": "BootcNodePool", "name": "workers"},
        }

    lines = events_lines(
        [ev("RolloutComplete", "2026-11-25T10:05:00Z"), ev("SlotTaken", "2026-11-25T10:01:00Z", 2)]
    )
    assert [line.split()[3] for line in lines[1:]] == ["SlotTaken", "RolloutComplete"]
    assert "(x2)" in lines[1] and lines[1].endswith("SlotTaken happened")
    assert events_lines([]) == ["No Events."]


def test_event_queries_select_the_rollouts_events_on_the_server() -> None:
    """The pool's Events by kind and name; each node's by name (its BootcNode and
    Node share it), the kind kept from the answer: never every Event listed."""
    assert event_queries("workers", ["w-1", "w-0", "w-1"]) == [
        (
            "involvedObject.kind=BootcNodePool,involvedObject.name=workers",
            frozenset({"BootcNodePool"}),
        ),
        ("involvedObject.name=w-0", frozenset({"BootcNode", "Node"})),
        ("involvedObject.name=w-1", frozenset({"BootcNode", "Node"})),
    ]
    assert event_queries(None, ["w-0"]) == [
        ("involvedObject.name=w-0", frozenset({"BootcNode", "Node"}))
    ]
    assert event_queries("empty", []) == [
        (
            "involvedObject.kind=BootcNodePool,involvedObject.name=empty",
            frozenset({"BootcNodePool"}),
        )
    ]


def test_api_errors_are_one_line_naming_verb_and_resource() -> None:
    forbidden = ApiError(
        403,
        "Forbidden",
        'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the '
        "cluster scope",
    )
    assert explain_api_error(forbidden, "list", NODES, None) == (
        'no permission to list nodes: User "u" cannot list resource "nodes" in API group "" '
        "at the cluster scope"
    )
    missing = ApiError(404, "NotFound", 'bootcnodepools "x" not found')
    assert explain_api_error(missing, "get", BOOTC_NODE_POOLS, "x") == (
        'no such pool "x" (kubectl get bootcnodepools lists them)'
    )
    assert "CRDs installed" in explain_api_error(missing, "list", BOOTC_NODE_POOLS, None)


def labelled(name: str, **labels: str) -> dict[str, Any]:
    n = node(name)
    n["metadata"]["labels"] = labels
    return n


def test_zone_by_zone_names_the_domain_a_node_waits_for() -> None:
    zone = "topology.kubernetes.io/zone"
    r = report(
        pool({"topology": {"key": zone}}),
        [bn("n0", annotations=holding(40)), bn("n1"), bn("n2")],
        n0=labelled("n0", **{zone: "a"}) | {"spec": {"unschedulable": True}},
        n1=labelled("n1", **{zone: "b"}),
        n2=labelled("n2"),
    )
    assert e.why_node(r, "n1") == (
        f"n1 is staged and waits for its domain ({zone}=b): reboots stay in a until it is "
        "done (spec.rollout.topology)."
    )
    assert e.why_node(r, "n2") == (
        f"n2 is staged and waits for its domain ({zone}=(unlabelled)): reboots stay in a "
        "until it is done (spec.rollout.topology)."
    )
    assert e.why_pool(r).endswith(f" Zone by zone: updating {zone}=a (1 of 3)."), e.why_pool(r)


def test_the_admins_order_shows_who_is_next() -> None:
    rack = "example.com/rack"
    r = report(
        pool({"order": {"byLabel": rack, "controlPlane": "Last"}, "paused": True}),
        [bn("n0"), bn("n1"), bn("n2")],
        n0=labelled("n0", **{rack: "10"}),
        n1=labelled("n1", **{rack: "9", c.CONTROL_PLANE_LABEL: ""}),
        n2=labelled("n2", **{rack: "2"}),
    )
    describe = f"control plane last, by label {rack}, by name"
    assert e.why_pool(r).endswith(f" Next ({describe}): n2, n0, n1."), e.why_pool(r)
    assert e.why_node(r, "n0").endswith(
        f" It is number 2 of 3 in line (spec.rollout.order: {describe})."
    ), e.why_node(r, "n0")


def test_a_signed_pool_as_the_controller_published_it() -> None:
    """spec.image.verification: the plugin checks no signature; the pool's conditions say
    whether the controller verified its digest."""
    verification = {"publicKeys": ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]}
    signed = pool(phase="UpToDate", up=(c.REASON_ALL_UPDATED, "2/2 updated"))
    signed["spec"]["image"]["verification"] = verification
    r = report(signed, [updated("n0"), updated("n1")])
    assert e.waits_for(r) == e.Wait(e.NOTHING, f"nothing: all 2 nodes run {D2[7:19]}")
    why = f"{REPO}@{D2} is not signed (no sha256-....sig in the repository)"
    message = f"{why}; nodes stay on what they run; 0/1 updated"
    refused = pool(phase="Degraded", up=(c.REASON_SIGNATURE_VERIFICATION_FAILED, message))
    refused["spec"]["image"]["verification"] = verification
    r = report(refused, [bn("n0")])
    assert r.target == "" and r.plan is None
    assert e.waits_for(r) == e.Wait(e.SIGNATURE, f"a signature that verifies: {why}")
    # issue 37 §16: when the controller looks again, as it published it
    refused["status"]["nextSignatureCheckTime"] = "2026-11-25T20:00:04Z"
    wait = e.waits_for(report(refused, [bn("n0")]))
    assert wait == e.Wait(
        e.SIGNATURE, f"a signature that verifies: {why}; checked again at 20:00:04 UTC (in 4s)"
    )
    assert e.why_pool(report(refused, [bn("n0")])).endswith(f"It waits for {wait.message}.")
    # a registry that cannot be asked: its retry, due now
    down = f"cannot check the signature of {REPO}@{D2}: connection refused; nothing stages"
    refused["status"]["conditions"][0].update(
        reason=c.REASON_SIGNATURE_REGISTRY_ERROR, message=down
    )
    refused["status"]["nextSignatureCheckTime"] = "2026-11-25T19:59:58Z"
    assert e.waits_for(report(refused, [bn("n0")])).message == (
        f"a signature that verifies: {down}; checked again at 19:59:58 UTC (due now)"
    )
