"""The admin's order (``policy.order`` and its use in ``plan_rollout`` / ``plan_staging``):
labels (numeric and not, missing), boot and creation times, the control plane first
or last, canaries first, ties by name, and the spec."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.nodestate import NodeState, NodeView, view
from bootc_operator.policy.order import Order, label_rank, order_key, order_news
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.slots import plan_staging
from bootc_operator.policy.topology import Topology
from unit.policy.planning import rollout_plan
from unit.policy.test_decisions import NOW, v
from unit.policy.test_poolspec import pool

S = NodeState
RACK = "example.com/rack"
ZONE = "topology.kubernetes.io/zone"
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def n(
    name: str,
    state: NodeState = S.STAGED,
    *,
    cp: bool = False,
    rack: str | None = None,
    zone: str | None = None,
) -> NodeView:
    """A member with Node labels: RACK ``rack``, ZONE ``zone``, and ``cp``: control plane."""
    pairs = {k: val for k, val in ((RACK, rack), (ZONE, zone)) if val is not None}
    if cp:
        pairs[c.CONTROL_PLANE_LABEL] = ""
    return replace(v(name, state), labels=tuple(sorted(pairs.items())))


def ordered(order: Order, nodes: list[NodeView]) -> list[str]:
    return [x.name for x in sorted(nodes, key=lambda x: order_key(order, x))]


# ------------------------------------------------------------------ the key


def test_label_values_numbers_first_numerically_then_words_then_missing() -> None:
    values = ["10", "b", None, "2", "a", "-1", "1.5", "nan"]
    assert sorted(values, key=label_rank) == ["-1", "1.5", "2", "10", "a", "b", "nan", None]


def test_by_label_lower_first_ties_by_name() -> None:
    nodes = [n("d", rack="2"), n("c"), n("b", rack="10"), n("a", rack="2"), n("e", rack="1")]
    assert ordered(Order(by_label=RACK), nodes) == ["e", "a", "d", "b", "c"]


def test_by_name_alone() -> None:
    assert ordered(Order(), [n("b"), n("c"), n("a")]) == ["a", "b", "c"]


def test_oldest_boot_first_by_the_ready_transition_unknown_last() -> None:
    nodes = [
        replace(n("a"), ready_since=T0 + dt.timedelta(hours=2)),
        replace(n("b"), ready_since=T0),
        n("c"),  # no Ready time known
        replace(n("d"), ready_since=T0),
    ]
    assert ordered(Order(by="OldestBootFirst"), nodes) == ["b", "d", "a", "c"]


def test_newest_first_by_creation_unknown_last() -> None:
    nodes = [
        replace(n("a"), created=T0),
        replace(n("b"), created=T0 + dt.timedelta(days=3)),
        n("c"),
        replace(n("d"), created=T0 + dt.timedelta(days=3)),
    ]
    assert ordered(Order(by="NewestFirst"), nodes) == ["b", "d", "a", "c"]


@pytest.mark.parametrize(
    ("control_plane", "expected"),
    [
        ("First", ["cp1", "cp2", "a", "b"]),
        ("Last", ["a", "b", "cp1", "cp2"]),
        (None, ["a", "b", "cp1", "cp2"]),
    ],
)
def test_the_control_plane_first_or_last(control_plane: str | None, expected: list[str]) -> None:
    nodes = [n("cp2", cp=True), n("b"), n("cp1", cp=True), n("a")]
    assert ordered(Order(control_plane=control_plane), nodes) == expected


def test_the_control_plane_outranks_the_label_which_outranks_by() -> None:
    nodes = [
        replace(n("a", rack="2"), ready_since=T0),
        replace(n("b", rack="1"), ready_since=T0 + dt.timedelta(hours=1)),
        replace(n("c", rack="1"), ready_since=T0),
        replace(n("m", cp=True, rack="0"), ready_since=T0),
    ]
    order = Order(by="OldestBootFirst", by_label=RACK, control_plane="Last")
    assert ordered(order, nodes) == ["c", "b", "a", "m"]
    assert order.describe() == f"control plane last, by label {RACK}, oldest boot first"


@pytest.mark.parametrize("seed", range(10))
def test_the_order_does_not_depend_on_the_input_order(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [
        replace(
            n(
                f"n{i}",
                cp=rng.random() < 0.2,
                rack=str(rng.randint(0, 3)) if i % 3 else None,
            ),
            ready_since=T0 + dt.timedelta(minutes=rng.randint(0, 2)),
        )
        for i in range(12)
    ]
    order = Order(by="OldestBootFirst", by_label=RACK, control_plane="First")
    shuffled = nodes[:]
    rng.shuffle(shuffled)
    assert ordered(order, shuffled) == ordered(order, nodes)


def test_the_view_reads_the_creation_time() -> None:
    bn = {"metadata": {"name": "x"}, "spec": {}, "status": {}}
    node = {"metadata": {"name": "x", "creationTimestamp": "2026-11-01T00:00:00Z"}}
    assert view(bn, node, frozenset()).created == T0


# ------------------------------------------------------------------ in the plan


def test_the_plan_takes_slots_in_the_admins_order_and_lists_the_rest() -> None:
    nodes = [n("a", rack="3"), n("b", rack="1"), n("c", rack="2"), n("m", cp=True, rack="0")]
    order = Order(by_label=RACK, control_plane="Last")
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, order=order)
    assert plan.take == ("b",) and plan.next_up == ("c", "a", "m")
    assert order_news(order, plan.next_up) == (
        f"next (control plane last, by label {RACK}, by name): c, a, m"
    )
    assert order_news(order, tuple("abcdefg")) == (
        f"next (control plane last, by label {RACK}, by name): a, b, c, d, e and 2 more"
    )


def test_the_admins_order_replaces_cordoned_first_and_staged_longest() -> None:
    nodes = [
        replace(n("a", rack="2"), unschedulable=True),
        replace(n("b", rack="1"), idle_since=NOW),
        replace(n("c", rack="3"), idle_since=NOW - dt.timedelta(hours=1)),
    ]
    # the default: a (cordoned by someone else) first, then c, staged longest
    assert rollout_plan(nodes, 2, paused=False, now=NOW).take == ("a", "c")
    # by rack: b first; a uses the rest of the budget, so c waits, but a may still take
    # a free slot (updating it costs no capacity)
    plan = rollout_plan(nodes, 2, paused=False, now=NOW, order=Order(by_label=RACK))
    assert plan.take == ("b", "a") and plan.next_up == ("c",)


def test_canaries_still_come_first() -> None:
    nodes = [n("a", rack="1"), n("z", rack="9")]
    plan = rollout_plan(
        nodes, 1, paused=False, now=NOW, order=Order(by_label=RACK), canaries=frozenset({"z"})
    )
    assert plan.take == ("z",) and plan.next_up == ()


def test_inside_a_topology_the_order_applies_within_the_domain() -> None:
    nodes = [
        n("a", rack="1", zone="b"),
        n("b", rack="3", zone="a"),
        n("c", rack="2", zone="a"),
    ]
    plan = rollout_plan(
        nodes, 1, paused=False, now=NOW, order=Order(by_label=RACK), topology=Topology(ZONE)
    )
    assert plan.domain == "a" and plan.take == ("c",) and plan.next_up == ("b",)


def test_staging_follows_the_order() -> None:
    nodes = [
        replace(n("a", S.PENDING, rack="3"), spec_in_sync=False),
        replace(n("b", S.PENDING, rack="1"), spec_in_sync=False, unschedulable=True),
        replace(n("c", S.PENDING, rack="2"), spec_in_sync=False),
    ]
    assert plan_staging(nodes, 2) == ("b", "a")  # the default: cordoned first, then names
    assert plan_staging(nodes, 2, order=Order(by_label=RACK)) == ("b", "c")
    assert plan_staging(nodes, 2, order=Order(by_label=RACK, control_plane="First")) == (
        "b",
        "c",
    )


# ------------------------------------------------------------------ the spec


def test_the_spec_resolves_into_an_order() -> None:
    spec = {"byLabel": RACK, "by": "NewestFirst", "controlPlane": "Last"}
    policy = check_pool(_pool_with(spec))
    assert policy.valid and policy.order == Order("NewestFirst", RACK, "Last")
    assert check_pool(_pool_with({})).order == Order()
    assert check_pool(_pool_with(None)).order is None


@pytest.mark.parametrize(
    ("order", "problem"),
    [
        ([], "spec.rollout.order must be an object"),
        (
            {"by": "Age"},
            'spec.rollout.order.by must be Name, OldestBootFirst or NewestFirst, not "Age"',
        ),
        ({"byLabel": "a b"}, 'spec.rollout.order.byLabel must be a label key, not "a b"'),
        (
            {"controlPlane": "Middle"},
            'spec.rollout.order.controlPlane must be First or Last, not "Middle"',
        ),
    ],
)
def test_a_bad_order_is_named(order: Any, problem: str) -> None:
    policy = check_pool(_pool_with(order))
    assert problem in policy.problems and policy.order is None


def _pool_with(order: Any) -> dict[str, Any]:
    return pool({"order": order})
