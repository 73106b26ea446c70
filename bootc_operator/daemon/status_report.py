"""BootcNode.status as the daemon writes it: built from a decision, compared, patched.

Pure functions over wire dicts (camelCase, as the API server stores them):

- ``build_status(current, decision, images, generation, now, assessment)``: the
  complete new status (``desired_state``: the BootcNode's ``spec.desiredImageState``).
  ``observedGeneration`` is the BootcNode generation the decision was made for; the
  ``Idle``/``Degraded`` conditions (and kstatus's, ``node_kstatus``) follow metav1
  semantics through
  ``api.conditions.set_condition`` (``lastTransitionTime`` moves only when a
  condition's status changes; other condition types are kept as they are);
  ``booted``/``staged``/``rollback`` come from bootc status, or are kept as they
  were when bootc status could not be read (``images=None``), and so does
  ``bootedShort``. ``bootAssessment`` is the current boot's (``assessment``), never
  one kept from the status: what the server holds may be the previous boot's, and a
  new ``booted`` next to an old ``Complete`` would pass a health gate the new boot
  never passed. None (not read) writes none. ``lastRebootKind`` is the decision's
  ``reboot_kind`` when it reboots (written with ``Idle=False/Rebooting``), else kept.
  ``sealingKey`` is this process's public key (``sealing_key``), or none: a key an
  earlier process published is removed (its private key died with it).
- ``node_kstatus(conditions, desired_state)``: the BootcNode's kstatus conditions
  (``api.kstatus``), for its own work, written by ``build_status`` beside Idle and
  Degraded: ``Stalled`` while Degraded (the daemon cannot do what the spec asks:
  bootc failed, the host is incompatible, a reboot was not permitted ...);
  ``Ready`` once it did what the spec asks: it runs the desired image (Idle), or it
  has it staged and the spec asks for no more (``desiredImageState: Staged``; the
  rollout decides when it reboots); ``Reconciling`` meanwhile (Staging, Rebooting,
  Staged when told to boot it), with the Idle reason.
- ``completed_reboot(current, images)``: the kind of the reboot the host just came
  back from (``lastRebootKind``, ``Full`` if unset), when the status on the server is
  the ``Idle=False/Rebooting`` one the daemon wrote before rebooting and bootc now
  reports another booted deployment; None otherwise (a daemon restart, a reboot that
  booted nothing new). Counted once per process (``metrics.REBOOTS``).
- ``booted_short(info)``: ``status.bootedShort``, for ``kubectl get``: the first 12
  hex digits of the booted image's digest *as the pool targets it*: the digest of
  the reference bootc was switched to when that is digest-pinned (``repo@sha256:…``,
  what the daemon switches to; for a multi-arch index that is the index digest,
  while ``imageDigest`` is the per-architecture one), else ``imageDigest``. None
  when nothing is booted.
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
import re
from collections.abc import Mapping
from typing import Any, Final

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import get_condition, set_condition
from bootc_operator.api.kstatus import KStatus, set_kstatus
from bootc_operator.api.wire import BootAssessment, DesiredImageState, ImageInfo, RebootKind
from bootc_operator.daemon.bootc_status import DeploymentImages
from bootc_operator.daemon.decide import Decision

Status = dict[str, Any]
SLOTS = ("booted", "staged", "rollback")
BOOTED_SHORT: Final = "bootedShort"
BOOT_ASSESSMENT: Final = "bootAssessment"
LAST_REBOOT_KIND: Final = "lastRebootKind"
SEALING_KEY: Final = "sealingKey"
SHORT_HEX: Final = 12
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:([0-9a-fA-F]{32,})")


def _short_hex(digest: str | None) -> str | None:
    match = _DIGEST.fullmatch(digest or "")
    return match.group(1)[:SHORT_HEX].lower() if match else None


def booted_short(info: ImageInfo | None) -> str | None:
    """``status.bootedShort`` for the booted deployment ``info`` (module docstring)."""
    if info is None:
        return None
    _, sep, pinned = info.image.rpartition("@")
    return (_short_hex(pinned) if sep else None) or _short_hex(info.image_digest)


def image_wire(info: ImageInfo | None) -> dict[str, Any] | None:
    """``ImageInfo`` as a wire dict with every field present (absent ones null)."""
    return None if info is None else info.to_wire(nulls=True)


def node_kstatus(conditions: list[dict[str, Any]], desired_state: str | None = None) -> KStatus:
    """The BootcNode's kstatus conditions from its Idle and Degraded ones and its
    ``spec.desiredImageState`` (module docstring; unset or unknown reads as Staged)."""
    degraded = get_condition(conditions, c.COND_DEGRADED) or {}
    if degraded.get("status") == "True":
        reason = str(degraded.get("reason") or c.REASON_ERROR)
        return KStatus(False, reason, str(degraded.get("message") or ""), stalled=True)
    idle = get_condition(conditions, c.COND_IDLE)
    if idle is None:
        return KStatus(
            False, c.REASON_PENDING, "waiting for the first bootc status", reconciling=True
        )
    reason, message = str(idle.get("reason") or c.REASON_IDLE), str(idle.get("message") or "")
    if idle.get("status") == "True":
        return KStatus(True, reason, message or "runs the desired image")
    if reason == c.REASON_STAGED and desired_state != DesiredImageState.BOOTED:
        return KStatus(True, reason, message or "the desired image is staged")
    return KStatus(False, reason, message, reconciling=True)


def build_status(
    current: Mapping[str, Any] | None,
    decision: Decision,
    images: DeploymentImages | None,
    generation: int | None,
    now: dt.datetime,
    assessment: BootAssessment | None = None,
    *,
    sealing_key: str | None = None,
    desired_state: str | None = None,
) -> Status:
    current = current or {}
    conditions = [dict(cond) for cond in current.get("conditions") or ()]
    # Idle, then Degraded (their order on a new object); no Idle verdict keeps Idle as it is.
    for cond_type, cond in ((c.COND_IDLE, decision.idle), (c.COND_DEGRADED, decision.degraded)):
        if cond is not None:
            conditions = set_condition(
                conditions,
                cond_type,
                cond.status,
                cond.reason,
                cond.message,
                observed_generation=generation,
                now=now,
            )
    conditions = set_kstatus(
        conditions,
        node_kstatus(conditions, desired_state),
        observed_generation=generation,
        now=now,
    )
    status: Status = {"observedGeneration": generation}
    if images is None:
        for key in (*SLOTS, BOOTED_SHORT):
            status[key] = current.get(key)
    else:
        status.update(
            booted=image_wire(images.booted),
            staged=image_wire(images.staged),
            rollback=image_wire(images.rollback),
        )
        status[BOOTED_SHORT] = booted_short(images.booted)
    status[BOOT_ASSESSMENT] = None if assessment is None else assessment.to_wire()
    kind = decision.reboot_kind
    status[LAST_REBOOT_KIND] = kind.value if kind is not None else current.get(LAST_REBOOT_KIND)
    status[SEALING_KEY] = sealing_key
    status["conditions"] = conditions
    return status


def completed_reboot(
    current: Mapping[str, Any] | None, images: DeploymentImages
) -> RebootKind | None:
    """The kind of reboot the host came back from, if any (see the module docstring)."""
    current = current or {}
    idle = next(
        (
            cond
            for cond in current.get("conditions") or ()
            if isinstance(cond, Mapping) and cond.get("type") == c.COND_IDLE
        ),
        None,
    )
    if idle is None or idle.get("reason") != c.REASON_REBOOTING:
        return None
    before = current.get("booted") or {}
    now = images.booted
    if now is None or (before.get("image"), before.get("imageDigest")) == (
        now.image,
        now.image_digest,
    ):
        return None
    try:
        return RebootKind(str(current.get(LAST_REBOOT_KIND) or RebootKind.FULL.value))
    except ValueError:
        return RebootKind.FULL


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
    return {
        "status": {
            **dict.fromkeys((*SLOTS, BOOTED_SHORT, BOOT_ASSESSMENT, SEALING_KEY)),
            **status,
        }
    }
