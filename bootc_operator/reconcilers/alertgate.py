"""The alert gate: no new reboot slots while a matching Prometheus alert fires.

``reconcile(pool_name)`` for a pool with ``spec.rollout.blockingAlerts``: asks
Prometheus for the firing alerts that match (one instant query of the
``ALERTS`` series, so matching is Prometheus' own PromQL semantics, and it works
against anything that serves the query API: Prometheus, Thanos, Mimir) and
keeps the answer as the pool's ``AlertGate``, which rollout (no new slots while
``blocked``) and status (``UpToDate=False/BlockedByAlerts``) read. It requeues
itself every ``interval``; after a failed query sooner, with capped exponential
backoff (5 s doubling, at most ``interval``).

Fail closed: until the first answer, when the controller has no
``--prometheus-url``, and while Prometheus cannot be queried, the pool is
blocked with a message saying why. A changed verdict wakes the other
reconcilers (``on_change``); a repeat does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from bootc_operator.alerts import PrometheusError
from bootc_operator.alerts.gate import (
    AlertGate,
    alert_query,
    blocking_alerts,
    firing_gate,
    retry_delay,
)
from bootc_operator.reconcilers.context import Obj

log = logging.getLogger("alerts")


class Querier(Protocol):
    async def query(self, promql: str) -> list[dict[str, Any]]: ...


class AlertReconciler:
    name = "alerts"

    def __init__(
        self,
        pool: Callable[[str], Obj | None],
        prometheus: Querier | None,
        *,
        interval: float,
        on_change: Callable[[str], None],
        url: str = "",
    ) -> None:
        self._pool = pool  # a pool from the cache, by name
        self.prometheus = prometheus
        self.interval = interval
        self.url = url
        self._on_change = on_change
        self._gates: dict[str, AlertGate] = {}
        self._failures: dict[str, int] = {}

    def gate(self, pool: Obj) -> AlertGate | None:
        """The pool's gate (None: it has no blockingAlerts); fail closed until known."""
        if not blocking_alerts(pool):
            return None
        if self.prometheus is None:
            return AlertGate(
                True,
                "spec.rollout.blockingAlerts is set but the controller was started without "
                "--prometheus-url; no new reboots",
            )
        return self._gates.get(
            pool["metadata"]["name"],
            AlertGate(True, f"Prometheus at {self.url} not queried yet; no new reboots"),
        )

    async def reconcile(self, pool_name: str) -> float | None:
        pool = self._pool(pool_name)
        selectors = blocking_alerts(pool) if pool is not None else []
        if pool is None or not selectors or self.prometheus is None:
            self._failures.pop(pool_name, None)
            if self._gates.pop(pool_name, None) is not None:
                self._on_change(pool_name)
            return None
        try:
            result = await self.prometheus.query(alert_query(selectors))
        except PrometheusError as err:
            failures = self._failures.get(pool_name, 0) + 1
            self._failures[pool_name] = failures
            gate = AlertGate(True, f"{err}; no new reboots until Prometheus answers (fail closed)")
            delay = retry_delay(failures, self.interval)
        else:
            self._failures.pop(pool_name, None)
            gate = firing_gate(result)
            delay = self.interval
        previous = self._gates.get(pool_name)
        self._gates[pool_name] = gate
        if gate != previous:
            level = logging.WARNING if gate.blocked else logging.INFO
            log.log(level, gate.message or "no blocking alert fires", extra={"pool": pool_name})
            self._on_change(pool_name)
        return delay
