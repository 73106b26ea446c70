"""The Prometheus kit's pure parts: durations, the PrometheusRule rendered as a rules file
with its ``for`` scaled (``hack.testenv.prometheus``), and the simulation's scrape
targets (``hack.simlib.monitoring``): labelled as the ServiceMonitors' scrape would,
daemons only on managed nodes."""

from __future__ import annotations

from typing import Any

import pytest

from hack.simlib.monitoring import FOR_SCALE, scrape_targets
from hack.testenv.prometheus import (
    CONTROLLER_JOB,
    DAEMON_JOB,
    Target,
    format_duration,
    parse_duration,
    render_rules,
)


def test_durations_round_trip() -> None:
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2h") == 7200
    assert format_duration(5400) == "1h30m"
    assert format_duration(0.5) == "500ms"
    assert format_duration(30) == "30s"
    assert format_duration(0) == "0s"
    for bad in ("two hours", "", "5", "1h 30m", "m5"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_rules_rendered_with_only_the_for_scaled() -> None:
    plain = render_rules()
    fast = render_rules(for_scale=FOR_SCALE)
    assert [g["name"] for g in plain["groups"]] == [g["name"] for g in fast["groups"]]
    by_name = {r["alert"]: r for g in plain["groups"] for r in g["rules"]}
    fast_by_name = {r["alert"]: r for g in fast["groups"] for r in g["rules"]}
    assert by_name.keys() == fast_by_name.keys() and len(by_name) >= 7
    assert by_name["BootcOperatorDrainBlocked"]["for"] == "30m"
    assert fast_by_name["BootcOperatorDrainBlocked"]["for"] == "30s"
    assert fast_by_name["BootcOperatorRolloutStuck"]["for"] == "2m"
    assert fast_by_name["BootcOperatorDaemonDown"]["for"] == "15s"
    for name, rule in by_name.items():
        assert {k: v for k, v in rule.items() if k != "for"} == {
            k: v for k, v in fast_by_name[name].items() if k != "for"
        }, name


PROCESSES: dict[str, dict[str, Any]] = {
    "controller-1": {"pid": 10, "metrics_port": 9001},
    "controller-2": {"pid": None, "metrics_port": 9002},  # restarting: still a target
    "daemon/worker-1": {"pid": 11, "metrics_port": 9101},
    "daemon/worker-2": {"pid": 12, "metrics_port": 9102},
    "daemon/worker-3": {"pid": 13},  # no port known: no target
}


def test_scrape_targets_label_like_the_service_monitors() -> None:
    jobs = scrape_targets(PROCESSES)
    assert jobs[CONTROLLER_JOB] == [
        Target(
            "127.0.0.1:9001",
            {
                "namespace": "bootc-operator",
                "endpoint": "metrics",
                "pod": "controller-1",
                "service": CONTROLLER_JOB,
            },
        ),
        Target(
            "127.0.0.1:9002",
            {
                "namespace": "bootc-operator",
                "endpoint": "metrics",
                "pod": "controller-2",
                "service": CONTROLLER_JOB,
            },
        ),
    ]
    assert [t.address for t in jobs[DAEMON_JOB]] == ["127.0.0.1:9101", "127.0.0.1:9102"]
    assert jobs[DAEMON_JOB][0].labels == {
        "namespace": "bootc-operator",
        "endpoint": "metrics",
        "pod": "daemon-worker-1",
        "node": "worker-1",
        "service": DAEMON_JOB,
    }


def test_only_the_daemons_of_managed_nodes_are_scraped() -> None:
    """The install's DaemonSet runs on managed nodes alone (the sim runs a daemon on all)."""
    assert [t.labels["node"] for t in scrape_targets(PROCESSES, {"worker-2"})[DAEMON_JOB]] == [
        "worker-2"
    ]
    none = scrape_targets(PROCESSES, set())
    assert none[DAEMON_JOB] == [] and len(none[CONTROLLER_JOB]) == 2
