"""Prometheus metrics of workqueues, one set per registry.

client-go's / controller-runtime's names, with the label ``name`` (the queue's
name): ``workqueue_depth``, ``workqueue_adds_total``,
``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``,
``workqueue_retries_total``, ``workqueue_unfinished_work_seconds``,
``workqueue_longest_running_processor_seconds``.

``workqueue_metrics(registry)`` creates the collectors on first use and returns
the same objects afterwards; ``None`` means prometheus-client's global
registry. Tests pass their own ``CollectorRegistry`` so nothing collides.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bootc_operator.promreg import per_registry

# controller-runtime: prometheus.ExponentialBuckets(10e-9, 10, 12) = 1e-8 s .. 1e3 s
DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(12))


@dataclass(frozen=True, slots=True)
class WorkqueueMetrics:
    depth: Gauge
    adds: Counter
    queue_duration: Histogram
    work_duration: Histogram
    retries: Counter
    unfinished_work: Gauge
    longest_running: Gauge


def _build(reg: CollectorRegistry) -> WorkqueueMetrics:
    label = ["name"]
    return WorkqueueMetrics(
        depth=Gauge("workqueue_depth", "Current depth of workqueue", label, registry=reg),
        adds=Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            label,
            registry=reg,
        ),
        queue_duration=Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            label,
            buckets=DURATION_BUCKETS,
            registry=reg,
        ),
        work_duration=Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            label,
            buckets=DURATION_BUCKETS,
            registry=reg,
        ),
        retries=Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            label,
            registry=reg,
        ),
        unfinished_work=Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            label,
            registry=reg,
        ),
        longest_running=Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            label,
            registry=reg,
        ),
    )


workqueue_metrics = per_registry(_build)
