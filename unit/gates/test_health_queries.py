"""PromQL health queries and pool preconditions (issue 30 §2): the pure rules
(``policy.queries``), their place in the health gate and the slot plan, the spec
parsing, the pool's condition, and the two async shells over an in-process query
function (the precondition side of ``AlertReconciler``, ``HealthQueries``)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.api.v1alpha1 import BootcNodePool
from bootc_operator.gates.alertgate import AlertReconciler
from bootc_operator.gates.alerts import AlertGate, combine
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.gates.prometheus import PrometheusError
from bootc_operator.gates.queries import (
    NO_PROMETHEUS,
    HealthQuery,
    NodeQueries,
    Precondition,
    QueryState,
    for_node,
    label_value,
    observe,
    parse_hold,
    precondition_gate,
    preconditions_of,
    queries_check,
)
from bootc_operator.policy.health import HealthPolicy, Verdict, evaluate, gate_results
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.poolstatus import RolloutFacts, count_states, phase, rollout_condition
from unit.policy.planning import rollout_plan
from unit.policy.test_health_gate import NOW, ago, back, node

Q = HealthQuery("ceph-osd", 'ceph_osd_up{host="$node"} == 1', hold=30.0)
R = HealthQuery("app", 'app_ready{node="$node"}')

# ------------------------------------------------------------------ the small rules


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(None, 0.0), ("", 0.0), ("0s", 0.0), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0),
     ("1m30s", 90.0), ("2h0m5s", 7205.0), ("30", None), ("1d", None), ("s", None), ("5 m", None)],
)  # fmt: skip
def test_a_for_is_hours_minutes_seconds(text: str | None, seconds: float | None) -> None:
    assert parse_hold(text) == seconds


@pytest.mark.parametrize(
    ("text", "ok"),
    [("30s", True), ("1h2m3s", True), ("5m", True), ("30", False), ("1.5s", False),
     ("-1s", False), ("1s1m", False)],
)  # fmt: skip
def test_the_crd_pattern_of_for_agrees_with_the_parser(text: str, ok: bool) -> None:
    assert bool(re.match(c.QUERY_FOR_PATTERN, text)) is ok
    assert (parse_hold(text) is not None) is ok


def test_node_is_replaced_escaped_for_a_quoted_label_value() -> None:
    assert for_node('up{node="$node"} and on() x{n="$node"}', "w-1.example") == (
        'up{node="w-1.example"} and on() x{n="w-1.example"}'
    )
    assert for_node('a{n="$nodes"} + b{n="$node_x"}', "w") == 'a{n="$nodes"} + b{n="$node_x"}'
    hostile = 'x"} or vector(1) or {a="\\'
    escaped = label_value(hostile)
    assert escaped == 'x\\"} or vector(1) or {a=\\"\\\\'
    # the value cannot end the string early: every quote is escaped
    assert re.fullmatch(r'([^"\\]|\\.)*', escaped)
    assert label_value("a\nb'c\t") == "a\\nb\\'c\\t"


def test_a_run_of_non_empty_answers_starts_once_and_breaks_on_empty_or_error() -> None:
    one = [{"metric": {}, "value": [0, "1"]}]
    first = observe(None, one, ago(20))
    assert first == QueryState(ago(20))
    assert observe(first, one, NOW) == QueryState(ago(20))  # the run goes on
    assert observe(first, [], NOW) == QueryState()  # broken
    assert observe(first, None, NOW, "Prometheus at x did not answer") == QueryState(
        None, "Prometheus at x did not answer"
    )
    assert observe(None, None, NOW) == QueryState(None, "no answer")
    assert observe(QueryState(), one, NOW) == QueryState(NOW)  # a new run


def test_the_check_names_what_does_not_pass_and_when_time_alone_passes_it() -> None:
    assert queries_check((), None, NOW) == (True, "", None)
    ok, why, wait = queries_check((Q, R), None, NOW)
    assert not ok and wait is None
    assert why == "ceph-osd: not asked yet; app: not asked yet (0/2 pass)"
    states = {"ceph-osd": QueryState(ago(10)), "app": QueryState(ago(1))}
    ok, why, wait = queries_check((Q, R), NodeQueries(states), NOW)
    assert (ok, why, wait) == (False, "ceph-osd: non-empty for 10s of 30s (1/2 pass)", 20.0)
    states["ceph-osd"] = QueryState(ago(30))
    assert queries_check((Q, R), NodeQueries(states), NOW) == (True, "", None)
    states["app"] = QueryState()
    assert queries_check((Q, R), NodeQueries(states), NOW)[1] == "app: empty result (1/2 pass)"
    states["app"] = QueryState(None, "Prometheus at x answered HTTP 400: parse error")
    why = queries_check((Q, R), NodeQueries(states), NOW)[1]
    assert why == "app: Prometheus at x answered HTTP 400: parse error (1/2 pass)"
    ok, why, _ = queries_check((Q, R), NodeQueries(unavailable=NO_PROMETHEUS), NOW)
    assert not ok and why == f"{NO_PROMETHEUS}; cannot ask ceph-osd, app"
    many = tuple(HealthQuery(f"q{i}", "x") for i in range(5))
    why = queries_check(many, NodeQueries(), NOW)[1]
    assert why.endswith("q2: not asked yet; and 2 more (0/5 pass)")


# ------------------------------------------------------------------ the health gate


def test_the_gate_holds_a_node_until_its_queries_pass_then_times_out_into_on_failure() -> None:
    policy = HealthPolicy(queries=(Q,), timeout_seconds=120.0, rollback=True)
    v = back("a")  # reboot requested 30 s ago
    pending = evaluate(policy, v, None, NOW)
    assert (pending.verdict, pending.check) == (Verdict.PENDING, "queries")
    assert pending.message == "ceph-osd: not asked yet (0/1 pass)"
    assert pending.describe() == "Pending: queries: ceph-osd: not asked yet (0/1 pass)"
    held = evaluate(policy, v, None, NOW, NodeQueries({"ceph-osd": QueryState(ago(10))}))
    assert held.verdict is Verdict.PENDING and held.wait == pytest.approx(20.5)
    done = evaluate(policy, v, None, NOW, NodeQueries({"ceph-osd": QueryState(ago(30))}))
    assert done.verdict is Verdict.PASSED
    late = back("a", reboot_requested_at=ago(121))
    failed = evaluate(policy, late, None, NOW, NodeQueries({"ceph-osd": QueryState()}))
    assert (failed.verdict, failed.check) == (Verdict.FAILED, "queries")
    assert failed.message == (
        "not healthy 120s after its reboot was requested: ceph-osd: empty result (0/1 pass)"
    )
    # a failed query with onFailure Rollback: the plan points the node at its rollback
    plan = rollout_plan(
        [late, node("b")], 1, paused=False, now=NOW, gates={"a": failed}, rollback_on_failure=True
    )
    assert plan.rollback == ("a",) and plan.take == ()


def test_gate_results_ask_for_queries_only_when_the_policy_has_some() -> None:
    asked: list[str] = []

    def queries_of(name: str) -> NodeQueries:
        asked.append(name)
        return NodeQueries({"ceph-osd": QueryState(ago(60))})

    views = [back("a"), node("b")]
    no_queries = gate_results(HealthPolicy(), views, NOW, lambda _n: None, queries_of)
    assert asked == [] and no_queries["a"].verdict is Verdict.PASSED
    with_queries = gate_results(HealthPolicy(queries=(Q,)), views, NOW, lambda _n: None, queries_of)
    assert asked == ["a"] and list(with_queries) == ["a"]  # b has not arrived
    assert with_queries["a"].verdict is Verdict.PASSED


# ------------------------------------------------------------------ the spec


def pool_spec(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "generation": 1},
        "spec": {
            "nodeSelector": {"matchLabels": {"a": "b"}},
            "image": {"ref": "registry.example.com/os@sha256:" + "b" * 64},
            **spec,
        },
    }


def test_the_spec_reads_queries_and_reports_bad_entries() -> None:
    good = check_pool(
        pool_spec(
            health={
                "queries": [
                    {"name": "ceph-osd", "expr": 'ceph_osd_up{host="$node"} == 1', "for": "30s"},
                    {"name": "app", "expr": 'app_ready{node="$node"}'},
                ]
            }
        )
    )
    assert good.valid and good.health is not None
    assert good.health.queries == (Q, R)
    bad = check_pool(
        pool_spec(
            health={
                "queries": [
                    {"name": "a", "expr": "x", "for": "30"},
                    {"name": "a", "expr": "y"},
                    {"name": "b"},
                    "c",
                ]
            }
        )
    )
    assert not bad.valid
    assert list(bad.problems) == [
        'spec.health.queries[0].for must be a duration like "30s", "5m" or "1m30s", not "30"',
        "spec.health.queries[1].name 'a' is used twice",
        "spec.health.queries[2].expr is required",
        "spec.health.queries[3] must be an object",
    ]


def test_the_wire_model_round_trips_for_and_preconditions() -> None:
    body = pool_spec(
        health={"queries": [{"name": "q", "expr": "up", "for": "1m"}]},
        rollout={"preconditions": [{"name": "ceph", "expr": "ceph_health_status == 0"}]},
    )
    body.update(apiVersion="node.bootc.dev/v1alpha1", kind="BootcNodePool")
    wire = BootcNodePool.model_validate(body).to_wire()
    assert wire["spec"]["health"]["queries"] == [{"name": "q", "expr": "up", "for": "1m"}]
    assert wire["spec"]["rollout"]["preconditions"] == [
        {"name": "ceph", "expr": "ceph_health_status == 0"}
    ]
    assert preconditions_of(body) == [Precondition("ceph", "ceph_health_status == 0")]
    assert preconditions_of(pool_spec()) == []


# ------------------------------------------------------------------ preconditions


CEPH = Precondition("ceph-ok", "ceph_health_status == 0")
DNS = Precondition("dns", "up{job='coredns'} == 1")
ONE = [{"metric": {}, "value": [0, "1"]}]


def test_preconditions_block_naming_each_one_not_met_and_fail_closed() -> None:
    ok = precondition_gate([CEPH, DNS], {"ceph-ok": (ONE, ""), "dns": (ONE, "")})
    assert ok == AlertGate(False, reason=c.REASON_PRECONDITION_NOT_MET)
    empty = precondition_gate([CEPH, DNS], {"ceph-ok": ([], ""), "dns": (ONE, "")})
    assert empty == AlertGate(
        True,
        "precondition ceph-ok is not met (empty result); no new reboots until it holds",
        c.REASON_PRECONDITION_NOT_MET,
    )
    both = precondition_gate([CEPH, DNS], {"ceph-ok": ([], ""), "dns": ([], "")})
    assert both.message.startswith("precondition ceph-ok, dns are not met (empty result)")
    error = precondition_gate([CEPH, DNS], {"ceph-ok": (None, "cannot query Prometheus at x")})
    assert error.blocked and error.message == (
        "precondition ceph-ok could not be checked: cannot query Prometheus at x (fail closed); "
        "precondition dns could not be checked: not asked yet (fail closed); "
        "no new reboots until it holds"
    )


def test_preconditions_and_alerts_are_one_gate_preconditions_first() -> None:
    pre = AlertGate(True, "precondition x is not met", c.REASON_PRECONDITION_NOT_MET)
    alerts = AlertGate(True, "NodeDown fires")
    assert combine(None, None) is None
    assert combine(None, AlertGate(False)) == AlertGate(False)
    assert combine(pre, alerts) == AlertGate(
        True, "precondition x is not met; NodeDown fires", c.REASON_PRECONDITION_NOT_MET
    )
    assert combine(AlertGate(False, reason=c.REASON_PRECONDITION_NOT_MET), alerts) == alerts


def test_a_failing_precondition_is_the_pools_reason_and_phase() -> None:
    views = [node("a"), node("b")]
    up, reason, message = rollout_condition(
        RolloutFacts(
            counts=count_states(views),
            blocked_by_alerts="precondition ceph-ok is not met (empty result)",
            blocked_reason=c.REASON_PRECONDITION_NOT_MET,
        )
    )
    assert (up, reason) == (False, c.REASON_PRECONDITION_NOT_MET)
    assert message.startswith("precondition ceph-ok is not met (empty result); ")
    assert phase(reason, False, c.REASON_HEALTHY) == c.PHASE_BLOCKED


class FakePrometheus:
    """Answers instant queries by expression (our own interface): a result, or an error."""

    def __init__(self) -> None:
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.error: str | None = None
        self.queries: list[str] = []
        self.asked = asyncio.Event()

    async def query(self, promql: str) -> list[dict[str, Any]]:
        self.queries.append(promql)
        self.asked.set()
        if self.error:
            raise PrometheusError(self.error)
        return self.answers.get(promql, [])


def pool(name: str = "p", **rollout: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"rollout": rollout}}


async def test_the_reconciler_checks_preconditions_fails_closed_and_wakes_on_changes() -> None:
    pre = [{"name": "ceph-ok", "expr": CEPH.expr}]
    pools = {"p": pool(preconditions=pre), "both": pool("both", preconditions=pre,
             blockingAlerts=['severity="critical"'])}  # fmt: skip
    prom = FakePrometheus()
    woken: list[str] = []
    gate = AlertReconciler(
        pools.get,
        prom,
        interval=30.0,
        on_change=woken.append,
        url="http://prom:9090",
    )
    first = gate.gate(pools["p"])
    assert first is not None and first.blocked and "not checked yet" in first.message
    assert first.reason == c.REASON_PRECONDITION_NOT_MET
    # empty: blocked naming it; the others are woken once
    assert await gate.reconcile("p") == 30.0
    got = gate.gate(pools["p"])
    assert got is not None and got.blocked and "precondition ceph-ok is not met" in got.message
    assert woken == ["p"] and prom.queries == [CEPH.expr]
    assert await gate.reconcile("p") == 30.0 and woken == ["p"]  # a repeat wakes nobody
    # holds: open
    prom.answers[CEPH.expr] = ONE
    await gate.reconcile("p")
    assert gate.gate(pools["p"]) == AlertGate(False, reason=c.REASON_PRECONDITION_NOT_MET)
    assert woken == ["p", "p"]
    # unreachable: fail closed with backoff
    prom.error = "cannot query Prometheus at http://prom:9090: connection refused"
    assert [await gate.reconcile("p") for _ in range(2)] == [5.0, 10.0]
    got = gate.gate(pools["p"])
    assert got is not None and got.blocked and "connection refused (fail closed)" in got.message
    # both gates on one pool: the precondition's reason first, both messages
    prom.error = None
    prom.answers.pop(CEPH.expr)
    await gate.reconcile("both")
    got = gate.gate(pools["both"])
    assert got is not None and got.reason == c.REASON_PRECONDITION_NOT_MET
    assert "precondition ceph-ok is not met" in got.message
    # preconditions removed: the gate is gone, the others are woken
    pools["p"] = pool()
    assert await gate.reconcile("p") is None and gate.gate(pools["p"]) is None


async def test_without_a_prometheus_url_preconditions_block_and_say_why() -> None:
    gate = AlertReconciler(lambda n: None, None, interval=30.0, on_change=lambda p: None)
    got = gate.gate(pool(preconditions=[{"name": "x", "expr": "up"}]))
    assert got is not None and got.blocked and got.reason == c.REASON_PRECONDITION_NOT_MET
    assert got.message == (
        "spec.rollout.preconditions is set but the controller was started without "
        "--prometheus-url; no new reboots"
    )


# ------------------------------------------------------------------ the per-node polls


async def test_polls_substitute_the_node_track_runs_and_wake_on_changes_only() -> None:
    prom = FakePrometheus()
    woken: list[tuple[str, str]] = []
    told = asyncio.Event()

    def on_change(node: str, pool: str) -> None:
        woken.append((node, pool))
        told.set()

    polls = HealthQueries(prom, interval=3600.0, on_change=on_change, now=lambda: NOW)
    try:
        assert polls.peek("n1", (Q,)) is None
        assert polls.states("n1", "p", (Q,)) == NodeQueries()
        await asyncio.wait_for(told.wait(), 5)  # the first answer is news
        assert prom.queries == ['ceph_osd_up{host="n1"} == 1']
        assert polls.peek("n1", (Q,)) == NodeQueries({"ceph-osd": QueryState()})
        assert woken == [("n1", "p")]
        assert polls.polling() == {"n1"}
        polls.retain({"n1"}, "other")  # another pool's retain leaves it alone
        assert polls.polling() == {"n1"}
        polls.retain((), "p")
        assert polls.polling() == set() and polls.peek("n1", (Q,)) is None
    finally:
        await polls.stop()


async def test_without_prometheus_polls_say_why_and_start_nothing() -> None:
    polls = HealthQueries(None, interval=1.0, on_change=lambda n, p: None)
    assert polls.states("n1", "p", (Q,)) == NodeQueries(unavailable=NO_PROMETHEUS)
    assert polls.polling() == set()
    policy = HealthPolicy(queries=(Q,))
    result = evaluate(policy, back("n1"), None, NOW, polls.peek("n1", (Q,)))
    assert result.verdict is Verdict.PENDING and NO_PROMETHEUS in result.message
