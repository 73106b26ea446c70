"""The alert gate: its query, its verdicts, fail-closed behaviour and backoff (pure and
the reconciler over an in-process query function), and its place in the slot plan."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.gates.alertgate import AlertReconciler
from bootc_operator.gates.alerts import (
    AlertGate,
    alert_query,
    describe_alert,
    firing_gate,
    retry_delay,
)
from bootc_operator.gates.prometheus import PrometheusClient, PrometheusError, PrometheusOptions
from bootc_operator.policy.poolstatus import (
    RolloutFacts,
    count_states,
    phase,
    rollout_condition,
)
from unit.policy.planning import rollout_plan
from unit.policy.test_health_gate import NOW, S, node


def test_the_query_ors_entries_and_ands_matchers_within_one() -> None:
    assert alert_query(['alertname=~"Node.*|Etcd.*"', ' severity="critical", team!="x", ']) == (
        'ALERTS{alertstate="firing",alertname=~"Node.*|Etcd.*"} or '
        'ALERTS{alertstate="firing",severity="critical", team!="x"}'
    )


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('alertname=~"Node.*|Etcd.*"', True),
        ('severity="critical", alertname!="Watchdog"', True),
        ('a="quote \\" inside"', True),
        ("severity=critical", False),  # unquoted value
        ('{severity="critical"}', False),  # braces are ours
        ('severity="critical" or up', False),
        ("", False),
    ],
)
def test_the_crd_pattern_accepts_matchers_only(text: str, ok: bool) -> None:
    assert bool(re.match(c.ALERT_MATCHERS_PATTERN, text)) is ok


def test_firing_alerts_are_named_sorted_and_capped() -> None:
    assert firing_gate([]) == AlertGate(False)
    one = firing_gate(
        [
            {
                "metric": {
                    "__name__": "ALERTS",
                    "alertname": "NodeDown",
                    "alertstate": "firing",
                    "instance": "n1",
                }
            }
        ]
    )
    assert one == AlertGate(True, 'NodeDown{instance="n1"} fires; no new reboots until resolved')
    many = firing_gate([{"metric": {"alertname": f"A{i}"}} for i in range(7)] + [{"metric": {}}])
    assert many.blocked and many.message.startswith("A0, A1, A2, A3, A4, and 3 more fire")
    assert describe_alert({"alertname": "X", "b": "2", "a": "1"}) == 'X{a="1",b="2"}'


def test_retries_back_off_up_to_the_interval() -> None:
    assert [retry_delay(n, 30) for n in range(1, 6)] == [5, 10, 20, 30, 30]


class FakePrometheus:
    """Answers instant queries with whatever the test set (our own interface, not a
    library's): a list of alert label sets, or an error."""

    def __init__(self) -> None:
        self.firing: list[dict[str, str]] = []
        self.error: str | None = None
        self.queries: list[str] = []

    async def query(self, promql: str) -> list[dict[str, Any]]:
        self.queries.append(promql)
        if self.error:
            raise PrometheusError(self.error)
        return [{"metric": labels, "value": [0, "1"]} for labels in self.firing]


def pool(name: str = "p", alerts: list[str] | None = None) -> dict[str, Any]:
    rollout = {"blockingAlerts": alerts} if alerts is not None else {}
    return {"metadata": {"name": name}, "spec": {"rollout": rollout}}


async def test_the_reconciler_fails_closed_backs_off_and_wakes_others_on_changes_only() -> None:
    pools = {"p": pool(alerts=['severity="critical"']), "free": pool("free")}
    prom = FakePrometheus()
    woken: list[str] = []
    gate = AlertReconciler(
        pools.get, prom, interval=30.0, on_change=woken.append, url="http://prom:9090"
    )
    assert gate.gate(pools["free"]) is None
    first = gate.gate(pools["p"])
    assert first is not None and first.blocked and "not queried yet" in first.message
    assert await gate.reconcile("p") == 30.0 and gate.gate(pools["p"]) == AlertGate(False)
    assert woken == ["p"]
    assert await gate.reconcile("p") == 30.0 and woken == ["p"]  # a repeat wakes nobody
    prom.firing = [{"alertname": "EtcdDown", "severity": "critical"}]
    await gate.reconcile("p")
    got = gate.gate(pools["p"])
    assert got is not None and got.blocked and 'EtcdDown{severity="critical"} fires' in got.message
    prom.error = "cannot query Prometheus at http://prom:9090: connection refused"
    assert [await gate.reconcile("p") for _ in range(3)] == [5.0, 10.0, 20.0]
    got = gate.gate(pools["p"])
    assert got is not None and got.blocked
    assert got.message == (
        "cannot query Prometheus at http://prom:9090: connection refused; "
        "no new reboots until Prometheus answers (fail closed)"
    )
    prom.error, prom.firing = None, []
    assert await gate.reconcile("p") == 30.0 and gate.gate(pools["p"]) == AlertGate(False)
    assert woken == ["p", "p", "p", "p"]
    assert prom.queries[0] == 'ALERTS{alertstate="firing",severity="critical"}'
    assert await gate.reconcile("free") is None and await gate.reconcile("gone") is None


async def test_without_a_prometheus_url_a_pool_with_blocking_alerts_is_blocked() -> None:
    gate = AlertReconciler(lambda n: None, None, interval=30.0, on_change=lambda p: None)
    got = gate.gate(pool(alerts=['severity="critical"']))
    assert got is not None and got.blocked and "--prometheus-url" in got.message


def test_a_blocking_alert_stops_new_slots_and_holders_finish() -> None:
    views = [node("a", S.UP_TO_DATE, in_slot=True, idle=True), node("b"), node("c")]
    plan = rollout_plan(views, 1, paused=False, now=NOW, alerts_blocked=True)
    assert plan.release == ("a",) and plan.take == () and plan.alerts_blocked
    assert plan.waiting == ("b", "c")
    assert rollout_plan(views, 1, paused=False, now=NOW).take == ("b",)
    counts = count_states(views)
    up, reason, message = rollout_condition(
        RolloutFacts(counts=counts, blocked_by_alerts="NodeDown fires")
    )
    assert (up, reason) == (False, c.REASON_BLOCKED_BY_ALERTS) and "NodeDown fires" in message
    assert phase(reason, False, c.REASON_HEALTHY) == c.PHASE_BLOCKED


# ------------------------------------------------------------------ the query client's options


async def test_the_bearer_token_is_read_on_every_query_and_never_shown(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    client = PrometheusClient(
        PrometheusOptions(url="http://127.0.0.1:9", bearer_token_file=str(token))
    )
    assert client._headers() == {"Authorization": "Bearer first"}
    token.write_text("rotated")
    assert client._headers() == {"Authorization": "Bearer rotated"}
    token.unlink()
    with pytest.raises(PrometheusError) as err:
        await client.query("up")
    assert str(err.value).startswith(f"cannot read the bearer token file {token}: ")
    assert "rotated" not in str(err.value)
    await client.close()


async def test_an_unreadable_ca_file_is_one_clear_error(tmp_path: Any) -> None:
    client = PrometheusClient(
        PrometheusOptions(url="https://127.0.0.1:9", ca_file=str(tmp_path / "missing.pem"))
    )
    with pytest.raises(PrometheusError) as err:
        await client.query("up")
    assert str(err.value).startswith(f"cannot load the CA file {tmp_path / 'missing.pem'}")
    await client.close()


async def test_nothing_listening_is_one_clear_error() -> None:
    client = PrometheusClient(PrometheusOptions(url="http://127.0.0.1:9", timeout=2.0))
    with pytest.raises(PrometheusError) as err:
        await client.query("up")
    assert str(err.value).startswith("cannot query Prometheus at http://127.0.0.1:9: ")
    await client.close()
