"""Zone by zone (``policy.topology`` and its use in ``plan_rollout`` / ``plan_staging``):
domain order, the current domain, canaries first, the unlabelled last, and that a
simulated rollout never has slots in two domains at once."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from bootc_operator.policy.nodestate import NodeState, NodeView, view
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.poolstatus import Counts, RolloutFacts, rollout_condition
from bootc_operator.policy.slots import plan_staging
from bootc_operator.policy.topology import (
    NO_DOMAIN,
    UNLABELLED,
    Topology,
    current_domain,
    display,
    domain_news,
)
from unit.policy.planning import rollout_plan
from unit.policy.test_decisions import NOW, v
from unit.policy.test_poolspec import pool

S = NodeState
ZONE = "topology.kubernetes.io/zone"
TOPO = Topology(ZONE)


def z(name: str, zone: str | None, state: NodeState = S.STAGED, **kw: Any) -> NodeView:
    """A member in ``zone`` (None: without the label)."""
    return replace(v(name, state, **kw), labels=() if zone is None else ((ZONE, zone),))


# ------------------------------------------------------------------ domains and their order


def test_a_node_without_the_label_or_with_an_empty_value_has_no_domain() -> None:
    assert TOPO.domain(z("a", "eu-1a")) == "eu-1a"
    assert TOPO.domain(z("a", None)) == NO_DOMAIN
    assert TOPO.domain(z("a", "")) == NO_DOMAIN
    assert display(NO_DOMAIN) == UNLABELLED and display("b") == "b"


def test_domains_go_by_name_then_the_unlabelled_last() -> None:
    assert TOPO.ordered(["c", NO_DOMAIN, "a", "b", "a"]) == ("a", "b", "c", NO_DOMAIN)


def test_listed_domains_go_first_as_listed_then_the_rest_by_name() -> None:
    topo = Topology(ZONE, order=("c", "a"))
    assert topo.ordered(["a", "b", "c", "d", NO_DOMAIN]) == ("c", "a", "b", "d", NO_DOMAIN)


def test_a_listed_domain_without_nodes_is_skipped() -> None:
    topo = Topology(ZONE, order=("x", "b"))
    nodes = [z("a1", "a"), z("b1", "b")]
    assert current_domain(topo, nodes, holders=()) == "b"


def test_the_view_reads_the_node_labels() -> None:
    bn = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    node = {"metadata": {"name": "n", "labels": {ZONE: "b", "x": "y"}}, "status": {}}
    seen = view(bn, node, frozenset())
    assert seen.label(ZONE) == "b" and seen.label("missing") is None
    assert view(bn, None, frozenset()).labels == ()


# ------------------------------------------------------------------ the current domain


def test_the_current_domain_is_the_first_with_a_node_on_its_way() -> None:
    nodes = [
        z("a1", "a", S.UP_TO_DATE),
        z("b1", "b", S.STAGING),
        z("c1", "c", S.STAGED),
    ]
    assert current_domain(TOPO, nodes, holders=()) == "b"
    # b's node is staging, not a candidate: c's staged node still waits for it
    plan = rollout_plan(nodes, 5, paused=False, now=NOW, topology=TOPO)
    assert plan.domain == "b" and plan.take == () and plan.other_domains == ("c1",)
    assert "c1" in plan.waiting


@pytest.mark.parametrize("state", [S.PENDING, S.STAGING, S.STAGED, S.REBOOTING])
def test_a_node_on_its_way_keeps_its_domain_open(state: NodeState) -> None:
    nodes = [z("a1", "a", state), z("b1", "b")]
    assert current_domain(TOPO, nodes, holders=()) == "a"


def test_degraded_and_held_back_nodes_do_not_keep_their_domain_open() -> None:
    degraded = z("a1", "a", S.DEGRADED)
    held = replace(z("a2", "a", S.PENDING), held_back=True)
    assert current_domain(TOPO, [degraded, held, z("b1", "b")], holders=()) == "b"


def test_holders_keep_the_domain_whatever_the_order() -> None:
    nodes = [z("a1", "a"), z("b1", "b", slot=True)]
    assert current_domain(TOPO, nodes, holders={"b1"}) == "b"
    plan = rollout_plan(nodes, 2, paused=False, now=NOW, topology=TOPO)
    assert plan.domain == "b" and plan.take == () and plan.waiting == ("a1",)


def test_holders_in_two_domains_finish_and_nothing_new_starts_outside_the_first() -> None:
    # the topology was set mid-rollout: b1 and c1 hold slots
    nodes = [z("b1", "b", slot=True), z("c1", "c", slot=True), z("b2", "b"), z("c2", "c")]
    plan = rollout_plan(nodes, 4, paused=False, now=NOW, topology=TOPO)
    assert plan.domain == "b" and plan.take == ("b2",) and plan.other_domains == ("c2",)
    assert set(plan.holders) == {"b1", "b2", "c1"}


def test_every_domain_done_has_no_current_domain() -> None:
    nodes = [z("a1", "a", S.UP_TO_DATE), z("n", None, S.UP_TO_DATE)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, topology=TOPO)
    assert plan.domain is None and domain_news(TOPO, nodes, None) == ""


def test_max_unavailable_applies_inside_the_domain() -> None:
    nodes = [z(f"a{i}", "a") for i in range(3)] + [z(f"b{i}", "b") for i in range(3)]
    plan = rollout_plan(nodes, 2, paused=False, now=NOW, topology=TOPO)
    assert plan.take == ("a0", "a1") and plan.waiting == ("a2", "b0", "b1", "b2")
    # all of a's nodes fit in the budget: still none of b's
    plan = rollout_plan(nodes, 5, paused=False, now=NOW, topology=TOPO)
    assert plan.take == ("a0", "a1", "a2") and plan.other_domains == ("b0", "b1", "b2")


def test_a_per_domain_budget_caps_the_slots_inside_the_domain() -> None:
    nodes = [z(f"a{i}", "a") for i in range(4)] + [z("b0", "b")]
    per_domain = Topology(ZONE, max_unavailable=1)
    plan = rollout_plan(nodes, 3, paused=False, now=NOW, topology=per_domain)
    assert plan.take == ("a0",) and plan.waiting == ("a1", "a2", "a3", "b0")
    # a holder of the domain counts against it
    nodes[0] = z("a0", "a", slot=True)
    assert rollout_plan(nodes, 3, paused=False, now=NOW, topology=per_domain).take == ()
    # a percentage of the domain's 4 members, rounded up: 50% is 2, 25% is 1, 30% is 2
    for value, room in (("50%", 1), ("25%", 0), ("30%", 1)):
        topo = Topology(ZONE, max_unavailable=value)
        assert len(rollout_plan(nodes, 3, paused=False, now=NOW, topology=topo).take) == room
    # maxUnavailable still applies
    topo = Topology(ZONE, max_unavailable=4)
    assert rollout_plan(nodes, 2, paused=False, now=NOW, topology=topo).take == ("a1",)


def test_the_domain_moves_on_in_the_pass_that_releases_the_last_holder() -> None:
    nodes = [z("a1", "a", S.UP_TO_DATE, slot=True, want="Booted"), z("b1", "b")]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, topology=TOPO)
    assert plan.release == ("a1",) and plan.domain == "b" and plan.take == ("b1",)


def test_nodes_without_the_label_go_last_and_the_status_says_so() -> None:
    nodes = [z("n1", None), z("b1", "b", S.UP_TO_DATE), z("a1", "a")]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, topology=TOPO)
    assert plan.take == ("a1",)
    nodes = [z("n1", None), z("b1", "b", S.UP_TO_DATE), z("a1", "a", S.UP_TO_DATE)]
    plan = rollout_plan(nodes, 1, paused=False, now=NOW, topology=TOPO)
    assert plan.domain == NO_DOMAIN and plan.take == ("n1",)
    assert domain_news(TOPO, nodes, plan.domain) == (
        f"updating the nodes without label {ZONE}, last (3 of 3)"
    )
    assert domain_news(TOPO, nodes, "a") == f"updating {ZONE}=a (1 of 3)"


def test_canaries_still_go_first_one_domain_at_a_time() -> None:
    nodes = [z("a1", "a"), z("b1", "b"), z("c1", "c")]
    plan = rollout_plan(
        nodes, 3, paused=False, now=NOW, topology=TOPO, canaries=frozenset({"b1", "c1"})
    )
    assert plan.domain == "b" and plan.take == ("b1",) and plan.other_domains == ("c1",)
    # b1 updated: the other canary, in c, before a's nodes
    nodes[1] = z("b1", "b", S.UP_TO_DATE)
    plan = rollout_plan(
        nodes, 3, paused=False, now=NOW, topology=TOPO, canaries=frozenset({"b1", "c1"})
    )
    assert plan.domain == "c" and plan.take == ("c1",)
    # both canaries done: back to domain order
    nodes[2] = z("c1", "c", S.UP_TO_DATE)
    plan = rollout_plan(
        nodes, 3, paused=False, now=NOW, topology=TOPO, canaries=frozenset({"b1", "c1"})
    )
    assert plan.domain == "a" and plan.take == ("a1",)


def test_without_a_topology_nothing_changes() -> None:
    nodes = [z("a1", "a"), z("b1", "b")]
    plan = rollout_plan(nodes, 2, paused=False, now=NOW)
    assert plan.take == ("a1", "b1") and plan.domain is None and plan.other_domains == ()


# ------------------------------------------------------------------ staging across domains


def test_staging_runs_ahead_across_domains_in_domain_order() -> None:
    topo = Topology(ZONE, order=("c",))
    nodes = [
        z("a1", "a", S.PENDING, in_sync=False),
        z("c1", "c", S.PENDING, in_sync=False),
        z("c2", "c", S.PENDING, in_sync=False),
        z("n1", None, S.PENDING, in_sync=False),
    ]
    assert plan_staging(nodes, 2, topology=topo) == ("c1", "c2")
    assert plan_staging(nodes, 3, topology=topo) == ("c1", "c2", "a1")
    assert plan_staging(nodes, 9, topology=topo) == ("c1", "c2", "a1", "n1")
    # a canary still stages first, whatever its domain
    assert plan_staging(nodes, 1, canaries=frozenset({"n1"}), topology=topo) == ("n1",)


# ------------------------------------------------------------------ a whole rollout


def _step(nodes: dict[str, NodeView], rng: random.Random, max_unavailable: int) -> set[str]:
    """One plan applied, then one random holder progresses; the domains with holders."""
    plan = rollout_plan(nodes.values(), max_unavailable, paused=False, now=NOW, topology=TOPO)
    for name in plan.release:
        nodes[name] = replace(nodes[name], in_slot=False, desired_image_state="Staged")
    for name in plan.take:
        nodes[name] = replace(nodes[name], in_slot=True)
    holders = [n for n in nodes.values() if n.in_slot]
    if holders:
        h = rng.choice(holders)
        nodes[h.name] = replace(h, state=S.UP_TO_DATE, idle=True)
    return {TOPO.domain(n) for n in nodes.values() if n.in_slot}


@pytest.mark.parametrize("seed", range(30))
def test_a_random_rollout_never_has_slots_in_two_domains(seed: int) -> None:
    rng = random.Random(seed)
    zones = ["a", "b", "c", None]
    nodes = {
        f"n{i}": z(f"n{i}", rng.choice(zones), rng.choice([S.STAGED, S.STAGING, S.PENDING]))
        for i in range(12)
    }
    order: list[str] = []  # domains in the order they first took slots
    for _ in range(200):
        # nodes on their way become staged over time
        for name, n in nodes.items():
            if n.state in (S.PENDING, S.STAGING) and rng.random() < 0.3:
                nodes[name] = replace(n, state=S.STAGED)
        disrupted = _step(nodes, rng, max_unavailable=rng.randint(1, 4))
        assert len(disrupted) <= 1, disrupted
        for d in disrupted:
            if not order or order[-1] != d:
                order.append(d)
        if all(n.state is S.UP_TO_DATE and not n.in_slot for n in nodes.values()):
            break
    else:
        pytest.fail("the rollout did not finish")
    # each domain was disrupted in one stretch, in domain order
    assert order == list(TOPO.ordered(order)), order


# ------------------------------------------------------------------ the spec


def test_the_spec_resolves_into_a_topology() -> None:
    policy = check_pool(_pool_with({"key": ZONE, "order": ["b", "a"]}))
    assert policy.valid and policy.topology == Topology(ZONE, ("b", "a"))
    policy = check_pool(_pool_with({"key": ZONE, "maxUnavailablePerDomain": "50%"}))
    assert policy.valid and policy.topology == Topology(ZONE, max_unavailable="50%")
    assert check_pool(_pool_with(None)).topology is None


@pytest.mark.parametrize(
    ("topology", "problem"),
    [
        ("zone", "spec.rollout.topology must be an object"),
        (
            {},
            "spec.rollout.topology.key must be a label key (e.g. topology.kubernetes.io/zone), "
            "not null",
        ),
        (
            {"key": "a b"},
            "spec.rollout.topology.key must be a label key (e.g. "
            'topology.kubernetes.io/zone), not "a b"',
        ),
        ({"key": ZONE, "order": "a"}, "spec.rollout.topology.order must be a list of label values"),
        (
            {"key": ZONE, "maxUnavailablePerDomain": 0},
            "spec.rollout.topology.maxUnavailablePerDomain must be at least 1",
        ),
        (
            {"key": ZONE, "maxUnavailablePerDomain": "half"},
            'spec.rollout.topology.maxUnavailablePerDomain: maxUnavailablePerDomain "half" is '
            'not a non-negative integer or a percentage like "25%"',
        ),
        (
            {"key": ZONE, "order": ["a", "b", "a"]},
            "spec.rollout.topology.order must name each domain once: a repeated",
        ),
    ],
)
def test_a_bad_topology_is_named(topology: Any, problem: str) -> None:
    policy = check_pool(_pool_with(topology))
    assert problem in policy.problems and policy.topology is None


def test_the_progress_message_names_the_domain_even_while_paused() -> None:
    facts = RolloutFacts(
        counts=Counts(total=3, updated=1, staged=2),
        generation=1,
        membership_done=True,
        target_known=True,
        paused=True,
        domain=f"updating {ZONE}=b (2 of 3)",
    )
    up, reason, message = rollout_condition(facts)
    assert not up and reason == "Paused"
    assert message.endswith(f"; updating {ZONE}=b (2 of 3)"), message


def _pool_with(topology: Any) -> dict[str, Any]:
    return pool({"topology": topology})
