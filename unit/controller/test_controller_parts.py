"""Pure parts of the controller runtime: leader-election decisions and event mapping."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.reconcilers.triggers import node_changed, pool_changed, pools_selecting
from bootc_operator.runtime.leaderelection import Decision, LeaseRecord, decide

ME = "me"


def rec(holder: str, duration: float = 15) -> LeaseRecord:
    return LeaseRecord(holder, duration, 0, None, None)


@pytest.mark.parametrize(
    ("record", "observed_at", "now", "expected"),
    [
        (None, 0, 0, Decision.CREATE),
        (rec(ME), 0, 100, Decision.RENEW),
        (rec(""), 0, 0, Decision.TAKE),  # released by its holder
        (rec("other"), 0, 10, Decision.WAIT),
        (rec("other"), 0, 14.9, Decision.WAIT),
        (rec("other"), 0, 15, Decision.TAKE),  # expired on our clock
        (rec("other", 1), 5, 5.5, Decision.WAIT),
        (rec("other", 1), 5, 6.1, Decision.TAKE),
    ],
)
def test_leader_decision(
    record: LeaseRecord | None, observed_at: float, now: float, expected: Decision
) -> None:
    assert decide(record, ME, observed_at, now) is expected


def test_lease_record_parses_lease() -> None:
    r = LeaseRecord.from_lease(
        {"spec": {"holderIdentity": "x", "leaseDurationSeconds": 15, "leaseTransitions": 3}}
    )
    assert r == LeaseRecord("x", 15.0, 3, None, None)
    assert LeaseRecord.from_lease({}) == LeaseRecord("", 0.0, 0, None, None)


def node(
    labels: dict[str, str], ready: str = "True", unschedulable: bool = False
) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "labels": labels, "resourceVersion": "1"},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "images": [{"names": ["x"]}],
        },
    }


def test_only_relevant_node_changes_pass() -> None:
    base = node({"a": "b"})
    heartbeat = node({"a": "b"})
    heartbeat["status"]["images"] = [{"names": ["y"]}]
    heartbeat["metadata"]["resourceVersion"] = "2"
    assert not node_changed(base, heartbeat)
    assert node_changed(base, node({"a": "c"}))
    assert node_changed(base, node({"a": "b"}, ready="False"))
    assert node_changed(base, node({"a": "b"}, unschedulable=True))
    # an autoscaler's taint saying it removes the node (or taking that back)
    tainted = node({"a": "b"})
    tainted["spec"]["taints"] = [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
    assert node_changed(base, tainted) and node_changed(tainted, base)
    other = node({"a": "b"})
    other["spec"]["taints"] = [{"key": "example.com/other", "effect": "NoSchedule"}]
    assert not node_changed(base, other)
    # the autoscaler annotations a slot holder carries, removed or changed by someone
    protected = node({"a": "b"})
    protected["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    assert node_changed(protected, base) and node_changed(base, protected)
    unrelated = node({"a": "b"})
    unrelated["metadata"]["annotations"] = {"example.com/note": "x"}
    assert not node_changed(base, unrelated)


def test_pool_changes_that_matter() -> None:
    p = {"metadata": {"generation": 1}, "status": {"nodeCount": 1}}
    assert not pool_changed(p, {"metadata": {"generation": 1}, "status": {"nodeCount": 2}})
    assert pool_changed(p, {"metadata": {"generation": 2}, "status": {"nodeCount": 1}})
    assert pool_changed(p, {"metadata": {"generation": 1, "deletionTimestamp": "t"}})
    assert pool_changed(p, {"metadata": {"generation": 1}, "status": {"targetDigest": "d"}})


def test_pools_selecting_old_or_new_labels_and_skips_invalid() -> None:
    pools = [
        {"metadata": {"name": "a"}, "spec": {"nodeSelector": {"matchLabels": {"r": "a"}}}},
        {"metadata": {"name": "b"}, "spec": {"nodeSelector": {"matchLabels": {"r": "b"}}}},
        {"metadata": {"name": "bad"}, "spec": {"nodeSelector": {"matchLabels": {"r b": "a"}}}},
    ]
    assert pools_selecting(pools, {"r": "a"}, {"r": "b"}) == {"a", "b"}
    assert pools_selecting(pools, {"r": "c"}) == set()
