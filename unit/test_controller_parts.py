"""Pure parts of the controller runtime: leader-election decisions and event mapping."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.policy.poolspec import check_pool
from bootc_operator.reconcilers.triggers import node_changed, pool_changed, pools_selecting
from bootc_operator.runtime.httpserver import parse_bind_address
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


@pytest.mark.parametrize(
    ("addr", "expected"),
    [(":8080", ("0.0.0.0", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("0", None), ("", None)],
)
def test_bind_addresses(addr: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(addr) == expected


def test_bad_bind_address() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bind_address("localhost")


# ------------------------------------------------------------------ rollout policy fields


def _pool_with(**rollout: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {"matchLabels": {"a": "b"}},
            "image": {"ref": "quay.io/x/os@sha256:" + "a" * 64},
            "rollout": rollout,
        },
    }


def test_policy_fields_resolve_with_their_defaults() -> None:
    plain = check_pool(_pool_with())
    assert plain.valid and plain.windows == ()
    assert plain.resolve_max_unhealthy(1) == 2  # a 1-node pool keeps the default of 2
    assert plain.resolve_stage_ahead(10, 2) is None  # unset: everyone stages at once
    tuned = check_pool(_pool_with(maxUnhealthy="10%", stageAhead="20%"))
    assert tuned.resolve_max_unhealthy(35) == 4 and tuned.resolve_max_unhealthy(3) == 1
    assert tuned.resolve_stage_ahead(10, 1) == 2
    assert check_pool(_pool_with(stageAhead=0)).resolve_stage_ahead(10, 3) == 3
    assert check_pool(_pool_with(stageAhead="0%")).resolve_stage_ahead(10, 0) == 1
    assert check_pool(_pool_with(maxUnhealthy=5)).resolve_max_unhealthy(3) == 5


def test_bad_policy_fields_are_invalid_spec_naming_the_field() -> None:
    cases = {
        "spec.rollout.maxUnhealthy must be at least 1": _pool_with(maxUnhealthy=0),
        'spec.rollout.stageAhead: stageAhead "5"': _pool_with(stageAhead="5"),
        'maintenanceWindows[0].timeZone: "Mars/Base"': _pool_with(
            maintenanceWindows=[{"start": "22:00", "duration": "4h", "timeZone": "Mars/Base"}]
        ),
    }
    for fragment, pool in cases.items():
        check = check_pool(pool)
        assert not check.valid
        assert any(fragment in p for p in check.problems), (fragment, check.problems)
