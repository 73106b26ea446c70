"""The controller's Prometheus metrics (pool gauges, drain and update durations, leadership).

The pool gauges tell every fact at once, so an alert on one is never masked by
another: ``bootc_operator_pool_nodes{state}`` has one series per member state
(``poolstatus.MemberState``: each member counted in exactly one, ``UpToDate``
only once it is done, as ``status.updatedCount``), and
``bootc_operator_pool_degraded{reason}`` one series per Degraded reason, 1 for
*every* reason that applies (not only the condition's top one), else 0.

Reconcile metrics (``controller_runtime_reconcile_*``) belong to the workers
that run reconciles: :mod:`bootc_operator.workqueue.worker`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from bootc_operator.api import constants as c

POOL_NODES: Final = Gauge(
    "bootc_operator_pool_nodes",
    "Members of a pool by state (each in one; UpToDate: done, out of its slot, checks passed)",
    ["pool", "state"],
)
POOL_UP_TO_DATE: Final = Gauge(
    "bootc_operator_pool_up_to_date", "1 when every node of the pool runs the target", ["pool"]
)
POOL_DEGRADED: Final = Gauge(
    "bootc_operator_pool_degraded",
    "1 for every reason the pool is Degraded for (several at once), 0 for the others",
    ["pool", "reason"],
)
POOL_PAUSED: Final = Gauge(
    "bootc_operator_pool_paused", "1 when the pool's rollout is paused", ["pool"]
)
REBOOT_SLOTS_IN_USE: Final = Gauge(
    "bootc_operator_reboot_slots_in_use", "Nodes of a pool holding a reboot slot", ["pool"]
)
REBOOT_SLOTS_MAX: Final = Gauge(
    "bootc_operator_reboot_slots_max", "Resolved maxUnavailable of a pool", ["pool"]
)
DRAIN_BLOCKED: Final = Gauge(
    "bootc_operator_drain_blocked",
    "Drains waiting: pods that cannot be evicted, or a pod list that cannot be read",
    ["pool"],
)
DRAIN_OUTCOMES: Final = Counter(
    "bootc_operator_drain_outcomes_total",
    "Drains past their timeout by what was done (GiveUp, Halt, Skip, Force), pods force-"
    "deleted (ForcedPod), evictions an admission webhook or policy denied (Denied), and pods "
    "held for their emptyDir data under deleteEmptyDirData false (EmptyDirData)",
    ["pool", "outcome"],
)
DRAIN_DURATION: Final = Histogram(
    "bootc_operator_drain_duration_seconds",
    "Time from cordon to an empty node",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600),
)
NODE_UPDATE_DURATION: Final = Histogram(
    "bootc_operator_node_update_duration_seconds",
    "Time from taking a reboot slot (node Staged) to the node running the target (UpToDate)",
    buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
)
HEALTH_CHECK_DURATION: Final = Histogram(
    "bootc_operator_health_check_duration_seconds",
    "Time from a node's reboot request to passing its health gate (spec.health)",
    buckets=(5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600),
)
HEALTH_CHECK_FAILURES: Final = Counter(
    "bootc_operator_health_check_failures_total",
    "Nodes that failed their health gate (spec.health), by the check that failed",
    ["pool", "check"],
)
NODE_REBOOTS: Final = Counter(
    "bootc_operator_node_reboots_total",
    "Nodes released after rebooting into an update or a rollback, by how they rebooted "
    "(status.lastRebootKind: soft = userspace only, full)",
    ["pool", "kind"],
)
ROLLBACKS: Final = Counter(
    "bootc_operator_rollbacks_total",
    "Nodes told to roll back (bootc rollback) after failing their health gate",
    ["pool"],
)
IS_LEADER: Final = Gauge("bootc_operator_leader", "1 when this controller is the leader")


def set_pool_gauges(
    pool: str,
    *,
    members: Iterable[tuple[str, int]],
    up_to_date: bool,
    degraded_reasons: Collection[str],
    slots_in_use: int,
    max_unavailable: int,
) -> None:
    """Set a pool's gauges: ``members`` (member state, how many), the reasons it is
    Degraded for (all that apply), its reboot slots."""
    for state, n in members:
        POOL_NODES.labels(pool, state).set(n)
    POOL_UP_TO_DATE.labels(pool).set(1 if up_to_date else 0)
    REBOOT_SLOTS_IN_USE.labels(pool).set(slots_in_use)
    REBOOT_SLOTS_MAX.labels(pool).set(max_unavailable)
    for reason in c.DEGRADED_PRECEDENCE:
        POOL_DEGRADED.labels(pool, reason).set(1 if reason in degraded_reasons else 0)


def forget_pool(pool: str) -> None:
    """Drop a deleted pool's series so dashboards do not show ghosts."""
    for gauge in (
        POOL_UP_TO_DATE,
        POOL_PAUSED,
        REBOOT_SLOTS_IN_USE,
        REBOOT_SLOTS_MAX,
        DRAIN_BLOCKED,
        ROLLBACKS,
    ):
        with contextlib.suppress(KeyError):
            gauge.remove(pool)
    for gauge in (POOL_NODES, POOL_DEGRADED, HEALTH_CHECK_FAILURES, NODE_REBOOTS, DRAIN_OUTCOMES):
        for labels in list(gauge._metrics):  # no public way to list series
            if labels[0] == pool:
                gauge.remove(*labels)
