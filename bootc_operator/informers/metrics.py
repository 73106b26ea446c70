"""Prometheus metrics of informers, one set per registry.

Counters use the label ``resource`` (``nodes``,
``bootcnodepools.node.bootc.dev``): ``informer_lists_total``,
``informer_watch_lists_total`` (streaming lists: watches with
``sendInitialEvents``), ``informer_watches_total`` (streaming lists included),
``informer_relists_total`` (initial state fetched again after 410 Gone),
``informer_watch_events_total`` (also by ``type``: ADDED, MODIFIED, DELETED,
BOOKMARK, ERROR) and ``informer_errors_total`` (also by ``op``: list,
watch).

``informer_metrics(registry)`` creates the collectors on first use and returns
the same objects afterwards; ``None`` means prometheus-client's global
registry. Tests pass their own ``CollectorRegistry`` so nothing collides.
Workqueue metrics: :mod:`bootc_operator.workqueue.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from bootc_operator.promreg import per_registry


@dataclass(frozen=True, slots=True)
class InformerMetrics:
    lists: Counter
    watch_lists: Counter
    watches: Counter
    relists: Counter
    events: Counter
    errors: Counter


def _build(reg: CollectorRegistry) -> InformerMetrics:
    return InformerMetrics(
        lists=Counter(
            "informer_lists_total",
            "LIST requests completed by informers",
            ["resource"],
            registry=reg,
        ),
        watch_lists=Counter(
            "informer_watch_lists_total",
            "Streaming lists (WATCH with sendInitialEvents) started by informers",
            ["resource"],
            registry=reg,
        ),
        watches=Counter(
            "informer_watches_total",
            "WATCH requests started by informers",
            ["resource"],
            registry=reg,
        ),
        relists=Counter(
            "informer_relists_total",
            "Initial state fetched again after the watch's resourceVersion expired (410 Gone)",
            ["resource"],
            registry=reg,
        ),
        events=Counter(
            "informer_watch_events_total",
            "Watch events received by informers",
            ["resource", "type"],
            registry=reg,
        ),
        errors=Counter(
            "informer_errors_total",
            "Failed LIST and WATCH attempts of informers",
            ["resource", "op"],
            registry=reg,
        ),
    )


informer_metrics = per_registry(_build)
