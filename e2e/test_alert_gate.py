"""The alert gate end to end (issue 17 §2): the real controller with
``--prometheus-url``, real daemons on simulated hosts, the safety monitor on.

- a real Prometheus (``hack.testenv.prometheus``) with alerts the test fires and
  resolves: a matching alert blocks new slots (the pool names it), an alert no
  entry matches does not; resolving it resumes; one firing mid-rollout lets the
  slot holder finish but starts no new reboot;
- Prometheus cannot be queried (nothing listens at the URL): the gate fails
  closed — nodes stage, no slot is taken, the pool says
  ``UpToDate=False/BlockedByAlerts`` naming the URL and the cause; removing
  ``blockingAlerts`` lets the rollout finish.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.gates.prometheus import PrometheusOptions
from bootc_operator.kube import BOOTC_NODE_POOLS, ApiError
from bootc_operator.kube.rest import patch_object
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.helpers import condition, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from e2e.test_rollout_policies import idle_reason, report, setup_hosts, up_to_date_on
from hack.testenv.controller import running_controller
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.prometheus import Prometheus
from hack.testenv.registry import Registry


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_prometheus_blocks_new_slots_until_the_gate_is_removed(
    api: ApiClient, hosted: HostedNodes, registry: Registry
) -> None:
    started = time.monotonic()
    group = unique_name("alerts")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 2)
    url = f"http://127.0.0.1:{closed_port()}"
    body = pool_body(
        group,
        {"group": group},
        registry.ref(repo, digest=v2),
        1,
        blockingAlerts=['severity="critical"'],
    )
    monitor = SafetyMonitor(api, group, 1, target=v2)
    options = PrometheusOptions(url=url, timeout=2.0)
    async with monitor, running_controller(api, prometheus=options, alert_check_interval=2.0):
        await create_pool(api, body)

        async def blocked() -> dict[str, Any] | None:
            pool = await get_pool(api, group)
            up = condition(pool, "UpToDate")
            staged = [await idle_reason(api, n) for n in names] == [c.REASON_STAGED] * 2
            return pool if staged and up.get("reason") == c.REASON_BLOCKED_BY_ALERTS else None

        pool = await wait_for(
            blocked, 90, "nodes staged and the pool blocked by the alert gate", ignore=(ApiError,)
        )
        message = condition(pool, "UpToDate")["message"]
        assert f"cannot query Prometheus at {url}" in message, message
        assert "no new reboots until Prometheus answers (fail closed)" in message, message
        assert pool["status"]["phase"] == c.PHASE_BLOCKED
        assert monitor.takes == []

        await patch_object(
            api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"blockingAlerts": None}}}
        )
        await wait_for(lambda: up_to_date_on(api, group, v2, 2), 120, "the rollout finishing")
    assert monitor.violations == [], monitor.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("alert gate: unreachable Prometheus", started)


async def test_a_firing_alert_blocks_new_slots_and_resolving_it_resumes(
    api: ApiClient, hosted: HostedNodes, registry: Registry, tmp_path: Path
) -> None:
    started = time.monotonic()
    group = unique_name("alerts")
    names, repo, (_v1, v2) = await setup_hosts(hosted, registry, group, 3)
    body = pool_body(
        group,
        {"group": group},
        registry.ref(repo, digest=v2),
        1,
        blockingAlerts=['alertname=~"Node.*|Etcd.*"', 'severity="critical"'],
    )
    prometheus = await asyncio.to_thread(Prometheus(tmp_path / "prometheus").start)
    monitor = SafetyMonitor(api, group, 1, target=v2)
    options = PrometheusOptions(url=prometheus.url)
    try:
        # both fire (fire returns once Prometheus reports it) before the controller's
        # first query: a controller that started earlier could rightly see no alert
        await prometheus.fire("EtcdHighFsyncDurations", {"severity": "warning"})
        await prometheus.fire("Watchdog", {"severity": "none"})  # no entry matches it
        async with monitor, running_controller(api, prometheus=options, alert_check_interval=1.0):
            await create_pool(api, body)

            async def blocked_by(fragment: str) -> dict[str, Any] | None:
                pool = await get_pool(api, group)
                up = condition(pool, "UpToDate")
                ok = up.get("reason") == c.REASON_BLOCKED_BY_ALERTS and fragment in up["message"]
                return pool if ok else None

            async def all_staged_and_blocked() -> dict[str, Any] | None:
                pool = await blocked_by('EtcdHighFsyncDurations{severity="warning"} fires')
                reasons = [await idle_reason(api, n) for n in names]
                return pool if pool and reasons == [c.REASON_STAGED] * 3 else None

            pool = await wait_for(
                all_staged_and_blocked,
                90,
                "every node staged and the pool blocked by the firing etcd alert",
                ignore=(ApiError,),
            )
            message = condition(pool, "UpToDate")["message"]
            assert "Watchdog" not in message, message
            assert pool["status"]["phase"] == c.PHASE_BLOCKED
            assert monitor.takes == []

            # resolved: the rollout starts; a reboot is held so a holder is mid-reboot
            hosted.hold(*names)
            await prometheus.resolve("EtcdHighFsyncDurations")
            await wait_for(lambda: monitor.takes, 60, "a first slot once the alert resolved")
            first = monitor.takes[0][1]
            await prometheus.fire("NodeFilesystemAlmostFull", {"severity": "warning"})
            await wait_for(
                lambda: blocked_by("NodeFilesystemAlmostFull"), 60, "blocked again mid-rollout"
            )
            hosted.unhold(*names)
            # the holder finishes its reboot; nobody else takes a slot while it fires
            await wait_for(
                lambda: [n for _, n in monitor.releases] == [first], 90, f"{first} finishing"
            )

            async def done_and_blocked() -> dict[str, Any] | None:
                pool = await blocked_by("NodeFilesystemAlmostFull")
                return pool if pool and pool["status"].get("updatedCount") == 1 else None

            await wait_for(done_and_blocked, 30, f"{first} counted, the pool still blocked")
            assert [n for _, n in monitor.takes] == [first]

            await prometheus.resolve("NodeFilesystemAlmostFull")
            await wait_for(lambda: up_to_date_on(api, group, v2, 3), 120, "the rollout finishing")
        assert monitor.violations == [], monitor.violations
    finally:
        await asyncio.to_thread(prometheus.close)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    report("alert gate: real Prometheus", started)
