"""BootcNodePool bodies for tests and tools: which Nodes, which image, how to roll out."""

from __future__ import annotations

from typing import Any

from bootc_operator.api import constants as c


def pool_body(
    name: str, selector: dict[str, str], ref: str, max_unavailable: int | str = 1, **rollout: Any
) -> dict[str, Any]:
    """Pool ``name`` selecting Nodes by ``selector`` (matchLabels), rolling out ``ref``
    ``max_unavailable`` at a time; ``rollout`` adds other ``spec.rollout`` fields."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.POOL_KIND,
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": selector},
            "image": {"ref": ref},
            "rollout": {"maxUnavailable": max_unavailable, **rollout},
        },
    }
