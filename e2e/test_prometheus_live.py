"""A real Prometheus (Debian's 2.42, ``hack.testenv.prometheus``) on the operator's metrics.

The kit's own first (no cluster): the server takes file-discovered targets with
their labels, the PrometheusRule rendered as a rules file with every ``for``
scaled, an alert fired and resolved on demand (``fire``/``resolve``), and a rule
on a gauge the test serves (``Gauges``) going pending → firing → gone through
scrape, evaluation and the alerts API. This is the fixture the alert-gate tests
build on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from e2e.helpers import wait_for
from hack.testenv.prometheus import (
    Gauges,
    Prometheus,
    Target,
    alert_rule,
    format_duration,
    parse_duration,
    render_rules,
)


@pytest.fixture(scope="module")
def gauges() -> Iterator[Gauges]:
    with Gauges() as g:
        yield g


@pytest.fixture(scope="module")
def kit_prom(tmp_path_factory: pytest.TempPathFactory, gauges: Gauges) -> Iterator[Prometheus]:
    """A Prometheus scraping ``gauges`` (job ``app``), the kit's rules loaded (``for`` / 60)."""
    target = Target(gauges.address, {"pod": "app-0", "namespace": "test"})
    with Prometheus(
        tmp_path_factory.mktemp("prom-kit"),
        targets={"app": [target]},
        rules={"kit": render_rules(for_scale=1 / 60)},
    ) as prom:
        yield prom


def test_durations_round_trip() -> None:
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert format_duration(5400) == "1h30m"
    assert format_duration(0.5) == "500ms"
    assert format_duration(30) == "30s"
    with pytest.raises(ValueError):
        parse_duration("two hours")


def test_rules_rendered_with_scaled_for() -> None:
    plain = render_rules()
    fast = render_rules(for_scale=1 / 60)
    by_name = {r["alert"]: r for g in plain["groups"] for r in g["rules"]}
    fast_by_name = {r["alert"]: r for g in fast["groups"] for r in g["rules"]}
    assert by_name.keys() == fast_by_name.keys() and len(by_name) >= 7
    assert by_name["BootcOperatorDrainBlocked"]["for"] == "30m"
    assert fast_by_name["BootcOperatorDrainBlocked"]["for"] == "30s"
    assert fast_by_name["BootcOperatorRolloutStuck"]["for"] == "2m"
    for name, rule in by_name.items():  # only `for` changes
        assert {k: v for k, v in rule.items() if k != "for"} == {
            k: v for k, v in fast_by_name[name].items() if k != "for"
        }


async def test_the_kit_rules_load_and_a_labelled_target_is_scraped(kit_prom: Prometheus) -> None:
    groups = {g["name"]: g for g in kit_prom.rules()}
    rules = {r["name"]: r for g in groups.values() for r in g["rules"]}
    assert {"bootc-operator.pools", "bootc-operator.components"} <= groups.keys()
    assert rules["BootcOperatorDrainBlocked"]["duration"] == 30
    assert rules["BootcOperatorNodeDegraded"]["duration"] == 15
    assert all(r["health"] != "err" for r in rules.values()), rules
    up = await wait_for(lambda: kit_prom.query('up{job="app"} == 1'), 20, "the app scraped")
    assert up[0][0]["pod"] == "app-0" and up[0][0]["namespace"] == "test"


async def test_an_alert_fires_and_resolves_on_demand(kit_prom: Prometheus) -> None:
    kit_prom.fire("MaintenanceWindowClosed", {"severity": "critical", "team": "os"})
    # a reload returns once the rules are loaded; the first evaluation is within a second
    firing = await wait_for(
        lambda: kit_prom.firing("MaintenanceWindowClosed"), 10, "the fired alert"
    )
    assert firing[0]["labels"] == {
        "alertname": "MaintenanceWindowClosed",
        "severity": "critical",
        "team": "os",
    }
    kit_prom.fire("Other")
    await wait_for(lambda: kit_prom.firing("Other"), 10, "a second alert")
    kit_prom.resolve("MaintenanceWindowClosed")
    names = {a["labels"]["alertname"] for a in kit_prom.alerts()}
    assert "MaintenanceWindowClosed" not in names and "Other" in names
    kit_prom.resolve("Other")
    assert not [a for a in kit_prom.alerts() if a["labels"]["alertname"] == "Other"]


async def test_a_rule_on_a_gauge_the_test_sets(kit_prom: Prometheus, gauges: Gauges) -> None:
    """Scrape → evaluate → alert, with a ``for``: pending first, then firing, then gone."""
    gauges.set("test_switch", 0, {"name": "gate"})
    rule = {**alert_rule("SwitchOn", 'test_switch{job="app"} > 0'), "for": "2s"}
    kit_prom.set_rules("switch", {"groups": [{"name": "switch", "rules": [rule]}]})
    await wait_for(
        lambda: kit_prom.value('test_switch{name="gate"}') == 0, 20, "the gauge scraped at 0"
    )
    assert kit_prom.alerts() == [] or all(
        a["labels"]["alertname"] != "SwitchOn" for a in kit_prom.alerts()
    )
    gauges.set("test_switch", 1, {"name": "gate"})

    def state() -> str:
        found = [a for a in kit_prom.alerts() if a["labels"]["alertname"] == "SwitchOn"]
        return str(found[0]["state"]) if found else ""

    await wait_for(lambda: state() == "pending", 10, "SwitchOn pending")
    await wait_for(lambda: state() == "firing", 10, "SwitchOn firing after its for")
    alert = kit_prom.firing("SwitchOn")[0]
    assert alert["labels"]["pod"] == "app-0" and alert["labels"]["name"] == "gate"
    assert math.isclose(float(alert["value"]), 1.0)
    gauges.set("test_switch", 0, {"name": "gate"})
    await wait_for(lambda: state() == "", 10, "SwitchOn resolved")
    kit_prom.remove_rules("switch")
    assert "switch" not in {g["name"] for g in kit_prom.rules()}


async def test_a_new_job_is_added_while_running(kit_prom: Prometheus, gauges: Gauges) -> None:
    kit_prom.set_targets("app2", [Target(gauges.address, {"pod": "app-1"})])
    assert set(kit_prom.jobs()) == {"app", "app2"}
    found = await wait_for(
        lambda: {t["labels"]["job"] for t in kit_prom.targets()} >= {"app", "app2"},
        20,
        "the second job's target discovered",
    )
    assert found
