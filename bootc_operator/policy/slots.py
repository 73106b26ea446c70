"""Reboot-slot decisions: which nodes release, keep or take a slot, and which drain.

``plan_rollout`` is a pure function of the pool's ``NodeView``s, the resolved
maxUnavailable, pause, the reboot timeout and the current time. The rollout
reconciler turns its answer into API writes. Rules (DESIGN §3):

- A slot holder is released when it runs a target digest, is Idle, not
  Degraded and its Node is Ready; or when the target moved on while it was
  still waiting to reboot (its drain is cancelled, it re-stages, competes again).
- A holder is *unhealthy* when Degraded, or NotReady while not rebooting, or
  still rebooting/NotReady past ``reboot_timeout`` after its reboot was requested
  (``bootc.dev/reboot-requested``; for holders without it, the time the slot was
  taken). Not the Idle condition's lastTransitionTime: that is when the node
  started *staging*, possibly long before it got a slot. ``max_unhealthy``
  (``spec.rollout.maxUnhealthy``, default 2) unhealthy holders halt the rollout:
  no new slots until they recover.
- The budget counts every *unavailable* member, like a Deployment's unavailable
  pods: slot holders, and members outside the rollout that are NotReady or
  unschedulable (cordoned by someone else). Slot holders never exceed
  ``max_unavailable``; a node that is available takes a slot only while slot
  holders plus outside-unavailable members stay below ``max_unavailable``; a node
  already unschedulable may take a free slot whatever the others (updating it
  costs no capacity). When outside nodes use up the budget the plan names them
  (``outside``) and says so (``budget_blocked``).
- New slots: none while paused, halted or outside a maintenance window
  (``window_open``); only healthy, Ready, Staged nodes whose spec already names
  the target. Order is deterministic: already-unavailable (unschedulable) nodes
  first, then the one staged longest (Idle condition's transition), then by name.
- With a topology (``spec.rollout.topology``) only members of the current
  domain take slots (``topology.current_domain``); candidates elsewhere wait
  (``other_domains``).
- With an order (``spec.rollout.order``) the candidates go in that order
  (``order.order_key``) instead; ``next_up`` lists them as they will go.
- A holder that is Staged with ``desiredImageState: Staged`` must be drained;
  after the drain the reconciler sets ``Booted``.
- A pool whose target was *withdrawn* (``spec.image.verification``: no digest's
  signature verification holds any more, a key revoked or rotated) plans nothing
  but the slots (``plan_withdrawn``): a holder not yet told to reboot gives its
  slot back at once (its drain is cancelled, its cordon restored: no node stays
  cordoned for a reboot that will not come); one told to reboot keeps it until
  it is back (Idle, not Degraded, Ready, running its ``desiredImage``), then
  gives it back. No slot is taken, no node told to reboot.
- ``desiredImageState: Booted`` is only ever legitimate on a node holding a
  *drained* slot (``bootc.dev/in-reboot-slot`` and ``bootc.dev/reboot-requested``).
  Anywhere else (written by hand, or left by another operator) it is put back to
  ``Staged`` (``restore``): the daemon would otherwise reboot an undrained node.
  Releasing a slot writes ``Staged`` too, so the rule holds at rest.
- A slot this controller did not take is *adopted* (``adoption``): the Go
  bootc-operator, or an older controller, left it. The Go operator writes
  ``in-reboot-slot`` with an empty value and sets ``Booted`` after its drain
  without ``reboot-requested``. Adopting stamps the slot with the time it was
  adopted (the drain and reboot timeouts count from it) and puts such a ``Booted``
  back to ``Staged`` in the same write; the holder is then drained again (a
  drain is idempotent: nothing left to evict finishes at once) and told to
  reboot with ``reboot-requested`` like any other. Not a Warning: nothing unsafe
  was found, the rule above was only not yet written down on that node.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.wire import DesiredImageState
from bootc_operator.policy.autoscaler import PROTECT, protection_to_reapply, restore_annotations
from bootc_operator.policy.drainplan import halting_drains
from bootc_operator.policy.health import GateResult, Verdict, choose_canaries
from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.policy.order import Order, order_key
from bootc_operator.policy.ownership import retarget_due
from bootc_operator.policy.poolspec import Budgets, PoolPolicy
from bootc_operator.policy.topology import Topology, current_domain
from bootc_operator.policy.windows import WindowState, window_state

BOOTED = DesiredImageState.BOOTED.value
STAGED = DesiredImageState.STAGED.value


@dataclass(frozen=True, slots=True)
class RolloutPlan:
    release: tuple[str, ...] = ()  # free the slot, restore the cordon state
    cancel: tuple[str, ...] = ()  # subset of release: target moved mid-drain
    withdrawn: tuple[str, ...] = ()  # subset of release: target withdrawn before the reboot
    take: tuple[str, ...] = ()  # annotate, cordon, then drain
    drain: tuple[str, ...] = ()  # holders that still need (or are in) a drain
    holders: tuple[str, ...] = ()  # slot holders after this plan (kept + taken)
    unhealthy: tuple[str, ...] = ()
    halted: bool = False
    waiting: tuple[str, ...] = field(default=())  # healthy Staged nodes left without a slot
    restore: tuple[str, ...] = ()  # Booted without a drained slot: put back to Staged
    # members outside the rollout that count against the budget: (name, why)
    outside: tuple[tuple[str, str], ...] = ()
    budget_blocked: bool = False  # a candidate waited because ``outside`` used the budget
    window_closed: bool = False  # candidates wait for a maintenance window
    max_unhealthy: int = 2
    max_unavailable: int = 1  # the budget this plan was made with
    stage: tuple[str, ...] = ()  # stageAhead: members to point at the target now
    # the health gate (spec.health): holders still being checked (name, check, message)
    gate_pending: tuple[tuple[str, str, str], ...] = ()
    # holders that failed it and keep their slot (Halt, or nothing to roll back to)
    health_failed: tuple[tuple[str, str, str], ...] = ()
    rollback: tuple[str, ...] = ()  # holders that failed it: roll back now (Rollback)
    held_back: tuple[str, ...] = ()  # members rolled back from the current target
    canaries: tuple[str, ...] = ()
    canary_pending: tuple[str, ...] = ()  # canaries not yet updated (and passed)
    awaiting_approval: bool = False  # canaries passed; approvedDigest is not the target
    alerts_blocked: bool = False  # candidates wait: a blocking alert fires (or unknown)
    # spec.rollout.topology: the domain slots stay in (None: no topology, or all done)
    domain: str | None = None
    other_domains: tuple[str, ...] = ()  # candidates waiting in a later domain
    # spec.rollout.order: the candidates left waiting (current domain), in the order they go
    next_up: tuple[str, ...] = ()
    drain_halted: tuple[str, ...] = ()  # holders past their drain timeout (onTimeout: Halt)

    @property
    def health_halted(self) -> bool:
        """A node failed its health check on the current target: no new slots."""
        return bool(self.health_failed or self.rollback or self.held_back)


def reboot_clock(v: NodeView) -> dt.datetime | None:
    """Since when ``v``'s reboot counts against the reboot timeout."""
    return v.reboot_requested_at or v.slot_since or v.idle_since


def _timed_out(v: NodeView, now: dt.datetime, reboot_timeout: float | None) -> bool:
    since = reboot_clock(v)
    if reboot_timeout is None or reboot_timeout <= 0 or since is None:
        return False
    return (now - since).total_seconds() > reboot_timeout


def is_unhealthy_holder(v: NodeView, now: dt.datetime, reboot_timeout: float | None) -> bool:
    if v.state is NodeState.DEGRADED:
        return True
    rebooting = v.state is NodeState.REBOOTING or v.desired_image_state == BOOTED
    if rebooting:
        return _timed_out(v, now, reboot_timeout)
    if not v.ready:
        # NotReady while up to date: the node came back from its reboot but never
        # became Ready; give it the reboot timeout before calling it unhealthy.
        return v.state is not NodeState.UP_TO_DATE or _timed_out(v, now, reboot_timeout)
    return False


# ------------------------------------------------------------------ the slot protocol
#
# A slot lives in three BootcNode annotations: taken (``in-reboot-slot``, with
# ``was-cordoned`` saying whether someone else had cordoned the Node), and drained
# (``reboot-requested``, written with ``Booted``). These functions are the only
# place that spells them; rollout and membership both use them.


def take_patch(
    taken_at: str, *, was_cordoned: bool, autoscaler_prior: str | None = None
) -> dict[str, Any]:
    """The BootcNode merge patch that takes a slot (written *before* cordoning);
    ``autoscaler_prior``: ``autoscaler.prior_record`` of the Node."""
    annotations = {
        c.IN_REBOOT_SLOT_ANNOTATION: taken_at,
        c.WAS_CORDONED_ANNOTATION: "true" if was_cordoned else "false",
    }
    if autoscaler_prior is not None:
        annotations[c.AUTOSCALER_PRIOR_ANNOTATION] = autoscaler_prior
    return {"metadata": {"annotations": annotations}}


def node_take_patch() -> dict[str, Any]:
    """The Node merge patch of a slot taken (after ``take_patch``): cordon, and the
    autoscalers told to leave it alone (``autoscaler.PROTECT``)."""
    return {"spec": {"unschedulable": True}, "metadata": {"annotations": dict(PROTECT)}}


def hold_repair_patch(
    node: Mapping[str, Any], bootc_node_annotations: Mapping[str, str], *, cordon: bool
) -> dict[str, Any]:
    """The Node merge patch that puts back what someone took off a slot holder's
    Node: the cordon (when ``cordon``: while it drains) and the autoscaler
    annotations (``autoscaler.protection_to_reapply``). Empty: nothing to write."""
    patch: dict[str, Any] = {}
    if cordon and not (node.get("spec") or {}).get("unschedulable"):
        patch["spec"] = {"unschedulable": True}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if lost := protection_to_reapply(annotations, bootc_node_annotations):
        patch["metadata"] = {"annotations": lost}
    return patch


def node_release_patch(annotations: Mapping[str, str]) -> dict[str, Any]:
    """The Node merge patch that gives a slot (or the node) back, from the BootcNode's
    ``annotations``: uncordon per ``must_uncordon``, the autoscaler annotations as
    recorded (``autoscaler.restore_annotations``). Empty: nothing to write."""
    patch: dict[str, Any] = {}
    if must_uncordon(annotations):
        patch["spec"] = {"unschedulable": None}
    if restore := restore_annotations(annotations):
        patch["metadata"] = {"annotations": restore}
    return patch


def release_annotations() -> dict[str, str | None]:
    """The merge-patch annotations that give a slot back (its whole memory)."""
    return {
        c.IN_REBOOT_SLOT_ANNOTATION: None,
        c.WAS_CORDONED_ANNOTATION: None,
        c.AUTOSCALER_PRIOR_ANNOTATION: None,
        c.REBOOT_REQUESTED_ANNOTATION: None,
        c.HEALTH_CHECK_ANNOTATION: None,
        c.DRAIN_SUMMARY_ANNOTATION: None,
        c.DRAIN_SKIPPED_ANNOTATION: None,
    }


def release_patch(
    desired_image_state: str, extra_annotations: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """The BootcNode merge patch that gives a slot back (written *after* the cordon is
    restored); ``Booted`` goes back to ``Staged`` (see ``must_restore_staged``)."""
    patch: dict[str, Any] = {
        "metadata": {"annotations": release_annotations() | dict(extra_annotations or {})}
    }
    if desired_image_state != STAGED:
        patch["spec"] = {"desiredImageState": STAGED}
    return patch


def must_uncordon(annotations: Mapping[str, str]) -> bool:
    """Whether giving the slot back (or the node) must uncordon the Node.

    A slot holder was cordoned by us unless ``was-cordoned`` says someone else had
    (``"true"``); outside a slot only an explicit ``"false"`` left behind counts.
    """
    if c.IN_REBOOT_SLOT_ANNOTATION in annotations:
        return annotations.get(c.WAS_CORDONED_ANNOTATION) != "true"
    return annotations.get(c.WAS_CORDONED_ANNOTATION) == "false"


def gives_slot_back_on_retarget(annotations: Mapping[str, str], desired_image_state: str) -> bool:
    """A new target voids a holder's drain unless it was already told to reboot: the
    slot goes back in the same write that moves desiredImage."""
    return c.IN_REBOOT_SLOT_ANNOTATION in annotations and desired_image_state != BOOTED


def retargets_due(views: Iterable[NodeView], policy: PoolPolicy) -> tuple[str, ...]:
    """The members the rollout loop points at the pool's target before its plan
    (``ownership.retarget_due``), by name: the holders (their slot given back in the
    same write when their drain is void) and every other member, unless the pool
    stages ahead (the plan's stage step) or its selector is invalid (nothing is
    matched: members keep what they were told). The status loop claims a generation
    only once none is due (``poolsummary.membership_done``)."""
    every_member = policy.selector_ok and policy.stage_ahead is None
    return tuple(
        sorted(
            v.name
            for v in views
            if retarget_due(
                policy.desired_image,
                v.desired_image or None,
                in_slot=v.in_slot,
                failed_digest=v.health_failed,
                every_member=every_member,
            )
        )
    )


def gives_node_back(annotations: Mapping[str, str]) -> bool:
    """A member leaving its pool whose Node a slot changed (cordon, autoscaler
    annotations: ``node_release_patch``): membership hands it to rollout, which gives
    the Node back, before it deletes the BootcNode."""
    return bool(node_release_patch(annotations))


def holds_drained_slot(v: NodeView) -> bool:
    """The node was given a slot and drained, so it may be told to reboot."""
    return v.in_slot and v.reboot_requested_at is not None


def must_restore_staged(v: NodeView) -> bool:
    """``desiredImageState: Booted`` that the rollout did not write (see module doc)."""
    return v.desired_image_state == BOOTED and not holds_drained_slot(v)


@dataclass(frozen=True, slots=True)
class Adoption:
    """Taking over a slot holder from a previous controller (module doc)."""

    stamp: bool  # the slot carries no time: write the adoption time
    restore: bool  # Booted without reboot-requested: back to Staged, drained again
    why: str  # how it shows it was not taken by this controller
    found: str  # what the previous controller left
    then: str  # what happens next

    def message(self, name: str) -> str:
        """The ``SlotAdopted`` Event's text."""
        return (
            f"{name}: adopted reboot slot from a previous controller ({self.why}): "
            f"found {self.found}; {self.then}"
        )


def adoption(v: NodeView, since: dt.datetime) -> Adoption | None:
    """How to adopt slot holder ``v`` (None: nothing to adopt). ``since``: when this
    controller began rolling out; a slot stamped before then, or not stamped at all
    (the Go operator writes an empty value), was taken by a previous controller.

    A ``Booted`` without ``reboot-requested`` on a slot *this* controller took was
    written by someone else mid-drain: that is ``must_restore_staged``'s Warning,
    not an adoption.
    """
    if not v.in_slot:
        return None
    stamp = v.slot_since is None
    previous = stamp or (v.slot_since is not None and v.slot_since < since)
    restore = previous and must_restore_staged(v)
    if not stamp and not restore:
        return None
    cordon = "cordoned by someone else before" if v.was_cordoned else "cordoned for its slot"
    if v.state is NodeState.UP_TO_DATE:
        found = "it already runs the target"
        then = "its slot is released once it is Ready"
    elif v.state is NodeState.REBOOTING:
        found = "it is rebooting"
        then = "its slot is released once it is back and Ready"
    elif v.state is NodeState.DEGRADED:
        found = f"it is degraded ({v.degraded_message})" if v.degraded_message else "it is degraded"
        then = "it keeps the slot until it recovers"
    elif v.state is NodeState.STAGED and restore:
        found = "it was drained and told to reboot"
        then = "desiredImageState set back to Staged; it is drained again and then told to reboot"
    elif v.state is NodeState.STAGED:
        found = "its drain under way"
        then = "its drain is resumed; it is then told to reboot"
    else:
        found = f"it is {v.state.value.lower()}"
        then = "it keeps the slot"
    if restore and v.state is not NodeState.STAGED:
        then = f"desiredImageState set back to Staged; {then}"
    if restore:
        why = "desiredImageState Booted without a reboot-requested annotation"
    else:
        why = "no time on its in-reboot-slot annotation"
    return Adoption(stamp, restore, why, f"{found}, {cordon}", then)


def adoption_patch(adopt: Adoption, now: str) -> dict[str, Any]:
    """The one BootcNode merge patch that adopts a slot holder."""
    patch: dict[str, Any] = {}
    if adopt.stamp:
        patch["metadata"] = {"annotations": {c.IN_REBOOT_SLOT_ANNOTATION: now}}
    if adopt.restore:
        patch["spec"] = {"desiredImageState": STAGED}
    return patch


def should_release(v: NodeView, gate: GateResult | None = None) -> tuple[bool, bool]:
    """(release?, because the target moved?) for a slot holder; ``gate``: its health
    gate's verdict, when the pool has one and the holder arrived on the target."""
    if v.state is NodeState.DEGRADED or not v.ready:
        return False, False
    if v.rolling_back:
        # failed its health check: done once it runs the image it was rolled back to
        return v.idle and v.booted_desired, False
    if v.state is NodeState.UP_TO_DATE and v.idle:
        return gate is None or gate.verdict is Verdict.PASSED, False
    target_moved = v.state in (NodeState.PENDING, NodeState.STAGING) or not v.spec_in_sync
    if target_moved and v.desired_image_state == STAGED:
        return True, True
    return False, False


def is_candidate(v: NodeView) -> bool:
    return (
        not v.in_slot
        and not v.held_back
        and not v.departing  # an autoscaler is removing it: updating it only delays that
        and v.state is NodeState.STAGED
        and v.spec_in_sync
        and v.ready
        and v.desired_image_state == STAGED
    )


def outside_unavailable(v: NodeView, *, released: bool = False) -> str:
    """Why member ``v`` counts against the budget outside the rollout ("" if it does not).

    ``released``: it gives its slot back in this plan (it stays unschedulable only
    if someone else had cordoned it).
    """
    if v.in_slot and not released:
        return ""
    if not v.ready:
        return "NotReady"
    if released:
        return "cordoned by someone else" if v.was_cordoned else ""
    return "cordoned by someone else" if v.unschedulable else ""


def slot_order(v: NodeView) -> tuple[bool, dt.datetime, str]:
    """Already unavailable first, then staged longest, then by name."""
    return (not v.unschedulable, v.idle_since or dt.datetime.max.replace(tzinfo=dt.UTC), v.name)


@dataclass(frozen=True, slots=True)
class Gates:
    """What holds new slots back from outside the slot plan, judged before it: the
    holders' health-gate verdicts (``health.gate_results``, those that arrived on the
    target), the canaries (``health.choose_canaries``), the maintenance window, the
    alert gate, the drains past their timeout under ``onTimeout: Halt``, and the nodes
    whose last take was refused (``refusals.Refusals.excluded``: no candidates for
    now, the next ones go)."""

    health: Mapping[str, GateResult] = field(default_factory=dict)
    canaries: frozenset[str] = frozenset()
    window_open: bool = True
    alerts_blocked: bool = False
    drain_halted: tuple[str, ...] = ()
    refused: frozenset[str] = frozenset()

    @property
    def stop_new_slots(self) -> bool:
        """A closed window, a blocking alert or a halting drain: no new slots."""
        return not self.window_open or self.alerts_blocked or bool(self.drain_halted)


def plan_rollout(
    policy: PoolPolicy,
    budgets: Budgets,
    views: Iterable[NodeView],
    now: dt.datetime,
    gates: Gates,
) -> RolloutPlan:
    """The slot decisions (module doc), step by step: the holders that release
    (``release_step``) and how healthy the rest are (``holder_health``); the
    candidates in order (``candidates``), canaries first (``canary_step``), inside the
    current domain (``topology_step``); then the slots the budget leaves
    (``budget_step``)."""
    nodes = sorted(views, key=lambda v: v.name)
    holders = release_step(nodes, gates.health)
    health = holder_health(holders.kept, now, policy, budgets, gates.health)
    queue = canary_step(
        nodes,
        candidates(nodes, policy.order, gates.refused),
        gates.canaries,
        policy.awaiting_approval,
    )
    zone = topology_step(policy.topology, nodes, holders.kept, queue)
    held_back = tuple(v.name for v in nodes if v.held_back)
    stopped = health.stops or bool(held_back) or queue.awaiting_approval
    free = budgets.max_unavailable - len(holders.kept)
    capacity = 0 if policy.paused or stopped or gates.stop_new_slots else max(0, free)
    # the current domain's own budget; and unavailable members (holders and
    # outside) may not exceed max_unavailable
    capacity = capacity if zone.room is None else min(capacity, zone.room)
    slots = budget_step(zone.candidates, capacity, free - len(holders.outside))
    return RolloutPlan(
        restore=tuple(v.name for v in nodes if must_restore_staged(v)),
        release=holders.release,
        cancel=holders.cancel,
        take=slots.take,
        drain=tuple(v.name for v in holders.kept if _needs_drain(v)) + slots.take,
        holders=tuple(sorted([v.name for v in holders.kept] + list(slots.take))),
        unhealthy=health.unhealthy,
        halted=health.halted,
        waiting=slots.waiting + zone.other_domains,
        outside=holders.outside,
        budget_blocked=slots.budget_blocked,
        window_closed=not gates.window_open and bool(zone.candidates),
        max_unhealthy=max(1, budgets.max_unhealthy),
        max_unavailable=budgets.max_unavailable,
        gate_pending=health.gate_pending,
        health_failed=health.health_failed,
        rollback=health.rollback,
        held_back=held_back,
        canaries=tuple(sorted(gates.canaries)),
        canary_pending=queue.canary_pending,
        awaiting_approval=queue.awaiting_approval,
        alerts_blocked=gates.alerts_blocked and bool(zone.candidates),
        domain=zone.domain,
        other_domains=zone.other_domains,
        next_up=tuple(v.name for v in zone.candidates if v.name not in slots.take)
        if policy.order
        else (),
        drain_halted=gates.drain_halted,
    )


def _needs_drain(v: NodeView) -> bool:
    """A holder staged and not yet told to reboot: it is drained (first)."""
    return v.state is NodeState.STAGED and v.desired_image_state == STAGED and v.spec_in_sync


# ------------------------------------------------------------------ the plan's steps


@dataclass(frozen=True, slots=True)
class Holders:
    """``release_step``: the holders that give their slot back and those that keep it."""

    release: tuple[str, ...] = ()
    cancel: tuple[str, ...] = ()  # of ``release``: the target moved mid-drain
    kept: tuple[NodeView, ...] = ()
    outside: tuple[tuple[str, str], ...] = ()  # members outside the rollout, unavailable


def release_step(nodes: Sequence[NodeView], health: Mapping[str, GateResult]) -> Holders:
    """Which holders release (``should_release``), and which members count against the
    budget from outside the rollout (``outside_unavailable``)."""
    release: list[str] = []
    cancel: list[str] = []
    kept: list[NodeView] = []
    outside: list[tuple[str, str]] = []
    for v in nodes:
        if not v.in_slot:
            if why := outside_unavailable(v):
                outside.append((v.name, why))
            continue
        free, moved = should_release(v, health.get(v.name))
        if not free:
            kept.append(v)
            continue
        release.append(v.name)
        if moved:
            cancel.append(v.name)
        if why := outside_unavailable(v, released=True):
            outside.append((v.name, why))
    return Holders(tuple(release), tuple(cancel), tuple(kept), tuple(outside))


@dataclass(frozen=True, slots=True)
class HolderHealth:
    """``holder_health``: the kept holders' health, and whether it stops new slots."""

    unhealthy: tuple[str, ...] = ()
    halted: bool = False  # ``max_unhealthy`` holders are unhealthy
    gate_pending: tuple[tuple[str, str, str], ...] = ()  # (name, check, message)
    health_failed: tuple[tuple[str, str, str], ...] = ()  # they keep their slot
    rollback: tuple[str, ...] = ()  # failed, with a rollback deployment: roll back

    @property
    def stops(self) -> bool:
        return self.halted or bool(self.health_failed or self.rollback)


def holder_health(
    kept: Sequence[NodeView],
    now: dt.datetime,
    policy: PoolPolicy,
    budgets: Budgets,
    health: Mapping[str, GateResult],
) -> HolderHealth:
    """Unhealthy holders (``is_unhealthy_holder``; ``max_unhealthy`` of them halt) and
    the health gate's verdicts: pending, failed (keeps its slot), or rolled back
    (``onFailure: Rollback`` and a rollback deployment on the host)."""
    unhealthy = tuple(v.name for v in kept if is_unhealthy_holder(v, now, policy.reboot_timeout))
    rollback_on_failure = policy.health is not None and policy.health.rollback
    pending: list[tuple[str, str, str]] = []
    failed: list[tuple[str, str, str]] = []
    rollback: list[str] = []
    for v in kept:
        gate = health.get(v.name)
        if gate is None or gate.verdict is Verdict.PASSED:
            continue
        if gate.verdict is Verdict.PENDING:
            pending.append((v.name, gate.check, gate.message))
        elif rollback_on_failure and v.rollback_image:
            rollback.append(v.name)
        elif rollback_on_failure:
            note = f"{gate.message}; no rollback deployment on the host to roll back to"
            failed.append((v.name, gate.check, note))
        else:
            failed.append((v.name, gate.check, gate.message))
    halted = len(unhealthy) >= max(1, budgets.max_unhealthy)
    return HolderHealth(unhealthy, halted, tuple(pending), tuple(failed), tuple(rollback))


def candidates(
    nodes: Iterable[NodeView], order: Order | None, refused: frozenset[str] = frozenset()
) -> list[NodeView]:
    """The members that may take a slot (``is_candidate``, not ``refused``), in the
    order they take them: the admin's ``order`` (``order.order_key``), else
    ``slot_order``; nodes a drain timeout skipped (``onTimeout: Skip``) after the
    others, fewest skips first."""
    return sorted(
        (v for v in nodes if is_candidate(v) and v.name not in refused),
        key=lambda v: (v.drain_skips, slot_order(v) if order is None else order_key(order, v)),
    )


@dataclass(frozen=True, slots=True)
class Queue:
    """``canary_step``: the candidates the canaries leave, and what they wait for."""

    candidates: tuple[NodeView, ...] = ()
    canary_pending: tuple[str, ...] = ()  # canaries not yet updated (and passed)
    awaiting_approval: bool = False


def canary_step(
    nodes: Iterable[NodeView],
    queue: Sequence[NodeView],
    canaries: frozenset[str],
    approval_needed: bool,
) -> Queue:
    """While a canary is not updated only canaries may take slots; once all are, with
    ``approval_needed`` nobody until the target is approved."""
    pending = tuple(
        v.name
        for v in nodes
        if v.name in canaries and not (v.state is NodeState.UP_TO_DATE and not v.in_slot)
    )
    if pending:
        return Queue(tuple(v for v in queue if v.name in canaries), pending)
    return Queue(tuple(queue), (), approval_needed and bool(queue))


@dataclass(frozen=True, slots=True)
class Zone:
    """``topology_step``: the current domain, its candidates and its own budget."""

    candidates: tuple[NodeView, ...] = ()
    domain: str | None = None
    other_domains: tuple[str, ...] = ()  # candidates waiting in a later domain
    room: int | None = None  # slots the domain's own budget leaves (None: no such budget)


def topology_step(
    topology: Topology | None, nodes: Sequence[NodeView], kept: Sequence[NodeView], queue: Queue
) -> Zone:
    """With ``spec.rollout.topology`` only the current domain's candidates take slots
    (``topology.current_domain``; canaries' domains first), within its own budget."""
    if topology is None:
        return Zone(queue.candidates)
    domain = current_domain(
        topology,
        nodes,
        holders={v.name for v in kept},
        only=frozenset(queue.canary_pending) if queue.canary_pending else None,
    )
    inside = tuple(v for v in queue.candidates if topology.domain(v) == domain)
    others = tuple(v.name for v in queue.candidates if topology.domain(v) != domain)
    own = topology.budget(sum(1 for v in nodes if topology.domain(v) == domain))
    room = None
    if own is not None:
        # the current domain's own budget: its holders count against it
        room = max(0, own - sum(1 for v in kept if topology.domain(v) == domain))
    return Zone(inside, domain, others, room)


@dataclass(frozen=True, slots=True)
class Slots:
    """``budget_step``: the candidates that take a slot now and those that wait."""

    take: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    budget_blocked: bool = False  # a candidate waited because outside members used it


def budget_step(queue: Sequence[NodeView], capacity: int, budget: int) -> Slots:
    """Candidates in order take the ``capacity`` free slots while the ``budget`` of
    unavailable members lasts; one already unschedulable costs no budget (it counts
    as outside already)."""
    take: list[str] = []
    waiting: list[str] = []
    blocked = False
    for v in queue:
        if len(take) >= capacity:
            waiting.append(v.name)
        elif v.unschedulable:
            take.append(v.name)
        elif budget > 0:
            take.append(v.name)
            budget -= 1
        else:
            blocked = True
            waiting.append(v.name)
    return Slots(tuple(take), tuple(waiting), blocked)


def plan_staging(
    views: Iterable[NodeView],
    stage_ahead: int | None,
    canaries: frozenset[str] = frozenset(),
    topology: Topology | None = None,
    order: Order | None = None,
) -> tuple[str, ...]:
    """Members to point at the target now, under ``spec.rollout.stageAhead``.

    Like a player buffering ahead: at most ``stage_ahead`` members beyond the slot
    holders may be on their way (told the target, not yet running it: pending,
    staging, or staged and waiting for a slot). Members already running the target
    are retargeted at once (nothing to stage); degraded ones do not count (they
    are not staging). Among the rest: already-unavailable members first (they
    take slots first), then by name; canaries before all of them; with a
    ``topology``, domain by domain in its order (so the current domain never waits
    for room taken by a later one); with an ``order``, in that order instead of
    already-unavailable first and by name. Members held back from the target
    (rolled back), or that an autoscaler is removing (``departing``), never.
    None: unlimited, every member is retargeted at once (``retargets_due``).
    """
    if stage_ahead is None:
        return ()
    nodes = sorted(views, key=lambda v: v.name)
    # a node an autoscaler is removing never takes a slot: it would hold a place forever
    nodes = [v for v in nodes if not v.departing]
    on_the_way = sum(
        1
        for v in nodes
        if v.spec_in_sync
        and not v.in_slot
        and v.state in (NodeState.PENDING, NodeState.STAGING, NodeState.STAGED)
    )
    behind = [v for v in nodes if not v.spec_in_sync and not v.in_slot and not v.held_back]
    free = [v.name for v in behind if v.state is NodeState.UP_TO_DATE]
    rest = sorted(
        (v for v in behind if v.state is not NodeState.UP_TO_DATE),
        key=lambda v: (
            v.name not in canaries,
            topology.rank(topology.domain(v)) if topology is not None else (0, 0, ""),
            (not v.unschedulable, v.name) if order is None else order_key(order, v),
        ),
    )
    room = max(0, stage_ahead - on_the_way)
    return tuple(free + [v.name for v in rest[:room]])


def plan_pool(
    policy: PoolPolicy,
    views: Sequence[NodeView],
    now: dt.datetime,
    gates: Mapping[str, GateResult] | None = None,
    *,
    alerts_blocked: bool = False,
    refused: frozenset[str] = frozenset(),
) -> tuple[RolloutPlan, WindowState]:
    """``plan_rollout`` with the pool's own policy, budgets and gates, and its
    maintenance-window state; ``gates``: the health-gate verdicts
    (``health.gate_results``); ``alerts_blocked``: the alert gate's verdict;
    ``refused``: nodes that may not take a slot for now."""
    window = window_state(policy.windows, now)
    budgets = policy.budgets(len(views))
    judged = Gates(
        health=gates or {},
        canaries=choose_canaries(views, budgets.canaries),
        window_open=window.open,
        alerts_blocked=alerts_blocked,
        drain_halted=halting_drains(views, now, policy.drain),
        refused=refused,
    )
    plan = plan_rollout(policy, budgets, views, now, judged)
    stage = plan_staging(
        views,
        budgets.stage_ahead,
        canaries=judged.canaries,
        topology=policy.topology,
        order=policy.order,
    )
    return replace(plan, stage=stage), window


def asked_to_reboot(v: NodeView) -> bool:
    """The holder was told to reboot (``Booted``, or the drain's ``reboot-requested``):
    its daemon may be rebooting it now."""
    return v.desired_image_state == BOOTED or v.reboot_requested_at is not None


def plan_withdrawn(views: Iterable[NodeView]) -> RolloutPlan:
    """The slots of a pool whose target was withdrawn (module doc): holders not yet
    told to reboot release (``withdrawn``), the others once they are back; nothing
    else is planned (no take, no drain, no reboot)."""
    release: list[str] = []
    withdrawn: list[str] = []
    kept: list[str] = []
    for v in sorted(views, key=lambda v: v.name):
        if not v.in_slot:
            continue
        if not asked_to_reboot(v):
            release.append(v.name)
            withdrawn.append(v.name)
        elif (
            v.state not in (NodeState.DEGRADED, NodeState.REBOOTING)
            and v.ready
            and v.idle
            and v.booted_desired
        ):
            release.append(v.name)  # back, running what it was told to reboot into
        else:
            kept.append(v.name)
    return RolloutPlan(release=tuple(release), withdrawn=tuple(withdrawn), holders=tuple(kept))


def next_reboot_deadline(
    views: Iterable[NodeView], now: dt.datetime, reboot_timeout: float | None
) -> float | None:
    """Seconds until the next slot holder could time out rebooting (None: no such holder).

    Reconcilers requeue for then: nothing else happens when a node never returns.
    """
    if not reboot_timeout or reboot_timeout <= 0:
        return None
    waits = [
        reboot_timeout - (now - since).total_seconds()
        for v in views
        if v.in_slot
        and (since := reboot_clock(v)) is not None
        and (not v.ready or v.state is NodeState.REBOOTING)
    ]
    future = [w for w in waits if w > 0]
    return min(future) + 0.5 if future else None


@dataclass(frozen=True, slots=True)
class GateNews:
    """What the pool's status says about health gates and canaries (messages, "" = none)."""

    failed: str = ""  # HealthCheckFailed (Degraded and UpToDate)
    pending: str = ""  # holders still being checked
    canaries: str = ""  # canaries going first
    approval: str = ""  # AwaitingApproval


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"and {len(items) - limit} more")
    return ", ".join(shown)


def gate_news(plan: RolloutPlan, views: Mapping[str, NodeView], policy: PoolPolicy) -> GateNews:
    """The status messages of a plan's health-gate and canary parts."""
    target = policy.target_digest or "the target"
    failed = [
        f"{name} failed its health check on {target}: {what}: {message}; it keeps its reboot slot"
        for name, what, message in plan.health_failed
    ]
    for name in plan.rollback:
        failed.append(f"{name} failed its health check on {target} and is being rolled back")
    for name in plan.held_back:
        v = views[name]
        how = "is being rolled back" if v.in_slot else "was rolled back"
        why = v.health_note.split(": ", 1)[1] if ": " in v.health_note else v.health_note
        failed.append(
            f"{name} failed its health check on {v.health_failed} and {how}"
            + (f" ({why})" if why else "")
        )
    if failed:
        failed.append("no new reboots until the target changes or the nodes recover")
    pending = [f"{name} ({what}: {message})" for name, what, message in plan.gate_pending]
    canaries = ""
    if plan.canary_pending:
        done = len(plan.canaries) - len(plan.canary_pending)
        canaries = (
            f"canaries first: {_names(plan.canaries)} ({done} of {len(plan.canaries)} "
            "updated and healthy)"
        )
    approval = ""
    if plan.awaiting_approval:
        n = len(plan.canaries)
        approval = (
            f"{n} {'canary' if n == 1 else 'canaries'} healthy on {target}; set "
            f"spec.rollout.approvedDigest to {target} to continue"
        )
    return GateNews(
        failed="; ".join(failed),
        pending=f"waiting for health checks: {'; '.join(pending)}" if pending else "",
        canaries=canaries,
        approval=approval,
    )
