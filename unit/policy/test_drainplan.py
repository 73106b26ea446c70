"""The drain policy's pure parts: spec.rollout.drain parsed, what a timed-out drain
does, which holders halt the pool, Skip's order and the Halt message, and which
PodDisruptionBudgets a refused pod waits for."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.drainplan import (
    EMPTYDIR_REASON,
    MAX_TRIES,
    MIN_GRACE_PERIOD,
    DrainPolicy,
    TimeoutAction,
    blocking_message,
    budget_allows,
    budget_covers,
    drain_state,
    emptydir_volumes,
    halt_message,
    halting_drains,
    keeps_emptydir_data,
    overdue_drains,
    refusal_kind,
    slim_budget,
    timeout_action,
)
from bootc_operator.policy.nodestate import NodeState, drain_skips_of
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.slots import release_patch
from unit.policy.planning import rollout_plan
from unit.policy.test_decisions import NOW, v

DIGEST = "sha256:" + "a" * 64


def policy_of(**rollout: Any) -> DrainPolicy:
    pool = {"spec": {"nodeSelector": {}, "image": {"ref": f"q.io/x@{DIGEST}"}, "rollout": rollout}}
    checked = check_pool(pool)
    assert checked.valid, checked.problems
    assert checked.drain_timeout == checked.drain.timeout
    return checked.drain


def problems_of(**rollout: Any) -> tuple[str, ...]:
    pool = {"spec": {"nodeSelector": {}, "image": {"ref": f"q.io/x@{DIGEST}"}, "rollout": rollout}}
    return check_pool(pool).problems


def test_drain_timeout_seconds_alone_keeps_its_meaning() -> None:
    assert policy_of(drainTimeoutSeconds=60) == DrainPolicy(timeout=60.0)
    assert policy_of() == DrainPolicy()


def test_drain_timeout_seconds_wins_over_drain_timeout_seconds() -> None:
    got = policy_of(drainTimeoutSeconds=60, drain={"timeoutSeconds": 5, "onTimeout": "Force"})
    assert got == DrainPolicy(timeout=5.0, on_timeout="Force")
    # 0 is set too: no limit, whatever drainTimeoutSeconds says
    assert policy_of(drainTimeoutSeconds=60, drain={"timeoutSeconds": 0}).timeout is None
    # unset inside drain: drainTimeoutSeconds still counts
    got = policy_of(drainTimeoutSeconds=60, drain={"onTimeout": "Skip", "gracePeriodSeconds": 3})
    assert got == DrainPolicy(timeout=60.0, on_timeout="Skip", grace_period=3)


def test_a_zero_grace_period_is_taken_as_one() -> None:
    """Issue 37 §12: 0 would delete pods without their kubelet's confirmation."""
    force = {"onTimeout": "Force", "gracePeriodSeconds": 0}
    assert policy_of(drain=force).grace_period == MIN_GRACE_PERIOD == 1
    assert policy_of(drain={"gracePeriodSeconds": 0}).grace_period == 1
    assert policy_of(drain={"gracePeriodSeconds": 5}).grace_period == 5
    assert policy_of(drain={}).grace_period is None
    assert not problems_of(drain=force)


D = "spec.rollout.drain"
NON_NEGATIVE = "must be a non-negative integer, not"


@pytest.mark.parametrize(
    ("drain", "problem"),
    [
        ({"onTimeout": "Drop"}, f'{D}.onTimeout must be one of Halt, Skip, Force, not "Drop"'),
        ({"timeoutSeconds": -1}, f"{D}.timeoutSeconds {NON_NEGATIVE} -1"),
        ({"gracePeriodSeconds": "5"}, f'{D}.gracePeriodSeconds {NON_NEGATIVE} "5"'),
        ("Halt", f"{D} must be an object"),
    ],
)
def test_bad_drain_settings_are_named(drain: Any, problem: str) -> None:
    assert problem in problems_of(drain=drain)


def test_timeout_action_per_policy_and_skip_is_bounded() -> None:
    assert timeout_action(DrainPolicy(timeout=1), 0) is TimeoutAction.GIVE_UP
    assert timeout_action(DrainPolicy(timeout=1, on_timeout="Halt"), 0) is TimeoutAction.HALT
    assert timeout_action(DrainPolicy(timeout=1, on_timeout="Force"), 5) is TimeoutAction.FORCE
    skip = DrainPolicy(timeout=1, on_timeout="Skip")
    # issue 37 §5: "at most 3 tries" is three drains: two skips, the third gives up
    assert MAX_TRIES == 3
    assert [timeout_action(skip, n) for n in range(MAX_TRIES + 1)] == [
        TimeoutAction.SKIP,
        TimeoutAction.SKIP,
        TimeoutAction.GIVE_UP,
        TimeoutAction.GIVE_UP,
    ]


def test_only_a_pdb_429_is_a_pdb_refusal() -> None:
    assert refusal_kind(429) == "pdb"
    assert [refusal_kind(s) for s in (400, 403, 422, 500)] == ["denied"] * 4


def test_overdue_drains_count_from_the_slot_and_only_while_draining() -> None:
    taken = NOW - dt.timedelta(seconds=30)
    draining = v("a", NodeState.STAGED, slot=True, slot_since=taken)
    told = v("b", NodeState.STAGED, slot=True, slot_since=taken, want="Booted")
    young = v("c", NodeState.STAGED, slot=True, slot_since=NOW - dt.timedelta(seconds=5))
    free = v("d", NodeState.STAGED)
    views = [draining, told, young, free]
    assert overdue_drains(views, NOW, DrainPolicy(timeout=30)) == ("a",)
    assert overdue_drains(views, NOW, DrainPolicy(timeout=None)) == ()
    assert halting_drains(views, NOW, DrainPolicy(timeout=30)) == ()
    assert halting_drains(views, NOW, DrainPolicy(timeout=30, on_timeout="Halt")) == ("a",)


def test_a_halting_drain_stops_new_slots_but_the_holder_keeps_draining() -> None:
    nodes = [v("a", NodeState.STAGED, slot=True), v("b", NodeState.STAGED)]
    plan = rollout_plan(nodes, 2, paused=False, now=NOW, drain_halted=("a",))
    assert plan.take == () and plan.waiting == ("b",) and plan.drain == ("a",)
    assert plan.drain_halted == ("a",)
    assert rollout_plan(nodes, 2, paused=False, now=NOW).take == ("b",)


def test_skipped_nodes_take_slots_after_the_others_fewest_skips_first() -> None:
    nodes = [
        replace(v("a", NodeState.STAGED), drain_skips=2),
        replace(v("b", NodeState.STAGED), drain_skips=1),
        v("c", NodeState.STAGED),
    ]
    assert rollout_plan(nodes, 1, paused=False, now=NOW).take == ("c",)
    assert rollout_plan(nodes, 3, paused=False, now=NOW).take == ("c", "b", "a")


def test_skip_mark_is_counted_and_cleared_by_a_release() -> None:
    assert drain_skips_of("2 drain timed out after 5s: ...") == 2
    assert drain_skips_of(None) == 0 and drain_skips_of("garbage") == 0
    assert release_patch("Staged")["metadata"]["annotations"][c.DRAIN_SKIPPED_ANNOTATION] is None
    mark = {c.DRAIN_SKIPPED_ANNOTATION: "1 why"}
    assert release_patch("Staged", mark)["metadata"]["annotations"][c.DRAIN_SKIPPED_ANNOTATION] == (
        "1 why"
    )


def test_halt_message_names_the_node_and_the_blocking_pod() -> None:
    msg = halt_message(("n2", "n1"), {"n1": "drain of n1 blocked by default/web-1 (PDB)"})
    assert msg == (
        "drain timed out on n1, n2 (onTimeout: Halt), no new reboots until it ends: "
        "drain of n1 blocked by default/web-1 (PDB); drain of n2 not finished"
    )


# ------------------------------------------------- deleteEmptyDirData (issue 29 §4)


def test_delete_emptydir_data_is_read_and_a_non_boolean_named() -> None:
    assert policy_of(drain={"deleteEmptyDirData": False}).delete_emptydir_data is False
    assert policy_of(drain={"deleteEmptyDirData": True}).delete_emptydir_data is True
    # unset, in drain or without drain: None (evicted, as always)
    assert policy_of(drain={"onTimeout": "Halt"}).delete_emptydir_data is None
    assert policy_of().delete_emptydir_data is None
    assert f'{D}.deleteEmptyDirData must be true or false, not "false"' in problems_of(
        drain={"deleteEmptyDirData": "false"}
    )


def pod(
    name: str,
    *volumes: dict[str, Any],
    phase: str = "Running",
    owner: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T00:00:00Z"
    return {"metadata": meta, "spec": {"volumes": list(volumes)}, "status": {"phase": phase}}


SCRATCH = {"name": "scratch", "emptyDir": {}}
RAM = {"name": "ram", "emptyDir": {"medium": "Memory"}}
CONFIG = {"name": "cfg", "configMap": {"name": "c"}}


def test_emptydir_volumes_are_named_and_other_volumes_are_not() -> None:
    assert emptydir_volumes(pod("a", CONFIG, SCRATCH, RAM)) == ("scratch", "ram")
    assert emptydir_volumes(pod("a", CONFIG)) == ()
    assert emptydir_volumes({"metadata": {}, "spec": {}}) == ()
    assert emptydir_volumes({"metadata": {}}) == ()


@pytest.mark.parametrize("setting", [None, True, False])
@pytest.mark.parametrize("volumes", [(), (CONFIG,), (SCRATCH,), (RAM, CONFIG)])
@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed", "Unknown"])
def test_only_false_keeps_a_pod_with_emptydir_data_that_is_not_finished(
    setting: bool | None, volumes: tuple[dict[str, Any], ...], phase: str
) -> None:
    p = pod("a", *volumes, phase=phase)
    has_data = any("emptyDir" in vol for vol in volumes)
    finished = phase in ("Succeeded", "Failed")
    expected = setting is False and has_data and not finished
    assert keeps_emptydir_data(p, setting) is expected
    state = drain_state([p], setting)
    assert state.remaining == ("ns/a",)
    if expected:
        assert state.evict == () and list(state.held) == ["ns/a"]
    else:
        assert state.evict == ("ns/a",) and not state.held


def test_a_held_pod_blocks_the_drain_with_the_named_reason_and_its_volumes() -> None:
    pods = [
        pod("web", SCRATCH, RAM),
        pod("api", CONFIG),
        pod("gone", SCRATCH, deleting=True),  # terminating: waited for, not held
        pod("ds", SCRATCH, owner="DaemonSet"),  # a DaemonSet pod stays, data or not
        pod("job", SCRATCH, phase="Succeeded"),
    ]
    state = drain_state(pods, delete_emptydir_data=False)
    assert state.evict == ("ns/api", "ns/job")
    assert state.terminating == ("ns/gone",)
    assert dict(state.held) == {
        "ns/web": "EmptyDirData: its emptyDir volume(s) scratch, ram would be lost and "
        "spec.rollout.drain.deleteEmptyDirData is false"
    }
    assert state.remaining == ("ns/api", "ns/gone", "ns/job", "ns/web")
    msg = blocking_message("n1", state.held, state.held)
    assert msg.startswith(f"drain of n1 blocked by ns/web ({EMPTYDIR_REASON}: ")
    # unset and true: every one of them evicted (the daemon and the terminating aside)
    for setting in (None, True):
        again = drain_state(pods, setting)
        assert again.evict == ("ns/api", "ns/job", "ns/web") and not again.held
    assert drain_state(pods) == drain_state(pods, None)


def pdb(
    selector: dict[str, Any] | None,
    namespace: str = "apps",
    *,
    allowed: int | None = None,
    generation: int = 2,
    observed: int | None = 2,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allowed is not None:
        status["disruptionsAllowed"] = allowed
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {"name": "web", "namespace": namespace, "generation": generation},
        "spec": {"selector": selector},
        "status": status,
    }


@pytest.mark.parametrize(
    ("selector", "namespace", "labels", "covers"),
    [
        ({"matchLabels": {"app": "web"}}, "apps", {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, "apps", {"app": "db"}, False),
        ({"matchLabels": {"app": "web"}}, "other", {"app": "web"}, False),  # its namespace only
        ({}, "apps", {}, True),  # policy/v1: an empty selector covers the whole namespace
        (None, "apps", {"app": "web"}, False),  # no selector covers nothing
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, "apps",
         {"app": "web"}, True),
        ({"matchLabels": {"app": "-bad-"}}, "apps", {"app": "-bad-"}, False),  # invalid
    ],
)  # fmt: skip
def test_a_budget_covers_the_pods_of_its_namespace_its_selector_matches(
    selector: dict[str, Any] | None, namespace: str, labels: dict[str, str], covers: bool
) -> None:
    assert budget_covers(pdb(selector), namespace, labels) is covers


@pytest.mark.parametrize(
    ("allowed", "generation", "observed", "allows"),
    [
        (1, 2, 2, True),
        (0, 2, 2, False),
        (None, 2, 2, False),  # no status yet
        (1, 3, 2, False),  # the status is of an older spec
        (1, 2, None, False),
        (2, 2, 3, True),
    ],
)
def test_a_budget_allows_a_disruption_when_its_current_status_says_so(
    allowed: int | None, generation: int, observed: int | None, allows: bool
) -> None:
    budget = pdb({}, allowed=allowed, generation=generation, observed=observed)
    assert budget_allows(budget) is allows


def test_a_slim_budget_keeps_what_covers_and_allows_read() -> None:
    full = pdb({"matchLabels": {"app": "web"}}, allowed=1)
    full["metadata"] |= {"uid": "u", "resourceVersion": "7", "managedFields": [{"a": 1}]}
    full["spec"]["minAvailable"] = 1
    full["status"] |= {"currentHealthy": 3, "desiredHealthy": 2, "disruptedPods": {"p": "t"}}
    slim = slim_budget(full)
    assert slim == {
        "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "7", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "observedGeneration": 2},
    }
    assert budget_covers(slim, "apps", {"app": "web"}) and budget_allows(slim)
