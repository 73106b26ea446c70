"""Drain pod selection."""

from __future__ import annotations

from typing import Any

from bootc_operator.policy.drainplan import (
    DrainState,
    blocking_message,
    drain_state,
    must_leave,
    unblocked,
)
from bootc_operator.reconcilers.watchers.drain import DrainResult, describe, slim_pod


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


def test_blocking_message_names_only_the_blocked_pods_and_reasons() -> None:
    """Issue 37 §7: a pod just evicted (terminating) is not named beside the blocked one."""
    msg = blocking_message("n1", ["ns/b", "ns/a"], {"ns/a": "PDB web allows 0 disruptions"})
    assert msg == "drain of n1 blocked by ns/a (PDB web allows 0 disruptions)"
    many = blocking_message("n1", [], {f"ns/p{i}": "PDB" for i in range(7)})
    assert many.endswith("ns/p4 (PDB), and 2 more")
    # nothing refused: the pods it waits for to go, not "blocked"
    assert (
        blocking_message("n1", ["ns/b", "ns/a"], {}) == "drain of n1 waiting for ns/a, ns/b to go"
    )
    assert blocking_message("n1", [], {}) == "drain of n1 done"


def test_a_pod_evicted_or_deleted_meanwhile_blocks_no_more() -> None:
    """Issue 37 §7: refused once, then terminating (evicted, or deleted by an admin):
    not blocking; a pod still to evict, or still held, still blocks."""
    state = drain_state([pod("a", deleting=True), pod("b"), pod("c")])
    blocked = {"ns/a": "PDB", "ns/b": "PDB", "ns/gone": "PDB", "ns/held": "EmptyDirData"}
    assert unblocked(blocked, state, held_before=["ns/held"]) == {"ns/a", "ns/gone", "ns/held"}
    kept = DrainState(evict=(), terminating=(), remaining=("ns/held",), held={"ns/held": "x"})
    assert unblocked(blocked, kept, held_before=["ns/held"]) == {"ns/a", "ns/b", "ns/gone"}
    # held before, let go since (deleteEmptyDirData true): its hold no longer applies
    let_go = drain_state([pod("held")])
    assert unblocked({"ns/held": "EmptyDirData"}, let_go, held_before=["ns/held"]) == {"ns/held"}


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
