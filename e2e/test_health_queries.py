"""Health queries and pool preconditions end to end (issue 30 §2): the real
controller with ``--prometheus-url`` against a real Prometheus scraping a loopback
``/metrics`` whose gauges the test sets (``hack.testenv.prometheus.Gauges``), real
daemons on simulated hosts, the safety monitor on.

- ``spec.health.queries`` with ``onFailure: Rollback``: the first node's query
  (``$node`` replaced by its name) stays empty after its reboot, so past
  ``timeoutSeconds`` it is rolled back, released on its old image, the pool
  halted naming the query; nobody else reboots;
- ``spec.rollout.preconditions``: while the precondition's metric says "not
  healthy" nodes stage but no slot is taken, the pool says
  ``UpToDate=False/PreconditionNotMet`` naming it and an Event does too;
  turning it true starts the rollout; turning it false mid-rollout lets the slot
  holder finish (passing its own health query) and starts no other; true again
  finishes the rollout.

Every change of a gauge is followed by a wait until Prometheus *reports* the new
value (``set_metric``): the controller can only react to what Prometheus says, and
asserting before the scrape would race it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.gates.prometheus import PrometheusOptions
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, ApiError
from bootc_operator.kube.rest import get_object
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from e2e.test_health_gate import degraded_with
from e2e.test_rollout_policies import (
    booted,
    cordoned,
    idle_reason,
    report,
    setup_hosts,
    up_to_date_on,
)
from e2e.test_status_truth import pool_events
from hack.testenv.controller import running_controller
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.prometheus import Gauges, Prometheus, Target
from hack.testenv.registry import Registry

APP = "e2e_app_ready"  # per node: 1 when the node's workload is healthy
CEPH = "e2e_ceph_healthy"  # cluster-wide: 1 when storage is HEALTH_OK
APP_QUERY = {"name": "app-ready", "expr": f'{APP}{{node="$node"}} == 1', "for": "2s"}
CEPH_PRECONDITION = {"name": "ceph-ok", "expr": f"{CEPH} == 1"}


@pytest.fixture
def gauges() -> Iterator[Gauges]:
    with Gauges() as g:
        yield g


async def set_metric(
    prom: Prometheus,
    gauges: Gauges,
    name: str,
    value: float,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Set a gauge and return once Prometheus reports the new value (a scrape later)."""
    gauges.set(name, value, labels)
    matchers = ",".join(f'{k}="{v}"' for k, v in sorted((labels or {}).items()))
    promql = f"{name}{{{matchers}}}"
    await wait_for(
        lambda: asyncio.to_thread(lambda: prom.value(promql) == value),
        60,
        f"Prometheus reporting {promql} = {value}",
    )


async def started_prometheus(tmp_path: Path, gauges: Gauges) -> Prometheus:
    return await asyncio.to_thread(
        Prometheus(tmp_path / "prometheus", targets={"app": [Target(gauges.address)]}).start
    )


async def test_a_node_whose_health_query_stays_empty_is_rolled_back(
    api: ApiClient, hosted: HostedNodes, registry: Registry, gauges: Gauges, tmp_path: Path
) -> None:
    started = time.monotonic()
    group = unique_name("hquery")
    names, repo, (v1, v2) = await setup_hosts(hosted, registry, group, 2)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["health"] = {
        "queries": [APP_QUERY],
        "timeoutSeconds": 15,
        "onFailure": "Rollback",
    }
    prometheus = await started_prometheus(tmp_path, gauges)
    monitor = SafetyMonitor(api, group, 1)
    try:
        for name in names:  # every node's workload unhealthy: whoever goes first fails
            await set_metric(prometheus, gauges, APP, 0, {"node": name})
        options = PrometheusOptions(url=prometheus.url)
        async with monitor, running_controller(api, prometheus=options, alert_check_interval=1.0):
            await create_pool(api, body)
            await wait_for(lambda: monitor.takes, 90, "a first slot")
            first = monitor.takes[0][1]

            async def rolled_back() -> dict[str, Any] | None:
                said = f"{first} failed its health check on {v2} and was rolled back"
                pool = await degraded_with(api, group, said)
                released = first not in monitor.holders()
                ok = released and await booted(api, first) == v1
                return pool if pool is not None and ok and not await cordoned(api, first) else None

            pool = await wait_for(rolled_back, 150, f"{first} rolled back and released")
            message = condition(pool, "Degraded")["message"]
            assert "queries" in message and "app-ready: empty result" in message, message
            assert pool["status"]["phase"] == c.PHASE_HALTED
            bn = await get_object(api, BOOTC_NODES, first)
            annotations = bn["metadata"].get("annotations") or {}
            assert annotations.get(c.HEALTH_FAILED_ANNOTATION) == v2
            note = annotations.get(c.HEALTH_CHECK_ANNOTATION, "")
            assert note.startswith("Failed: queries: not healthy 15s after"), note
            # halted: nobody else took a slot; the other node still runs v1
            assert [n for _, n in monitor.takes] == [first]
            for name in names:
                assert await booted(api, name) == v1
        assert monitor.violations == [], monitor.violations
    finally:
        await asyncio.to_thread(prometheus.close)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("health queries: Rollback", started)


async def test_a_precondition_stops_new_slots_and_resumes_them(
    api: ApiClient, hosted: HostedNodes, registry: Registry, gauges: Gauges, tmp_path: Path
) -> None:
    started = time.monotonic()
    group = unique_name("precond")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 3)
    body = pool_body(group, {"group": group}, registry.ref(repo, digest=v2), 1)
    body["spec"]["rollout"]["preconditions"] = [CEPH_PRECONDITION]
    body["spec"]["health"] = {"queries": [APP_QUERY]}
    prometheus = await started_prometheus(tmp_path, gauges)
    monitor = SafetyMonitor(api, group, 1, target=v2)
    try:
        for name in names:  # every workload healthy: the health query passes
            await set_metric(prometheus, gauges, APP, 1, {"node": name})
        await set_metric(prometheus, gauges, CEPH, 0)
        options = PrometheusOptions(url=prometheus.url)
        async with monitor, running_controller(api, prometheus=options, alert_check_interval=1.0):
            await create_pool(api, body)

            async def not_met() -> dict[str, Any] | None:
                pool = await get_pool(api, group)
                up = condition(pool, "UpToDate")
                ok = up.get("reason") == c.REASON_PRECONDITION_NOT_MET
                return pool if ok and "precondition ceph-ok is not met" in up["message"] else None

            async def all_staged_and_blocked() -> dict[str, Any] | None:
                pool = await not_met()
                reasons = [await idle_reason(api, n) for n in names]
                return pool if pool and reasons == [c.REASON_STAGED] * 3 else None

            pool = await wait_for(
                all_staged_and_blocked,
                90,
                "every node staged and the pool blocked by precondition ceph-ok",
                ignore=(ApiError,),
            )
            assert pool["status"]["phase"] == c.PHASE_BLOCKED
            assert monitor.takes == []

            # the status reconciler's Event for the new UpToDate reason names it
            async def told() -> list[dict[str, Any]]:
                return [
                    e
                    for e in await pool_events(api, group)
                    if e.get("reason") == c.REASON_PRECONDITION_NOT_MET and "ceph-ok" in e["note"]
                ]

            await wait_for(told, 30, "a PreconditionNotMet Event on the pool naming ceph-ok")

            # true: the rollout starts; reboots are held so a holder is mid-reboot
            hosted.hold(*names)
            await set_metric(prometheus, gauges, CEPH, 1)
            await wait_for(lambda: monitor.takes, 60, "a first slot once ceph-ok holds")
            first = monitor.takes[0][1]
            # false again mid-rollout: the holder finishes, nobody else starts
            await set_metric(prometheus, gauges, CEPH, 0)
            await wait_for(not_met, 60, "blocked again mid-rollout")
            hosted.unhold(*names)
            await wait_for(
                lambda: [n for _, n in monitor.releases] == [first],
                90,
                f"{first} passing its health query and releasing its slot",
            )

            async def done_and_blocked() -> dict[str, Any] | None:
                pool = await not_met()
                return pool if pool and pool["status"].get("updatedCount") == 1 else None

            await wait_for(done_and_blocked, 30, f"{first} counted, the pool still blocked")
            assert [n for _, n in monitor.takes] == [first]

            await set_metric(prometheus, gauges, CEPH, 1)
            await wait_for(lambda: up_to_date_on(api, group, v2, 3), 120, "the rollout finishing")
        assert monitor.violations == [], monitor.violations
    finally:
        await asyncio.to_thread(prometheus.close)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("preconditions: real Prometheus", started)
