"""Drain pod selection."""

from __future__ import annotations

from typing import Any

from bootc_operator.policy.drainplan import blocking_message, drain_state, must_leave
from bootc_operator.reconcilers.drain import DrainResult, describe, slim_pod


def pod(
    name: str, *, owner: str | None = None, mirror: bool = False, deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "n1"}}


def test_daemonset_and_mirror_pods_stay() -> None:
    assert not must_leave(pod("ds", owner="DaemonSet"))
    assert not must_leave(pod("static", mirror=True))
    assert must_leave(pod("rs", owner="ReplicaSet"))
    assert must_leave(pod("bare"))
    # a DaemonSet reference that is not the controller does not protect the pod
    p = pod("x")
    p["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "o"}]
    assert must_leave(p)


def test_drain_state_splits_evictable_and_terminating() -> None:
    state = drain_state(
        [
            pod("b", owner="ReplicaSet"),
            pod("a"),
            pod("c", deleting=True),
            pod("d", owner="DaemonSet"),
        ]
    )
    assert state.evict == ("ns/a", "ns/b")
    assert state.terminating == ("ns/c",)
    assert state.remaining == ("ns/a", "ns/b", "ns/c")
    assert drain_state([pod("d", owner="DaemonSet")]).remaining == ()


def test_blocking_message_names_pods_and_reasons() -> None:
    msg = blocking_message("n1", ["ns/b", "ns/a"], {"ns/a": "PDB web allows 0 disruptions"})
    assert msg == "drain of n1 blocked by ns/a (PDB web allows 0 disruptions), ns/b"
    many = blocking_message("n1", [f"ns/p{i}" for i in range(7)], {})
    assert many.endswith("and 2 more")
    assert blocking_message("n1", [], {}) == "drain of n1 done"


def test_a_drain_that_cannot_list_its_pods_is_blocked_and_says_why() -> None:
    assert not DrainResult(pool="p").blocked
    res = DrainResult(
        pool="p", error="could not list the node's pods: 503 ServiceUnavailable: busy"
    )
    assert res.blocked
    assert res.message("n1") == (
        "drain of n1 waiting: could not list the node's pods: 503 ServiceUnavailable: busy; "
        "retrying"
    )
    evicting = DrainResult(pool="p", remaining=("ns/a",), blocked_by={"ns/a": "PDB"})
    assert evicting.blocked and evicting.message("n1") == "drain of n1 blocked by ns/a (PDB)"
    done = DrainResult(pool="p", done=True, error="could not list")
    assert not done.blocked


def test_an_error_is_described_by_its_type_when_it_says_nothing() -> None:
    assert describe(TimeoutError()) == "TimeoutError"
    assert describe(ConnectionResetError("reset by peer")) == "ConnectionResetError: reset by peer"


def test_slim_pod_keeps_the_emptydir_volume_names_and_nothing_else_of_the_spec() -> None:
    full = pod("a")
    full["spec"]["volumes"] = [
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "cfg", "configMap": {"name": "c"}},
    ]
    full["spec"]["containers"] = [{"name": "c", "image": "x"}]
    slim = slim_pod(full)
    assert slim["spec"] == {"nodeName": "n1", "volumes": [{"name": "scratch", "emptyDir": {}}]}
    assert slim_pod(pod("b"))["spec"] == {"nodeName": "n1"}
