"""What the disruption controller writes about a PodDisruptionBudget, for the kit's clusters.

No kube-controller-manager runs beside the harness's apiserver, so a test or
benchmark that needs a budget to allow or refuse a disruption writes the budget's
status itself (:func:`budget_status`): the e2e drain policies
(``e2e/test_drain_policies.py``) and the benchmark's budget-held drain
(``hack.perf.pdbdrain``).
"""

from __future__ import annotations

from typing import Any

from bootc_operator.kube import POD_DISRUPTION_BUDGETS, request_json


async def budget_status(
    api: Any, name: str, *, healthy: int, allowed: int, namespace: str = "default"
) -> None:
    """Budget ``name``'s status as the disruption controller would write it: ``healthy``
    pods of 1 desired, ``allowed`` disruptions, for the budget's current generation."""
    path = POD_DISRUPTION_BUDGETS.path(namespace, name)
    pdb = await request_json(api, "GET", path)
    status = {
        "observedGeneration": pdb["metadata"]["generation"],
        "currentHealthy": healthy,
        "desiredHealthy": 1,
        "expectedPods": healthy,
        "disruptionsAllowed": allowed,
    }
    await request_json(
        api,
        "PATCH",
        f"{path}/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )
