"""The current boot's assessment (systemd's boot-complete.target): status.bootAssessment.

systemd's Automatic Boot Assessment: health checks (greenboot's
``greenboot-healthcheck.service``, ``systemd-bless-boot`` with boot counting, a
workload's own units) order themselves before ``boot-complete.target``, which is
reached only when they all passed. The daemon reads it through the same host-command
path as bootc (``hostcmd.HostCommands.boot_probe``): ``systemctl is-active
boot-complete.target``; when that is not ``active``, ``systemctl
is-system-running`` and ``systemctl list-units --failed --plain --no-legend``. The
readings (``BootProbe``) map to a ``BootAssessment`` by one pure function,
``assess``:

=================================  ===========================  =====================
target (is-active)                 system (is-system-running)   state
=================================  ===========================  =====================
a command could not be run/read    any                          Unknown (the error)
``active``                         any                          Complete
not active                         ``initializing``/``starting``  Pending (failed units
                                                                so far named)
not active                         ``degraded``/``maintenance``   Failed, naming the
                                                                failed units
not active                         ``running`` + failed units     Failed (as above)
not active                         ``running``, none failed     Unknown: nothing pulls
                                                                the target in
not active                         ``stopping``/``offline``/...   Unknown
=================================  ===========================  =====================

``running`` with the target inactive and no failed unit is the one ambiguous
reading: the boot finished cleanly, but no unit on this host requires
``boot-complete.target`` (no greenboot, no boot counting), so it was never started.
That is reported as ``Unknown`` rather than ``Failed``: a host without boot
assessment is a configuration to fix, not a bad image to roll back.

When to read again (``recheck_after``): ``Pending`` soon, with a capped backoff
(1 s, 2 s, 4 s ... 10 s) so the controller learns of the completion promptly;
``Unknown`` the same way up to a minute (a timeout or a busy host clears up, a
host without the target stays Unknown at one cheap read a minute); ``Complete`` and
``Failed`` never: a boot's assessment does not change, and the daemon restarts with
the host's next boot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from bootc_operator.api.wire import BootAssessment, BootAssessmentState

BOOT_COMPLETE_TARGET: Final = "boot-complete.target"
#: ``systemctl is-system-running``: the boot's jobs are still running
BOOTING: Final = frozenset({"initializing", "starting"})
#: ``systemctl is-system-running``: the boot finished, but not as it should
BROKEN: Final = frozenset({"degraded", "maintenance"})
#: how many failed units a message names before "and N more"
NAMED_UNITS: Final = 5

#: what systemctl may print before a failed unit: a bullet, "*" (no UTF-8), a cross (newer)
BULLETS: Final = frozenset({"\u25cf", "*", "\u00d7"})

PENDING_BACKOFF: Final = (1.0, 10.0)
UNKNOWN_BACKOFF: Final = (1.0, 60.0)


@dataclass(frozen=True)
class BootProbe:
    """What the host said: each ``systemctl`` answer, or why the probe failed."""

    #: ``systemctl is-active boot-complete.target`` (first line of its output)
    target: str | None = None
    #: ``systemctl is-system-running``; None when not read (the target is active)
    system: str | None = None
    #: the failed units ``systemctl list-units --failed`` names
    failed_units: tuple[str, ...] = ()
    #: a command could not be run, timed out or printed nothing usable
    error: str | None = None


def _units(units: Sequence[str]) -> str:
    named = ", ".join(units[:NAMED_UNITS])
    more = len(units) - NAMED_UNITS
    return f"{named} and {more} more" if more > 0 else named


def assess(probe: BootProbe) -> BootAssessment:
    """The assessment of the current boot from ``probe`` (see the module docstring)."""
    unknown = BootAssessmentState.UNKNOWN
    if probe.error is not None:
        return BootAssessment(
            state=unknown, message=f"cannot read the boot assessment: {probe.error}"
        )
    target = (probe.target or "").strip()
    if target == "active":
        return BootAssessment(
            state=BootAssessmentState.COMPLETE, message=f"{BOOT_COMPLETE_TARGET} reached"
        )
    system = (probe.system or "").strip()
    failed = list(probe.failed_units)
    if system in BOOTING:
        so_far = f"; failed so far: {_units(failed)}" if failed else ""
        return BootAssessment(
            state=BootAssessmentState.PENDING,
            message=f"{BOOT_COMPLETE_TARGET} not reached yet (the system is {system}{so_far})",
        )
    if system in BROKEN or (system == "running" and failed):
        why = f"failed units: {_units(failed)}" if failed else f"the system is {system}"
        if system == "maintenance":
            why = f"the system is in maintenance mode (rescue or emergency); {why}"
        return BootAssessment(
            state=BootAssessmentState.FAILED,
            message=f"the boot finished without reaching {BOOT_COMPLETE_TARGET}: {why}",
        )
    if system == "running":
        return BootAssessment(
            state=unknown,
            message=(
                f"the boot finished with no failed unit but {BOOT_COMPLETE_TARGET} is "
                f"{target or 'not active'}: nothing on this host pulls it in (no boot "
                "assessment such as greenboot or boot counting is set up)"
            ),
        )
    return BootAssessment(
        state=unknown,
        message=(
            f"{BOOT_COMPLETE_TARGET} is {target or 'not active'} and systemctl "
            f"is-system-running says {system or 'nothing'}"
        ),
    )


def final(assessment: BootAssessment | None) -> bool:
    """Complete and Failed do not change within a boot: no need to read again."""
    return assessment is not None and assessment.state in (
        BootAssessmentState.COMPLETE,
        BootAssessmentState.FAILED,
    )


def recheck_after(assessment: BootAssessment, reads: int) -> float | None:
    """Seconds until the next read after ``reads`` consecutive non-final ones; None: never."""
    if final(assessment):
        return None
    initial, cap = (
        PENDING_BACKOFF if assessment.state == BootAssessmentState.PENDING else UNKNOWN_BACKOFF
    )
    return float(min(cap, initial * 2.0 ** min(max(reads, 1) - 1, 62)))


def parse_failed_units(text: str) -> tuple[str, ...]:
    """Unit names from ``systemctl list-units --failed --plain --no-legend`` output.

    The first column of each line; a leading bullet (``BULLETS``: some systemctl
    versions print one even with ``--plain``) is skipped, and so are legend lines should
    ``--no-legend`` be ignored.
    """
    units: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in BULLETS:
            words = words[1:]
        if not words or words[0] == "UNIT" or "." not in words[0]:
            continue
        units.append(words[0])
    return tuple(units)
