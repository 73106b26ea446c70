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

Rules, in order (the first that applies wins): ``RULES``, one function per rule, each
returning its ``Decision`` or None when it does not apply, over a ``Situation`` (the
inputs and what the rules derive from them, derived once).

0. (``invalid_image``) ``spec.desiredImage`` fails the BootcNode CRD's pattern
   (``imageref.desired_image_problem``: e.g. it begins with "-", or holds a control
   character) → ``Idle=True``, ``Degraded=True/InvalidImage`` saying why, a running
   switch cancelled; never a switch (defence in depth behind the CRD, and the shell
   ends bootc's options with ``--`` anyway).
1. (``switch_running``) A switch of the desired image is running →
   ``Idle=False/Staging``. The host status is not re-read meanwhile: bootc holds the
   sysroot lock while it stages.
2. (``no_status``) ``bootc status`` failed (timeout, garbage, non-zero exit) →
   ``Degraded=True`` with the reason, ``Idle`` left as it was, nothing else done;
   re-read after a capped exponential backoff.
3. (``unmanageable``) bootc cannot manage the host (``booted: null``,
   ``incompatible: true``, booted deployment without an image) → ``Idle=True``,
   ``Degraded=True`` saying exactly why; never a switch.
4. (``booted_desired``) No desired image, or the booted deployment runs it →
   ``Idle=True/Idle``; unless the next reboot, whoever causes it, would leave that image:
   a. (``revert_queued_rollback``, tried before 4) a rollback is queued
      (``rollbackQueued`` with nothing staged; e.g. a rollback was queued by rule 6
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
5. (``boots_next``) The desired image boots next: it is staged, or it is the rollback deployment and
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
6. (``roll_back``) The desired image is the *rollback* deployment (``image_matches``),
   neither booted nor staged: this is how the controller rolls a node back after a failed health
   check (``desiredImage`` = the rollback deployment as a digest ref; the Go
   operator's daemon would ``bootc switch`` to it, which ends in the same place).
   Queue it with ``bootc rollback`` (no ``--apply``, no pull: the deployment is on
   disk; a staged deployment is discarded) → ``Idle=False/Staging`` ("rolling back to
   X"); status is re-read and rule 5 takes over (Staged, or Rebooting with the
   permit). Failures and backoff as a switch's (rule 7); a rollback that exited 0
   without ``rollbackQueued: true`` counts as failed.
7. (``stage``) Otherwise stage it (``Idle=False/Staging``, start a switch), unless the last switch
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
   queued rollback needs nothing special here: the staged deployment boots first.
   bootc (1.16, seen on the real one) still reports ``rollbackQueued: true`` until the
   reboot, so a queued rollback counts only while nothing is staged
   (``Situation.queued``): otherwise a target moving back to the rollback image would
   be taken as "the rollback boots next" while the staged image would.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final, Literal

from bootc_operator.api import constants as c
from bootc_operator.api.imageref import desired_image_problem
from bootc_operator.api.wire import DesiredImageState, RebootKind, RebootPolicy
from bootc_operator.daemon.bootc_status import DeploymentImages, HostStatus, image_matches

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


# ------------------------------------------------------------------ the rules


@dataclass(frozen=True)
class Situation:
    """One decision's inputs and what the rules derive from them, derived once."""

    desired: Desired | None
    host: HostView
    work: Work
    now: float
    retry: RetryPolicy
    #: pull-secret problems (``pull_problems``, empties dropped)
    pull: tuple[str, ...] = ()
    pull_wait: str | None = None

    @cached_property
    def last(self) -> Attempt | None:
        """The last attempt, if it was at the desired image (another says nothing)."""
        last = self.work.last
        if self.desired is not None and last is not None and last.image != self.desired.image:
            return None
        return last

    @property
    def forget(self) -> bool:
        """The ``Work.last`` record is about another image: obsolete."""
        return self.work.last is not None and self.last is None

    @property
    def other_switch(self) -> bool:
        """A switch of an image other than the desired one is running."""
        switching = self.work.switching
        return switching is not None and (self.desired is None or switching != self.desired.image)

    @property
    def want(self) -> Desired:
        """The desired image, for the rules after 4 (which takes every pass without one)."""
        if self.desired is None:
            raise AssertionError("rule 4 decides every pass without a desired image")
        return self.desired

    @property
    def status(self) -> HostStatus:
        """The host status, for the rules after 2 (which takes every pass without one)."""
        if self.host.status is None:
            raise AssertionError("rule 2 decides every pass without a host status")
        return self.host.status

    @cached_property
    def images(self) -> DeploymentImages:
        return self.status.images()

    @property
    def staged_image(self) -> str | None:
        return self.images.staged.image if self.images.staged else None

    @property
    def download_only(self) -> bool:
        return self.status.staged is not None and self.status.staged.download_only

    @property
    def queued(self) -> bool:
        """A rollback is queued (``bootc rollback`` ran), its deployment is known, and
        nothing is staged: a deployment staged after the rollback boots first, although
        bootc keeps saying ``rollbackQueued`` until the reboot (the real bootc 1.16)."""
        return (
            self.status.rollback_queued
            and self.images.rollback is not None
            and self.images.staged is None
        )

    def rest(self, idle: Cond, degraded_: Cond = HEALTHY) -> Decision:
        """Nothing to run: report, stop any switch, drop the attempt record."""
        return Decision(
            idle,
            degraded_,
            cancel_switch=self.work.switching is not None,
            forget_attempt=self.work.last is not None,
        )


Rule = Callable[[Situation], "Decision | None"]


def invalid_image(s: Situation) -> Decision | None:
    """0. ``spec.desiredImage`` fails the CRD's pattern: never handed to bootc (it
    could read as an option)."""
    bad = desired_image_problem(s.desired.image) if s.desired is not None else None
    return None if bad is None else s.rest(IDLE, Cond(True, c.REASON_INVALID_IMAGE, bad))


def switch_running(s: Situation) -> Decision | None:
    """1. A switch of the desired image is running: Staging."""
    if s.desired is None or s.work.switching != s.desired.image:
        return None
    last = s.last
    problem = attempt_problem(last, None) if last and last.action == "switch" else None
    return Decision(
        staging(s.desired.image),
        degraded_by(problem, s.pull, reason=attempt_reason(last)),
        forget_attempt=s.forget,
    )


def no_status(s: Situation) -> Decision | None:
    """2. No usable ``bootc status``: Degraded, Idle left as it was, re-read later."""
    if s.host.error is None and s.host.status is not None:
        return None
    error = s.host.error or "bootc status has not been read yet"
    why = c.REASON_UNREADABLE_STATUS if s.host.unreadable else c.REASON_ERROR
    return Decision(
        None,
        degraded_by(error, s.pull, reason=why),
        cancel_switch=s.other_switch,
        requeue_after=s.retry.delay(max(1, s.host.failures)),
    )


def unmanageable(s: Situation) -> Decision | None:
    """3. A host bootc cannot manage: Idle, Degraded saying why; never a switch."""
    reason = s.status.unmanageable_reason()
    return None if reason is None else s.rest(IDLE, degraded_by(reason, s.pull))


def revert_queued_rollback(s: Situation) -> Decision | None:
    """4a. The booted image is desired but a rollback is queued: revert it."""
    if s.desired is None or not s.queued or not image_matches(s.images.booted, s.desired.image):
        return None
    queued_image = s.images.rollback.image if s.images.rollback else None
    idle = reverting(s.desired.image, queued_image)
    return _stage(s, idle, action="rollback", queued=True)


def booted_desired(s: Situation) -> Decision | None:
    """4. Nothing desired, or the desired image is booted: Idle; unless another image is
    still staged (4b): the booted image is staged again over it."""
    desired = s.desired
    if desired is not None and not image_matches(s.images.booted, desired.image):
        return None
    stale = s.staged_image
    if (
        desired is None
        or stale is None
        or s.download_only  # bootc never boots a download-only deployment
        or image_matches(s.images.staged, desired.image)
    ):
        return s.rest(with_note(IDLE, s.pull))
    idle = restaging(desired.image, stale, out_of_band=s.work.out_of_band == stale)
    return _stage(s, idle, wait=s.pull_wait)


def boots_next(s: Situation) -> Decision | None:
    """5. The desired image boots next (staged, or the queued rollback): Staged, or with
    ``Booted`` and the reboot permit the reboot (soft where allowed and capable)."""
    desired = s.want
    rolled_back = s.queued and image_matches(s.images.rollback, desired.image)
    if not rolled_back and not image_matches(s.images.staged, desired.image):
        return None
    download_only = s.download_only and not rolled_back
    waiting = with_note(
        rollback_queued(desired.image)
        if rolled_back
        else staged(desired.image, download_only=download_only),
        s.pull,
    )
    if desired.state != DesiredImageState.BOOTED:
        return Decision(
            waiting, HEALTHY, cancel_switch=s.other_switch, forget_attempt=s.work.last is not None
        )
    kind = _reboot_kind(s, rolled_back=rolled_back)
    if s.work.reboot_requested == desired.image:
        soft = s.work.reboot_soft
        full_why = None if soft else kind.full_why
        idle = rebooting(desired.image, rollback=rolled_back, soft=soft, full_why=full_why)
        return Decision(idle, HEALTHY, cancel_switch=s.other_switch)
    return _without_permit(s, waiting) or _reboot(
        s, waiting, kind, rolled_back=rolled_back, download_only=download_only
    )


def roll_back(s: Situation) -> Decision | None:
    """6. The desired image is the rollback deployment: ``bootc rollback``, no pull."""
    if not image_matches(s.images.rollback, s.want.image):
        return None
    return _stage(s, rolling_back(s.want.image), action="rollback")


def stage(s: Situation) -> Decision | None:
    """7. Otherwise stage the desired image (after the backoff of a failed switch)."""
    foreign = s.staged_image if s.work.out_of_band == s.staged_image else None
    return _stage(s, staging(s.want.image, replacing=foreign), wait=s.pull_wait)


#: The rules in order, numbered as in the module docstring: the first that decides wins.
RULES: Final[tuple[Rule, ...]] = (
    invalid_image,
    switch_running,
    no_status,
    unmanageable,
    revert_queued_rollback,
    booted_desired,
    boots_next,
    roll_back,
    stage,
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
    """The next step for this node: the decision of the first rule of ``RULES`` that
    has one (see the module docstring)."""
    situation = Situation(
        desired, host, work, now, retry, tuple(p for p in pull_problems if p), pull_wait
    )
    for rule in RULES:
        if (decision := rule(situation)) is not None:
            return decision
    raise AssertionError("rule 7 decides every pass the others leave")


# ------------------------------------------------------------------ the rules' steps


@dataclass(frozen=True)
class RebootKindChoice:
    """Soft or full, and why full where the pool allows soft (None: not allowed)."""

    soft: bool
    full_why: str | None


def _reboot_kind(s: Situation, *, rolled_back: bool) -> RebootKindChoice:
    """See "Soft reboots" in the module docstring."""
    desired = s.want
    soft_failed = s.work.soft_reboot_failed == desired.image
    capable = s.status.staged is not None and s.status.staged.soft_reboot_capable
    if not desired.allow_soft_reboot:
        return RebootKindChoice(False, None)
    if rolled_back:
        return RebootKindChoice(False, ROLLBACK_FULL)
    if soft_failed:
        return RebootKindChoice(False, SOFT_FAILED)
    # (said of a full reboot even when capable: one asked for before soft was allowed)
    return RebootKindChoice(capable, NOT_CAPABLE)


def _without_permit(s: Situation, waiting: Cond) -> Decision | None:
    """Booted without the drained slot's annotations: no reboot (rule 5)."""
    missing = s.want.missing_permits
    if not missing:
        return None
    forget = s.work.last is not None
    if missing == (c.REBOOT_REQUESTED_ANNOTATION,):
        # a slot whose drain is not confirmed (a previous controller's, e.g. the Go
        # operator's): the controller adopts it; nothing is wrong with the node
        return Decision(
            awaiting_drain(waiting), HEALTHY, cancel_switch=s.other_switch, forget_attempt=forget
        )
    return Decision(
        waiting,
        reboot_not_allowed(s.want.image, missing),
        cancel_switch=s.other_switch,
        forget_attempt=forget,
    )


def _reboot(
    s: Situation,
    waiting: Cond,
    kind: RebootKindChoice,
    *,
    rolled_back: bool,
    download_only: bool,
) -> Decision:
    """Rule 5 with the permit: apply a download-only deployment first, then reboot
    (soft or full); a failed command waits out its backoff."""
    image, last = s.want.image, s.last
    action: Action = "soft-reboot" if kind.soft else "apply" if download_only else "reboot"
    # the failed soft reboot's backoff is waited out before the full reboot
    soft_failed = s.work.soft_reboot_failed == image
    retried = (action, "soft-reboot") if soft_failed else (action,)
    failed = last if last is not None and last.action in retried else None
    # a finished switch did its job; an apply that worked left no download-only
    # deployment behind: either record is obsolete now
    forget = s.forget or (last is not None and failed is None)
    if action == "apply":
        ready = Cond(False, c.REASON_STAGED, f"applying the download-only {image} before rebooting")
    else:
        ready = rebooting(image, rollback=rolled_back, soft=kind.soft, full_why=kind.full_why)
    return _command_after_backoff(s, action, failed, forget=forget, ready=ready, waiting=waiting)


def _stage(
    s: Situation,
    idle: Cond,
    *,
    action: Literal["switch", "rollback"] = "switch",
    queued: bool = False,
    wait: str | None = None,
) -> Decision:
    """Start (or retry after the backoff) a switch to the desired image, or a ``bootc
    rollback`` (``action``); ``idle`` while it runs. A switch pulls: pull problems make
    Degraded; a rollback pulls nothing: they go into the Idle message. ``queued``: bootc
    status shows a queued rollback; ``wait``: why the credentials for a switch are not
    there yet (no switch until they are)."""
    image, last = s.want.image, s.last
    extra, notes = (s.pull, ()) if action == "switch" else ((), s.pull)
    failed = last if last is not None and last.action == action else None
    forget = s.forget or (last is not None and last.action != action)
    if wait is not None and action == "switch":
        why = attempt_problem(failed, s.staged_image) if failed is not None else None
        return Decision(
            Cond(False, c.REASON_STAGING, f"waiting to stage {image}: {wait}"),
            degraded_by(why, extra, reason=attempt_reason(failed)),
            cancel_switch=s.other_switch,
        )
    switch, rollback = (image, False) if action == "switch" else (None, True)
    if failed is None:
        return Decision(
            with_note(idle, notes),
            degraded_by(None, extra),
            cancel_switch=s.other_switch,
            start_switch=switch,
            rollback=rollback,
            forget_attempt=forget,
        )
    problem = degraded_by(
        attempt_problem(failed, s.staged_image, queued=queued),
        extra,
        reason=attempt_reason(failed),
    )
    retry_at = failed.finished_at + s.retry.delay(failed.attempts)
    if s.now < retry_at:
        return Decision(
            with_note(IDLE, notes),
            problem,
            cancel_switch=s.other_switch,
            requeue_after=retry_at - s.now,
        )
    return Decision(
        with_note(idle, notes),
        problem,
        cancel_switch=s.other_switch,
        start_switch=switch,
        rollback=rollback,
    )


def _command_after_backoff(
    s: Situation,
    action: Action,
    failed: Attempt | None,
    *,
    forget: bool,
    ready: Cond,
    waiting: Cond,
) -> Decision:
    """Run ``action`` (apply, reboot or soft reboot), or wait out the backoff of its
    ``failed`` attempt."""
    soft, reboot = action == "soft-reboot", action == "reboot"
    run = Decision(
        ready,
        HEALTHY,
        cancel_switch=s.other_switch,
        apply_staged=action == "apply",
        reboot=reboot,
        soft_reboot=soft,
        reboot_kind=RebootKind.SOFT if soft else RebootKind.FULL if reboot else None,
        forget_attempt=forget,
    )
    if failed is None:
        return run
    problem = degraded(attempt_problem(failed, s.staged_image))
    retry_at = failed.finished_at + s.retry.delay(failed.attempts)
    if s.now < retry_at:
        return Decision(
            waiting, problem, cancel_switch=s.other_switch, requeue_after=retry_at - s.now
        )
    return replace(run, degraded=problem, forget_attempt=False)
