"""The node agent's state machine, as one pure function (DESIGN §3/§4).

``decide(desired, host, work, now=..., retry=...)`` looks at what the BootcNode asks for
(``Desired``), what ``bootc status`` last said (``HostView``) and what the daemon itself
has under way or just tried (``Work``), and returns a ``Decision``: the ``Idle`` and
``Degraded`` conditions to report and the one next step to take (cancel the running
switch, start a switch, reboot, or wait ``requeue_after`` seconds). It never performs
I/O, never reads a clock and never raises for odd input: ``agent`` is the thin async
shell that gathers the inputs, writes the status and runs the commands.

Rules, in order (the first that applies wins):

1. A switch of the desired image is running → ``Idle=False/Staging``. The host
   status is not re-read meanwhile: bootc holds the sysroot lock while it stages.
2. ``bootc status`` failed (timeout, garbage, non-zero exit) → ``Degraded=True`` with
   the reason, ``Idle`` left as it was, nothing else done; re-read after a capped
   exponential backoff.
3. bootc cannot manage the host (``booted: null``, ``incompatible: true``, booted
   deployment without an image) → ``Idle=True``, ``Degraded=True`` saying exactly
   why; never a switch.
4. No desired image, or the booted deployment runs it → ``Idle=True/Idle``.
5. The desired image is staged:
   ``desiredImageState: Staged`` → ``Idle=False/Staged``;
   ``Booted`` → ``Idle=False/Rebooting`` and reboot (the shell writes that status
   *before* it runs ``systemctl reboot``), once per process and image; a failed
   reboot command is retried after the backoff (``Staged`` + ``Degraded`` meanwhile).
6. Otherwise stage it (``Idle=False/Staging``, start a switch), unless the last switch
   of this very image failed less than the backoff ago: then ``Idle=True/Idle`` +
   ``Degraded=True/Error`` with bootc's error text until the retry is due. A switch
   that exited 0 but left status without the image staged counts as failed ("exit
   code 0 also for nothing to do: read status, not the exit code"). While retrying,
   ``Degraded`` keeps the last error (no flapping) until the image is staged.

In every rule a running switch of any *other* image is cancelled (one switch at a
time; a newer desiredImage wins). Extra ``problems`` (an unusable pull secret) are
appended to ``Degraded``'s message and make it True without changing the action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bootc_operator.api import constants as c
from bootc_operator.api.v1alpha1 import DesiredImageState
from bootc_operator.daemon.bootc_status import HostStatus, image_matches

Action = Literal["switch", "reboot"]


@dataclass(frozen=True)
class Cond:
    """A condition to report: ``status`` True/False, ``reason``, ``message``."""

    status: bool
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Desired:
    """What BootcNode.spec asks for."""

    image: str
    state: DesiredImageState = DesiredImageState.STAGED


def desired_from_spec(spec: Mapping[str, Any] | None) -> Desired | None:
    """``Desired`` from a BootcNode's ``spec`` (wire dict); None without a desired image.

    An unknown ``desiredImageState`` reads as ``Staged``: never reboot on a guess.
    """
    spec = spec or {}
    image = spec.get("desiredImage")
    if not isinstance(image, str) or not image:
        return None
    try:
        state = DesiredImageState(str(spec.get("desiredImageState")))
    except ValueError:
        state = DesiredImageState.STAGED
    return Desired(image, state)


@dataclass(frozen=True)
class HostView:
    """The last ``bootc status`` read: a parsed document, or why the latest read failed."""

    status: HostStatus | None = None
    error: str | None = None
    #: consecutive failed reads (for the re-read backoff)
    failures: int = 0


@dataclass(frozen=True)
class Attempt:
    """The last finished switch or reboot command for ``image``.

    ``error`` is the command's failure text; None when it exited 0 (whether it had
    the intended effect is judged from status, not from the exit code).
    """

    action: Action
    image: str
    attempts: int
    finished_at: float
    error: str | None = None


@dataclass(frozen=True)
class Work:
    """What the daemon has under way or has just done."""

    #: the image of the switch that is running, if any
    switching: str | None = None
    last: Attempt | None = None
    #: the image a reboot was successfully requested for (by this process)
    reboot_requested: str | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff: ``initial * 2**(failures-1)``, at most ``cap``."""

    initial: float = 10.0
    cap: float = 300.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.cap, self.initial * 2.0 ** min(failures - 1, 62)))


@dataclass(frozen=True)
class Decision:
    #: None: leave the Idle condition as it is (the host state is unknown)
    idle: Cond | None
    degraded: Cond
    cancel_switch: bool = False
    start_switch: str | None = None
    reboot: bool = False
    #: the ``Work.last`` record is obsolete (succeeded, or about another image)
    forget_attempt: bool = False
    requeue_after: float | None = None


IDLE = Cond(True, c.REASON_IDLE)
HEALTHY = Cond(False, c.REASON_HEALTHY)


def staging(image: str) -> Cond:
    return Cond(False, c.REASON_STAGING, f"staging {image}")


def staged(image: str) -> Cond:
    return Cond(False, c.REASON_STAGED, f"{image} is staged")


def rebooting(image: str) -> Cond:
    return Cond(False, c.REASON_REBOOTING, f"rebooting into {image}")


def degraded(*problems: str | None) -> Cond:
    """``Degraded=True/Error`` with the problems joined, or ``False/Healthy`` if none."""
    found = [p for p in problems if p]
    return Cond(True, c.REASON_ERROR, "; ".join(found)) if found else HEALTHY


def attempt_problem(attempt: Attempt, staged_image: str | None) -> str:
    """The Degraded text for a switch or reboot that did not get the host where it should."""
    if attempt.error is not None:
        return attempt.error
    if attempt.action == "reboot":
        return f"systemctl reboot into {attempt.image} had no effect"
    now_staged = staged_image or "nothing"
    return (
        f"bootc switch {attempt.image} exited 0 but bootc status does not show it staged "
        f"(staged: {now_staged})"
    )


def decide(
    desired: Desired | None,
    host: HostView,
    work: Work,
    *,
    now: float,
    retry: RetryPolicy,
    problems: Sequence[str] = (),
) -> Decision:
    """The next step for this node; see the module docstring for the rules."""
    extra = tuple(p for p in problems if p)
    last = work.last
    if desired is not None and last is not None and last.image != desired.image:
        last = None  # an attempt at another image says nothing about this one
    forget = work.last is not None and last is None
    other_switch = work.switching is not None and (
        desired is None or work.switching != desired.image
    )

    # 1. staging the desired image
    if desired is not None and work.switching == desired.image:
        problem = attempt_problem(last, None) if last and last.action == "switch" else None
        return Decision(staging(desired.image), degraded(problem, *extra), forget_attempt=forget)

    # 2. no usable host status
    if host.error is not None or host.status is None:
        error = host.error or "bootc status has not been read yet"
        return Decision(
            None,
            degraded(error, *extra),
            cancel_switch=other_switch,
            requeue_after=retry.delay(max(1, host.failures)),
        )

    # 3. a host bootc cannot manage
    reason = host.status.unmanageable_reason()
    if reason is not None:
        return Decision(
            IDLE,
            degraded(reason, *extra),
            cancel_switch=work.switching is not None,
            forget_attempt=work.last is not None,
        )

    images = host.status.images()
    # 4. nothing to do
    if desired is None or image_matches(images.booted, desired.image):
        return Decision(
            IDLE,
            degraded(*extra),
            cancel_switch=work.switching is not None,
            forget_attempt=work.last is not None,
        )

    staged_image = images.staged.image if images.staged else None
    # 5. the desired image is staged
    if image_matches(images.staged, desired.image):
        if desired.state != DesiredImageState.BOOTED:
            return Decision(
                staged(desired.image),
                degraded(*extra),
                cancel_switch=other_switch,
                forget_attempt=work.last is not None,
            )
        if work.reboot_requested == desired.image:
            return Decision(rebooting(desired.image), degraded(*extra), cancel_switch=other_switch)
        failed = last if last is not None and last.action == "reboot" else None
        forget = forget or (last is not None and last.action == "switch")
        if failed is not None:
            problem = attempt_problem(failed, staged_image)
            retry_at = failed.finished_at + retry.delay(failed.attempts)
            if now < retry_at:
                return Decision(
                    staged(desired.image),
                    degraded(problem, *extra),
                    cancel_switch=other_switch,
                    requeue_after=retry_at - now,
                )
            return Decision(
                rebooting(desired.image),
                degraded(problem, *extra),
                cancel_switch=other_switch,
                reboot=True,
            )
        return Decision(
            rebooting(desired.image),
            degraded(*extra),
            cancel_switch=other_switch,
            reboot=True,
            forget_attempt=forget,
        )

    # 6. stage the desired image
    failed = last if last is not None and last.action == "switch" else None
    forget = forget or (last is not None and last.action == "reboot")
    if failed is not None:
        problem = attempt_problem(failed, staged_image)
        retry_at = failed.finished_at + retry.delay(failed.attempts)
        if now < retry_at:
            return Decision(
                IDLE,
                degraded(problem, *extra),
                cancel_switch=other_switch,
                requeue_after=retry_at - now,
            )
        return Decision(
            staging(desired.image),
            degraded(problem, *extra),
            cancel_switch=other_switch,
            start_switch=desired.image,
        )
    return Decision(
        staging(desired.image),
        degraded(*extra),
        cancel_switch=other_switch,
        start_switch=desired.image,
        forget_attempt=forget,
    )
