"""A real Prometheus (Debian's 2.42, ``hack.testenv.prometheus``) on the operator's metrics.

The kit's own first (no cluster): the server takes file-discovered targets with
their labels, the PrometheusRule rendered as a rules file with every ``for``
scaled, an alert fired and resolved on demand (``fire``/``resolve``), and a rule
on a gauge the test serves (``Gauges``) going pending → firing → gone through
scrape, evaluation and the alerts API. This is the fixture the alert-gate tests
build on.

Then the whole system (``slow``): one ``hack/sim`` of 5 nodes with its Prometheus
(``SimConfig(prometheus=True)``, ``hack.simlib.monitoring``) scraping both
controllers and the managed nodes' daemons each second, labelled as the kit's
ServiceMonitors' scrape would (HTTPS, with the token of a ServiceAccount bound to
``bootc-operator-metrics-reader``), with the kit's alerting
rules loaded. **The rules run on the simulation's clock: every ``for`` is divided
by 60** (minutes become seconds: ``for: 30m`` fires after 30 s; ``for: 15m`` of
``BootcOperatorDaemonDown`` still outlasts a simulated reboot of 1 s plus the
daemon's restart); expressions and their range windows are the kit's own.

- a healthy rollout (nodes 1-2) fires no alert, at any moment of it, and leaves
  none pending; Prometheus demonstrably watched it (a reboot slot in use);
- after it, every query of every Grafana dashboard panel returns data (a
  number, not only NaN), the dashboard's variables substituted (``$pool`` = the
  pool, ``$__rate_interval`` = a window spanning the rollout); panels that only
  have data in some situation are listed in ``ONLY_DURING`` with it (the halted
  test checks the Degraded pools panel in its situation);
- a drain held by a PodDisruptionBudget (node 3) fires ``BootcOperatorDrainBlocked``
  once blocked for its ``for``; the budget removed, the rollout completes and
  the alert resolves;
- two slot holders whose hosts do not come back (nodes 4-5, ``Sim.hold``, a
  reboot timeout of 5 s) halt the rollout and fire ``BootcOperatorRolloutHalted``;
  the hosts back, the rollout completes and the alert resolves;
- ``hack/sim up --prometheus`` (the command, 1 node) prints the URL (and
  ``export SIM_PROMETHEUS=``), whose graph page answers and which scrapes the
  controller; ``status`` shows it; ``down`` stops it with everything else.
"""

from __future__ import annotations

import asyncio
import calendar
import json
import math
import os
import re
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import ApiError
from bootc_operator.kube.rest import delete_object
from bootc_operator.runtime.httpserver import ProbeServer
from bootc_operator.runtime.metricsauth import UNAUTHENTICATED, Verdict, bearer_token
from bootc_operator.runtime.servingcert import self_signed
from e2e.controllerenv import create_blocking_pdb, create_pod
from e2e.helpers import unique_name, wait_for
from e2e.simenv import PoolRun, booted_image, digest_of, push, run_sim_cli
from hack.simlib import Sim, SimConfig, SimInfo
from hack.simlib.monitoring import scrape_targets
from hack.simlib.reaper import leftovers, teardown
from hack.testenv import api_client
from hack.testenv.controlplane import REPO_ROOT
from hack.testenv.metricsreader import scrape
from hack.testenv.monitor import PDBS
from hack.testenv.procs import pid_alive
from hack.testenv.prometheus import (
    CONTROLLER_JOB,
    DAEMON_JOB,
    Gauges,
    Prometheus,
    PrometheusClient,
    Target,
    alert_rule,
    bearer_https,
    finite,
    render_rules,
)

# The sim's tests run in one event loop for the module: the healthy rollout is a
# module fixture that the alert and dashboard tests share (the dashboard reads its pool).
module_loop = pytest.mark.asyncio(loop_scope="module")

DASHBOARD = REPO_ROOT / "manifests" / "prometheus" / "grafana-dashboard.json"
ROLLOUT = 120.0  # seconds a rollout of a few nodes may take on a loaded 2-core machine


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
    # fire and resolve return once both the alerts API and the ALERTS series say so
    fired = await kit_prom.fire("MaintenanceWindowClosed", {"severity": "critical", "team": "os"})
    labels = {"alertname": "MaintenanceWindowClosed", "severity": "critical", "team": "os"}
    assert fired["labels"] == labels and fired["state"] == "firing"
    assert kit_prom.firing("MaintenanceWindowClosed")[0]["labels"] == labels
    firing = 'ALERTS{alertname="MaintenanceWindowClosed",alertstate="firing"}'
    assert kit_prom.value(firing) == 1
    await kit_prom.fire("Other")
    assert kit_prom.firing("MaintenanceWindowClosed"), "a second alert leaves the first firing"
    await kit_prom.resolve("MaintenanceWindowClosed")
    names = {a["labels"]["alertname"] for a in kit_prom.alerts()}
    assert "MaintenanceWindowClosed" not in names and "Other" in names
    assert kit_prom.query(firing) == []
    await kit_prom.resolve("Other")
    assert not [a for a in kit_prom.alerts() if a["labels"]["alertname"] == "Other"]
    assert kit_prom.query('ALERTS{alertname="Other"}') == []


async def test_a_rule_on_a_gauge_the_test_sets(kit_prom: Prometheus, gauges: Gauges) -> None:
    """Scrape → evaluate → alert, with a ``for``: pending first, then firing, then gone."""

    def state() -> str:
        found = [a for a in kit_prom.alerts() if a["labels"]["alertname"] == "SwitchOn"]
        return str(found[0]["state"]) if found else ""

    gauges.set("test_switch", 0, {"name": "gate"})
    rule = {**alert_rule("SwitchOn", 'test_switch{job="app"} > 0'), "for": "2s"}
    kit_prom.set_rules("switch", {"groups": [{"name": "switch", "rules": [rule]}]})
    await wait_for(
        lambda: kit_prom.value('test_switch{name="gate"}') == 0, 20, "the gauge scraped at 0"
    )
    assert state() == ""
    gauges.set("test_switch", 1, {"name": "gate"})
    await wait_for(lambda: state() == "firing", 10, "SwitchOn firing after its for")
    # it was pending first: Prometheus' own record (polling for a 2 s state could miss it
    # on a loaded machine)
    pending = 'max_over_time(ALERTS{alertname="SwitchOn",alertstate="pending"}[1m])'
    assert kit_prom.value(pending) == 1
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


async def test_the_kit_scrapes_https_with_a_bearer_token(tmp_path: Path) -> None:
    """``bearer_https``: the operator's metrics server (HTTPS, self-signed, a request
    check; the real TokenReview is the sim's, below) scraped with the token file's
    token, and refused (401) to a job whose file holds another."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("let-me-in")
    bad.write_text("wrong")

    async def check(header: str | None) -> Verdict:
        return Verdict(200, "") if bearer_token(header) == "let-me-in" else UNAUTHENTICATED

    server = ProbeServer(ready=lambda: True, metrics_tls=await self_signed(), authorize=check)
    await server.start(metrics_addr="127.0.0.1:0", probe_addr="0")
    address = f"127.0.0.1:{server.ports['metrics']}"
    try:
        with Prometheus(
            tmp_path / "prom",
            targets={"ok": [Target(address)], "refused": [Target(address)]},
            scrape={"ok": bearer_https(good), "refused": bearer_https(bad)},
        ) as prom:

            def scraped() -> dict[str, Any]:
                """Each job's target once both were scraped ({} until then)."""
                jobs = {t["labels"]["job"]: t for t in prom.targets()}
                done = all(t.get("lastScrape", "").startswith("2") for t in jobs.values())
                return jobs if len(jobs) == 2 and done and jobs["ok"]["health"] == "up" else {}

            jobs = await wait_for(scraped, 30, "both jobs scraped once")
            assert jobs["ok"]["scrapeUrl"] == f"https://{address}/metrics"
            assert jobs["refused"]["health"] == "down"
            assert "401" in jobs["refused"]["lastError"], jobs["refused"]
            assert prom.query('python_info{job="ok"}')
    finally:
        await server.stop()


# ------------------------------------------------------------------ the whole system


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """Five nodes, two controllers, fast stages and reboots, and the sim's Prometheus."""
    config = SimConfig(
        nodes=5, reboot_seconds=1.0, stage_seconds=0.5, controllers=2, prometheus=True
    )
    with Sim(config, tmp_path_factory.mktemp("prom-live") / "sim") as s:
        yield s


@pytest.fixture(scope="module")
def prom(sim: Sim) -> Prometheus:
    assert sim.prometheus is not None, "the sim runs no Prometheus"
    return sim.prometheus


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(sim: Sim) -> AsyncIterator[ApiClient]:
    async with await api_client(sim.kubeconfig) as client:
        yield client


def sel(pool: str) -> str:
    return f'pool="{pool}"'


def alerts_of(
    prom: PrometheusClient, name: str, pool: str, state: str = ""
) -> list[dict[str, Any]]:
    """Active alerts ``name`` of ``pool`` (in ``state``, when given)."""
    return [
        a
        for a in prom.alerts()
        if a["labels"].get("alertname") == name
        and a["labels"].get("pool") == pool
        and (not state or a["state"] == state)
    ]


def since(started: float) -> str:
    """A range selector's window reaching back to ``started`` (``time.time()``)."""
    return f"{math.ceil(time.time() - started) + 2}s"


async def firing_for_its_duration(
    prom: PrometheusClient,
    name: str,
    pool: str,
    timeout: float,  # noqa: ASYNC109
) -> dict[str, Any]:
    """Wait until alert ``name`` of ``pool`` fires; check it was pending for its ``for``."""
    found = await wait_for(
        lambda: alerts_of(prom, name, pool, "firing"), timeout, f"{name} firing for {pool}"
    )
    alert = found[0]
    rule = next(r for g in prom.rules() for r in g["rules"] if r["name"] == name)
    active = alert["activeAt"]
    stamp = calendar.timegm(time.strptime(active[:19], "%Y-%m-%dT%H:%M:%S"))  # UTC, whole s
    assert time.time() - stamp >= rule["duration"] - 1, (alert, rule["duration"])
    return alert


@pytest.mark.slow
def test_the_sim_prometheus_scrapes_the_controllers_and_loads_the_rules(
    sim: Sim, prom: Prometheus
) -> None:
    """Both controllers, labelled as the ServiceMonitor's scrape would; no daemon yet:
    no Node is managed, so the install's DaemonSet would run none. The rules were
    loaded once every target answered: ``BootcOperatorControllerDown`` was never even
    pending (the start-up is not on the simulation's clock; loaded with Prometheus,
    it was pending until the controllers' first scrape, and fired when that took
    10 s)."""
    targets = {t["labels"]["instance"]: t for t in prom.targets()}
    expected = scrape_targets(sim.processes(), managed=())
    assert len(expected[CONTROLLER_JOB]) == 2 and expected[DAEMON_JOB] == []
    assert set(targets) == {t.address for t in expected[CONTROLLER_JOB]}
    for target in expected[CONTROLLER_JOB]:
        seen = targets[target.address]
        assert seen["health"] == "up", seen
        assert seen["labels"]["job"] == CONTROLLER_JOB
        assert target.labels.items() <= seen["labels"].items()
        # Scraped as installed: HTTPS with a token allowed to read /metrics, which
        # a scrape without one is refused.
        assert seen["scrapeUrl"] == f"https://{target.address}/metrics", seen
        assert scrape(seen["scrapeUrl"])[0] == 401
    leaders = prom.query("max by (pod) (bootc_operator_leader) == 1")
    assert len(leaders) == 1 and leaders[0][0]["pod"] in ("controller-1", "controller-2")
    rules = [r for g in prom.rules() for r in g["rules"]]
    kit = {r["alert"] for g in render_rules()["groups"] for r in g["rules"]}
    assert {r["name"] for r in rules} == kit
    assert {r["name"]: r["duration"] for r in rules}["BootcOperatorDrainBlocked"] == 30
    assert all(r["health"] == "ok" for r in rules), rules
    # the whole TSDB: this Prometheus started with the simulation
    down = 'max_over_time(ALERTS{alertname="BootcOperatorControllerDown"}[1h])'
    assert prom.query(down) == [], "ControllerDown pending or firing during the start-up"


@dataclass
class Rollout:
    pool: str
    nodes: list[str]
    started: float  # time.time() before the pool was created
    target: str  # the digest rolled out


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def healthy(api: ApiClient, sim: Sim, prom: Prometheus) -> AsyncIterator[Rollout]:
    """A pool over nodes 1-2 rolled out to a new image (one at a time), watched by the
    safety monitor; the pool stays until the module ends (the dashboard reads it)."""
    nodes = sim.nodes[0:2]
    old = booted_image(sim, nodes[0])
    async with PoolRun(api, sim, unique_name("healthy"), nodes, 1) as run:
        started = time.time()
        await run.create(old)
        await run.wait_up_to_date(digest_of(old))
        new = await push(sim, "os:healthy")
        await run.set_image(new)
        await run.wait_up_to_date(digest_of(new), ROLLOUT)
        await run.finish(digest_of(new))
        done = f'max by (pool) (bootc_operator_pool_nodes{{{sel(run.name)}, state="UpToDate"}})'
        await wait_for(lambda: prom.value(done) == 2, 30, "Prometheus to see the pool updated")
        for node in nodes:
            await status_read_scraped(sim, prom, node)
        yield Rollout(run.name, nodes, started, digest_of(new))


STATUS_READS = "bootc_operator_daemon_bootc_command_duration_seconds_count"


def daemon_status_reads(sim: Sim, node: str) -> float | None:
    """The node's daemon's own count of bootc status reads (its /metrics)."""
    port = (sim.processes().get(f"daemon/{node}") or {}).get("metrics_port")
    token = Path(sim.info.metrics_token).read_text()
    status, text = scrape(f"https://127.0.0.1:{port}/metrics", token)
    assert status == 200, text
    found = re.search(rf'^{STATUS_READS}{{command="status"}} (\S+)$', text, re.M)
    return float(found[1]) if found else None


async def status_read_scraped(sim: Sim, prom: Prometheus, node: str) -> None:
    """Make ``node``'s daemon read bootc status once more, after Prometheus scraped its
    current count, and wait until Prometheus scraped the new one.

    The daemons restarted with the reboot moments ago; their start-up reads may all
    predate their first scrape, and a counter's first sample shows no increase, so the
    rate panels would have nothing yet. A fleet that runs for longer always has such
    reads (polls, inotify): touching ``/ostree/bootc`` is what bootc does after it
    changes deployments, and the daemon answers it with a status read."""
    query = f'{STATUS_READS}{{command="status", node="{node}"}}'

    def scraped() -> float | None:
        """The daemon's count, once Prometheus has scraped exactly it."""
        now = daemon_status_reads(sim, node)
        return now if now is not None and prom.value(query) == now else None

    # (never 0: a running daemon has read bootc status at least once)
    before = await wait_for(scraped, 30, f"{node}'s current status read count scraped")
    assert before is not None
    os.utime(sim.info.host_root(node) / "ostree" / "bootc")
    await wait_for(
        lambda: (prom.value(query) or 0) > before, 30, f"{node}'s next status read scraped"
    )


@pytest.mark.slow
@module_loop
async def test_a_healthy_rollout_fires_no_alert(prom: Prometheus, healthy: Rollout) -> None:
    """No alert fired at any moment of the rollout (``ALERTS`` over its whole window),
    none is pending or firing after it. With the rules' ``for`` on the simulation's
    clock (/60), a reboot's down daemon may show ``BootcOperatorDaemonDown`` pending
    for a few seconds, never firing (15 s)."""
    window = since(healthy.started)
    slots = f"max_over_time(bootc_operator_reboot_slots_in_use{{{sel(healthy.pool)}}}[{window}])"
    assert max(v for _, v in prom.query(slots)) >= 1, "Prometheus did not see the rollout"
    daemons = prom.query(f'max_over_time(up{{job="{DAEMON_JOB}"}}[{window}])')
    assert {labels["node"] for labels, _ in daemons} == set(healthy.nodes), daemons
    # A restarted daemon exports 0 as its last bootc status read until its first read,
    # which BootcOperatorDaemonStatusStale counts as pending: give pending alerts a
    # moment (well under any `for` that could fire) to clear.
    await wait_for(lambda: prom.alerts() == [], 10, "no alert pending or firing")
    window = since(healthy.started)
    fired = prom.query(f'max_over_time(ALERTS{{alertstate="firing"}}[{window}])')
    assert fired == [], f"alerts fired during a healthy rollout: {fired}"
    pending = prom.query(f'max_over_time(ALERTS{{alertstate="pending"}}[{window}])')
    print("pending during the rollout:", sorted(a["alertname"] for a, _ in pending))


# Dashboard panels whose queries have data only in some situation: title → when.
ONLY_DURING = {
    "Degraded pools (reason)": "only while a pool is Degraded (checked in the halted test)",
}


def regex_literal(value: str) -> str:
    """``value`` as a regular expression matching itself, inside a PromQL string (what
    Grafana puts in for a single selected value): RE2 escapes, backslashes doubled."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\\\1", value)


def dashboard_queries(pool: str, window: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel target, Grafana's variables substituted."""
    dash = json.loads(DASHBOARD.read_text())
    variables = {
        "$pool": regex_literal(pool),
        "$__rate_interval": window,
        "$__interval": "1s",
        "$__range": window,
    }
    queries = []
    for panel in dash["panels"]:
        for target in panel.get("targets") or ():
            expr = target["expr"]
            for name, value in variables.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, f"unsubstituted variable in {panel['title']!r}: {expr}"
            queries.append((panel["title"], expr))
    return queries


@pytest.mark.slow
@module_loop
async def test_every_dashboard_panel_has_data_after_a_rollout(
    prom: Prometheus, healthy: Rollout
) -> None:
    dash = json.loads(await asyncio.to_thread(DASHBOARD.read_text))
    pool_var = next(v for v in dash["templating"]["list"] if v["name"] == "pool")
    metric = re.fullmatch(r"label_values\((\w+), pool\)", pool_var["definition"])
    assert metric is not None
    assert healthy.pool in prom.label_values("pool", metric[1])
    queries = dashboard_queries(healthy.pool, since(healthy.started))
    assert len({t for t, _ in queries}) == len([p for p in dash["panels"] if p["type"] != "row"])
    empty = []
    for title, expr in queries:
        samples = prom.query(expr)
        if not finite(samples) and title not in ONLY_DURING:
            empty.append(f"{title}: {expr} -> {samples}")
    assert not empty, "panels without data after a rollout:\n" + "\n".join(empty)
    assert set(ONLY_DURING) <= {t for t, _ in queries}, "ONLY_DURING names unknown panels"


def panel_query(title: str, pool: str) -> str:
    [expr] = [e for t, e in dashboard_queries(pool, "1m") if t == title]
    return expr


@pytest.mark.slow
@module_loop
async def test_a_drain_held_by_a_budget_fires_the_drain_alert(
    api: ApiClient, sim: Sim, prom: Prometheus
) -> None:
    node = sim.nodes[2]
    old = booted_image(sim, node)
    name = unique_name("pinned")
    labels = {"app": name}
    await create_pod(api, name, node, labels)
    await create_blocking_pdb(api, name, labels)
    try:
        async with PoolRun(api, sim, unique_name("drain"), [node], 1) as run:
            await run.create(old)
            await run.wait_up_to_date(digest_of(old))
            new = await push(sim, "os:drain-blocked")
            await run.set_image(new)
            blocked = f"max by (pool) (bootc_operator_drain_blocked{{{sel(run.name)}}})"
            await wait_for(lambda: prom.value(blocked) == 1, 60, "the blocked drain scraped")
            alert = await firing_for_its_duration(prom, "BootcOperatorDrainBlocked", run.name, 60)
            assert alert["labels"]["severity"] == "warning"
            assert alert["annotations"]["summary"] == f"Drains in pool {run.name} are blocked."
            assert prom.query(panel_query("Blocked drains", run.name))[0][1] == 1
            # the budget goes: the drain finishes, the node updates, the alert resolves
            await delete_pdb(api, name)
            await run.wait_up_to_date(digest_of(new), ROLLOUT)
            await wait_for(
                lambda: not alerts_of(prom, "BootcOperatorDrainBlocked", run.name),
                30,
                "BootcOperatorDrainBlocked resolved",
            )
            await run.finish(digest_of(new))
    finally:
        await delete_pdb(api, name)
        await asyncio.to_thread(
            sim.kubectl, "delete", "pod", name, "--ignore-not-found", "--wait=false"
        )


async def delete_pdb(api: ApiClient, name: str) -> None:
    try:
        await delete_object(api, PDBS, name, "default")
    except ApiError as err:
        if not err.not_found:
            raise


@pytest.mark.slow
@module_loop
async def test_a_halted_rollout_fires_its_alert(api: ApiClient, sim: Sim, prom: Prometheus) -> None:
    nodes = sim.nodes[3:5]
    old = booted_image(sim, nodes[0])
    for node in nodes:
        sim.hold(node)
    try:
        async with PoolRun(api, sim, unique_name("halted"), nodes, 2) as run:
            await run.create(old, rebootTimeoutSeconds=5)
            await run.wait_up_to_date(digest_of(old))
            new = await push(sim, "os:halted")
            await run.set_image(new)
            await run.wait_degraded(c.REASON_ROLLOUT_HALTED, tuple(nodes), 90)
            alert = await firing_for_its_duration(prom, "BootcOperatorRolloutHalted", run.name, 60)
            assert alert["labels"]["severity"] == "critical"
            assert alert["annotations"]["summary"] == f"Rollout of pool {run.name} is halted."
            degraded = prom.query(panel_query("Degraded pools (reason)", run.name))
            assert [s["reason"] for s, _ in degraded] == [c.REASON_ROLLOUT_HALTED], degraded
            # the hosts come back: the rollout resumes and completes, the alert resolves
            for node in nodes:
                sim.hold(node, False)
            await run.wait_up_to_date(digest_of(new), ROLLOUT)
            await wait_for(
                lambda: not alerts_of(prom, "BootcOperatorRolloutHalted", run.name),
                30,
                "BootcOperatorRolloutHalted resolved",
            )
            await run.finish(digest_of(new))
    finally:
        for node in nodes:
            sim.hold(node, False)


def http_status(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as resp:
        return int(resp.status)


@pytest.mark.slow
def test_sim_up_prometheus_prints_its_url_status_shows_it_down_stops_it(tmp_path: Path) -> None:
    state_dir = tmp_path / "sim"
    try:
        up = run_sim_cli(state_dir, "up", "--nodes=1", "--controllers=1", "--prometheus")
        assert up.returncode == 0, up.stderr[-4000:]
        found = re.search(r"^export SIM_PROMETHEUS=(http://127\.0\.0\.1:\d+)$", up.stdout, re.M)
        assert found is not None, up.stdout
        url = found[1]
        assert f"prometheus {url}: graphs {url}/graph, alerts {url}/alerts" in up.stderr
        prom = PrometheusClient(url)
        assert http_status(f"{url}/graph") == 200
        scraped = prom.query(f'up{{job="{CONTROLLER_JOB}"}} == 1')
        assert [labels["pod"] for labels, _ in scraped] == ["controller-1"]
        status = run_sim_cli(state_dir, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"prometheus {url}  1/1 targets up; firing: -" in status.stdout, status.stdout
        info = SimInfo.load(state_dir)
        assert info is not None and info.prometheus == url
        pid = info.pids["prometheus"]
        down = run_sim_cli(state_dir, "down")
        assert down.returncode == 0, down.stderr
        assert not prom.ready() and not pid_alive(pid)
        assert leftovers(state_dir) == []
    finally:
        teardown(state_dir)
