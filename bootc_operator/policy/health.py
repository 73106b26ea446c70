"""The post-reboot health gate (``spec.health``) and canary choice. Pure.

A slot holder that rebooted into its target (runs it, Idle, its reboot requested
by the rollout) *arrives*; with ``spec.health`` set it counts as updated, and its
slot is released, only once ``evaluate`` says ``Passed``. The checks, in the order
they are reported:

- ``Ready``: the Node is Ready (always, as without a health spec);
- ``bootComplete`` (``bootComplete: true``): the daemon reports the boot reached
  ``boot-complete.target`` (``status.bootAssessment.state: Complete``); a boot
  that finished without reaching it (``Failed``) fails the gate at once;
- ``minReadySeconds``: the Node's Ready condition has been True that long
  (``lastTransitionTime``; a NotReady flap restarts the count);
- ``pods``: at least one pod matching the selector (in the namespaces, if given)
  runs on the node, and every such pod is Ready *as reported since the reboot*:
  its Ready condition's ``lastTransitionTime`` is not before the reboot was
  requested (``bootc.dev/reboot-requested``). A reboot kills every container
  (a soft one too), so the kubelet that comes back reports each pod NotReady and
  then Ready again, moving that time; a Ready that did not move since is what
  the pod said before the reboot, not yet re-reported (a node back within the
  node-monitor grace period is never marked NotReady, nor are its pods). The
  request is the latest moment the rollout records before the host goes down,
  and no kubelet reports while it is down, so nothing reported after it can be
  stale but for a pod turning Ready in the instant between the request and the
  shutdown. The kubelet's time has whole seconds (the request's, microseconds):
  a transition in the second of the request counts as after it (a false "stale"
  would hold the node until the timeout). A pod recreated after the reboot is
  fresh by construction.

Anything still pending ``timeoutSeconds`` (default 600) after the reboot was
requested fails the gate, naming the first pending check. What a failure does
(``Halt`` or ``Rollback``) is ``slots.plan_rollout``'s business.

``pod_health`` reads the pods of a node the ``pods`` check selects (the rollout's pod
watches feed it; ``kubectl bootc`` a LIST).

``choose_canaries`` picks a pool's canaries: nodes labelled ``bootc.dev/canary``
first, then by name, ``canary.nodes`` of them (a percentage rounds up, at least 1).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bootc_operator.api import defaults
from bootc_operator.api.conditions import get_condition
from bootc_operator.api.timefmt import parse_time
from bootc_operator.api.wire import BootAssessmentState
from bootc_operator.gates.queries import CHECK_QUERIES, HealthQuery, NodeQueries, queries_check
from bootc_operator.policy.nodestate import NodeState, NodeView
from bootc_operator.policy.selectors import matches

CHECK_READY = "Ready"
CHECK_BOOT_COMPLETE = "bootComplete"
CHECK_MIN_READY = "minReadySeconds"
CHECK_PODS = "pods"
CHECKS = (CHECK_READY, CHECK_BOOT_COMPLETE, CHECK_MIN_READY, CHECK_PODS, CHECK_QUERIES)


class Verdict(StrEnum):
    PASSED = "Passed"
    PENDING = "Pending"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """``spec.health``, checked (see ``poolspec``)."""

    min_ready_seconds: int = 0
    boot_complete: bool = False
    #: ``spec.health.pods.selector`` (a LabelSelector dict); None: no pod check
    pods_selector: Mapping[str, Any] | None = None
    pods_namespaces: frozenset[str] = frozenset()
    timeout_seconds: float = float(defaults.HEALTH_TIMEOUT_SECONDS)
    rollback: bool = False  # onFailure: Rollback
    queries: tuple[HealthQuery, ...] = ()  # spec.health.queries


@dataclass(frozen=True, slots=True)
class PodHealth:
    """One pod on the node that the pod check selects."""

    key: str  # namespace/name
    ready: bool
    phase: str = ""
    #: the Ready condition's lastTransitionTime (None: not reported)
    ready_since: dt.datetime | None = None

    def ready_after(self, since: dt.datetime | None) -> bool:
        """Ready, as reported in the second of ``since`` or later (always, when ``since``
        is None). A kubelet stamps whole seconds and the reboot request microseconds: a
        pod re-reported in the request's second is fresh (a transition there cannot be
        ordered, and a false "stale" holds the node until the timeout, as no later
        report moves the stamp)."""
        if not self.ready:
            return False
        if since is None:
            return True
        return self.ready_since is not None and self.ready_since >= since.replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class GateResult:
    verdict: Verdict
    check: str = ""  # the first check not passed ("" when passed)
    message: str = ""
    #: seconds until the verdict can change by time alone (minReadySeconds, timeout)
    wait: float | None = None

    def describe(self) -> str:
        """``Pending: pods: ...`` (the BootcNode's health-check annotation)."""
        if self.verdict is Verdict.PASSED:
            return f"{Verdict.PASSED}: all checks passed"
        return f"{self.verdict}: {self.check}: {self.message}"


def arrived(v: NodeView) -> bool:
    """A slot holder the rollout rebooted that now runs its target and is Idle: the
    health gate decides whether it is done."""
    return (
        v.in_slot
        and v.state is NodeState.UP_TO_DATE
        and v.idle
        and v.reboot_requested_at is not None
        and not v.rolling_back
    )


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def _pods_check(
    policy: HealthPolicy, pods: Sequence[PodHealth] | None, since: dt.datetime | None
) -> tuple[Verdict, str] | None:
    """``since``: when the reboot was requested; Ready from before it does not count."""
    if policy.pods_selector is None:
        return None
    if pods is None:
        return Verdict.PENDING, "the node's pods have not been listed yet"
    if not pods:
        where = (
            f" in namespaces {', '.join(sorted(policy.pods_namespaces))}"
            if policy.pods_namespaces
            else ""
        )
        return Verdict.PENDING, f"no pod matching the selector runs on the node{where}"
    unready = sorted(p.key for p in pods if not p.ready)
    stale = sorted(p.key for p in pods if p.ready and not p.ready_after(since))
    if not unready and not stale:
        return Verdict.PASSED, ""
    said = []
    if unready:
        said.append(f"{_names(unready)} {'is' if len(unready) == 1 else 'are'} not Ready")
    if stale:
        have = "has" if len(stale) == 1 else "have"
        said.append(f"{_names(stale)} {have} not been reported Ready since the reboot")
    ready = len(pods) - len(unready) - len(stale)
    return Verdict.PENDING, f"{'; '.join(said)} ({ready}/{len(pods)} Ready)"


def _boot_check(policy: HealthPolicy, v: NodeView) -> tuple[Verdict, str] | None:
    """The daemon's own words when it gave some (it says what systemd said)."""
    if not policy.boot_complete:
        return None
    state, message = v.boot_assessment, v.boot_assessment_message
    if state == BootAssessmentState.COMPLETE:
        return Verdict.PASSED, ""
    if state == BootAssessmentState.FAILED:
        return Verdict.FAILED, message or "the boot did not reach boot-complete.target"
    if state == BootAssessmentState.UNKNOWN:
        return Verdict.PENDING, f"the boot assessment could not be read: {message or 'no detail'}"
    if state == BootAssessmentState.PENDING:
        return Verdict.PENDING, message or "boot-complete.target not reached yet"
    return Verdict.PENDING, "the daemon has not reported a boot assessment"


def _min_ready_check(
    policy: HealthPolicy, v: NodeView, now: dt.datetime
) -> tuple[Verdict, str, float | None] | None:
    """``minReadySeconds``: (verdict, why, seconds left) (None: not asked)."""
    if policy.min_ready_seconds <= 0:
        return None
    if not v.ready:
        return Verdict.PENDING, "the Node is not Ready", None
    since = v.ready_since
    held = (now - since).total_seconds() if since is not None else 0.0
    if since is not None and held >= policy.min_ready_seconds:
        return Verdict.PASSED, "", None
    left = policy.min_ready_seconds - max(0.0, held)
    why = f"Ready for {int(max(0.0, held))}s of {policy.min_ready_seconds}s"
    return Verdict.PENDING, why, left


def evaluate(
    policy: HealthPolicy,
    v: NodeView,
    pods: Sequence[PodHealth] | None,
    now: dt.datetime,
    queries: NodeQueries | None = None,
) -> GateResult:
    """The gate's verdict on ``v`` (an ``arrived`` holder) at ``now``; ``queries``:
    what is known of its health queries (None: nothing yet)."""
    results: list[tuple[str, Verdict, str]] = []
    waits: list[float] = []
    if not v.ready:
        results.append((CHECK_READY, Verdict.PENDING, "the Node is not Ready"))
    boot = _boot_check(policy, v)
    if boot is not None:
        results.append((CHECK_BOOT_COMPLETE, *boot))
    min_ready = _min_ready_check(policy, v, now)
    if min_ready is not None:
        verdict, why, left = min_ready
        results.append((CHECK_MIN_READY, verdict, why))
        if left is not None:
            waits.append(left)
    pods_result = _pods_check(policy, pods, v.reboot_requested_at)
    if pods_result is not None:
        results.append((CHECK_PODS, *pods_result))
    if policy.queries:
        passed, why, wait = queries_check(policy.queries, queries, now)
        results.append((CHECK_QUERIES, Verdict.PASSED if passed else Verdict.PENDING, why))
        if wait is not None:
            waits.append(wait)

    for check, verdict, message in results:
        if verdict is Verdict.FAILED:
            return GateResult(Verdict.FAILED, check, message)
    pending = [
        (check, message) for check, verdict, message in results if verdict is not Verdict.PASSED
    ]
    if not pending:
        return GateResult(Verdict.PASSED)
    check, message = pending[0]
    started = v.reboot_requested_at
    elapsed = (now - started).total_seconds() if started is not None else 0.0
    if elapsed > policy.timeout_seconds:
        return GateResult(
            Verdict.FAILED,
            check,
            f"not healthy {int(policy.timeout_seconds)}s after its reboot was requested: {message}",
        )
    waits.append(policy.timeout_seconds - elapsed)
    return GateResult(Verdict.PENDING, check, message, wait=max(0.0, min(waits)) + 0.5)


def gate_results(
    policy: HealthPolicy | None,
    views: Iterable[NodeView],
    now: dt.datetime,
    pods_of: Callable[[str], Sequence[PodHealth] | None],
    queries_of: Callable[[str], NodeQueries | None] = lambda _n: None,
) -> dict[str, GateResult]:
    """The verdicts of every ``arrived`` holder (none without a health policy);
    ``pods_of(node)`` is asked only when the policy checks pods, ``queries_of(node)``
    only when it has queries."""
    if policy is None:
        return {}
    return {
        v.name: evaluate(
            policy,
            v,
            pods_of(v.name) if policy.pods_selector is not None else None,
            now,
            queries_of(v.name) if policy.queries else None,
        )
        for v in views
        if arrived(v)
    }


def pod_health(
    pods: Collection[Mapping[str, Any]], selector: Mapping[str, Any], namespaces: Collection[str]
) -> list[PodHealth]:
    """The pods the check selects, each Ready or not (terminating pods are not Ready), and
    since when."""
    out = []
    for pod in pods:
        meta = pod.get("metadata", {})
        if namespaces and meta.get("namespace") not in namespaces:
            continue
        if not matches(selector, meta.get("labels")):
            continue
        status = pod.get("status") or {}
        ready = get_condition(status.get("conditions"), "Ready")
        out.append(
            PodHealth(
                key=f"{meta.get('namespace')}/{meta.get('name')}",
                ready=bool(ready and ready.get("status") == "True")
                and not meta.get("deletionTimestamp"),
                phase=str(status.get("phase") or ""),
                ready_since=parse_time(ready.get("lastTransitionTime")) if ready else None,
            )
        )
    return sorted(out, key=lambda p: p.key)


def choose_canaries(views: Iterable[NodeView], count: int) -> frozenset[str]:
    """The ``count`` canaries: labelled ``bootc.dev/canary`` first, then by name; never
    a node an autoscaler is removing (``departing``: it would never be updated)."""
    if count <= 0:
        return frozenset()
    staying = (v for v in views if not v.departing)
    ordered = sorted(staying, key=lambda v: (not v.canary_label, v.name))
    return frozenset(v.name for v in ordered[:count])
