"""The Prometheus gates of new reboot slots: blocking alerts and preconditions.

No new reboot slots while a Prometheus alert matching ``spec.rollout.blockingAlerts``
fires, or while a query of ``spec.rollout.preconditions`` returns an empty result
(``gates.queries.precondition_gate``; one instant query per precondition, the
same client and the same rhythm as the alerts).

``reconcile(pool_name)`` for a pool with ``spec.rollout.blockingAlerts``: asks
Prometheus for the firing alerts that match (one instant query of the
``ALERTS`` series, so matching is Prometheus' own PromQL semantics, and it works
against anything that serves the query API: Prometheus, Thanos, Mimir) and
keeps the answer as the pool's ``AlertGate``, which rollout (no new slots while
``blocked``) and status (``UpToDate=False/BlockedByAlerts``, or
``PreconditionNotMet`` naming the precondition) read; both gates of a pool are one
``AlertGate`` to them (``gate.combine``, preconditions first). It requeues
itself every ``interval``; after a failed query sooner, with capped exponential
backoff (5 s doubling, at most ``interval``).

Fail closed: until the first answer, when the controller has no
``--prometheus-url``, and while Prometheus cannot be queried, the pool is
blocked with a message saying why. A changed verdict wakes the other
reconcilers (``on_change``); a repeat does not. The Events are the status
reconciler's: a changed UpToDate reason is one (``PreconditionNotMet`` naming the
precondition, like ``BlockedByAlerts``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bootc_operator.api import constants as c
from bootc_operator.gates import ask
from bootc_operator.gates.alerts import (
    AlertGate,
    alert_query,
    blocking_alerts,
    combine,
    firing_gate,
    retry_delay,
)
from bootc_operator.gates.queries import (
    NO_PROMETHEUS,
    Answer,
    precondition_gate,
    preconditions_of,
)

Obj = dict[str, Any]


if TYPE_CHECKING:
    from bootc_operator.gates.prometheus import Querier

log = logging.getLogger("alerts")


class GateStates:
    """The Prometheus gates' last answers, by pool: the alert gate loop writes them
    (``keep``), every other loop reads them (``gate``, through the controller's
    ``PoolKnowledge``). Closed until answered, and without ``--prometheus-url``."""

    def __init__(self, *, prometheus: bool, url: str = "") -> None:
        self.prometheus = prometheus  # the controller has a Prometheus to ask
        self.url = url
        self._gates: dict[str, AlertGate] = {}
        self._preconditions: dict[str, AlertGate] = {}

    def gate(self, pool: Obj) -> AlertGate | None:
        """The pool's gate (None: no blockingAlerts nor preconditions); fail closed
        until known."""
        return combine(self._precondition_gate(pool), self._alert_gate(pool))

    def _alert_gate(self, pool: Obj) -> AlertGate | None:
        if not blocking_alerts(pool):
            return None
        if not self.prometheus:
            return AlertGate(
                True, f"spec.rollout.blockingAlerts is set but {NO_PROMETHEUS}; no new reboots"
            )
        return self._gates.get(
            pool["metadata"]["name"],
            AlertGate(True, f"Prometheus at {self.url} not queried yet; no new reboots"),
        )

    def _precondition_gate(self, pool: Obj) -> AlertGate | None:
        if not preconditions_of(pool):
            return None
        reason = c.REASON_PRECONDITION_NOT_MET
        if not self.prometheus:
            return AlertGate(
                True,
                f"spec.rollout.preconditions is set but {NO_PROMETHEUS}; no new reboots",
                reason,
            )
        return self._preconditions.get(
            pool["metadata"]["name"],
            AlertGate(
                True,
                f"preconditions not checked yet (Prometheus at {self.url}); no new reboots",
                reason,
            ),
        )

    def forget(self, pool_name: str) -> bool:
        """Drop the pool's answers; True when there were any."""
        alerts = self._gates.pop(pool_name, None)
        return self._preconditions.pop(pool_name, None) is not None or alerts is not None

    def keep(self, pool_name: str, alerts: AlertGate | None, pre: AlertGate | None) -> bool:
        """Store the answers (None: that gate is not set); True when one changed (logged)."""
        changed = _keep(self._gates, pool_name, alerts, "alerts")
        return _keep(self._preconditions, pool_name, pre, "preconditions") or changed


def _keep(gates: dict[str, AlertGate], pool_name: str, gate: AlertGate | None, what: str) -> bool:
    """Store ``gate`` (None: drop it); True when it changed (logged)."""
    previous = gates.pop(pool_name, None) if gate is None else gates.get(pool_name)
    if gate is None:
        return previous is not None
    gates[pool_name] = gate
    if gate == previous:
        return False
    level = logging.WARNING if gate.blocked else logging.INFO
    log.log(level, gate.message or f"{what}: nothing blocks", extra={"pool": pool_name})
    return True


class AlertReconciler:
    """The alert gate loop: asks Prometheus for each pool's gates, keeps the answers in
    its ``GateStates`` (``states``; its own when not given)."""

    name = "alerts"

    def __init__(
        self,
        pool: Callable[[str], Obj | None],
        prometheus: Querier | None,
        *,
        interval: float,
        on_change: Callable[[str], None],
        url: str = "",
        states: GateStates | None = None,
    ) -> None:
        self._pool = pool  # a pool from the cache, by name
        self.prometheus = prometheus
        self.interval = interval
        self.url = url
        self._on_change = on_change
        self.states = states or GateStates(prometheus=prometheus is not None, url=url)
        self._failures: dict[str, int] = {}

    def gate(self, pool: Obj) -> AlertGate | None:
        """The pool's gate as the states have it (``GateStates.gate``)."""
        return self.states.gate(pool)

    async def reconcile(self, pool_name: str) -> float | None:
        pool = self._pool(pool_name)
        selectors = blocking_alerts(pool) if pool is not None else []
        preconditions = preconditions_of(pool) if pool is not None else []
        if pool is None or self.prometheus is None or not (selectors or preconditions):
            self._failures.pop(pool_name, None)
            if self.states.forget(pool_name):
                self._on_change(pool_name)
            return None
        failed = False
        gate = None
        if selectors:
            result, error = await ask(self.prometheus, alert_query(selectors))
            if result is None:
                failed = True
                gate = AlertGate(
                    True, f"{error}; no new reboots until Prometheus answers (fail closed)"
                )
            else:
                gate = firing_gate(result)
        answers: dict[str, Answer] = {}
        for p in preconditions:
            answers[p.name] = await ask(self.prometheus, p.expr)
            failed = failed or answers[p.name][0] is None
        pre = precondition_gate(preconditions, answers) if preconditions else None
        if self.states.keep(pool_name, gate, pre):
            self._on_change(pool_name)
        if failed:
            failures = self._failures.get(pool_name, 0) + 1
            self._failures[pool_name] = failures
            return retry_delay(failures, self.interval)
        self._failures.pop(pool_name, None)
        return self.interval
