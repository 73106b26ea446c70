"""The pool gauges tell every fact at once: no Degraded reason masks another, and
``pool_nodes{state="UpToDate"}`` counts only members that are done."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import REGISTRY

from bootc_operator.api import constants as c
from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.policy.poolstatus import MemberState, member_states
from bootc_operator.reconcilers import metrics as m

S = NodeState


def member(name: str, state: NodeState = S.UP_TO_DATE, **kw: object) -> NodeView:
    base = NodeView(
        name=name,
        state=state,
        desired_image="registry.example.com/os@sha256:" + "2" * 64,
        desired_image_state="Staged",
        spec_in_sync=True,
        in_slot=False,
        was_cordoned=False,
        ready=True,
        unschedulable=False,
        idle=state is S.UP_TO_DATE,
        idle_since=None,
        degraded_message="",
        booted_digest=None,
        staged_digest=None,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def set_gauges(
    pool: str, views: list[NodeView], checking: frozenset[str], reasons: set[str]
) -> None:
    m.set_pool_gauges(
        pool,
        members=member_states(views, checking=checking).items(),
        up_to_date=False,
        degraded_reasons=reasons,
        slots_in_use=sum(1 for v in views if v.in_slot),
        max_unavailable=1,
    )


def test_every_active_degraded_reason_is_1_not_only_the_top_one() -> None:
    pool = "metrics-degraded"
    set_gauges(pool, [], frozenset(), {c.REASON_NODE_DEGRADED, c.REASON_ROLLOUT_HALTED})
    for reason in c.DEGRADED_PRECEDENCE:
        want = 1.0 if reason in (c.REASON_NODE_DEGRADED, c.REASON_ROLLOUT_HALTED) else 0.0
        assert sample("bootc_operator_pool_degraded", pool=pool, reason=reason) == want, reason
    # recovered from one: it goes back to 0, the other stays
    set_gauges(pool, [], frozenset(), {c.REASON_ROLLOUT_HALTED})
    assert sample("bootc_operator_pool_degraded", pool=pool, reason=c.REASON_NODE_DEGRADED) == 0
    assert sample("bootc_operator_pool_degraded", pool=pool, reason=c.REASON_ROLLOUT_HALTED) == 1
    m.forget_pool(pool)
    assert sample("bootc_operator_pool_degraded", pool=pool, reason=c.REASON_ROLLOUT_HALTED) is None


def test_nodes_under_health_check_or_in_their_slot_are_not_counted_up_to_date() -> None:
    pool = "metrics-states"
    views = [
        member("done"),
        member("checked", in_slot=True, desired_image_state="Booted", unschedulable=True),
        member("releasing", in_slot=True, desired_image_state="Booted", unschedulable=True),
        member("down", in_slot=True, desired_image_state="Booted", ready=False),
        member("broken", S.DEGRADED),
    ]
    set_gauges(pool, views, frozenset({"checked"}), set())
    got = {
        s.value: sample("bootc_operator_pool_nodes", pool=pool, state=s.value) for s in MemberState
    }
    assert got == {
        "UpToDate": 1,
        "HealthCheck": 1,
        "Releasing": 1,
        "Rebooting": 1,
        "Degraded": 1,
        "Pending": 0,
        "Staging": 0,
        "Staged": 0,
        "Draining": 0,
        "RolledBack": 0,
        "Leaving": 0,
    }
    # once checked and released, it counts as UpToDate
    done = [replace(v, in_slot=False, unschedulable=False) for v in views[:3]]
    set_gauges(pool, done, frozenset(), set())
    assert sample("bootc_operator_pool_nodes", pool=pool, state="UpToDate") == 3
    assert sample("bootc_operator_pool_nodes", pool=pool, state="HealthCheck") == 0
    m.forget_pool(pool)
