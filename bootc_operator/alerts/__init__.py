"""Prometheus alerts for the alert gate (``spec.rollout.blockingAlerts``)."""

from bootc_operator.alerts.client import (
    PrometheusClient,
    PrometheusError,
    PrometheusOptions,
    Querier,
    ask,
)

__all__ = ["PrometheusClient", "PrometheusError", "PrometheusOptions", "Querier", "ask"]
