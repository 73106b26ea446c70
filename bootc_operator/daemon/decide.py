"""The node agent's state machine, as one pure function (DESIGN §3/§4).

``decide(desired, host, work, now=..., retry=...)`` looks at what the BootcNode asks for
(``Desired``: spec plus the rollout's reboot-permit annotations), what ``bootc status``
last said (``HostView``) and what the daemon itself has under way or just tried
(``Work``), and returns a ``Decision``: the ``Idle`` and ``Degraded`` conditions to
report and the one next step to take (cancel the running switch, start a switch, apply
a download-only deployment, run ``bootc rollback``, reboot fully or softly, or wait
``requeue_after`` seconds). It never performs I/O, never reads a clock and never raises
for odd input: ``agent`` is the thin async shell that gathers the inputs, writes the
status and runs the commands.

Rules, in order (the first that applies wins):

0. ``spec.desiredImage`` fails the BootcNode CRD's pattern
   (``imageref.desired_image_problem``: e.g. it begins with "-", or holds a control
   character) → ``Idle=True``, ``Degraded=True/InvalidImage`` saying why, a running
   switch cancelled; never a switch (defence in depth behind the CRD, and the shell
   ends bootc's options with ``--`` anyway).
1. A switch of the desired image is running → ``Idle=False/Staging``. The host
   status is not re-read meanwhile: bootc holds the sysroot lock while it stages.
2. ``bootc status`` failed (timeout, garbage, non-zero exit) → ``Degraded=True`` with
   the reason, ``Idle`` left as it was, nothing else done; re-read after a capped
   exponential backoff.
3. bootc cannot manage the host (``booted: null``, ``incompatible: true``, booted
   deployment without an image) → ``Idle=True``, ``Degraded=True`` saying exactly
   why; never a switch.
4. No desired image, or the booted deployment runs it → ``Idle=True/Idle``; unless
   the next reboot, whoever causes it, would leave that image:
   a. a rollback is queued (``rollbackQueued``; e.g. a rollback was queued by rule 6
      and then the target moved back to the booted image): reverted with a second
      ``bootc rollback`` (``Idle=False/Staging``, "reverting the queued rollback to
      X"; failures and backoff as in rule 7, and one that exits 0 with the rollback
      still queued counts as failed);
   b. another image is still staged (the target went back to the booted image): it
      is replaced by switching to the desired (= booted) image again
      (``Idle=False/Staging``, failures and backoff as in rule 7). bootc has no
      "unstage": ``bootc switch <booted image>`` stages the booted image again in
      place of the other one, which is harmless at any moment; ``bootc rollback``
      also drops a staged deployment but queues the rollback deployment for the next
      boot and needs one to exist, and undoing that takes a second rollback, with the
      old rollback image queued in between. A *download-only* staged deployment is
      left alone: bootc never boots one (a reboot discards it).
5. The desired image boots next: it is staged, or it is the rollback deployment and
   a rollback is queued (rule 6 ran ``bootc rollback``):
   ``desiredImageState: Staged`` → ``Idle=False/Staged`` (for a queued rollback: "a
   rollback to X is queued");
   ``Booted`` → only on a node the rollout gave a reboot slot and drained, i.e. whose
   BootcNode carries both ``bootc.dev/in-reboot-slot`` and
   ``bootc.dev/reboot-requested``. Without them: no reboot, ``Idle=False/Staged``,
   ``Degraded=True/RebootNotAllowed`` naming the missing annotations (defence in
   depth: neither the controller nor the daemon alone can reboot an undrained node);
   with the slot but without ``reboot-requested`` (the Go operator's drained slot
   holder, which the controller adopts) no reboot either, but not Degraded: the
   ``Staged`` message says it waits for the controller to confirm the drain.
   With them: a *download-only* staged deployment (``downloadOnly: true``, from
   ``bootc upgrade --download-only``; bootc would not boot it) is first applied with
   ``bootc upgrade --from-downloaded`` (no ``--apply``: the daemon reboots itself, after
   writing Rebooting) and status re-read; then ``Idle=False/Rebooting`` and reboot
   (the shell writes that status *before* it runs ``systemctl reboot``), once per
   process and image. A failed apply or reboot command is retried after the backoff
   (``Staged`` + ``Degraded`` meanwhile); an apply that exits 0 but leaves the
   deployment download-only counts as failed. The decision carries the reboot's kind
   (``reboot_kind``), which the shell writes as ``status.lastRebootKind`` with the
   Rebooting status.

   **Soft reboots** (rule 5 with the permit): when the BootcNode's
   ``spec.rebootPolicy`` is ``AllowSoftReboot`` and bootc reports the staged
   deployment ``softRebootCapable`` (same kernel and initramfs as the booted one,
   compatible SELinux policy, a systemd that can soft-reboot), the update is applied
   with a soft reboot instead: ``Idle=False/Rebooting`` ("... (soft reboot: userspace
   restarts, the kernel keeps running)"), ``lastRebootKind: Soft``, then one command,
   ``bootc upgrade --from-downloaded --apply --soft-reboot=required``. Why that one:
   it is the only bootc command that applies the deployment *already staged* without
   pulling (``bootc upgrade --apply`` re-resolves the spec image and may stage a newer
   digest; ``bootc switch --apply IMAGE`` of the staged image stops at "Image
   specification is unchanged." and applies nothing); for a download-only deployment it
   unlocks it first, for a normal one it says "already set to apply on reboot"; then
   bootc prepares the soft reboot (ostree's ``/run/nextroot``) and reboots, which
   systemd turns into ``systemctl soft-reboot``. ``required``, not ``auto``: the
   daemon has already decided (and written ``Soft``) from ``softRebootCapable``;
   ``auto`` would silently fall back to a full reboot if bootc's view differed, and
   the status would lie, while ``required`` makes bootc refuse instead. A soft reboot
   command that fails (exit non-zero) is not tried again for that image by this
   process: after the backoff the node gets a full reboot as usual (drained and
   holding its slot, it should not wait for a soft reboot that may never work).
   ``RebootOnly`` (or no policy: a BootcNode written by the Go operator) never
   soft-reboots, nor does a queued rollback (rule 6): bootc can soft-reboot into the
   rollback deployment only as part of ``bootc rollback --soft-reboot``, and running
   that again would revert the queued rollback; a rollback is recovery, a full reboot
   is the conservative way back. A soft reboot still needs the drained slot: it
   restarts every pod. With the policy, a full reboot's Idle message says why it is
   not soft; without it the message is unchanged ("rebooting into X").
6. The desired image is the *rollback* deployment (``image_matches``), neither booted
   nor staged: this is how the controller rolls a node back after a failed health
   check (``desiredImage`` = the rollback deployment as a digest ref; the Go
   operator's daemon would ``bootc switch`` to it, which ends in the same place).
   Queue it with ``bootc rollback`` (no ``--apply``, no pull: the deployment is on
   disk; a staged deployment is discarded) → ``Idle=False/Staging`` ("rolling back to
   X"); status is re-read and rule 5 takes over (Staged, or Rebooting with the
   permit). Failures and backoff as a switch's (rule 7); a rollback that exited 0
   without ``rollbackQueued: true`` counts as failed.
7. Otherwise stage it (``Idle=False/Staging``, start a switch), unless the last switch
   of this very image failed less than the backoff ago: then ``Idle=True/Idle`` +
   ``Degraded=True/Error`` with bootc's error text until the retry is due. A switch
   that exited 0 but left status without the image staged counts as failed ("exit
   code 0 also for nothing to do: read status, not the exit code"). While retrying,
   ``Degraded`` keeps the last error (no flapping) until the image is staged. A switch
   the host's containers policy refused (``policy_refusal``: containers/image's "...
   is rejected by policy", "A signature was required, but no signature exists", ...;
   with ``--enforce-container-sigpolicy`` also a policy that accepts anything) is
   ``Degraded=True/ContainerPolicyRejected`` ("the host's containers policy refused X:
   <bootc's error>"), retried on the same backoff (a fixed policy or a newly signed
   image is picked up without a restart). A
   queued rollback needs nothing special here: staging a deployment cancels it
   (bootc's own behaviour).

**Out-of-band changes.** ``out_of_band_stage(before, after, ours=...)`` compares two
``bootc status`` reads of one daemon process: a staged deployment that appeared or
changed between them while the daemon ran no host command of its own was staged by
someone else (``bootc switch`` or ``bootc upgrade`` run on the host by hand or by
another tool). The shell logs it and passes it on as ``Work.out_of_band``; rules 4b and
7, which replace that deployment, name it in their ``Idle`` message ("X was staged out
of band ..."). A daemon that has just started cannot tell who staged what, so it
names nothing. The node's spec stays the truth: the out-of-band image is replaced like
any other staged image that is not desired.

In every rule a running switch of any *other* image is cancelled (one switch at a
time; a newer desired image wins). ``pull_problems`` (an unusable pull secret) make
``Degraded`` True (reason ``PullSecretError`` when nothing else is wrong) only where
the node has to pull (rules 1, 4b's re-stage, 7) or is Degraded anyway (2, 3); a node
that runs or has staged its desired image, or rolls back to it (4a, 6: ``bootc
rollback`` pulls nothing), needs no credentials, so there the problem is only noted in
the ``Idle`` message. ``pull_wait`` (the pull secret is not sealed to this daemon's
key yet: it has just published the key, or restarted with a new one) holds back a
switch that would pull (4b, 7): ``Idle=False/Staging`` "waiting to stage X: ...", not
Degraded; the controller's seal arrives as a BootcNode update and the daemon decides
again. A switch already running (1) and everything that pulls nothing go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from bootc_operator.api import constants as c
from bootc_operator.api.imageref import desired_image_problem
from bootc_operator.api.wire import DesiredImageState, RebootKind, RebootPolicy
from bootc_operator.daemon.bootc_status import HostStatus, image_matches

Action = Literal["switch", "apply", "rollback", "reboot", "soft-reboot"]

#: The rollout's annotations that together say "this node holds a reboot slot and was
#: drained": only then may ``desiredImageState: Booted`` make the daemon reboot.
REBOOT_PERMIT: Final = (c.IN_REBOOT_SLOT_ANNOTATION, c.REBOOT_REQUESTED_ANNOTATION)


@dataclass(frozen=True)
class Cond:
    """A condition to report: ``status`` True/False, ``reason``, ``message``."""

    status: bool
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Desired:
    """What the BootcNode asks for: spec, and which reboot-permit annotations it carries."""

    image: str
    state: DesiredImageState = DesiredImageState.STAGED
    #: the annotations of ``REBOOT_PERMIT`` present on the BootcNode (none by default:
    #: a reboot must be permitted explicitly)
    permits: frozenset[str] = frozenset()
    #: ``spec.rebootPolicy`` is ``AllowSoftReboot``
    allow_soft_reboot: bool = False

    @property
    def missing_permits(self) -> tuple[str, ...]:
        return tuple(a for a in REBOOT_PERMIT if a not in self.permits)


def desired_from_spec(
    spec: Mapping[str, Any] | None, annotations: Mapping[str, Any] | None = None
) -> Desired | None:
    """``Desired`` from a BootcNode's ``spec`` and ``metadata.annotations`` (wire dicts);
    None without a desired image.

    An unknown ``desiredImageState`` reads as ``Staged``: never reboot on a guess; any
    ``rebootPolicy`` but ``AllowSoftReboot`` (unset, unknown) means full reboots only.
    """
    spec = spec or {}
    image = spec.get("desiredImage")
    if not isinstance(image, str) or not image:
        return None
    try:
        state = DesiredImageState(str(spec.get("desiredImageState")))
    except ValueError:
        state = DesiredImageState.STAGED
    present = frozenset(a for a in REBOOT_PERMIT if a in (annotations or {}))
    soft = spec.get("rebootPolicy") == RebootPolicy.ALLOW_SOFT_REBOOT.value
    return Desired(image, state, present, allow_soft_reboot=soft)


@dataclass(frozen=True)
class HostView:
    """The last ``bootc status`` read: a parsed document, or why the latest read failed."""

    status: HostStatus | None = None
    error: str | None = None
    #: consecutive failed reads (for the re-read backoff)
    failures: int = 0
    #: the read ran but its output was refused (``UnreadableStatus``), not a bootc failure
    unreadable: bool = False


@dataclass(frozen=True)
class Attempt:
    """The last finished switch, apply, rollback or reboot command for ``image``.

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
    #: that reboot is a soft one
    reboot_soft: bool = False
    #: the image a soft reboot command failed for (by this process): full reboots only
    soft_reboot_failed: str | None = None
    #: the image someone else staged (``out_of_band_stage``), named while it is staged
    out_of_band: str | None = None


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
    #: ``bootc upgrade --from-downloaded``: let the staged download-only deployment boot
    apply_staged: bool = False
    #: ``bootc rollback``: queue the rollback deployment, or revert a queued rollback
    rollback: bool = False
    #: ``systemctl reboot``
    reboot: bool = False
    #: ``bootc upgrade --from-downloaded --apply --soft-reboot=required``
    soft_reboot: bool = False
    #: ``status.lastRebootKind`` to write with this decision's Rebooting status (None:
    #: keep what the status says)
    reboot_kind: RebootKind | None = None
    #: the ``Work.last`` record is obsolete (succeeded, or about another image)
    forget_attempt: bool = False
    requeue_after: float | None = None


IDLE = Cond(True, c.REASON_IDLE)
HEALTHY = Cond(False, c.REASON_HEALTHY)
#: appended to a pull-secret problem where the node needs no credentials right now
NOT_NEEDED_NOW = "not needed now: nothing to pull"


#: how a message names an image staged by someone else (``out_of_band_stage``)
OUT_OF_BAND = "was staged out of band (not by the bootc-operator daemon)"


def staging(image: str, *, replacing: str | None = None) -> Cond:
    """``Idle=False/Staging``; ``replacing``: an image staged out of band that the
    switch replaces."""
    if replacing is not None:
        return Cond(
            False, c.REASON_STAGING, f"{replacing} {OUT_OF_BAND}: staging {image} to replace it"
        )
    return Cond(False, c.REASON_STAGING, f"staging {image}")


def restaging(image: str, stale: str, *, out_of_band: bool = False) -> Cond:
    """``Idle=False/Staging``: the booted (desired) image staged again over ``stale``."""
    if out_of_band:
        return Cond(
            False,
            c.REASON_STAGING,
            f"{stale} {OUT_OF_BAND}: staging the booted image {image} again to replace it",
        )
    return Cond(
        False,
        c.REASON_STAGING,
        f"staging the booted image {image} again to replace the stale staged {stale}",
    )


def out_of_band_stage(before: HostStatus | None, after: HostStatus, *, ours: bool) -> str | None:
    """The image staged between the ``bootc status`` reads ``before`` and ``after`` by
    someone else: None when this daemon ran a host command in between (``ours``), without
    an earlier read (a daemon that just started cannot tell who staged what), and when
    the staged deployment is unchanged or gone."""
    if before is None or ours:
        return None
    now = after.images().staged
    if now is None or now == before.images().staged:
        return None
    return now.image


def staged(image: str, *, download_only: bool = False) -> Cond:
    if download_only:
        return Cond(
            False,
            c.REASON_STAGED,
            f"{image} is staged download-only (it is applied right before the reboot)",
        )
    return Cond(False, c.REASON_STAGED, f"{image} is staged")


#: why a node whose pool allows soft reboots reboots fully (``rebooting(full_why=...)``)
NOT_CAPABLE = "the staged deployment is not softRebootCapable (another kernel or initramfs)"
ROLLBACK_FULL = "a queued rollback boots with a full reboot"
SOFT_FAILED = "the soft reboot failed"


def rebooting(
    image: str, *, rollback: bool = False, soft: bool = False, full_why: str | None = None
) -> Cond:
    """``Idle=False/Rebooting``: soft, or full (saying why when soft was allowed)."""
    what = " (the rollback deployment)" if rollback else ""
    if soft:
        what += " (soft reboot: userspace restarts, the kernel keeps running)"
    elif full_why:
        what += f" (full reboot: {full_why})"
    return Cond(False, c.REASON_REBOOTING, f"rebooting into {image}{what}")


def rolling_back(image: str) -> Cond:
    return Cond(
        False,
        c.REASON_STAGING,
        f"rolling back to {image}: queueing the rollback deployment (bootc rollback, no pull)",
    )


def rollback_queued(image: str) -> Cond:
    return Cond(
        False,
        c.REASON_STAGED,
        f"a rollback to {image} is queued (bootc rollback): the rollback deployment boots next",
    )


def reverting(image: str, queued: str | None) -> Cond:
    return Cond(
        False,
        c.REASON_STAGING,
        f"reverting the queued rollback to {queued or 'the rollback deployment'} "
        f"(bootc rollback): {image} is booted and desired",
    )


def degraded(*problems: str | None, reason: str = c.REASON_ERROR) -> Cond:
    """``Degraded=True/Error`` (or ``reason``) with the problems joined, or
    ``False/Healthy`` if none."""
    found = [p for p in problems if p]
    return Cond(True, reason, "; ".join(found)) if found else HEALTHY


def degraded_by(
    problem: str | None, pull_problems: Sequence[str], *, reason: str = c.REASON_ERROR
) -> Cond:
    """``degraded`` for ``problem`` plus the pull-secret problems; the reason is
    ``PullSecretError`` when the pull secret is all that is wrong (e.g. a secret with a
    ``credHelpers`` key, refused on the node), so it is told apart from bootc's errors."""
    if problem is None and any(pull_problems):
        return Cond(True, c.REASON_PULL_SECRET_ERROR, "; ".join(p for p in pull_problems if p))
    return degraded(problem, *pull_problems, reason=reason)


def reboot_not_allowed(image: str, missing: Sequence[str]) -> Cond:
    """``Degraded=True/RebootNotAllowed``: Booted asked on a node without a drained slot."""
    return Cond(
        True,
        c.REASON_REBOOT_NOT_ALLOWED,
        f"not rebooting into {image}: desiredImageState is Booted but the BootcNode lacks "
        f"the annotation{'s' if len(missing) > 1 else ''} {' and '.join(missing)}, so the "
        "node was not given a reboot slot and drained, and an undrained node is never "
        "rebooted",
    )


def awaiting_drain(waiting: Cond) -> Cond:
    """``waiting`` (Staged) saying why Booted does not reboot a node holding a reboot slot
    without the drain's ``reboot-requested`` yet."""
    return Cond(
        waiting.status,
        waiting.reason,
        f"{waiting.message}; not rebooting yet: desiredImageState is Booted and the node "
        f"holds a reboot slot, but its drain is not confirmed ({c.REBOOT_REQUESTED_ANNOTATION} "
        "missing); waiting for the controller",
    )


def with_note(cond: Cond, notes: Sequence[str]) -> Cond:
    """``cond`` with pull problems the node does not need to solve now added to its message."""
    if not notes:
        return cond
    note = "; ".join(f"{n} ({NOT_NEEDED_NOW})" for n in notes)
    return Cond(cond.status, cond.reason, f"{cond.message}; {note}" if cond.message else note)


#: what containers/image and ostree-ext say when the host's containers policy refuses a
#: pull (``containers-policy.json(5)``; ``--enforce-container-sigpolicy``'s own checks)
POLICY_REFUSALS: Final = (
    "is rejected by policy",
    "A signature was required, but no signature exists",
    "None of the signatures were accepted",
    "Signature for identity",
    "Signature for digest",
    "cryptographic signature verification failed",
    "specifies a default of `insecureAcceptAnything`; refusing usage",
    "No containers policy.json found",
    "Source image rejected",
)


def policy_refusal(attempt: Attempt | None) -> bool:
    """The switch failed because the host's containers policy refused the image."""
    return (
        attempt is not None
        and attempt.action == "switch"
        and attempt.error is not None
        and any(marker in attempt.error for marker in POLICY_REFUSALS)
    )


def attempt_reason(attempt: Attempt | None) -> str:
    """The Degraded reason for a failed command: ``ContainerPolicyRejected`` for a policy
    refusal (it stays until the policy, its keys or the image change), else ``Error``."""
    return c.REASON_CONTAINER_POLICY_REJECTED if policy_refusal(attempt) else c.REASON_ERROR


def attempt_problem(attempt: Attempt, staged_image: str | None, *, queued: bool = False) -> str:
    """The Degraded text for a command that did not get the host where it should
    (``queued``: bootc status shows a queued rollback)."""
    if policy_refusal(attempt):
        return f"the host's containers policy refused {attempt.image}: {attempt.error}"
    if attempt.error is not None:
        return attempt.error
    if attempt.action == "rollback":
        if queued:
            return "bootc rollback exited 0 but bootc status still shows a rollback queued"
        return (
            f"bootc rollback exited 0 but bootc status does not show the rollback to "
            f"{attempt.image} queued"
        )
    if attempt.action == "reboot":
        return f"systemctl reboot into {attempt.image} had no effect"
    if attempt.action == "soft-reboot":
        return f"the soft reboot into {attempt.image} had no effect"
    if attempt.action == "apply":
        return (
            "bootc upgrade --from-downloaded exited 0 but bootc status still shows "
            f"{attempt.image} staged download-only"
        )
    now_staged = staged_image or "nothing"
    return (
        f"bootc switch {attempt.image} exited 0 but bootc status does not show it staged "
        f"(staged: {now_staged})"
    )


def _stage(
    image: str,
    last: Attempt | None,
    forget: bool,
    staged_image: str | None,
    *,
    idle: Cond,
    now: float,
    retry: RetryPolicy,
    other_switch: bool,
    extra: tuple[str, ...],
    action: Literal["switch", "rollback"] = "switch",
    queued: bool = False,
    notes: tuple[str, ...] = (),
    wait: str | None = None,
) -> Decision:
    """Start (or retry after the backoff) a switch to ``image``, or a ``bootc rollback``
    (``action``); ``idle`` while it runs. ``extra`` problems make Degraded, ``notes``
    (pull problems where nothing is pulled) go into the Idle message; ``queued``: bootc
    status shows a queued rollback; ``wait``: why the credentials for a switch are not
    there yet (no switch until they are)."""
    failed = last if last is not None and last.action == action else None
    forget = forget or (last is not None and last.action != action)
    if wait is not None and action == "switch":
        problem = attempt_problem(failed, staged_image) if failed is not None else None
        return Decision(
            Cond(False, c.REASON_STAGING, f"waiting to stage {image}: {wait}"),
            degraded_by(problem, extra, reason=attempt_reason(failed)),
            cancel_switch=other_switch,
        )
    start_switch = image if action == "switch" else None
    rollback = action == "rollback"
    if failed is not None:
        problem = attempt_problem(failed, staged_image, queued=queued)
        retry_at = failed.finished_at + retry.delay(failed.attempts)
        if now < retry_at:
            return Decision(
                with_note(IDLE, notes),
                degraded_by(problem, extra, reason=attempt_reason(failed)),
                cancel_switch=other_switch,
                requeue_after=retry_at - now,
            )
        return Decision(
            with_note(idle, notes),
            degraded_by(problem, extra, reason=attempt_reason(failed)),
            cancel_switch=other_switch,
            start_switch=start_switch,
            rollback=rollback,
        )
    return Decision(
        with_note(idle, notes),
        degraded_by(None, extra),
        cancel_switch=other_switch,
        start_switch=start_switch,
        rollback=rollback,
        forget_attempt=forget,
    )


def _command_after_backoff(
    action: Action,
    failed: Attempt | None,
    staged_image: str | None,
    *,
    forget: bool,
    now: float,
    retry: RetryPolicy,
    other_switch: bool,
    ready: Cond,
    waiting: Cond,
) -> Decision:
    """Run ``action`` (apply, reboot or soft reboot), or wait out the backoff of its
    ``failed`` attempt."""
    apply_staged, reboot, soft = action == "apply", action == "reboot", action == "soft-reboot"
    kind = RebootKind.SOFT if soft else RebootKind.FULL if reboot else None
    if failed is None:
        return Decision(
            ready,
            HEALTHY,
            cancel_switch=other_switch,
            apply_staged=apply_staged,
            reboot=reboot,
            soft_reboot=soft,
            reboot_kind=kind,
            forget_attempt=forget,
        )
    problem = attempt_problem(failed, staged_image)
    retry_at = failed.finished_at + retry.delay(failed.attempts)
    if now < retry_at:
        return Decision(
            waiting,
            degraded(problem),
            cancel_switch=other_switch,
            requeue_after=retry_at - now,
        )
    return Decision(
        ready,
        degraded(problem),
        cancel_switch=other_switch,
        apply_staged=apply_staged,
        reboot=reboot,
        soft_reboot=soft,
        reboot_kind=kind,
    )


def decide(
    desired: Desired | None,
    host: HostView,
    work: Work,
    *,
    now: float,
    retry: RetryPolicy,
    pull_problems: Sequence[str] = (),
    pull_wait: str | None = None,
) -> Decision:
    """The next step for this node; see the module docstring for the rules."""
    bad_image = desired_image_problem(desired.image) if desired is not None else None
    if bad_image is not None:  # 0. never handed to bootc (it could read as an option)
        return Decision(
            IDLE,
            Cond(True, c.REASON_INVALID_IMAGE, bad_image),
            cancel_switch=work.switching is not None,
            forget_attempt=work.last is not None,
        )
    extra = tuple(p for p in pull_problems if p)
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
        return Decision(
            staging(desired.image),
            degraded_by(problem, extra, reason=attempt_reason(last)),
            forget_attempt=forget,
        )

    # 2. no usable host status
    if host.error is not None or host.status is None:
        error = host.error or "bootc status has not been read yet"
        why = c.REASON_UNREADABLE_STATUS if host.unreadable else c.REASON_ERROR
        return Decision(
            None,
            degraded_by(error, extra, reason=why),
            cancel_switch=other_switch,
            requeue_after=retry.delay(max(1, host.failures)),
        )

    # 3. a host bootc cannot manage
    reason = host.status.unmanageable_reason()
    if reason is not None:
        return Decision(
            IDLE,
            degraded_by(reason, extra),
            cancel_switch=work.switching is not None,
            forget_attempt=work.last is not None,
        )

    images = host.status.images()
    staged_entry = host.status.staged
    staged_image = images.staged.image if images.staged else None
    download_only = staged_entry is not None and staged_entry.download_only
    queued = host.status.rollback_queued and images.rollback is not None
    queued_image = images.rollback.image if queued and images.rollback else None

    # 4. nothing to do, unless a rollback is queued (a) or a stale image is staged (b)
    if desired is not None and queued and image_matches(images.booted, desired.image):
        return _stage(
            desired.image,
            last,
            forget,
            staged_image,
            idle=reverting(desired.image, queued_image),
            now=now,
            retry=retry,
            other_switch=other_switch,
            extra=(),
            action="rollback",
            queued=True,
            notes=extra,
        )
    if desired is None or image_matches(images.booted, desired.image):
        stale = (
            desired is not None
            and staged_image is not None
            and not download_only
            and not image_matches(images.staged, desired.image)
        )
        if desired is None or not stale or staged_image is None:
            return Decision(
                with_note(IDLE, extra),
                HEALTHY,
                cancel_switch=work.switching is not None,
                forget_attempt=work.last is not None,
            )
        return _stage(
            desired.image,
            last,
            forget,
            staged_image,
            idle=restaging(
                desired.image, staged_image, out_of_band=work.out_of_band == staged_image
            ),
            now=now,
            retry=retry,
            other_switch=other_switch,
            extra=extra,
            wait=pull_wait,
        )

    # 5. the desired image boots next: staged, or the rollback deployment, queued
    rolled_back = queued and image_matches(images.rollback, desired.image)
    if rolled_back or image_matches(images.staged, desired.image):
        download_only = download_only and not rolled_back
        waiting = with_note(
            rollback_queued(desired.image)
            if rolled_back
            else staged(desired.image, download_only=download_only),
            extra,
        )
        if desired.state != DesiredImageState.BOOTED:
            return Decision(
                waiting,
                HEALTHY,
                cancel_switch=other_switch,
                forget_attempt=work.last is not None,
            )
        # soft or full (see "Soft reboots" in the module docstring)
        soft_failed = work.soft_reboot_failed == desired.image
        capable = staged_entry is not None and staged_entry.soft_reboot_capable
        soft = desired.allow_soft_reboot and not rolled_back and capable and not soft_failed
        full_why = (
            None
            if not desired.allow_soft_reboot
            else ROLLBACK_FULL
            if rolled_back
            else SOFT_FAILED
            if soft_failed
            else NOT_CAPABLE
        )
        if work.reboot_requested == desired.image:
            return Decision(
                rebooting(
                    desired.image,
                    rollback=rolled_back,
                    soft=work.reboot_soft,
                    full_why=None if work.reboot_soft else full_why,
                ),
                HEALTHY,
                cancel_switch=other_switch,
            )
        missing = desired.missing_permits
        if missing == (c.REBOOT_REQUESTED_ANNOTATION,):
            # a slot whose drain is not confirmed (a previous controller's, e.g. the Go
            # operator's): the controller adopts it; nothing is wrong with the node
            return Decision(
                awaiting_drain(waiting),
                HEALTHY,
                cancel_switch=other_switch,
                forget_attempt=work.last is not None,
            )
        if missing:
            return Decision(
                waiting,
                reboot_not_allowed(desired.image, missing),
                cancel_switch=other_switch,
                forget_attempt=work.last is not None,
            )
        action: Action = "soft-reboot" if soft else "apply" if download_only else "reboot"
        # the failed soft reboot's backoff is waited out before the full reboot
        retried = (action, "soft-reboot") if soft_failed else (action,)
        failed = last if last is not None and last.action in retried else None
        # a finished switch did its job; an apply that worked left no download-only
        # deployment behind: either record is obsolete now
        forget = forget or (last is not None and failed is None)
        ready = (
            Cond(
                False,
                c.REASON_STAGED,
                f"applying the download-only {desired.image} before rebooting",
            )
            if action == "apply"
            else rebooting(desired.image, rollback=rolled_back, soft=soft, full_why=full_why)
        )
        return _command_after_backoff(
            action,
            failed,
            staged_image,
            forget=forget,
            now=now,
            retry=retry,
            other_switch=other_switch,
            ready=ready,
            waiting=waiting,
        )

    # 6. the desired image is the rollback deployment: bootc rollback, no pull
    if image_matches(images.rollback, desired.image):
        return _stage(
            desired.image,
            last,
            forget,
            staged_image,
            idle=rolling_back(desired.image),
            now=now,
            retry=retry,
            other_switch=other_switch,
            extra=(),
            action="rollback",
            notes=extra,
        )

    # 7. stage the desired image
    foreign = staged_image if work.out_of_band == staged_image else None
    return _stage(
        desired.image,
        last,
        forget,
        staged_image,
        idle=staging(desired.image, replacing=foreign),
        now=now,
        retry=retry,
        other_switch=other_switch,
        extra=extra,
        wait=pull_wait,
    )
