"""The boot assessment's pure mapping (``daemon.assessment``): systemctl's answers →
``status.bootAssessment`` as a table, when to read again, and the failed-unit listing
parser. The host side (``HostCommands.boot_probe``) is in ``test_daemon_host.py``."""

from __future__ import annotations

import pytest

from bootc_operator.api import v1alpha1
from bootc_operator.api.wire import BootAssessment, BootAssessmentState
from bootc_operator.daemon.assessment import (
    BootProbe,
    assess,
    final,
    parse_failed_units,
    recheck_after,
)

PENDING, COMPLETE = BootAssessmentState.PENDING, BootAssessmentState.COMPLETE
FAILED, UNKNOWN = BootAssessmentState.FAILED, BootAssessmentState.UNKNOWN
GREENBOOT = "greenboot-healthcheck.service"

Row = tuple[str, BootProbe, BootAssessmentState, str]

ROWS: list[Row] = [
    (
        "target active: Complete",
        BootProbe(target="active"),
        COMPLETE,
        "boot-complete.target reached",
    ),
    (
        "target active on a degraded system: the target decides, Complete",
        BootProbe(target="active", system="degraded", failed_units=("late.service",)),
        COMPLETE,
        "boot-complete.target reached",
    ),
    (
        "still starting: Pending",
        BootProbe(target="inactive", system="starting"),
        PENDING,
        "boot-complete.target not reached yet (the system is starting)",
    ),
    (
        "initializing (early boot): Pending",
        BootProbe(target="inactive", system="initializing"),
        PENDING,
        "boot-complete.target not reached yet (the system is initializing)",
    ),
    (
        "starting with a unit failed already: Pending, the unit named",
        BootProbe(target="inactive", system="starting", failed_units=(GREENBOOT,)),
        PENDING,
        f"boot-complete.target not reached yet (the system is starting; failed so far: "
        f"{GREENBOOT})",
    ),
    (
        "finished degraded without the target: Failed, the failed unit named",
        BootProbe(target="inactive", system="degraded", failed_units=(GREENBOOT,)),
        FAILED,
        f"the boot finished without reaching boot-complete.target: failed units: {GREENBOOT}",
    ),
    (
        "degraded, the failed unit list empty (reset meanwhile): Failed, the system state",
        BootProbe(target="inactive", system="degraded"),
        FAILED,
        "the boot finished without reaching boot-complete.target: the system is degraded",
    ),
    (
        "many failed units: five named, the rest counted",
        BootProbe(
            target="inactive",
            system="degraded",
            failed_units=tuple(f"u{i}.service" for i in range(7)),
        ),
        FAILED,
        "the boot finished without reaching boot-complete.target: failed units: u0.service, "
        "u1.service, u2.service, u3.service, u4.service and 2 more",
    ),
    (
        "maintenance (emergency/rescue): Failed",
        BootProbe(target="inactive", system="maintenance", failed_units=("sysroot.mount",)),
        FAILED,
        "the boot finished without reaching boot-complete.target: the system is in maintenance "
        "mode (rescue or emergency); failed units: sysroot.mount",
    ),
    (
        "running with a failed unit (a listing race): Failed",
        BootProbe(target="inactive", system="running", failed_units=(GREENBOOT,)),
        FAILED,
        f"the boot finished without reaching boot-complete.target: failed units: {GREENBOOT}",
    ),
    (
        "running cleanly, target never pulled in: Unknown (no boot assessment set up)",
        BootProbe(target="inactive", system="running"),
        UNKNOWN,
        "the boot finished with no failed unit but boot-complete.target is inactive: nothing "
        "on this host pulls it in (no boot assessment such as greenboot or boot counting is "
        "set up)",
    ),
    (
        "shutting down: Unknown",
        BootProbe(target="inactive", system="stopping"),
        UNKNOWN,
        "boot-complete.target is inactive and systemctl is-system-running says stopping",
    ),
    (
        "systemd not PID 1: Unknown",
        BootProbe(target="inactive", system="offline"),
        UNKNOWN,
        "boot-complete.target is inactive and systemctl is-system-running says offline",
    ),
    (
        "a command failed: Unknown with its error",
        BootProbe(error="cannot run systemctl is-active: nsenter: No such file or directory"),
        UNKNOWN,
        "cannot read the boot assessment: cannot run systemctl is-active: nsenter: No such "
        "file or directory",
    ),
]


@pytest.mark.parametrize(
    ("probe", "state", "message"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_assessment_table(probe: BootProbe, state: BootAssessmentState, message: str) -> None:
    found = assess(probe)
    assert (found.state, found.message) == (state, message)
    # what the daemon writes is valid for the API model, which writes it back unchanged
    assert v1alpha1.BootAssessment.model_validate(found.to_wire()).to_wire() == found.to_wire()


def a(state: BootAssessmentState) -> BootAssessment:
    return BootAssessment(state=state)


@pytest.mark.parametrize(
    ("state", "reads", "delay"),
    [
        (PENDING, 1, 1.0),
        (PENDING, 2, 2.0),
        (PENDING, 4, 8.0),
        (PENDING, 5, 10.0),
        (PENDING, 500, 10.0),
        (UNKNOWN, 1, 1.0),
        (UNKNOWN, 6, 32.0),
        (UNKNOWN, 100, 60.0),
        (COMPLETE, 1, None),
        (FAILED, 3, None),
    ],
)
def test_recheck_after(state: BootAssessmentState, reads: int, delay: float | None) -> None:
    assert recheck_after(a(state), reads) == delay
    assert final(a(state)) is (delay is None)


def test_final_needs_an_assessment() -> None:
    assert not final(None)


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("", ()),
        (
            "greenboot-healthcheck.service loaded failed failed Greenboot health check\n"
            "app.mount loaded failed failed /app\n",
            ("greenboot-healthcheck.service", "app.mount"),
        ),
        # bullets some systemctl versions print even with --plain
        (
            "\u25cf x.service loaded failed failed X\n\u00d7 y.service loaded failed failed Y",
            ("x.service", "y.service"),
        ),
        ("* z.service loaded failed failed Z", ("z.service",)),
        # a legend, should --no-legend be ignored
        (
            "  UNIT LOAD ACTIVE SUB DESCRIPTION\nq.service loaded failed failed Q\n\n"
            "LOAD   = Reflects whether the unit definition was properly loaded.\n"
            "1 loaded units listed.",
            ("q.service",),
        ),
    ],
)
def test_parse_failed_units(text: str, units: tuple[str, ...]) -> None:
    assert parse_failed_units(text) == units
