"""What a pool waits for and why a node is where it is, in the controller's own terms.

The one place ``kubectl bootc`` calls the controller's pure decisions
(``bootc_operator.policy``): ``pool_report`` classifies the members
(``nodestate.view``), validates the spec (``poolspec.check_pool``), judges the health
gate (``health.gate_results``) and plans the slots (``slots.plan_pool``, which also
gives the maintenance-window state) exactly as the rollout and status reconcilers
do, from the same objects they read. What the plugin cannot see is taken from what
the controller published:

- a tag's digest: ``status.targetDigest`` (the controller resolves tags in memory);
- a signature: ``UpToDate`` says ``SignatureVerificationFailed`` or
  ``SignatureRegistryError``, and ``status.nextSignatureCheckTime`` when the
  controller looks again (the plugin checks no signature);
- the alert gate and the preconditions: the pool's ``UpToDate`` condition says
  ``BlockedByAlerts`` or ``PreconditionNotMet`` (the controller queried Prometheus;
  the plugin does not);
- a ``queries`` health check: the BootcNode's ``bootc.dev/health-check`` note (the
  controller asked Prometheus);
- a ``pods`` health check, when the caller could not list the node's pods: the
  BootcNode's ``bootc.dev/health-check`` note.

``waits_for`` names the one thing the pool waits for now (``Wait``: a kind and a
sentence); ``why_node`` / ``why_pool`` say it as one paragraph, with the current
domain of a topology and the admin's order of the nodes to come. All pure: the
caller passes ``now``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import parse_time
from bootc_operator.kubectl.table import NodeRow, condition_of, node_row, short
from bootc_operator.policy.health import GateResult, Verdict, arrived, gate_results, pod_health
from bootc_operator.policy.nodestate import NodeView, view
from bootc_operator.policy.order import order_news
from bootc_operator.policy.poolspec import PoolPolicy, check_pool, verification_fingerprint
from bootc_operator.policy.poolstatus import (
    Counts,
    MemberState,
    count_states,
    halted_message,
    member_state,
)
from bootc_operator.policy.slots import RolloutPlan, gate_news, plan_pool, reboot_clock
from bootc_operator.policy.topology import display, domain_news
from bootc_operator.policy.windows import (
    ALWAYS_OPEN,
    DAYS,
    Window,
    WindowState,
    describe_opening,
    window_state,
)

Obj = Mapping[str, Any]

# Wait kinds (``status -o json``'s ``waitsFor.kind``): one per gate, plus progress.
NOTHING = "Nothing"
INVALID_SPEC = "InvalidSpec"
TAG = "TagResolution"
SIGNATURE = "Signature"
HEALTH_FAILED = "HealthCheckFailed"
HALTED = "Halted"
PAUSED = "Paused"
WINDOW = "MaintenanceWindow"
ALERT = "Alert"
PRECONDITION = "Precondition"
APPROVAL = "Approval"
HEALTH_CHECK = "HealthCheck"
CANARIES = "Canaries"
BUDGET = "MaxUnavailable"
PROGRESS = "Progress"


def age(seconds: float) -> str:
    """``40s``, ``3m12s``, ``2h13m``, ``1d4h`` (never negative)."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


@dataclass(frozen=True)
class Wait:
    kind: str
    message: str


@dataclass(frozen=True)
class PoolReport:
    """One pool as the controller sees it now (see the module docstring)."""

    name: str
    pool: Obj
    now: dt.datetime
    check: PoolPolicy
    views: dict[str, NodeView]
    rows: tuple[NodeRow, ...]
    counts: Counts
    gates: dict[str, GateResult] = field(default_factory=dict)
    plan: RolloutPlan | None = None  # None: no valid spec or no target yet
    window: WindowState = ALWAYS_OPEN
    max_unavailable: int = 0

    @property
    def status(self) -> Obj:
        return self.pool.get("status") or {}

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or c.PHASE_PENDING)

    @property
    def image(self) -> str:
        return str(((self.pool.get("spec") or {}).get("image") or {}).get("ref") or "")

    @property
    def target(self) -> str:
        return self.check.target_digest or ""

    @property
    def checking(self) -> frozenset[str]:
        return frozenset(n for n, g in self.gates.items() if g.verdict is not Verdict.PASSED)

    def member(self, name: str) -> MemberState:
        return member_state(self.views[name], checking=self.checking)


def _resolved(pool: Obj) -> dict[str, str]:
    """A tag ref's digest as the controller last published it (``status.targetDigest``)."""
    ref = str(((pool.get("spec") or {}).get("image") or {}).get("ref") or "")
    target = (pool.get("status") or {}).get("targetDigest")
    return {ref: str(target)} if ref and target else {}


_SIGNATURE_REFUSED = (c.REASON_SIGNATURE_VERIFICATION_FAILED, c.REASON_SIGNATURE_REGISTRY_ERROR)


def _verified(pool: Obj, resolved: Mapping[str, str]) -> str | None:
    """What the controller verified, as far as its conditions tell (this plugin checks
    no signature): the pool's digest, unless UpToDate says its signature failed or is
    still being verified (then the controller rolls nothing new out)."""
    if verification_fingerprint(pool.get("spec") or {}) is None:
        return None
    up = condition_of(pool, c.COND_UP_TO_DATE)
    if up.get("reason") in _SIGNATURE_REFUSED or str(up.get("message") or "").startswith(
        "verifying the signature"
    ):
        return None
    unchecked = check_pool(pool, resolved)
    if unchecked.repository is None or unchecked.candidate_digest is None:
        return None
    return f"{unchecked.repository}@{unchecked.candidate_digest}"


def _gate_from_note(note: str) -> GateResult | None:
    """The controller's last verdict, from ``bootc.dev/health-check`` (``Pending: pods: …``)."""
    verdict, _, rest = note.partition(": ")
    check, _, message = rest.partition(": ")
    try:
        return GateResult(Verdict(verdict), check, message)
    except ValueError:
        return None


def pool_report(
    pool: Obj,
    bootc_nodes: Sequence[Obj],
    nodes: Mapping[str, Obj],
    now: dt.datetime,
    pods: Mapping[str, Sequence[Obj]] | None = None,
) -> PoolReport:
    """``pool`` with its BootcNodes, the Nodes by name and, per node under a ``pods``
    health check, the Pods on it (None: not listed; the controller's note is used)."""
    name = str(pool["metadata"]["name"])
    resolved = _resolved(pool)
    check = check_pool(pool, resolved, _verified(pool, resolved))
    mine = sorted(
        (bn for bn in bootc_nodes if bn["metadata"].get("labels", {}).get(c.POOL_LABEL) == name),
        key=lambda bn: str(bn["metadata"]["name"]),
    )
    views = {
        str(bn["metadata"]["name"]): view(bn, nodes.get(bn["metadata"]["name"]), check.targets)
        for bn in mine
    }
    rows = tuple(node_row(n, nodes.get(n), bn) for n, bn in zip(views, mine, strict=True))
    base = PoolReport(
        name, pool, now, check, views, rows, count_states(views.values()), max_unavailable=0
    )
    if not check.valid or not check.targets:
        return base
    gates: dict[str, GateResult] = {}
    policy = check.health
    if policy is not None:

        def pods_of(node: str) -> Any:
            listed = (pods or {}).get(node)
            if listed is None or policy.pods_selector is None:
                return None
            return pod_health(listed, policy.pods_selector, policy.pods_namespaces)

        gates = gate_results(policy, views.values(), now, pods_of)
        for node in list(gates):
            noted = _gate_from_note(views[node].health_note)
            unlisted = policy.pods_selector is not None and (pods or {}).get(node) is None
            if (unlisted or policy.queries) and noted is not None:
                # pods not listed, or Prometheus asked: the controller's last word
                gates[node] = noted
    up = condition_of(pool, c.COND_UP_TO_DATE)
    alerts = up.get("reason") in (c.REASON_BLOCKED_BY_ALERTS, c.REASON_PRECONDITION_NOT_MET)
    plan, window = plan_pool(check, list(views.values()), now, gates, alerts_blocked=alerts)
    checking = frozenset(n for n, g in gates.items() if g.verdict is not Verdict.PASSED)
    return PoolReport(
        name,
        pool,
        now,
        check,
        views,
        rows,
        count_states(views.values(), checking=checking),
        gates,
        plan,
        window,
        check.resolve_max_unavailable(len(views)),
    )


# ------------------------------------------------------------------ phrases


def _since(now: dt.datetime, when: dt.datetime | None) -> str:
    return age((now - when).total_seconds()) if when is not None else "?"


def holder_phrase(r: PoolReport, name: str) -> str:
    """``worker-1 (draining, 40s)``: a slot holder and what it is doing, for how long."""
    v = r.views[name]
    state = r.member(name)
    if state is MemberState.DRAINING:
        return f"{name} (draining, {_since(r.now, v.slot_since)})"
    if state is MemberState.REBOOTING:
        return f"{name} (rebooting, {_since(r.now, reboot_clock(v))})"
    if state is MemberState.HEALTH_CHECK:
        gate = r.gates.get(name)
        what = f"health check {gate.check}" if gate and gate.check else "health check"
        left = health_time_left(r, name)
        return f"{name} ({what}, {age(left)} left)" if left is not None else f"{name} ({what})"
    if state is MemberState.RELEASING:
        return f"{name} (done, releasing its slot)"
    if state is MemberState.DEGRADED:
        return f"{name} (degraded)"
    return f"{name} ({state.value.lower()})"


def health_time_left(r: PoolReport, name: str) -> float | None:
    """Seconds until the health gate fails ``name`` by its timeout (None: not checked)."""
    v = r.views[name]
    policy = r.check.health
    if policy is None or v.reboot_requested_at is None or name not in r.gates:
        return None
    return policy.timeout_seconds - (r.now - v.reboot_requested_at).total_seconds()


def signature_wait(r: PoolReport, message: str) -> str:
    """``a signature that verifies: <the controller's refusal>; checked again at
    12:00:07 UTC (in 4s)`` (``status.nextSignatureCheckTime``)."""
    why = message.split("; nodes stay on what they run", 1)[0] or "its signature is refused"
    text = f"a signature that verifies: {why}"
    due = parse_time((r.pool.get("status") or {}).get("nextSignatureCheckTime"))
    if due is not None:
        left = (due - r.now).total_seconds()
        when = f"in {age(left)}" if left > 0 else "due now"
        text += f"; checked again at {due.astimezone(dt.UTC):%H:%M:%S} UTC ({when})"
    return text


def describe_window(w: Window) -> str:
    """``Mon-Fri 22:00 4h Europe/Berlin`` (a window as written, days as a range if they are)."""
    days = sorted(w.days)
    if not days or len(days) == 7:
        when = "daily"
    elif len(days) > 2 and days == list(range(days[0], days[-1] + 1)):
        when = f"{DAYS[days[0]]}-{DAYS[days[-1]]}"
    else:
        when = ",".join(DAYS[d] for d in days)
    minutes = int(w.duration.total_seconds()) // 60
    hours, minutes = divmod(minutes, 60)
    length = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return f"{when} {w.start:%H:%M} {length} {w.zone.key}"


def _window_sentence(r: PoolReport) -> str:
    if not r.check.windows:
        return ""
    w = r.window
    if w.open:
        for window in r.check.windows:
            state = window_state((window,), r.now)
            if state.open and state.closes_at is not None:
                left = age((state.closes_at - r.now).total_seconds())
                return f"the window {describe_window(window)} is open for {left} more"
        return "a maintenance window is open"
    text = describe_opening(w)
    if w.next_opening is not None:
        text += f" (in {age((w.next_opening - r.now).total_seconds())})"
    return text


def _budget_users(r: PoolReport) -> list[str]:
    plan = r.plan
    assert plan is not None
    users = [holder_phrase(r, n) for n in plan.holders if n not in plan.take]
    users += [f"{n} ({why})" for n, why in plan.outside]
    return users


def budget_message(r: PoolReport, waiting: Sequence[str]) -> str:
    """``a reboot slot for n1, n2: maxUnavailable 1 is used by n0 (draining, 40s)``;
    ``waiting`` empty: no "for" part (a node's own paragraph)."""
    users = _budget_users(r)
    used = ", ".join(users) if users else "no one"
    who = ""
    if waiting:
        who = f" for {', '.join(waiting[:5])}" + (" and more" if len(waiting) > 5 else "")
    return f"a reboot slot{who}: maxUnavailable {r.max_unavailable} is used by {used}"


def waits_for(r: PoolReport) -> Wait:
    """The one thing the pool waits for now, in the order the controller lets gates win
    (``poolstatus.rollout_condition``)."""
    up = condition_of(r.pool, c.COND_UP_TO_DATE)
    if not r.check.valid:
        return Wait(INVALID_SPEC, "a valid spec: " + "; ".join(r.check.problems))
    if up.get("reason") in _SIGNATURE_REFUSED:
        return Wait(SIGNATURE, signature_wait(r, str(up.get("message") or "")))
    if r.plan is None:
        msg = str(up.get("message") or f"tag {r.check.tag} to be resolved by the controller")
        return Wait(TAG, msg)
    plan, counts = r.plan, r.counts
    if counts.total and counts.updated == counts.total:
        return Wait(NOTHING, f"nothing: all {counts.total} nodes run {short(r.target)}")
    if not counts.total:
        return Wait(NOTHING, "nothing: no node matches spec.nodeSelector")
    news = gate_news(plan, r.views, r.check)
    if news.failed:
        return Wait(HEALTH_FAILED, f"the nodes to recover or a new target: {news.failed}")
    if plan.halted:
        return Wait(HALTED, halted_message(plan.unhealthy, plan.max_unhealthy))
    if r.check.paused:
        return Wait(PAUSED, f"resume: the rollout is paused (kubectl bootc resume {r.name})")
    if plan.window_closed:
        return Wait(WINDOW, f"a maintenance window: {_window_sentence(r)}")
    if plan.alerts_blocked and up.get("reason") == c.REASON_PRECONDITION_NOT_MET:
        return Wait(PRECONDITION, f"preconditions to hold: {up.get('message') or 'one is not met'}")
    if plan.alerts_blocked:
        return Wait(ALERT, f"alerts to resolve: {up.get('message') or 'a blocking alert fires'}")
    if plan.awaiting_approval:
        n = len(plan.canaries)
        return Wait(
            APPROVAL,
            f"approval of {r.target}: {n} {'canary' if n == 1 else 'canaries'} "
            f"({', '.join(plan.canaries)}) passed; kubectl bootc approve {r.name}",
        )
    if plan.gate_pending:
        parts = []
        for node, check_name, message in plan.gate_pending:
            left = health_time_left(r, node)
            tail = f"; {age(left)} left before it fails" if left is not None else ""
            parts.append(f"{node} ({check_name}: {message}{tail})")
        return Wait(HEALTH_CHECK, "a health check: " + "; ".join(parts))
    if plan.waiting and not plan.take:
        users = _budget_users(r)
        if plan.canary_pending and not users:
            return Wait(CANARIES, news.canaries)
        return Wait(BUDGET, budget_message(r, plan.waiting))
    if plan.canary_pending:
        return Wait(CANARIES, news.canaries)
    return _progress(r, plan, up)


def _progress(r: PoolReport, plan: RolloutPlan, up: Obj) -> Wait:
    """Nothing holds the rollout: the nodes in slots, else those staging."""
    taking = [f"{n} (taking a reboot slot)" for n in plan.take]
    moving = taking + [holder_phrase(r, n) for n in plan.holders if n not in plan.take]
    if moving:
        return Wait(PROGRESS, "the nodes in reboot slots: " + ", ".join(moving))
    staging = sorted(n for n in r.views if r.member(n) is MemberState.STAGING)
    if staging:
        return Wait(PROGRESS, "staging to finish on " + ", ".join(staging[:5]))
    return Wait(PROGRESS, str(up.get("message") or "the controller to act"))


# ------------------------------------------------------------------ paragraphs


def why_pool(r: PoolReport) -> str:
    """One paragraph: where the pool is and what it waits for."""
    wait = waits_for(r)
    target = f" to {short(r.target)}" if r.target else ""
    text = (
        f"Pool {r.name} is {r.phase}: {r.counts.updated}/{r.counts.total} nodes updated{target}. "
    )
    text += f"It waits for {wait.message}." if wait.kind != NOTHING else "Nothing to do."
    window = _window_sentence(r)
    if window and wait.kind not in (WINDOW, NOTHING):
        text += f" {window[0].upper()}{window[1:]}."
    plan, topology, order = r.plan, r.check.topology, r.check.order
    if plan is not None and topology is not None and plan.domain is not None:
        text += f" Zone by zone: {domain_news(topology, r.views.values(), plan.domain)}."
    if plan is not None and order is not None and plan.next_up:
        news = order_news(order, plan.next_up)
        text += f" {news[0].upper()}{news[1:]}."
    return text


def why_node(r: PoolReport, name: str) -> str:
    """One paragraph: what ``name`` (a member of ``r``) is doing and what it waits for
    (``NODE_STATES``: one phrase per member state), then where it stands in the plan."""
    state = r.member(name)
    text = NODE_STATES.get(state, _pending)(r, name, r.views[name])
    if r.plan is not None and state is not MemberState.UP_TO_DATE:
        text += _in_the_plan(r, name)
    return text


def _target(r: PoolReport) -> str:
    return short(r.target) if r.target else "the target"


def _up_to_date(r: PoolReport, name: str, v: NodeView) -> str:
    return f"{name} is up to date: it runs {short(v.booted_digest or '')} and is out of its slot."


def _degraded(r: PoolReport, name: str, v: NodeView) -> str:
    return (
        f"{name} is degraded ({v.degraded_message or 'no message'}); it takes no reboot "
        "slot until it recovers."
    )


def _rolled_back(r: PoolReport, name: str, v: NodeView) -> str:
    return (
        f"{name} failed its health check on {short(v.health_failed or '')} and was rolled "
        "back; it is held back until the pool's target changes."
    )


def _leaving(r: PoolReport, name: str, v: NodeView) -> str:
    return f"{name} is {v.leaving}: it gets no reboot slot and is not updated."


def _draining(r: PoolReport, name: str, v: NodeView) -> str:
    text = f"{name} holds a reboot slot since {_since(r.now, v.slot_since)} ago and is draining"
    if r.check.drain_timeout and v.slot_since is not None:
        left = r.check.drain_timeout - (r.now - v.slot_since).total_seconds()
        text += f" ({age(left)} left of its drain timeout {int(r.check.drain_timeout)}s)"
    return text + f"; once drained it is told to reboot into {_target(r)}."


def _rebooting(r: PoolReport, name: str, v: NodeView) -> str:
    since = reboot_clock(v)
    text = (
        f"{name} holds a reboot slot and is rebooting into {_target(r)} "
        f"(for {_since(r.now, since)})"
    )
    if r.check.reboot_timeout and since is not None:
        left = r.check.reboot_timeout - (r.now - since).total_seconds()
        text += f"; it counts as unhealthy unless back and Ready within {age(left)}"
    return text + "."


def _health_check(r: PoolReport, name: str, v: NodeView) -> str:
    gate = r.gates[name]
    text = (
        f"{name} runs {_target(r)} and keeps its reboot slot until its health check passes: "
        f"{gate.check}: {gate.message}"
    )
    remaining = health_time_left(r, name)
    if remaining is not None and r.check.health is not None:
        limit = int(r.check.health.timeout_seconds)
        text += f"; it fails in {age(remaining)} (timeoutSeconds {limit})"
    return text + "."


def _releasing(r: PoolReport, name: str, v: NodeView) -> str:
    return f"{name} runs {_target(r)}; its slot is released and the node uncordoned now."


def _staged(r: PoolReport, name: str, v: NodeView) -> str:
    """A staged node: which of the plan's steps holds it (``slots``: ``is_candidate``'s
    readiness, ``topology_step``, ``canary_step``, ``budget_step``) or the pool's wait."""
    plan, topology = r.plan, r.check.topology
    if plan is not None and name in plan.take:
        return f"{name} is staged and takes a reboot slot now."
    if not v.ready:
        return f"{name} is staged but its Node is not Ready: it takes a slot once Ready."
    if plan is not None and topology is not None and name in plan.other_domains:
        return (
            f"{name} is staged and waits for its domain "
            f"({topology.key}={display(topology.domain(v))}): reboots stay in "
            f"{display(plan.domain or '')} until it is done (spec.rollout.topology)."
        )
    if plan is not None and plan.canary_pending and name not in plan.canaries:
        first = gate_news(plan, r.views, r.check).canaries.removeprefix("canaries first: ")
        return f"{name} is staged and waits for the canaries to go first: {first}."
    wait = waits_for(r)
    what = budget_message(r, ()) if wait.kind == BUDGET else wait.message
    return f"{name} is staged and waits for {what}."


def _staging(r: PoolReport, name: str, v: NodeView) -> str:
    staging = short(v.desired_image.rpartition("@")[2])
    return f"{name} is staging {staging}; then it waits for a reboot slot."


def _pending(r: PoolReport, name: str, v: NodeView) -> str:
    """Not staging yet: no status, not told the target, or told and not started."""
    target = _target(r)
    if v.booted_digest is None:
        return f"{name} has no status yet: its daemon has not reported."
    if v.spec_in_sync:
        return f"{name} was told {target} and its daemon has not started staging yet."
    ahead = r.check.stage_ahead is not None
    why = " (stageAhead: it is pointed at it when others move on)" if ahead else ""
    return f"{name} has not been told {target} yet{why}."


#: how ``why_node`` says each member state (any other: ``_pending``)
NODE_STATES: dict[MemberState, Callable[[PoolReport, str, NodeView], str]] = {
    MemberState.UP_TO_DATE: _up_to_date,
    MemberState.DEGRADED: _degraded,
    MemberState.ROLLED_BACK: _rolled_back,
    MemberState.LEAVING: _leaving,
    MemberState.DRAINING: _draining,
    MemberState.REBOOTING: _rebooting,
    MemberState.HEALTH_CHECK: _health_check,
    MemberState.RELEASING: _releasing,
    MemberState.STAGED: _staged,
    MemberState.STAGING: _staging,
}


def _in_the_plan(r: PoolReport, name: str) -> str:
    """Where a node not yet done stands: outside the rollout using the budget
    (``release_step``), the maintenance window, its place in the admin's order."""
    plan = r.plan
    assert plan is not None
    text = ""
    outside = dict(plan.outside)
    if name in outside:
        text += f" It is {outside[name]}, so it counts against maxUnavailable {r.max_unavailable}."
    if window := _window_sentence(r):
        text += f" {window[0].upper()}{window[1:]}."
    if r.check.order is not None and name in plan.next_up:
        place = plan.next_up.index(name) + 1
        text += (
            f" It is number {place} of {len(plan.next_up)} in line "
            f"(spec.rollout.order: {r.check.order.describe()})."
        )
    return text


# ------------------------------------------------------------------ pods and approval


def pods_wanted(r: PoolReport) -> list[str]:
    """Members whose ``pods`` health check needs their Pods listed (arrived holders)."""
    policy = r.check.health
    if policy is None or policy.pods_selector is None or r.plan is None:
        return []
    return sorted(n for n, v in r.views.items() if arrived(v))


@dataclass(frozen=True)
class Approval:
    """What ``approve`` shows and whether it may write ``approvedDigest``."""

    digest: str
    lines: tuple[str, ...]
    ok: bool
    refusal: str = ""


def approval(r: PoolReport, digest: str | None) -> Approval:
    """The canaries of ``r``, what they run and their health results; approving
    ``digest`` (default: the target) is ``ok`` only when a canary runs it, passed its
    health check and is out of its slot (what the controller counts as updated)."""
    digest = digest or r.target
    lines = [f"Pool {r.name}: target {r.target or '(not resolved yet)'}"]
    if not digest:
        return Approval("", tuple(lines), False, "the pool has no target digest yet")
    canaries = r.plan.canaries if r.plan is not None else ()
    if not canaries:
        return Approval(
            digest, tuple(lines), False, f"pool {r.name} has no canaries (spec.rollout.canary)"
        )
    ran = []
    lines.append("Canaries:")
    for name in canaries:
        v = r.views[name]
        state = r.member(name)
        gate = r.gates.get(name)
        if gate is not None:
            health = gate.describe()
        elif r.check.health is None:
            health = "no health checks (spec.health unset)"
        elif state is MemberState.UP_TO_DATE:
            health = "passed (slot released)"
        else:
            health = "not checked yet"
        lines.append(
            f"  {name}: runs {short(v.booted_digest or '') or '-'}, {state.value}; health: {health}"
        )
        if v.booted_digest == digest and state is MemberState.UP_TO_DATE:
            ran.append(name)
    lines.append(f"Approving {digest}")
    if not ran:
        return Approval(
            digest, tuple(lines), False, f"no canary ran {digest} and passed its health check"
        )
    return Approval(digest, tuple(lines), True)
