"""BootcNode.status as the daemon writes it: built from a decision, compared, patched.

Pure functions over wire dicts (camelCase, as the API server stores them):

- ``build_status(current, decision, images, generation, now)``: the complete new
  status. ``observedGeneration`` is the BootcNode generation the decision was made
  for; the ``Idle``/``Degraded`` conditions follow metav1 semantics through
  ``api.conditions.set_condition`` (``lastTransitionTime`` moves only when a
  condition's status changes; other condition types are kept as they are);
  ``booted``/``staged``/``rollback`` come from bootc status, or are kept as they
  were when bootc status could not be read (``images=None``).
- ``same_status(a, b)``: True when two statuses say the same thing. Timestamps of
  conditions are ignored, and so is absent vs ``null`` and condition order, so a
  no-op never costs a write.
- ``status_patch(status)``: the JSON merge patch for the ``status`` subresource. Every
  field is spelled out, absent ones as ``null``, so fields that disappeared (a
  deployment that is gone, an image without a version) are removed on the server
  whatever the cache held.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import set_condition
from bootc_operator.api.v1alpha1 import ImageInfo
from bootc_operator.daemon.bootc_status import DeploymentImages
from bootc_operator.daemon.decide import Decision

Status = dict[str, Any]
SLOTS = ("booted", "staged", "rollback")


def image_wire(info: ImageInfo | None) -> dict[str, Any] | None:
    """``ImageInfo`` as a wire dict with every field present (absent ones null)."""
    return None if info is None else info.model_dump(mode="json", by_alias=True)


def build_status(
    current: Mapping[str, Any] | None,
    decision: Decision,
    images: DeploymentImages | None,
    generation: int | None,
    now: dt.datetime,
) -> Status:
    current = current or {}
    conditions = [dict(cond) for cond in current.get("conditions") or ()]
    if decision.idle is not None:
        idle = decision.idle
        conditions = set_condition(
            conditions,
            c.COND_IDLE,
            idle.status,
            idle.reason,
            idle.message,
            observed_generation=generation,
            now=now,
        )
    deg = decision.degraded
    conditions = set_condition(
        conditions,
        c.COND_DEGRADED,
        deg.status,
        deg.reason,
        deg.message,
        observed_generation=generation,
        now=now,
    )
    status: Status = {"observedGeneration": generation}
    if images is None:
        for slot in SLOTS:
            status[slot] = current.get(slot)
    else:
        status.update(
            booted=image_wire(images.booted),
            staged=image_wire(images.staged),
            rollback=image_wire(images.rollback),
        )
    status["conditions"] = conditions
    return status


def _prune(value: Any) -> Any:
    """Drop null fields, recursively (absent and null mean the same on the wire)."""
    if isinstance(value, Mapping):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _comparable(status: Mapping[str, Any] | None) -> dict[str, Any]:
    pruned: dict[str, Any] = _prune(dict(status or {}))
    conditions = pruned.pop("conditions", None) or []
    pruned["conditions"] = sorted(
        ({k: v for k, v in cond.items() if k != "lastTransitionTime"} for cond in conditions),
        key=lambda cond: str(cond.get("type")),
    )
    return pruned


def same_status(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two statuses say the same thing (see the module docstring)."""
    return _comparable(a) == _comparable(b)


def status_patch(status: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that makes the server's status exactly ``status``."""
    return {"status": {**dict.fromkeys(SLOTS), **status}}
