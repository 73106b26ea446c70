"""The daemon's state machine (``bootc_operator.daemon.decide``) as a table: every rule of
DESIGN §3/§4 is one row of (desired, host status, in-flight work) → decision.

Rows added for issue 13: no reboot without the rollout's slot annotations
(RebootNotAllowed), download-only staged deployments (applied before the reboot), a
stale staged image once the target is the booted image again (re-staged), and pull
secret problems on a node that has nothing to pull (noted, not Degraded).

Rows added for issue 16: the desired image is the rollback deployment (``bootc
rollback``, no pull; then Staged/Rebooting like a staged image), a queued rollback
reverted when the booted image is desired, and switched over for a third image.

Rows added for issue 17: soft reboots (``spec.rebootPolicy: AllowSoftReboot`` and a
``softRebootCapable`` staged deployment: one ``bootc upgrade --from-downloaded --apply
--soft-reboot=required``; otherwise, and always for a queued rollback, a full reboot
that says why; a failed soft reboot is followed by a full one after the backoff).

Rows added for issue 25: an image staged out of band (``Work.out_of_band``) is replaced
like any image that is not desired, and the Idle message names it;
``out_of_band_stage`` tells it from the daemon's own commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.api.v1alpha1 import DesiredImageState, RebootKind
from bootc_operator.daemon.bootc_status import parse_document, parse_status
from bootc_operator.daemon.decide import (
    HEALTHY,
    IDLE,
    NOT_CAPABLE,
    NOT_NEEDED_NOW,
    REBOOT_PERMIT,
    ROLLBACK_FULL,
    SOFT_FAILED,
    Action,
    Attempt,
    Cond,
    Decision,
    Desired,
    HostView,
    RetryPolicy,
    Work,
    awaiting_drain,
    decide,
    degraded,
    desired_from_spec,
    out_of_band_stage,
    reboot_not_allowed,
    rebooting,
    restaging,
    reverting,
    rollback_queued,
    rolling_back,
    staged,
    staging,
    with_note,
)


def digest(ch: str) -> str:
    return "sha256:" + ch * 64


REPO = "quay.io/example/os"
A, B, C = (f"{REPO}@{digest(x)}" for x in "abc")
INDEX = f"{REPO}@{digest('f')}"  # a multi-arch index; bootc reports the amd64 digest "e"
NOW = 1000.0
RETRY = RetryPolicy(initial=10.0, cap=300.0)
STAGED, BOOTED = DesiredImageState.STAGED, DesiredImageState.BOOTED
SOFT, FULL = RebootKind.SOFT, RebootKind.FULL
SLOT = c.IN_REBOOT_SLOT_ANNOTATION
REQUESTED = c.REBOOT_REQUESTED_ANNOTATION
#: the BootcNode holds a drained reboot slot: both annotations present
DRAINED = frozenset(REBOOT_PERMIT)
SECRET = "pull secret ns/s: not found (keeping the previous file)"
SWITCH_ERROR = f"bootc switch {B} failed (exit code 1): error: Switching: Pulling: unauthorized"


def entry(ref: str | None, image_digest: str | None = None, **flags: Any) -> dict[str, Any]:
    image = None
    if ref is not None:
        image = {
            "image": {"image": ref, "transport": "registry"},
            "imageDigest": image_digest or ref.partition("@")[2],
            "architecture": "amd64",
        }
    return {"image": image, **flags}


def host(
    booted: dict[str, Any] | None = None,
    staged_: dict[str, Any] | None = None,
    rollback: dict[str, Any] | None = None,
    *,
    queued: bool = False,
) -> HostView:
    doc = {
        "apiVersion": "org.containers.bootc/v1",
        "kind": "BootcHost",
        "status": {
            "booted": booted,
            "staged": staged_,
            "rollback": rollback,
            "rollbackQueued": queued,
        },
    }
    return HostView(parse_document(doc))


ON_A = host(entry(A))
A_STAGED_B = host(entry(A), entry(B))
A_STAGED_B_DOWNLOAD_ONLY = host(entry(A), entry(B, downloadOnly=True))
A_STAGED_A = host(entry(A), entry(A))
#: B (the target) booted and bad, A (the image before) the rollback deployment
B_ROLLBACK_A = host(entry(B), None, entry(A))
B_QUEUED_A = host(entry(B), None, entry(A), queued=True)
ROLLBACK_ERROR = "bootc rollback failed (exit code 1): error: Rollback: No rollback available"
INCOMPATIBLE_WHY = "local rpm-ostree modifications (incompatible: true)"
NOT_BOOTC_WHY = "bootc reports no booted deployment (status.booted is null)"


def failed(action: Action, image: str, attempts: int, ago: float, error: str | None) -> Attempt:
    return Attempt(action, image, attempts, NOW - ago, error)


def deg(*problems: str) -> Cond:
    return degraded(*problems)


def reason_of(view: HostView, why: str) -> str:
    assert view.status is not None
    reason = view.status.unmanageable_reason()
    assert reason is not None and why in reason
    return reason


UNCONFIRMED = (
    f"bootc switch {B} exited 0 but bootc status does not show it staged (staged: nothing)"
)
#: the staged / rollback deployment has the booted one's kernel
A_STAGED_B_SOFT = host(entry(A), entry(B, softRebootCapable=True))
A_STAGED_B_DOWNLOAD_ONLY_SOFT = host(entry(A), entry(B, downloadOnly=True, softRebootCapable=True))
B_QUEUED_A_SOFT = host(entry(B), None, entry(A, softRebootCapable=True), queued=True)
SOFT_ERROR = (
    "bootc upgrade --from-downloaded --apply --soft-reboot=required failed (exit code 1): "
    "error: Upgrading: Handling staged soft reboot: Handling soft reboot: Soft reboot was "
    "required but staged deployment is not soft-reboot capable"
)


def allowing(
    image: str, state: DesiredImageState = BOOTED, permits: frozenset[str] = DRAINED
) -> Desired:
    """A BootcNode whose pool allows soft reboots (``spec.rebootPolicy: AllowSoftReboot``)."""
    return Desired(image, state, permits, allow_soft_reboot=True)


INCOMPATIBLE = host(entry(None, incompatible=True))
STAGED_INCOMPATIBLE = host(entry(A), entry(B, incompatible=True))
NOT_BOOTC = host(None)
NO_IMAGE = host(entry(None))

Row = tuple[str, Desired | None, HostView, Work, tuple[str, ...], Decision]

ROWS: list[Row] = [
    # --- nothing to do
    ("booted is desired: Idle", Desired(A), ON_A, Work(), (), Decision(IDLE, HEALTHY)),
    (
        "booted is desired, Booted asked: Idle, no reboot",
        Desired(A, BOOTED),
        ON_A,
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    ("no desired image: Idle", None, ON_A, Work(), (), Decision(IDLE, HEALTHY)),
    (
        "multi-arch index digest desired, booted through it: Idle",
        Desired(INDEX),
        host(entry(INDEX, digest("e"))),
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    (
        "desired names the per-arch digest of the booted tag: Idle",
        Desired(f"{REPO}@{digest('e')}"),
        host(entry(f"{REPO}:latest", digest("e"))),
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    # --- staging
    (
        "desired differs, nothing staged: Staging, switch",
        Desired(B),
        ON_A,
        Work(),
        (),
        Decision(staging(B), HEALTHY, start_switch=B),
    ),
    (
        "Booted asked but not staged yet: stage first, no reboot",
        Desired(B, BOOTED),
        ON_A,
        Work(),
        (),
        Decision(staging(B), HEALTHY, start_switch=B),
    ),
    (
        "switch of the desired image running: Staging, nothing else",
        Desired(B),
        ON_A,
        Work(switching=B),
        (),
        Decision(staging(B), HEALTHY),
    ),
    (
        "newer desired image while switching: cancel, switch the new one",
        Desired(C),
        ON_A,
        Work(switching=B),
        (),
        Decision(staging(C), HEALTHY, cancel_switch=True, start_switch=C),
    ),
    (
        "desired back to the booted image while switching: cancel, Idle",
        Desired(A),
        ON_A,
        Work(switching=B),
        (),
        Decision(IDLE, HEALTHY, cancel_switch=True),
    ),
    (
        "desired is the staged image while switching another: cancel, Staged",
        Desired(B),
        A_STAGED_B,
        Work(switching=C),
        (),
        Decision(staged(B), HEALTHY, cancel_switch=True),
    ),
    (
        "desired changes while staged: re-stage",
        Desired(C),
        A_STAGED_B,
        Work(),
        (),
        Decision(staging(C), HEALTHY, start_switch=C),
    ),
    (
        "BootcNode without desired image while switching: cancel",
        None,
        ON_A,
        Work(switching=B),
        (),
        Decision(IDLE, HEALTHY, cancel_switch=True),
    ),
    # --- staged, reboot
    (
        "desired staged, Staged asked: Staged",
        Desired(B),
        A_STAGED_B,
        Work(),
        (),
        Decision(staged(B), HEALTHY),
    ),
    (
        "desired staged, Booted asked, drained slot: Rebooting, then reboot",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(),
        (),
        Decision(rebooting(B), HEALTHY, reboot=True, reboot_kind=FULL),
    ),
    (
        "reboot already requested: Rebooting, no second reboot",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(reboot_requested=B),
        (),
        Decision(rebooting(B), HEALTHY),
    ),
    (
        "a successful switch is forgotten once staged",
        Desired(B),
        A_STAGED_B,
        Work(last=failed("switch", B, 1, 1, None)),
        (),
        Decision(staged(B), HEALTHY, forget_attempt=True),
    ),
    (
        "a successful switch is forgotten when rebooting",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(last=failed("switch", B, 2, 1, None)),
        (),
        Decision(rebooting(B), HEALTHY, reboot=True, reboot_kind=FULL, forget_attempt=True),
    ),
    (
        "reboot command failed, backoff running: Staged + Degraded, wait",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(last=failed("reboot", B, 1, 4, "systemctl reboot failed (exit code 1): nope")),
        (),
        Decision(
            staged(B),
            deg("systemctl reboot failed (exit code 1): nope"),
            requeue_after=6.0,
        ),
    ),
    (
        "reboot command failed, backoff over: Rebooting + reboot, still Degraded",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(last=failed("reboot", B, 1, 10, "systemctl reboot failed (exit code 1): nope")),
        (),
        Decision(
            rebooting(B),
            deg("systemctl reboot failed (exit code 1): nope"),
            reboot=True,
            reboot_kind=FULL,
        ),
    ),
    # --- stage failures and backoff
    (
        "stage failed, backoff running: Idle + Degraded with bootc's error, wait",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 1, 3, SWITCH_ERROR)),
        (),
        Decision(IDLE, deg(SWITCH_ERROR), requeue_after=7.0),
    ),
    (
        "stage failed, backoff over: retry, Degraded kept (no flapping)",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 1, 10, SWITCH_ERROR)),
        (),
        Decision(staging(B), deg(SWITCH_ERROR), start_switch=B),
    ),
    (
        "retry running: Staging, Degraded kept",
        Desired(B),
        ON_A,
        Work(switching=B, last=failed("switch", B, 1, 10, SWITCH_ERROR)),
        (),
        Decision(staging(B), deg(SWITCH_ERROR)),
    ),
    (
        "third failure: 40 s backoff",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 3, 30, SWITCH_ERROR)),
        (),
        Decision(IDLE, deg(SWITCH_ERROR), requeue_after=10.0),
    ),
    (
        "backoff is capped",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 40, 100, SWITCH_ERROR)),
        (),
        Decision(IDLE, deg(SWITCH_ERROR), requeue_after=200.0),
    ),
    (
        "switch exited 0 but nothing staged: read status, not the exit code",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 1, 1, None)),
        (),
        Decision(IDLE, deg(UNCONFIRMED), requeue_after=9.0),
    ),
    (
        "a failure of another image does not hold back the desired one",
        Desired(C),
        ON_A,
        Work(last=failed("switch", B, 5, 1, SWITCH_ERROR)),
        (),
        Decision(staging(C), HEALTHY, start_switch=C, forget_attempt=True),
    ),
    (
        "desired booted after failures: Idle, healthy, failure forgotten",
        Desired(A),
        ON_A,
        Work(last=failed("switch", B, 2, 1, SWITCH_ERROR)),
        (),
        Decision(IDLE, HEALTHY, forget_attempt=True),
    ),
    # --- bootc status unusable
    (
        "status unreadable: Degraded, Idle unchanged, re-read after backoff",
        Desired(B),
        HostView(None, "bootc status did not finish within 120s", failures=1),
        Work(),
        (),
        Decision(None, deg("bootc status did not finish within 120s"), requeue_after=10.0),
    ),
    (
        "status unreadable a 4th time: longer backoff, even with a stale document",
        Desired(B),
        HostView(ON_A.status, "bootc status output is not JSON", failures=4),
        Work(),
        (),
        Decision(None, deg("bootc status output is not JSON"), requeue_after=80.0),
    ),
    (
        "status never read",
        Desired(B),
        HostView(),
        Work(),
        (),
        Decision(None, deg("bootc status has not been read yet"), requeue_after=10.0),
    ),
    # --- hosts bootc cannot manage: never a switch
    (
        "incompatible booted deployment: Degraded, no switch",
        Desired(B),
        INCOMPATIBLE,
        Work(),
        (),
        Decision(IDLE, deg(reason_of(INCOMPATIBLE, INCOMPATIBLE_WHY))),
    ),
    (
        "incompatible staged deployment: Degraded, no reboot",
        Desired(B, BOOTED),
        STAGED_INCOMPATIBLE,
        Work(),
        (),
        Decision(IDLE, deg(reason_of(STAGED_INCOMPATIBLE, INCOMPATIBLE_WHY))),
    ),
    (
        "not a bootc host: Degraded, no switch",
        Desired(B),
        NOT_BOOTC,
        Work(),
        (),
        Decision(IDLE, deg(reason_of(NOT_BOOTC, NOT_BOOTC_WHY))),
    ),
    (
        "booted deployment without an image: Degraded, no switch",
        Desired(B),
        NO_IMAGE,
        Work(),
        (),
        Decision(IDLE, deg(reason_of(NO_IMAGE, "not a container image"))),
    ),
    # --- pull secret problems: Degraded only where the node has to pull
    (
        "pull secret problem: Degraded, staging goes on",
        Desired(B),
        ON_A,
        Work(),
        (SECRET,),
        Decision(staging(B), Cond(True, c.REASON_PULL_SECRET_ERROR, SECRET), start_switch=B),
    ),
    (
        "pull secret problem and stage error: both reported",
        Desired(B),
        ON_A,
        Work(last=failed("switch", B, 1, 1, SWITCH_ERROR)),
        (SECRET,),
        Decision(IDLE, deg(SWITCH_ERROR, SECRET), requeue_after=9.0),
    ),
    (
        "pull secret problem while the switch runs: Degraded",
        Desired(B),
        ON_A,
        Work(switching=B),
        (SECRET,),
        Decision(staging(B), Cond(True, c.REASON_PULL_SECRET_ERROR, SECRET)),
    ),
    (
        "pull secret problem on an up-to-date node: noted in Idle, not Degraded",
        Desired(A),
        ON_A,
        Work(),
        (SECRET,),
        Decision(Cond(True, c.REASON_IDLE, f"{SECRET} ({NOT_NEEDED_NOW})"), HEALTHY),
    ),
    (
        "pull secret problem on a node with its image staged: noted in Staged",
        Desired(B),
        A_STAGED_B,
        Work(),
        (SECRET,),
        Decision(
            Cond(False, c.REASON_STAGED, f"{B} is staged; {SECRET} ({NOT_NEEDED_NOW})"),
            HEALTHY,
        ),
    ),
    (
        "pull secret problem when the staged image must be replaced: Degraded",
        Desired(A),
        A_STAGED_B,
        Work(),
        (SECRET,),
        Decision(restaging(A, B), Cond(True, c.REASON_PULL_SECRET_ERROR, SECRET), start_switch=A),
    ),
    # --- no reboot without a drained reboot slot (issue 13, item 0)
    (
        "Booted asked without the slot annotations: no reboot, RebootNotAllowed",
        Desired(B, BOOTED),
        A_STAGED_B,
        Work(),
        (),
        Decision(staged(B), reboot_not_allowed(B, (SLOT, REQUESTED))),
    ),
    (
        "Booted asked with a slot but not drained (the Go operator's drained holder): "
        "no reboot, not Degraded: waits for the controller to adopt it",
        Desired(B, BOOTED, frozenset({SLOT})),
        A_STAGED_B,
        Work(),
        (),
        Decision(awaiting_drain(staged(B)), HEALTHY),
    ),
    (
        "Booted asked with reboot-requested but no slot: no reboot",
        Desired(B, BOOTED, frozenset({REQUESTED})),
        A_STAGED_B,
        Work(),
        (),
        Decision(staged(B), reboot_not_allowed(B, (SLOT,))),
    ),
    (
        "refused even when a failed reboot's backoff is over",
        Desired(B, BOOTED),
        A_STAGED_B,
        Work(last=failed("reboot", B, 1, 100, "systemctl reboot failed (exit code 1): nope")),
        (),
        Decision(staged(B), reboot_not_allowed(B, (SLOT, REQUESTED)), forget_attempt=True),
    ),
    (
        "Booted without annotations, not staged yet: staging is harmless, goes on",
        Desired(B, BOOTED),
        ON_A,
        Work(),
        (),
        Decision(staging(B), HEALTHY, start_switch=B),
    ),
    (
        "Booted without annotations on an up-to-date node: Idle, nothing refused",
        Desired(A, BOOTED),
        ON_A,
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    # --- download-only staged deployments (issue 13)
    (
        "download-only staged, Staged asked: Staged, nothing applied yet",
        Desired(B),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(),
        (),
        Decision(staged(B, download_only=True), HEALTHY),
    ),
    (
        "download-only staged, Booted asked, drained: apply it first, no reboot yet",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(),
        (),
        Decision(
            Cond(False, c.REASON_STAGED, f"applying the download-only {B} before rebooting"),
            HEALTHY,
            apply_staged=True,
        ),
    ),
    (
        "download-only staged, Booted asked, not drained: refused, nothing applied",
        Desired(B, BOOTED),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(),
        (),
        Decision(staged(B, download_only=True), reboot_not_allowed(B, (SLOT, REQUESTED))),
    ),
    (
        "applied: reboot, the apply record forgotten",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B,
        Work(last=failed("apply", B, 1, 1, None)),
        (),
        Decision(rebooting(B), HEALTHY, reboot=True, reboot_kind=FULL, forget_attempt=True),
    ),
    (
        "apply failed, backoff running: Staged + Degraded, wait",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(last=failed("apply", B, 1, 4, "bootc upgrade --from-downloaded failed")),
        (),
        Decision(
            staged(B, download_only=True),
            deg("bootc upgrade --from-downloaded failed"),
            requeue_after=6.0,
        ),
    ),
    (
        "apply exited 0 but still download-only: Degraded, retried after the backoff",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(last=failed("apply", B, 1, 10, None)),
        (),
        Decision(
            Cond(False, c.REASON_STAGED, f"applying the download-only {B} before rebooting"),
            deg(
                "bootc upgrade --from-downloaded exited 0 but bootc status still shows "
                f"{B} staged download-only"
            ),
            apply_staged=True,
        ),
    ),
    # --- a stale staged image once the target is the booted one again (issue 13)
    (
        "booted is desired, another image staged: stage the booted image again",
        Desired(A),
        A_STAGED_B,
        Work(),
        (),
        Decision(restaging(A, B), HEALTHY, start_switch=A),
    ),
    (
        "stale staged image, Booted asked: still only re-staged, never a reboot",
        Desired(A, BOOTED, DRAINED),
        A_STAGED_B,
        Work(),
        (),
        Decision(restaging(A, B), HEALTHY, start_switch=A),
    ),
    (
        "the re-stage switch runs: Staging",
        Desired(A),
        A_STAGED_B,
        Work(switching=A),
        (),
        Decision(staging(A), HEALTHY),
    ),
    (
        "stale staged image replaced by the booted one: Idle, switch record forgotten",
        Desired(A),
        A_STAGED_A,
        Work(last=failed("switch", A, 1, 1, None)),
        (),
        Decision(IDLE, HEALTHY, forget_attempt=True),
    ),
    (
        "re-stage failed, backoff running: Idle + Degraded (the stale image is a hazard)",
        Desired(A),
        A_STAGED_B,
        Work(last=failed("switch", A, 1, 3, SWITCH_ERROR)),
        (),
        Decision(IDLE, deg(SWITCH_ERROR), requeue_after=7.0),
    ),
    # --- an image staged out of band (issue 25)
    (
        "booted is desired, another image staged out of band: re-staged, the message names it",
        Desired(A),
        A_STAGED_B,
        Work(out_of_band=B),
        (),
        Decision(restaging(A, B, out_of_band=True), HEALTHY, start_switch=A),
    ),
    (
        "an earlier out-of-band image, now another staged: the plain stale message",
        Desired(A),
        A_STAGED_B,
        Work(out_of_band=C),
        (),
        Decision(restaging(A, B), HEALTHY, start_switch=A),
    ),
    (
        "a third image desired over one staged out of band: staged, the message names it",
        Desired(C),
        A_STAGED_B,
        Work(out_of_band=B),
        (),
        Decision(staging(C, replacing=B), HEALTHY, start_switch=C),
    ),
    (
        "the desired image itself staged out of band: Staged, nothing to replace",
        Desired(B),
        A_STAGED_B,
        Work(out_of_band=B),
        (),
        Decision(staged(B), HEALTHY),
    ),
    (
        "a stale download-only staged image is left alone (bootc never boots it)",
        Desired(A),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    (
        "no desired image with something staged: Idle, nothing switched",
        None,
        A_STAGED_B,
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    # --- rollback: desiredImage is the rollback deployment (issue 16)
    (
        "desired is the rollback deployment: bootc rollback, no switch (no pull)",
        Desired(A),
        B_ROLLBACK_A,
        Work(),
        (),
        Decision(rolling_back(A), HEALTHY, rollback=True),
    ),
    (
        "rollback with Booted and the permit: queued first, the reboot after",
        Desired(A, BOOTED, DRAINED),
        B_ROLLBACK_A,
        Work(),
        (),
        Decision(rolling_back(A), HEALTHY, rollback=True),
    ),
    (
        "the rollback deployment named by repo@imageDigest (it was booted from a tag)",
        Desired(A),
        host(entry(B), None, entry(f"{REPO}:v1", digest("a"))),
        Work(),
        (),
        Decision(rolling_back(A), HEALTHY, rollback=True),
    ),
    (
        "a staged image is no obstacle: bootc rollback discards it",
        Desired(A, BOOTED, DRAINED),
        host(entry(B), entry(C), entry(A)),
        Work(),
        (),
        Decision(rolling_back(A), HEALTHY, rollback=True),
    ),
    (
        "another image's switch runs: cancelled, then the rollback",
        Desired(A),
        B_ROLLBACK_A,
        Work(switching=C),
        (),
        Decision(rolling_back(A), HEALTHY, cancel_switch=True, rollback=True),
    ),
    (
        "rollback queued, Staged asked: Staged, a rollback is queued",
        Desired(A),
        B_QUEUED_A,
        Work(),
        (),
        Decision(rollback_queued(A), HEALTHY),
    ),
    (
        "rollback queued, Booted with the permit: Rebooting, reboot",
        Desired(A, BOOTED, DRAINED),
        B_QUEUED_A,
        Work(),
        (),
        Decision(rebooting(A, rollback=True), HEALTHY, reboot=True, reboot_kind=FULL),
    ),
    (
        "rollback queued, Booted without the permit: no reboot, RebootNotAllowed",
        Desired(A, BOOTED),
        B_QUEUED_A,
        Work(),
        (),
        Decision(rollback_queued(A), reboot_not_allowed(A, (SLOT, REQUESTED))),
    ),
    (
        "rollback queued, reboot requested already: Rebooting, no second reboot",
        Desired(A, BOOTED, DRAINED),
        B_QUEUED_A,
        Work(reboot_requested=A),
        (),
        Decision(rebooting(A, rollback=True), HEALTHY),
    ),
    (
        "the successful rollback command is forgotten once it is queued",
        Desired(A, BOOTED, DRAINED),
        B_QUEUED_A,
        Work(last=failed("rollback", A, 1, 1, None)),
        (),
        Decision(
            rebooting(A, rollback=True), HEALTHY, reboot=True, reboot_kind=FULL, forget_attempt=True
        ),
    ),
    (
        "bootc rollback failed, backoff running: Idle + Degraded, wait",
        Desired(A, BOOTED, DRAINED),
        B_ROLLBACK_A,
        Work(last=failed("rollback", A, 1, 3, ROLLBACK_ERROR)),
        (),
        Decision(IDLE, deg(ROLLBACK_ERROR), requeue_after=7.0),
    ),
    (
        "bootc rollback failed, backoff over: retried, Degraded kept",
        Desired(A, BOOTED, DRAINED),
        B_ROLLBACK_A,
        Work(last=failed("rollback", A, 2, 20, ROLLBACK_ERROR)),
        (),
        Decision(rolling_back(A), deg(ROLLBACK_ERROR), rollback=True),
    ),
    (
        "bootc rollback exited 0 but nothing queued: read status, not the exit code",
        Desired(A),
        B_ROLLBACK_A,
        Work(last=failed("rollback", A, 1, 1, None)),
        (),
        Decision(
            IDLE,
            deg(
                f"bootc rollback exited 0 but bootc status does not show the rollback to {A} queued"
            ),
            requeue_after=9.0,
        ),
    ),
    (
        "pull secret problem while rolling back: noted, not Degraded (nothing is pulled)",
        Desired(A),
        B_ROLLBACK_A,
        Work(),
        (SECRET,),
        Decision(with_note(rolling_back(A), [SECRET]), HEALTHY, rollback=True),
    ),
    (
        "after the rollback's reboot: Idle on the old image, the bad one is the rollback",
        Desired(A, BOOTED, DRAINED),
        host(entry(A), None, entry(B)),
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    (
        "a queued rollback while the booted image is desired: reverted (second rollback)",
        Desired(B),
        B_QUEUED_A,
        Work(),
        (),
        Decision(reverting(B, A), HEALTHY, rollback=True),
    ),
    (
        "revert with Booted and the permit: still only reverted, never a reboot",
        Desired(B, BOOTED, DRAINED),
        B_QUEUED_A,
        Work(),
        (),
        Decision(reverting(B, A), HEALTHY, rollback=True),
    ),
    (
        "revert exited 0 but still queued: Idle + Degraded, backoff",
        Desired(B),
        B_QUEUED_A,
        Work(last=failed("rollback", B, 1, 1, None)),
        (),
        Decision(
            IDLE,
            deg("bootc rollback exited 0 but bootc status still shows a rollback queued"),
            requeue_after=9.0,
        ),
    ),
    (
        "reverted: Idle, the rollback record forgotten",
        Desired(B),
        B_ROLLBACK_A,
        Work(last=failed("rollback", B, 1, 1, None)),
        (),
        Decision(IDLE, HEALTHY, forget_attempt=True),
    ),
    (
        "a queued rollback, desired a third image: switch as usual (staging cancels it)",
        Desired(C),
        B_QUEUED_A,
        Work(),
        (),
        Decision(staging(C), HEALTHY, start_switch=C),
    ),
    (
        "a queued rollback and no desired image: left alone",
        None,
        B_QUEUED_A,
        Work(),
        (),
        Decision(IDLE, HEALTHY),
    ),
    # --- soft reboots (issue 17)
    (
        "AllowSoftReboot, capable, drained: Rebooting (soft), one soft reboot command",
        allowing(B),
        A_STAGED_B_SOFT,
        Work(),
        (),
        Decision(rebooting(B, soft=True), HEALTHY, soft_reboot=True, reboot_kind=SOFT),
    ),
    (
        "AllowSoftReboot, download-only and capable: the same command unlocks it, no apply",
        allowing(B),
        A_STAGED_B_DOWNLOAD_ONLY_SOFT,
        Work(),
        (),
        Decision(rebooting(B, soft=True), HEALTHY, soft_reboot=True, reboot_kind=SOFT),
    ),
    (
        "AllowSoftReboot, another kernel: full reboot, saying why",
        allowing(B),
        A_STAGED_B,
        Work(),
        (),
        Decision(rebooting(B, full_why=NOT_CAPABLE), HEALTHY, reboot=True, reboot_kind=FULL),
    ),
    (
        "AllowSoftReboot, another kernel, download-only: applied first, as always",
        allowing(B),
        A_STAGED_B_DOWNLOAD_ONLY,
        Work(),
        (),
        Decision(
            Cond(False, c.REASON_STAGED, f"applying the download-only {B} before rebooting"),
            HEALTHY,
            apply_staged=True,
        ),
    ),
    (
        "RebootOnly, capable: a full reboot, the message as ever",
        Desired(B, BOOTED, DRAINED),
        A_STAGED_B_SOFT,
        Work(),
        (),
        Decision(rebooting(B), HEALTHY, reboot=True, reboot_kind=FULL),
    ),
    (
        "AllowSoftReboot, capable, Staged asked: Staged, nothing else",
        allowing(B, STAGED, frozenset()),
        A_STAGED_B_SOFT,
        Work(),
        (),
        Decision(staged(B), HEALTHY),
    ),
    (
        "AllowSoftReboot, capable, not drained: no reboot of any kind",
        allowing(B, BOOTED, frozenset({SLOT})),
        A_STAGED_B_SOFT,
        Work(),
        (),
        Decision(awaiting_drain(staged(B)), HEALTHY),
    ),
    (
        "soft reboot requested: Rebooting (soft), no second command",
        allowing(B),
        A_STAGED_B_SOFT,
        Work(reboot_requested=B, reboot_soft=True),
        (),
        Decision(rebooting(B, soft=True), HEALTHY),
    ),
    (
        "full reboot requested although allowed: Rebooting (full, why), nothing more",
        allowing(B),
        A_STAGED_B,
        Work(reboot_requested=B),
        (),
        Decision(rebooting(B, full_why=NOT_CAPABLE), HEALTHY),
    ),
    (
        "soft reboot failed, backoff running: Staged + Degraded, wait",
        allowing(B),
        A_STAGED_B_SOFT,
        Work(last=failed("soft-reboot", B, 1, 4, SOFT_ERROR), soft_reboot_failed=B),
        (),
        Decision(staged(B), deg(SOFT_ERROR), requeue_after=6.0),
    ),
    (
        "soft reboot failed, backoff over: a full reboot, saying why, still Degraded",
        allowing(B),
        A_STAGED_B_SOFT,
        Work(last=failed("soft-reboot", B, 1, 10, SOFT_ERROR), soft_reboot_failed=B),
        (),
        Decision(
            rebooting(B, full_why=SOFT_FAILED),
            deg(SOFT_ERROR),
            reboot=True,
            reboot_kind=FULL,
        ),
    ),
    (
        "soft reboot failed with the deployment still download-only: apply, then full",
        allowing(B),
        A_STAGED_B_DOWNLOAD_ONLY_SOFT,
        Work(last=failed("soft-reboot", B, 1, 10, SOFT_ERROR), soft_reboot_failed=B),
        (),
        Decision(
            Cond(False, c.REASON_STAGED, f"applying the download-only {B} before rebooting"),
            deg(SOFT_ERROR),
            apply_staged=True,
        ),
    ),
    (
        "a soft reboot failure of another image does not stop this one's",
        allowing(B),
        A_STAGED_B_SOFT,
        Work(soft_reboot_failed=C),
        (),
        Decision(rebooting(B, soft=True), HEALTHY, soft_reboot=True, reboot_kind=SOFT),
    ),
    (
        "queued rollback, AllowSoftReboot and capable: full reboot (rollback)",
        allowing(A),
        B_QUEUED_A_SOFT,
        Work(),
        (),
        Decision(
            rebooting(A, rollback=True, full_why=ROLLBACK_FULL),
            HEALTHY,
            reboot=True,
            reboot_kind=FULL,
        ),
    ),
]


@pytest.mark.parametrize(
    ("desired", "view", "work", "problems", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_decision_table(
    desired: Desired | None,
    view: HostView,
    work: Work,
    problems: tuple[str, ...],
    expected: Decision,
) -> None:
    assert decide(desired, view, work, now=NOW, retry=RETRY, pull_problems=problems) == expected


def test_conditions_of_each_state() -> None:
    assert (IDLE.status, IDLE.reason) == (True, c.REASON_IDLE)
    assert (staging(B).status, staging(B).reason) == (False, c.REASON_STAGING)
    assert (staged(B).status, staged(B).reason) == (False, c.REASON_STAGED)
    assert (rebooting(B).status, rebooting(B).reason) == (False, c.REASON_REBOOTING)
    assert rebooting(B).message == f"rebooting into {B}"
    assert rebooting(B, soft=True).message == (
        f"rebooting into {B} (soft reboot: userspace restarts, the kernel keeps running)"
    )
    assert rebooting(B, full_why=NOT_CAPABLE).message == (
        f"rebooting into {B} (full reboot: the staged deployment is not softRebootCapable "
        "(another kernel or initramfs))"
    )
    refused = reboot_not_allowed(B, (SLOT, REQUESTED))
    assert (refused.status, refused.reason) == (True, "RebootNotAllowed")
    assert refused.message == (
        f"not rebooting into {B}: desiredImageState is Booted but the BootcNode lacks the "
        "annotations bootc.dev/in-reboot-slot and bootc.dev/reboot-requested, so the node "
        "was not given a reboot slot and drained, and an undrained node is never rebooted"
    )
    assert (HEALTHY.status, HEALTHY.reason) == (False, c.REASON_HEALTHY)
    assert deg("x", "y") == Cond(True, c.REASON_ERROR, "x; y")
    assert degraded(None, "") == HEALTHY


def test_never_a_switch_or_reboot_on_an_unmanageable_host() -> None:
    for view in (INCOMPATIBLE, STAGED_INCOMPATIBLE, NOT_BOOTC, NO_IMAGE):
        for desired in (Desired(B), Desired(B, BOOTED), Desired(A, BOOTED)):
            for work in (Work(), Work(last=failed("switch", B, 1, 999, SWITCH_ERROR))):
                d = decide(desired, view, work, now=NOW, retry=RETRY)
                assert d.start_switch is None and not d.reboot and not d.rollback
                assert d.degraded.status


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0.0), (1, 10.0), (2, 20.0), (3, 40.0), (5, 160.0), (6, 300.0), (1000, 300.0)],
)
def test_retry_delay_is_capped_exponential(failures: int, delay: float) -> None:
    assert RETRY.delay(failures) == delay


def test_no_reboot_or_apply_without_both_annotations() -> None:
    """Whatever the host and the work under way: no reboot, no apply of a download-only
    deployment, unless the BootcNode carries both reboot-permit annotations."""
    views = (ON_A, A_STAGED_B, A_STAGED_B_DOWNLOAD_ONLY, A_STAGED_A)
    works = (
        Work(),
        Work(last=failed("reboot", B, 3, 999, "nope")),
        Work(last=failed("apply", B, 3, 999, None)),
        Work(last=failed("switch", B, 1, 1, None)),
        Work(switching=C),
    )
    for permits in (frozenset(), frozenset({SLOT}), frozenset({REQUESTED})):
        for view in views:
            for work in works:
                d = decide(Desired(B, BOOTED, permits), view, work, now=NOW, retry=RETRY)
                assert not d.reboot and not d.apply_staged, (permits, view, work)
    assert decide(Desired(B, BOOTED, DRAINED), A_STAGED_B, Work(), now=NOW, retry=RETRY).reboot


def test_no_soft_reboot_unless_allowed_capable_drained_and_not_a_rollback() -> None:
    """Whatever the host and the work under way: a soft reboot only for a pool that
    allows it, a drained node and a capable staged deployment; never for a rollback."""
    views = (
        A_STAGED_B,
        A_STAGED_B_SOFT,
        A_STAGED_B_DOWNLOAD_ONLY,
        A_STAGED_B_DOWNLOAD_ONLY_SOFT,
        B_QUEUED_A_SOFT,
        ON_A,
    )
    works = (
        Work(),
        Work(last=failed("soft-reboot", B, 3, 999, SOFT_ERROR), soft_reboot_failed=B),
        Work(last=failed("reboot", B, 3, 999, "nope")),
        Work(last=failed("apply", B, 1, 1, None)),
    )
    softly = 0
    for image in (A, B):
        for permits in (frozenset(), frozenset({SLOT}), DRAINED):
            for soft in (False, True):
                for view in views:
                    for work in works:
                        desired = Desired(image, BOOTED, permits, allow_soft_reboot=soft)
                        d = decide(desired, view, work, now=NOW, retry=RETRY)
                        if not d.soft_reboot:
                            assert d.reboot_kind != SOFT
                            continue
                        assert (soft, permits, d.reboot_kind) == (True, DRAINED, SOFT)
                        assert view.status is not None and view.status.staged is not None
                        assert view.status.staged.soft_reboot_capable
                        assert not view.status.rollback_queued
                        assert work.soft_reboot_failed != image
                        assert not d.reboot and not d.apply_staged
                        softly += 1
    assert softly == 6  # B: 2 capable views x 3 works without a failed soft reboot


def test_rolling_back_never_pulls_and_never_reboots_without_both_annotations() -> None:
    """Desired = the rollback deployment: whatever the work under way, never a switch
    (a pull) of it, and never a reboot without the reboot permit."""
    works = (
        Work(),
        Work(last=failed("rollback", A, 3, 999, ROLLBACK_ERROR)),
        Work(last=failed("rollback", A, 1, 1, None)),
        Work(last=failed("reboot", A, 3, 999, "nope")),
        Work(switching=C),
    )
    for view in (B_ROLLBACK_A, B_QUEUED_A, host(entry(B), entry(C), entry(A))):
        for work in works:
            for permits in (frozenset(), frozenset({SLOT}), frozenset({REQUESTED}), DRAINED):
                for state in (STAGED, BOOTED):
                    d = decide(Desired(A, state, permits), view, work, now=NOW, retry=RETRY)
                    assert d.start_switch is None, (view, work)
                    assert not d.reboot or (permits == DRAINED and state == BOOTED)
    # and it does get there: queued, then rebooted into
    first = decide(Desired(A, BOOTED, DRAINED), B_ROLLBACK_A, Work(), now=NOW, retry=RETRY)
    assert first.rollback and not first.reboot
    then = decide(Desired(A, BOOTED, DRAINED), B_QUEUED_A, Work(), now=NOW, retry=RETRY)
    assert then.reboot and not then.rollback


@pytest.mark.parametrize(
    ("spec", "annotations", "expected"),
    [
        ({"desiredImage": A, "desiredImageState": "Booted"}, {SLOT: "t", REQUESTED: "t"}, DRAINED),
        ({"desiredImage": A, "desiredImageState": "Booted"}, {SLOT: "t"}, frozenset({SLOT})),
        ({"desiredImage": A, "desiredImageState": "Booted"}, {"other": "x"}, frozenset()),
        ({"desiredImage": A, "desiredImageState": "Booted"}, None, frozenset()),
    ],
)
def test_desired_reads_the_reboot_permit_annotations(
    spec: dict[str, Any], annotations: dict[str, str] | None, expected: frozenset[str]
) -> None:
    desired = desired_from_spec(spec, annotations)
    assert desired is not None and desired.permits == expected
    assert desired.missing_permits == tuple(a for a in REBOOT_PERMIT if a not in expected)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"desiredImage": A, "desiredImageState": "Staged"}, Desired(A, STAGED)),
        ({"desiredImage": A, "desiredImageState": "Booted"}, Desired(A, BOOTED)),
        ({"desiredImage": A, "desiredImageState": "Sideways"}, Desired(A, STAGED)),
        ({"desiredImage": A}, Desired(A, STAGED)),
        (
            {"desiredImage": A, "rebootPolicy": "AllowSoftReboot"},
            Desired(A, STAGED, allow_soft_reboot=True),
        ),
        ({"desiredImage": A, "rebootPolicy": "RebootOnly"}, Desired(A, STAGED)),
        ({"desiredImage": A, "rebootPolicy": "Sometimes"}, Desired(A, STAGED)),
        ({"desiredImage": ""}, None),
        ({}, None),
        (None, None),
    ],
)
def test_desired_from_spec(spec: dict[str, Any] | None, expected: Desired | None) -> None:
    assert desired_from_spec(spec) == expected


def test_out_of_band_stage_is_a_staged_change_without_a_command_of_ours() -> None:
    on_a, a_b, a_c = (v.status for v in (ON_A, A_STAGED_B, host(entry(A), entry(C))))
    assert on_a is not None and a_b is not None and a_c is not None
    assert out_of_band_stage(on_a, a_b, ours=False) == B
    assert out_of_band_stage(a_b, a_c, ours=False) == C, "one staged image replaced another"
    assert out_of_band_stage(on_a, a_b, ours=True) is None, "our own switch"
    assert out_of_band_stage(None, a_b, ours=False) is None, "no earlier read: who knows"
    assert out_of_band_stage(a_b, a_b, ours=False) is None, "unchanged"
    assert out_of_band_stage(a_b, on_a, ours=False) is None, "nothing staged any more"


def test_out_of_band_messages_name_the_image() -> None:
    assert restaging(A, B, out_of_band=True).message == (
        f"{B} was staged out of band (not by the bootc-operator daemon): staging the booted "
        f"image {A} again to replace it"
    )
    assert staging(C, replacing=B).message == (
        f"{B} was staged out of band (not by the bootc-operator daemon): staging {C} to replace it"
    )


HOSTILE_IMAGES = [
    f"--apply@{digest('b')}",
    f"--transport=dir@{digest('b')}",
    f"-{REPO}@{digest('b')}",
    f"{REPO}\x1b[2J@{digest('b')}",
    f"{REPO}@{digest('b')}\n",
    f"{REPO}:latest",
]


@pytest.mark.parametrize("image", HOSTILE_IMAGES, ids=repr)
def test_an_image_that_fails_the_crd_pattern_is_never_switched_to(image: str) -> None:
    """A BootcNode written past the CRD (an older CRD, by hand): Degraded, no bootc."""
    for view in (ON_A, A_STAGED_B, B_QUEUED_A):
        for work in (Work(), Work(switching=B), Work(last=failed("switch", image, 1, 999, "x"))):
            for desired in (Desired(image), Desired(image, BOOTED, DRAINED)):
                d = decide(desired, view, work, now=NOW, retry=RETRY, pull_problems=[SECRET])
                assert d.start_switch is None and not d.reboot and not d.rollback
                assert not d.apply_staged and not d.soft_reboot
                assert d.cancel_switch == (work.switching is not None)
                assert d.degraded.status and d.degraded.reason == c.REASON_INVALID_IMAGE
                assert d.degraded.message.startswith("spec.desiredImage ")
                assert d.degraded.message.endswith("; not switching to it")


def test_a_pull_waits_for_the_sealed_pull_secret_and_nothing_else_does() -> None:
    """``pull_wait``: the pull secret is not sealed to this daemon's key yet. A switch
    that would pull waits (Staging, saying why, not Degraded); what pulls nothing, and
    a switch already running, go on."""
    wait = "pull secret ns/s is not sealed to this daemon's key k yet"

    def run(desired: Desired, view: HostView, work: Work = Work()) -> Decision:  # noqa: B008
        return decide(desired, view, work, now=NOW, retry=RETRY, pull_wait=wait)

    for view in (ON_A, host(entry(A), entry(C))):  # rule 7, and 4b's re-stage
        want = B if view is ON_A else A
        d = run(Desired(want), view)
        assert d.start_switch is None
        assert d.idle == Cond(False, c.REASON_STAGING, f"waiting to stage {want}: {wait}")
        assert d.degraded == HEALTHY
    # a failed pull keeps its Degraded while waiting for new credentials
    d = run(Desired(B), ON_A, Work(last=failed("switch", B, 1, 1, SWITCH_ERROR)))
    assert d.start_switch is None and d.degraded == deg(SWITCH_ERROR)
    # nothing to pull: unchanged
    assert run(Desired(A), ON_A) == decide(Desired(A), ON_A, Work(), now=NOW, retry=RETRY)
    staged = run(Desired(B, BOOTED, DRAINED), A_STAGED_B)
    assert staged.reboot and staged.degraded == HEALTHY
    assert run(Desired(A), B_ROLLBACK_A).rollback
    # a switch under way goes on
    d = run(Desired(B), ON_A, Work(switching=B))
    assert not d.cancel_switch and d.idle is not None and d.idle.reason == c.REASON_STAGING


POLICY_ERROR = (
    f"bootc switch {B} failed (exit code 1): error: Switching: Pulling: Preparing import: "
    "Fetching manifest: failed to invoke method OpenImage: A signature was required, but no "
    "signature exists"
)


def test_a_containers_policy_refusal_is_named_and_backs_off() -> None:
    """The host's containers policy refusing the image is ContainerPolicyRejected, with
    bootc's text, on the same capped backoff as any failed switch (no hot loop); other
    switch failures stay Error."""
    why = Cond(
        True,
        c.REASON_CONTAINER_POLICY_REJECTED,
        f"the host's containers policy refused {B}: {POLICY_ERROR}",
    )

    def run(work: Work) -> Decision:
        return decide(Desired(B), ON_A, work, now=NOW, retry=RETRY)

    waiting = run(Work(last=failed("switch", B, 3, 5, POLICY_ERROR)))
    assert waiting == Decision(IDLE, why, requeue_after=35.0)
    retrying = run(Work(last=failed("switch", B, 3, 40, POLICY_ERROR)))
    assert retrying == Decision(staging(B), why, start_switch=B)
    assert run(Work(switching=B, last=failed("switch", B, 3, 40, POLICY_ERROR))).degraded == why
    assert run(Work(last=failed("switch", B, 1, 3, SWITCH_ERROR))).degraded == deg(SWITCH_ERROR)
    insecure = (
        f"bootc switch {B} failed (exit code 1): error: Switching: Pulling: Preparing import: "
        "Fetching manifest: containers-policy.json specifies a default of "
        "`insecureAcceptAnything`; refusing usage"
    )
    got = run(Work(last=failed("switch", B, 1, 3, insecure))).degraded
    assert got.reason == c.REASON_CONTAINER_POLICY_REJECTED


REAL = Path(__file__).parents[1] / "fixtures" / "bootc-real"


def real_view(name: str) -> HostView:
    """A ``bootc status`` captured from the real bootc (``hack.realbootc.capture``)."""
    return HostView(parse_status((REAL / f"{name}.json").read_text()))


def test_a_switch_after_a_queued_rollback_boots_next() -> None:
    """The real bootc 1.16: ``bootc rollback``, then ``bootc switch IMAGE3``: status keeps
    ``rollbackQueued: true`` with IMAGE3 staged, and the reboot boots IMAGE3. So the
    staged image is what the node reboots into, and a target back on the rollback image
    is not "queued" (it would not boot): the daemon runs ``bootc rollback``, which there
    reverts the queue and drops the staged image (captured: "Reverting queued rollback
    state"), then again once status shows the rollback deployment unqueued. It never
    reboots on the way."""
    view = real_view("rollback-queued-then-staged")
    assert view.status is not None and view.status.rollback_queued
    images = view.status.images()
    assert images.staged is not None and images.rollback is not None
    staged, rollback = images.staged.image, images.rollback.image
    assert view.status.reported_images().staged == images.staged

    onto_staged = decide(Desired(staged, BOOTED, DRAINED), view, Work(), now=NOW, retry=RETRY)
    assert onto_staged.reboot and not onto_staged.rollback
    assert onto_staged.idle is not None and onto_staged.idle.reason == c.REASON_REBOOTING
    assert "rollback" not in onto_staged.idle.message

    back = decide(Desired(rollback, BOOTED, DRAINED), view, Work(), now=NOW, retry=RETRY)
    assert back.rollback and not back.reboot and back.start_switch is None
    # what that rollback leaves: the rollback deployment, not queued, nothing staged
    after = real_view("rollback-present")
    assert after.status is not None
    undone = after.status.images().rollback
    assert undone is not None
    desired = Desired(undone.image, BOOTED, DRAINED)
    done = Work(last=failed("rollback", undone.image, 1, 0, None))
    waiting = decide(desired, after, done, now=NOW, retry=RETRY)
    assert not waiting.reboot and not waiting.rollback and waiting.requeue_after
    again = decide(desired, after, done, now=NOW + waiting.requeue_after, retry=RETRY)
    assert again.rollback and not again.reboot
