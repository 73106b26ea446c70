"""Boot assessment of a simulated host: how each boot goes for systemd's boot-complete.target.

A real bootc host assesses each boot with systemd's Automatic Boot Assessment:
checks (greenboot's ``greenboot-healthcheck.service``, ``systemd-bless-boot`` ...) order
themselves before ``boot-complete.target``, which is reached only when they all
pass. The simulated host decides at every boot (``make_host``'s first boot, each
``simulate_reboot``) how this boot will be assessed (``decide_boot``) and records it
as ``State.boot`` (``Boot``); the ``systemctl`` shim then answers from that record,
as real systemd would at that moment after the boot:

============  ======================  ======================  ==============  ==============
outcome       is-active               is-system-running       UNIT            list-units
              boot-complete.target                                            --failed
============  ======================  ======================  ==============  ==============
complete      inactive, then active   starting, then running  (none)          (none)
fail[:UNIT]   inactive                starting, then degraded activating,     UNIT, after
                                                              then failed     the delay
hang[:UNIT]   inactive                starting (forever)      activating      (none)
============  ======================  ======================  ==============  ==============

"then" is ``config.boot_complete_delay`` seconds after the boot started (wall
clock: the shims are separate processes). UNIT defaults to
``greenboot-healthcheck.service``. ``hang`` is a check that never returns (no start
timeout): the boot never finishes. A transient unit that failed without
``--collect`` (``shims``) also makes the system ``degraded`` and is listed as failed,
as on a real host, but does not take the target back.

Where a boot's outcome comes from, first match wins:

1. a host fault ``boot-fail`` / ``boot-hang`` (``Host.set_fault("boot-fail",
   message=UNIT, digest=D)``, ``fake-host fault ROOT boot-fail --digest D``) scoped to
   the booted deployment's digest (its ``imageDigest``, or the digest its image
   reference names, e.g. a multi-arch index digest); ``fail`` before ``hang``;
2. the same faults without a digest (every boot of this host);
3. the booted image itself: the label ``fakebootc.boot-assessment`` on the image's
   config (a real registry, read by the fake pull) or ``"bootAssessment"`` in its
   catalog entry, with a ``fail[:UNIT]`` / ``hang[:UNIT]`` / ``complete`` value. This
   is how a fleet says "image X fails its boot assessment on every host": push X
   with the label (``hack.testenv.push.make_image(labels=...)``), or give it the
   key in a catalog every host reads (``$FAKEBOOTC_CATALOG``, ``config.catalogs``);
4. otherwise ``complete``.

Faults and labels are read at boot: changing a fault affects the next boot, not
the current one (a boot's assessment does not change its mind).

Standard library only (the ``systemctl`` shim imports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

BOOT_COMPLETE_TARGET: Final = "boot-complete.target"
DEFAULT_CHECK_UNIT: Final = "greenboot-healthcheck.service"
#: the image label (and catalog key ``bootAssessment``) that decides its boots' outcome
LABEL: Final = "fakebootc.boot-assessment"
OUTCOMES: Final = ("complete", "fail", "hang")


@dataclass(frozen=True)
class Boot:
    """How the current boot is assessed (``State.boot``)."""

    #: wall-clock time the boot started
    started: float
    #: "complete", "fail" or "hang"
    outcome: str = "complete"
    #: the check unit that fails or never finishes (None for complete)
    unit: str | None = None
    #: seconds after ``started`` until the target is reached (complete) or the check fails
    delay: float = 0.0
    #: where the outcome came from: "default", "fault", "fault:<digest>" or "label"
    source: str = "default"
    #: the booted deployment's digest
    digest: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Boot:
        outcome = str(data.get("outcome") or "complete")
        return cls(
            started=float(data.get("started", 0.0)),
            outcome=outcome if outcome in OUTCOMES else "complete",
            unit=data.get("unit"),
            delay=float(data.get("delay", 0.0)),
            source=str(data.get("source") or "default"),
            digest=data.get("digest"),
        )

    def settled(self, now: float) -> bool:
        """The boot's checks are done (the target reached, or a check failed)."""
        return self.outcome != "hang" and now >= self.started + self.delay

    def unit_state(self, unit: str, now: float) -> str | None:
        """``systemctl is-active`` of ``unit`` in this boot; None: not a unit of the boot."""
        if unit == BOOT_COMPLETE_TARGET:
            return "active" if self.outcome == "complete" and self.settled(now) else "inactive"
        if unit == self.unit:
            return "failed" if self.settled(now) else "activating"
        return None

    def system_state(self, now: float, *, other_failed: bool = False) -> str:
        """``systemctl is-system-running`` (``other_failed``: a failed transient unit)."""
        if not self.settled(now):
            return "starting"
        return "degraded" if self.outcome == "fail" or other_failed else "running"

    def failed_units(self, now: float) -> list[str]:
        """The boot's units ``list-units --failed`` shows."""
        return [self.unit] if self.outcome == "fail" and self.unit and self.settled(now) else []


class BadSpec(ValueError):
    """A boot-assessment value that is not ``complete``, ``fail[:UNIT]`` or ``hang[:UNIT]``."""


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"fail:x.service"`` → ``("fail", "x.service")``; the default unit when none is named."""
    outcome, _, unit = spec.strip().partition(":")
    outcome = outcome.strip().lower()
    if outcome not in OUTCOMES:
        raise BadSpec(f"boot assessment {spec!r}: expected complete, fail[:UNIT] or hang[:UNIT]")
    if outcome == "complete":
        return outcome, None
    return outcome, unit.strip() or DEFAULT_CHECK_UNIT


def _digests(image: str, digest: str) -> set[str]:
    """The digests a deployment answers to: its imageDigest and the one its ref names."""
    _, sep, pinned = image.rpartition("@")
    return {digest, pinned} if sep else {digest}


def decide_boot(
    *,
    image: str,
    digest: str,
    label: str | None,
    fail: Mapping[str, str],
    hang: Mapping[str, str],
    delay: float,
    now: float,
) -> Boot:
    """How a boot of the deployment (``image``, ``digest``, its image's ``label``) goes,
    given the host's ``boot-fail`` / ``boot-hang`` faults (scope → unit; scope ``"*"``
    or a digest) and ``config.boot_complete_delay`` (see the module docstring)."""
    mine = _digests(image, digest)
    for scoped in (True, False):
        for outcome, faults in (("fail", fail), ("hang", hang)):
            for scope, unit in faults.items():
                if (scope in mine) if scoped else scope == "*":
                    source = f"fault:{scope}" if scoped else "fault"
                    return Boot(now, outcome, unit or DEFAULT_CHECK_UNIT, delay, source, digest)
    if label:
        try:
            from_label, label_unit = parse_spec(label)
        except BadSpec:
            from_label, label_unit = "complete", None  # an unreadable label breaks no boot
        return Boot(now, from_label, label_unit, delay, "label", digest)
    return Boot(now, "complete", None, delay, "default", digest)
