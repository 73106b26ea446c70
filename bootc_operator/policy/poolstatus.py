"""Pool status aggregation: counts, progress message, the two pool conditions, the phase.

Pure functions: ``member_state`` puts one member in exactly one ``MemberState``
(the status counts and ``bootc_operator_pool_nodes{state}`` both use it);
``count_states`` tallies ``NodeView``s (plus matched nodes that have no
BootcNode yet, as pending); ``progress_message`` renders ``7/10 updated; 2
staging, 1 rebooting``; ``degraded_condition`` picks the
highest-precedence problem (DESIGN §2: NodeDegraded < NodeConflict <
RolloutHalted < PullSecretError < InvalidSpec < TagResolutionError);
``rollout_condition`` says what UpToDate is and why, and never claims more than
is known: it is True only once membership has processed the pool's current
generation and every matched node runs a known target *and is done*: out of its
reboot slot, so uncordoned (the rollout restores the cordon before it removes the
slot annotation, so the BootcNode's release is the later write), and past its
health check; a pool that cannot
progress says what blocks it (InvalidSpec, TagResolutionError, HealthCheckFailed,
RolloutHalted, Paused, AwaitingMaintenanceWindow, BlockedByAlerts, PreconditionNotMet,
AwaitingApproval, RolloutBlocked for maxUnavailable 0), not "in progress"; updated nodes
still being checked make it HealthCheckPending, naming the pending check;
``phase`` condenses both conditions into the one word ``kubectl get`` shows;
``pool_kstatus`` says the same in kstatus's terms (``Ready`` exactly when UpToDate is
True; ``Stalled`` when the rollout cannot go on without a person: halted, invalid,
a refused signature; ``Reconciling`` with the phase as its reason while it is under
way; neither while it waits for a person's decision: paused, awaiting approval).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bootc_operator.api import constants as c
from bootc_operator.api.kstatus import KStatus
from bootc_operator.api.wire import DesiredImageState
from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.wording import counted, noun


class MemberState(StrEnum):
    """What a pool member is counted as: each member is in exactly one, in the
    status counts and as ``bootc_operator_pool_nodes{state}`` alike.

    Only ``UpToDate`` counts as updated: a node that runs the target is not done
    while it is under its health check or still holds its reboot slot (cordoned
    by us until the slot is released).
    """

    UP_TO_DATE = "UpToDate"  # runs the target, out of its slot, passed its checks
    PENDING = "Pending"  # not yet reporting, or told a new target and not staging yet
    STAGING = "Staging"
    STAGED = "Staged"  # staged, waiting for a reboot slot
    DRAINING = "Draining"  # staged and holding a slot, not yet told to reboot
    REBOOTING = "Rebooting"  # told to reboot, reporting Rebooting, or back but not Ready
    HEALTH_CHECK = "HealthCheck"  # runs the target, still under its health check
    RELEASING = "Releasing"  # runs the target, done, its slot not yet released
    DEGRADED = "Degraded"
    ROLLED_BACK = "RolledBack"  # failed the health check on the target, rolled back, held
    LEAVING = "Leaving"  # an autoscaler is removing its Node: not updated, gets no slot


def member_state(v: NodeView, *, checking: frozenset[str] = frozenset()) -> MemberState:
    """The one ``MemberState`` of member ``v``; ``checking``: members that run the
    target but have not passed their health gate."""
    if v.state is NodeState.DEGRADED:
        return MemberState.DEGRADED
    if v.state is NodeState.UP_TO_DATE:
        if v.name in checking:
            return MemberState.HEALTH_CHECK
        if v.in_slot:
            # the slot is released (and the cordon restored) only once it is Ready
            return MemberState.RELEASING if v.ready else MemberState.REBOOTING
        return MemberState.UP_TO_DATE
    if v.held_back and not v.in_slot:
        return MemberState.ROLLED_BACK
    if v.departing:
        return MemberState.LEAVING
    if v.state is NodeState.REBOOTING or (
        v.in_slot and v.desired_image_state == DesiredImageState.BOOTED
    ):
        return MemberState.REBOOTING
    if v.state is NodeState.STAGED:
        return MemberState.DRAINING if v.in_slot else MemberState.STAGED
    if v.state is NodeState.STAGING:
        return MemberState.STAGING
    return MemberState.PENDING


@dataclass(frozen=True, slots=True)
class Counts:
    total: int = 0
    updated: int = 0
    pending: int = 0
    staging: int = 0
    staged: int = 0  # staged, waiting for a reboot slot
    draining: int = 0  # staged and holding a slot, not yet told to reboot
    rebooting: int = 0  # told to reboot (Booted), reporting Rebooting, or back but not Ready
    degraded: int = 0
    rolled_back: int = 0  # failed the health check on the target, rolled back, held
    checking: int = 0  # run the target, still under their health check (not updated yet)
    releasing: int = 0  # run the target, done, still holding their slot (not updated yet)
    leaving: int = 0  # an autoscaler is removing their Nodes: not updated, no slot

    @property
    def updating(self) -> int:
        return (
            self.staging
            + self.staged
            + self.draining
            + self.rebooting
            + self.checking
            + self.releasing
        )


#: the ``Counts`` field each member state is tallied in
_FIELD: dict[MemberState, str] = {
    MemberState.UP_TO_DATE: "updated",
    MemberState.PENDING: "pending",
    MemberState.STAGING: "staging",
    MemberState.STAGED: "staged",
    MemberState.DRAINING: "draining",
    MemberState.REBOOTING: "rebooting",
    MemberState.HEALTH_CHECK: "checking",
    MemberState.RELEASING: "releasing",
    MemberState.DEGRADED: "degraded",
    MemberState.ROLLED_BACK: "rolled_back",
    MemberState.LEAVING: "leaving",
}


def member_states(
    views: Iterable[NodeView], *, checking: frozenset[str] = frozenset()
) -> dict[MemberState, int]:
    """How many of ``views`` are in each ``MemberState`` (every state present)."""
    tally = dict.fromkeys(MemberState, 0)
    for v in views:
        tally[member_state(v, checking=checking)] += 1
    return tally


def count_states(
    views: Iterable[NodeView],
    *,
    without_bootc_node: int = 0,
    checking: frozenset[str] = frozenset(),
) -> Counts:
    """Tally ``views``; ``without_bootc_node`` matched nodes not yet members count as
    pending; ``checking`` members run the target but have not passed their health
    gate: not updated yet."""
    tally = {_FIELD[s]: n for s, n in member_states(views, checking=checking).items()}
    tally["total"] = sum(tally.values()) + without_bootc_node
    tally["pending"] += without_bootc_node
    return Counts(**tally)


def progress_message(counts: Counts) -> str:
    if not counts.total:
        return "no nodes match spec.nodeSelector"
    text = f"{counts.updated}/{counts.total} updated"
    parts = [
        f"{n} {label}"
        for n, label in (
            (counts.pending, "pending"),
            (counts.staging, "staging"),
            (counts.staged, "staged"),
            (counts.draining, "draining"),
            (counts.rebooting, "rebooting"),
            (counts.checking, "under health check"),
            (counts.releasing, "releasing"),
            (counts.degraded, "degraded"),
            (counts.rolled_back, "rolled back"),
            (counts.leaving, "leaving (an autoscaler is removing them)"),
        )
        if n
    ]
    return f"{text}; {', '.join(parts)}" if parts else text


@dataclass(frozen=True, slots=True)
class RolloutFacts:
    """What the status reconciler knows about a pool's rollout (inputs of ``rollout_condition``)."""

    counts: Counts
    generation: int | None = None
    membership_done: bool = True  # membership processed this generation
    invalid: str = ""  # InvalidSpec message
    tag: str | None = None  # the tag ref, for tag pools
    target_known: bool = True
    tag_error: str = ""  # TagResolutionError message
    # (reason, message) of a signature that failed verification (spec.image.verification)
    signature_error: tuple[str, str] | None = None
    unverified: str = ""  # the digest whose signature is being verified
    halted: str = ""  # RolloutHalted message
    paused: bool = False
    max_unavailable: int | None = None  # resolved; None when unknown
    selects_all: bool = False  # an empty nodeSelector
    window_closed: bool = False  # outside every maintenance window
    next_window: str = ""  # "the next maintenance window opens ..."
    budget_used_by: str = ""  # outside members using up maxUnavailable, named
    health_failed: str = ""  # HealthCheckFailed message (the rollout is halted)
    health_pending: str = ""  # holders still being checked, named with their check
    canaries: str = ""  # "canaries first: ..." while canaries go alone
    awaiting_approval: str = ""  # canaries passed, approvedDigest not the target
    blocked_by_alerts: str = ""  # the alert gate's message while it blocks new slots
    #: its reason (BlockedByAlerts, or PreconditionNotMet); "" means BlockedByAlerts
    blocked_reason: str = ""
    domain: str = ""  # with a topology: "updating topology.kubernetes.io/zone=a (1 of 3)"
    order: str = ""  # with spec.rollout.order: "next (by label rack, by name): n1, n2"


Condition = tuple[bool, str, str]  # (status, reason, message)


def rollout_condition(facts: RolloutFacts) -> Condition:
    """(status, reason, message) of the pool's UpToDate condition: the first that
    applies of what keeps the pool from rolling out at all (``_not_rolling``), all
    updated, what stops new reboots (``_stopped``), what the rollout waits for
    (``_waiting``)."""
    f = facts
    progress = progress_message(f.counts)
    if f.selects_all:
        progress += "; spec.nodeSelector is empty, so the pool selects every node"
    if f.domain:
        progress += f"; {f.domain}"
    if f.order:
        progress += f"; {f.order}"
    if (cond := _not_rolling(f, progress)) is not None:
        return cond
    if f.counts.updated == f.counts.total:
        reason = c.REASON_ALL_UPDATED if f.counts.total else c.REASON_NO_MATCHING_NODES
        return True, reason, progress
    if (cond := _stopped(f, progress)) is not None:
        return cond
    return _waiting(f, progress)


def _not_rolling(f: RolloutFacts, progress: str) -> Condition | None:
    """An invalid spec, a refused signature, a target not known yet, or membership not
    done with this generation."""
    if f.invalid:
        return False, c.REASON_INVALID_SPEC, f"{f.invalid}; {progress}"
    if f.signature_error is not None:
        reason, message = f.signature_error
        if reason == c.REASON_SIGNATURE_VERIFICATION_FAILED and not f.target_known:
            # the target withdrawn (slots.plan_withdrawn): no slot stays held for it
            message += (
                "; no digest's verification holds: nodes stay on what they run, none is "
                "told to reboot, and nodes draining for a reboot slot are uncordoned and "
                "give it back"
            )
            return False, reason, f"{message}; {progress}"
        return False, reason, f"{message}; nodes stay on what they run; {progress}"
    if f.unverified:
        return False, c.REASON_PENDING, f"verifying the signature of {f.unverified}; {progress}"
    if not f.target_known:
        if f.tag_error:
            return False, c.REASON_TAG_RESOLUTION_ERROR, f"{f.tag_error}; {progress}"
        return False, c.REASON_PENDING, f"waiting for tag {f.tag} to be resolved; {progress}"
    if not f.membership_done:
        what = f"generation {f.generation}" if f.generation is not None else "the spec"
        return (
            False,
            c.REASON_PENDING,
            f"nodes not yet matched against {what} of the spec; {progress}",
        )
    return None


def _stopped(f: RolloutFacts, progress: str) -> Condition | None:
    """A failed health check, a halt, pause, a closed window, the alert gate, approval."""
    if f.health_failed:
        return False, c.REASON_HEALTH_CHECK_FAILED, f"{f.health_failed}; {progress}"
    if f.halted:
        return False, c.REASON_ROLLOUT_HALTED, f"{f.halted}; {progress}"
    if f.paused:
        return False, c.REASON_PAUSED, f"rollout paused: {progress}"
    if f.window_closed:
        return (
            False,
            c.REASON_AWAITING_MAINTENANCE_WINDOW,
            f"no new reboots outside maintenance windows; {f.next_window}; {progress}",
        )
    if f.blocked_by_alerts:
        reason = f.blocked_reason or c.REASON_BLOCKED_BY_ALERTS
        return False, reason, f"{f.blocked_by_alerts}; {progress}"
    if f.awaiting_approval:
        return False, c.REASON_AWAITING_APPROVAL, f"{f.awaiting_approval}; {progress}"
    return None


def _waiting(f: RolloutFacts, progress: str) -> Condition:
    """Under way: canaries first, health checks, a budget of 0 or used up by others."""
    if f.canaries:
        progress += f"; {f.canaries}"
    if f.health_pending:
        return False, c.REASON_HEALTH_CHECK_PENDING, f"{progress}; {f.health_pending}"
    if f.max_unavailable == 0:
        return (
            False,
            c.REASON_ROLLOUT_BLOCKED,
            f"maxUnavailable is 0, so no node may reboot; {progress}",
        )
    if f.budget_used_by:
        # maxUnavailable is used up by nodes outside the rollout
        moving = f.counts.draining + f.counts.rebooting
        reason = c.REASON_ROLLOUT_IN_PROGRESS if moving else c.REASON_ROLLOUT_BLOCKED
        return False, reason, f"{progress}; waiting: {f.budget_used_by}"
    return False, c.REASON_ROLLOUT_IN_PROGRESS, progress


def phase(up_reason: str, degraded: bool, degraded_reason: str) -> str:
    """The one word of ``kubectl get bnp``'s PHASE column, from the two conditions."""
    if degraded and degraded_reason in (c.REASON_ROLLOUT_HALTED, c.REASON_HEALTH_CHECK_FAILED):
        return c.PHASE_HALTED
    if degraded:
        return c.PHASE_DEGRADED
    return {
        c.REASON_ALL_UPDATED: c.PHASE_UP_TO_DATE,
        c.REASON_NO_MATCHING_NODES: c.PHASE_UP_TO_DATE,
        c.REASON_PENDING: c.PHASE_PENDING,
        c.REASON_PAUSED: c.PHASE_PAUSED,
        c.REASON_ROLLOUT_BLOCKED: c.PHASE_BLOCKED,
        c.REASON_AWAITING_MAINTENANCE_WINDOW: c.PHASE_AWAITING_WINDOW,
        c.REASON_ROLLOUT_HALTED: c.PHASE_HALTED,
        c.REASON_HEALTH_CHECK_FAILED: c.PHASE_HALTED,
        c.REASON_AWAITING_APPROVAL: c.PHASE_AWAITING_APPROVAL,
        c.REASON_BLOCKED_BY_ALERTS: c.PHASE_BLOCKED,
        c.REASON_PRECONDITION_NOT_MET: c.PHASE_BLOCKED,
    }.get(up_reason, c.PHASE_PROGRESSING)


#: reasons (of UpToDate or Degraded) that stop a rollout until a person acts: a halt
#: (too many unhealthy slot holders, a drain that timed out with onTimeout Halt, a
#: failed health check), a spec the controller cannot act on, a target whose
#: signature is refused. kstatus calls the pool Failed.
STALLING_REASONS: frozenset[str] = frozenset(
    {
        c.REASON_ROLLOUT_HALTED,
        c.REASON_HEALTH_CHECK_FAILED,
        c.REASON_INVALID_SPEC,
        c.REASON_SIGNATURE_VERIFICATION_FAILED,
    }
)
#: UpToDate reasons of a rollout that waits for a person's decision, by design: not
#: under way, not stalled either (kstatus InProgress, through Ready=False)
AWAITING_A_PERSON: frozenset[str] = frozenset({c.REASON_PAUSED, c.REASON_AWAITING_APPROVAL})


def pool_kstatus(
    up: tuple[bool, str, str], degraded: tuple[bool, str, str], phase_word: str
) -> KStatus:
    """The pool's kstatus conditions from its UpToDate and Degraded (status, reason,
    message) and its phase (module docstring)."""
    up_status, up_reason, up_message = up
    deg_status, deg_reason, deg_message = degraded
    if up_status:
        return KStatus(True, up_reason, up_message)
    if up_reason in STALLING_REASONS:
        return KStatus(False, up_reason, up_message, stalled=True)
    if deg_status and deg_reason in STALLING_REASONS:
        return KStatus(False, deg_reason, deg_message, stalled=True)
    if up_reason in AWAITING_A_PERSON:
        return KStatus(False, up_reason, up_message)
    return KStatus(False, up_reason, up_message, reconciling=True, detail=phase_word)


def degraded_condition(problems: Mapping[str, str]) -> tuple[bool, str, str]:
    """(status, reason, message): the highest-precedence problem, or Healthy.

    ``problems`` maps a Degraded reason to its message. Lower-precedence problems
    are appended to the message so nothing is hidden.
    """
    present = [r for r in reversed(c.DEGRADED_PRECEDENCE) if problems.get(r)]
    unknown = sorted(set(problems) - set(c.DEGRADED_PRECEDENCE))
    if unknown:
        raise ValueError(f"unknown Degraded reasons: {unknown}")
    if not present:
        return False, c.REASON_HEALTHY, "all nodes healthy"
    top, *rest = present
    message = problems[top]
    if rest:
        message += "; also: " + "; ".join(f"{r}: {problems[r]}" for r in rest)
    return True, top, message


def degraded_nodes_message(views: Iterable[NodeView], limit: int = 5) -> str:
    """``node-a: error: ...; node-b: ...`` naming up to ``limit`` degraded nodes."""
    bad = sorted((v for v in views if v.state is NodeState.DEGRADED), key=lambda v: v.name)
    shown = [f"{v.name}: {v.degraded_message or 'degraded'}" for v in bad[:limit]]
    if len(bad) > limit:
        shown.append(f"and {len(bad) - limit} more")
    return "; ".join(shown)


def halted_message(unhealthy: Sequence[str], max_unhealthy: int) -> str:
    """The RolloutHalted message: the unhealthy slot holders, named, and the threshold."""
    k = len(unhealthy)
    return (
        f"{counted(k, 'node')} holding {noun(k, 'a reboot slot', 'reboot slots')} "
        f"{noun(k, 'is', 'are')} unhealthy ({', '.join(unhealthy)}; maxUnhealthy is "
        f"{max_unhealthy}); no new reboots until {noun(k, 'it recovers', 'they recover')}"
    )
