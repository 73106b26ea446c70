"""The sample workload of ``hack/sim workload``: something for drains to move.

A Deployment ``web`` in namespace ``default`` (one replica per node by default),
spread over nodes and zones with ``topologySpreadConstraints``, and a
PodDisruptionBudget allowing one ``web`` Pod down at a time, so draining two
nodes at once is serialised by the budget, as on a real cluster. kwok runs the
Pods (they never pull anything).

The spread constraints are ``ScheduleAnyway``: with ``DoNotSchedule`` a Pod evicted
from a cordoned node can become unschedulable (the cordoned node still counts in
the skew), which would stall the drain of the next node behind the budget.
"""

from __future__ import annotations

from typing import Any

from hack.simlib.common import HOSTNAME_LABEL, SIM_NODE_LABEL, ZONE_LABEL

NAMESPACE = "default"
NAME = "web"
LABELS = {"app": NAME}


def manifests(replicas: int) -> list[dict[str, Any]]:
    """The Deployment and its PodDisruptionBudget."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": LABELS},
        }
        for key in (HOSTNAME_LABEL, ZONE_LABEL)
    ]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": LABELS},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "nodeSelector": {SIM_NODE_LABEL: "true"},
                    "containers": [{"name": NAME, "image": "registry.example.com/web:1"}],
                    "terminationGracePeriodSeconds": 0,
                    "topologySpreadConstraints": spread,
                },
            },
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": LABELS}},
    }
    return [deployment, budget]
