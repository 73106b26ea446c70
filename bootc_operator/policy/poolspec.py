"""A pool's spec, read once: validated into the immutable ``PoolPolicy`` every decision reads.

``check_pool(pool, resolved)`` returns the policy: every problem (for
``Degraded/InvalidSpec``) and each setting in its typed form (selector, image
repository and target digest, maxUnavailable and the other budgets, windows,
stageAhead, canaries and approval, health gate, timeouts, reboot policy). The
controller resolves it once per pool revision (``Context.policy``); reconcilers
and plans take the policy, never the raw spec. The budgets that depend on the
pool's size are resolved once per plan (``PoolPolicy.budgets``).

The target digest:

- a digest ref targets its digest;
- a tag ref targets the digest the tag resolver found *for this very ref*
  (``resolved``: ref → digest, kept by the controller process); None until
  then, so a changed tag never rolls out the previous tag's digest;
- with ``spec.image.verification``, that digest is the target only once the
  signature reconciler verified it *with the keys the pool trusts now*
  (``verified``: the ``repo@digest`` whose verification still holds; the
  reconciler answers None as soon as a key cannot be read or the set of keys
  differs from the one that verified it); until then it is ``unverified_digest``
  and the target stays that verified digest when it is of the same repository (a
  rollout to it completes), else None, as for a tag not yet resolved: no node is
  told to stage a digest whose verification does not hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api import defaults
from bootc_operator.api.imageref import InvalidImageRef, parse_image_ref
from bootc_operator.api.intstr import (
    InvalidIntOrPercent,
    resolve_int_or_percent,
    resolve_max_unavailable,
)
from bootc_operator.gates.queries import HealthQuery, parse_hold
from bootc_operator.policy.drainplan import MIN_GRACE_PERIOD, DrainPolicy
from bootc_operator.policy.health import HealthPolicy
from bootc_operator.policy.order import BY_NAME, FIRST, LAST, NEWEST_FIRST, OLDEST_BOOT_FIRST, Order
from bootc_operator.policy.selectors import InvalidSelector, validate_selector
from bootc_operator.policy.topology import Topology
from bootc_operator.policy.windows import Window, parse_windows


@dataclass(frozen=True, slots=True)
class Budgets:
    """The policy's size-dependent numbers for a pool of ``total`` members."""

    max_unavailable: int
    max_unhealthy: int
    canaries: int  # 0: no canaries
    stage_ahead: int | None  # None: everyone stages at once


@dataclass(frozen=True, slots=True)
class PoolPolicy:
    """A pool's spec as the decisions read it; ``problems`` say why it is not ``valid``."""

    problems: tuple[str, ...] = ()
    image_ref: str = ""  # spec.image.ref as written
    repository: str | None = None  # registry/repo, when the image ref parses
    tag: str | None = None  # set for tag refs
    target_digest: str | None = None
    selector_ok: bool = False
    selector: Mapping[str, Any] | None = None  # spec.nodeSelector, when selector_ok
    paused: bool = False
    drain_timeout: float | None = None  # drain.timeoutSeconds, else drainTimeoutSeconds
    drain: DrainPolicy = field(default_factory=DrainPolicy)
    reboot_timeout: float | None = None
    max_unavailable: int | str = 1
    targets: frozenset[str] = field(default_factory=frozenset)
    max_unhealthy: int | str | None = None
    stage_ahead: int | str | None = None
    windows: tuple[Window, ...] = ()
    health: HealthPolicy | None = None
    canary_nodes: int | str | None = None  # spec.rollout.canary.nodes; None: no canaries
    require_approval: bool = False
    approved_digest: str | None = None
    reboot_policy: str | None = None  # members' spec.rebootPolicy (None: RebootOnly)
    topology: Topology | None = None  # spec.rollout.topology; None: slots go anywhere
    order: Order | None = None  # spec.rollout.order; None: the default slot order
    # spec.image.verification's fingerprint (None: no signature required)
    verification: str | None = None
    # the digest awaiting its signature's verification (target_digest is None meanwhile)
    unverified_digest: str | None = None

    @property
    def candidate_digest(self) -> str | None:
        """The digest the ref names (or its tag resolved to), verified or not."""
        return self.unverified_digest or self.target_digest

    @property
    def awaiting_approval(self) -> bool:
        """Canaries need approval and spec.rollout.approvedDigest does not name the target."""
        return self.require_approval and self.approved_digest != self.target_digest

    def resolve_canaries(self, total: int) -> int:
        """How many canaries (0: none); a percentage rounds up, at least 1."""
        if self.canary_nodes is None or total == 0:
            return 0
        count = resolve_int_or_percent(self.canary_nodes, total, field="canary.nodes", default=1)
        return max(1, min(count, total))

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def desired_image(self) -> str | None:
        """``repo@digest`` for BootcNode.spec.desiredImage, once known."""
        if self.repository and self.target_digest:
            return f"{self.repository}@{self.target_digest}"
        return None

    def resolve_max_unavailable(self, total: int) -> int:
        return resolve_max_unavailable(self.max_unavailable, total)

    def resolve_max_unhealthy(self, total: int) -> int:
        """Unhealthy slot holders that halt the rollout: default 2, never below 1."""
        if self.max_unhealthy is None:
            return defaults.MAX_UNHEALTHY
        count = resolve_int_or_percent(
            self.max_unhealthy, total, field="maxUnhealthy", default=defaults.MAX_UNHEALTHY
        )
        if isinstance(self.max_unhealthy, int):
            count = self.max_unhealthy  # not clamped to the pool size: "5" means 5
        return max(1, count)

    def resolve_stage_ahead(self, total: int, max_unavailable: int) -> int | None:
        """Nodes that may stage beyond the slot holders; None: all at once (unset)."""
        if self.stage_ahead is None:
            return None
        count = resolve_int_or_percent(self.stage_ahead, total, field="stageAhead")
        return count or max(1, max_unavailable)

    def budgets(self, total: int) -> Budgets:
        """Every size-dependent number at once, for a pool of ``total`` members."""
        max_unavailable = self.resolve_max_unavailable(total)
        return Budgets(
            max_unavailable=max_unavailable,
            max_unhealthy=self.resolve_max_unhealthy(total),
            canaries=self.resolve_canaries(total),
            stage_ahead=self.resolve_stage_ahead(total, max_unavailable),
        )


def verification_fingerprint(spec: Mapping[str, Any]) -> str | None:
    """``spec.image.verification`` as one comparable string (None: unset: no
    signature is required)."""
    verification = (spec.get("image") or {}).get("verification")
    if verification is None:
        return None
    return json.dumps(verification, sort_keys=True, separators=(",", ":"))


def check_pool(
    pool: Mapping[str, Any],
    resolved: Mapping[str, str] | None = None,
    verified: str | None = None,
) -> PoolPolicy:
    """The pool's policy; ``resolved``: tag ref -> digest, as this process resolved it;
    ``verified``: the ``repo@digest`` whose signature verification holds for the keys
    the pool trusts now (the signature reconciler's ``verified``). One reader per
    section of the spec; an absent field takes its default from ``api.defaults`` (the
    models' own)."""
    spec = pool.get("spec") or {}
    rollout = spec.get("rollout") or {}
    problems: list[str] = []
    selector_ok = _check_selector(spec.get("nodeSelector"), "nodeSelector" in spec, problems)
    image = _image_target(spec, resolved, verified, problems)
    _check_counts(rollout, problems)
    windows, window_problems = parse_windows(rollout.get("maintenanceWindows"))
    problems.extend(window_problems)
    health = _health_policy(spec.get("health"), problems)
    canary_nodes, require_approval = _canary(rollout.get("canary"), problems)
    topology = _topology(rollout.get("topology"), problems)
    order = _order(rollout.get("order"), problems)
    drain = _drain_policy(rollout, problems)
    reboot_timeout = _seconds(rollout, "rebootTimeoutSeconds", problems)
    return PoolPolicy(
        problems=tuple(problems),
        image_ref=image.ref_text,
        repository=image.repository,
        tag=image.tag,
        target_digest=image.target,
        selector_ok=selector_ok,
        selector=spec.get("nodeSelector") if selector_ok else None,
        paused=bool(rollout.get("paused")),
        drain_timeout=drain.timeout,
        drain=drain,
        reboot_timeout=reboot_timeout,
        max_unavailable=rollout.get("maxUnavailable", defaults.MAX_UNAVAILABLE),
        targets=frozenset({image.target}) if image.target else frozenset(),
        max_unhealthy=rollout.get("maxUnhealthy"),
        stage_ahead=rollout.get("stageAhead"),
        windows=tuple(windows),
        health=health,
        canary_nodes=canary_nodes,
        require_approval=require_approval,
        approved_digest=rollout.get("approvedDigest"),
        reboot_policy=_reboot_policy(spec),
        topology=topology,
        order=order,
        verification=image.fingerprint,
        unverified_digest=image.unverified,
    )


def _check_selector(selector: Any, present: bool, problems: list[str]) -> bool:
    """``spec.nodeSelector``: required, and a valid label selector."""
    if not present:
        problems.append("spec.nodeSelector is required")
        return False
    try:
        validate_selector(selector)
    except InvalidSelector as err:
        problems.append(f"spec.nodeSelector: {err}")
        return False
    return True


@dataclass(frozen=True, slots=True)
class _ImageTarget:
    """What ``spec.image`` names and which digest the pool may target now."""

    ref_text: str
    repository: str | None = None
    tag: str | None = None
    target: str | None = None
    fingerprint: str | None = None
    unverified: str | None = None


def _image_target(
    spec: Mapping[str, Any],
    resolved: Mapping[str, str] | None,
    verified: str | None,
    problems: list[str],
) -> _ImageTarget:
    """``spec.image``: the ref parsed, the digest it names (a tag's as resolved), and
    with ``verification`` the digest held back until its signature is verified."""
    ref_text = str((spec.get("image") or {}).get("ref", ""))
    fingerprint = verification_fingerprint(spec)
    try:
        ref = parse_image_ref(ref_text)
    except InvalidImageRef as err:
        problems.append(f"spec.image.ref: {err}")
        return _ImageTarget(ref_text, fingerprint=fingerprint)
    repository, tag = ref.name, None if ref.digest else ref.reference
    target = ref.digest or (resolved or {}).get(ref_text)
    unverified = None
    if fingerprint is not None and target is not None and verified != f"{repository}@{target}":
        # The digest verified with these very keys stays the target meanwhile (a
        # rollout to it finishes, its slots are released); none: no target at all.
        unverified, target = target, None
        if verified is not None:
            verified_repo, _, verified_digest = verified.rpartition("@")
            if verified_repo == repository:
                target = verified_digest
    return _ImageTarget(ref_text, repository, tag, target, fingerprint, unverified)


def _check_counts(rollout: Mapping[str, Any], problems: list[str]) -> None:
    """``maxUnavailable``, ``maxUnhealthy``, ``stageAhead``: an integer or a percentage
    (read again, against the pool's size, by ``PoolPolicy.budgets``)."""
    for name in ("maxUnavailable", "maxUnhealthy", "stageAhead"):
        value = rollout.get(name)
        if value is None:
            continue
        try:
            resolve_int_or_percent(value, 1, field=name)
        except InvalidIntOrPercent as err:
            problems.append(f"spec.rollout.{name}: {err}")
    if rollout.get("maxUnhealthy") in (0, "0%"):
        problems.append("spec.rollout.maxUnhealthy must be at least 1")


def _canary(canary: Any, problems: list[str]) -> tuple[int | str | None, bool]:
    """``spec.rollout.canary``: how many canaries (None: none) and whether they need
    approval."""
    if canary is None:
        return None, False
    if not isinstance(canary, Mapping):
        problems.append("spec.rollout.canary must be an object")
        return None, False
    nodes: int | str | None = canary.get("nodes", defaults.CANARY_NODES)
    try:
        resolve_int_or_percent(nodes, 1, field="canary.nodes")
    except InvalidIntOrPercent as err:
        problems.append(f"spec.rollout.canary.nodes: {err}")
        nodes = None
    if nodes in (0, "0%"):
        problems.append("spec.rollout.canary.nodes must be at least 1")
    return nodes, bool(canary.get("requireApproval"))


def _order(order: Any, problems: list[str]) -> Order | None:
    """``spec.rollout.order`` as an ``Order`` (the CRD checks the same)."""
    if order is None:
        return None
    if not isinstance(order, Mapping):
        problems.append("spec.rollout.order must be an object")
        return None
    by = order.get("by") or defaults.ORDER_BY
    by_label = order.get("byLabel")
    control_plane = order.get("controlPlane")
    bad = len(problems)
    if by not in (BY_NAME, OLDEST_BOOT_FIRST, NEWEST_FIRST):
        problems.append(
            f"spec.rollout.order.by must be Name, OldestBootFirst or NewestFirst, "
            f"not {json.dumps(by)}"
        )
    if by_label is not None and (
        not isinstance(by_label, str) or not re.match(c.LABEL_KEY_PATTERN, by_label)
    ):
        problems.append(
            f"spec.rollout.order.byLabel must be a label key, not {json.dumps(by_label)}"
        )
    if control_plane not in (None, FIRST, LAST):
        problems.append(
            "spec.rollout.order.controlPlane must be First or Last, "
            f"not {json.dumps(control_plane)}"
        )
    if len(problems) > bad:
        return None
    return Order(by=by, by_label=by_label, control_plane=control_plane)


def _topology(topology: Any, problems: list[str]) -> Topology | None:
    """``spec.rollout.topology`` as a ``Topology`` (the CRD checks the same; a CRD
    installed without validation still gets a clear message here)."""
    if topology is None:
        return None
    if not isinstance(topology, Mapping):
        problems.append("spec.rollout.topology must be an object")
        return None
    key = topology.get("key")
    if not isinstance(key, str) or not re.match(c.LABEL_KEY_PATTERN, key) or len(key) > 317:
        problems.append(
            f"spec.rollout.topology.key must be a label key "
            f"(e.g. topology.kubernetes.io/zone), not {json.dumps(key)}"
        )
        return None
    order = topology.get("order") or []
    if not isinstance(order, list) or not all(isinstance(d, str) for d in order):
        problems.append("spec.rollout.topology.order must be a list of label values")
        return None
    if dupes := sorted({d for d in order if order.count(d) > 1}):
        problems.append(
            f"spec.rollout.topology.order must name each domain once: {', '.join(dupes)} repeated"
        )
        return None
    per_domain = topology.get("maxUnavailablePerDomain")
    if per_domain is not None:
        try:
            resolve_int_or_percent(per_domain, 1, field="maxUnavailablePerDomain")
        except InvalidIntOrPercent as err:
            problems.append(f"spec.rollout.topology.maxUnavailablePerDomain: {err}")
            return None
        if per_domain in (0, "0%"):
            problems.append("spec.rollout.topology.maxUnavailablePerDomain must be at least 1")
            return None
    return Topology(key=key, order=tuple(order), max_unavailable=per_domain)


def _reboot_policy(spec: Mapping[str, Any]) -> str | None:
    """What a member's ``spec.rebootPolicy`` says: ``AllowSoftReboot`` when the pool
    allows soft reboots, else nothing (unset means ``RebootOnly``, as for a member
    written by the Go operator)."""
    policy = (spec.get("disruption") or {}).get("rebootPolicy")
    return "AllowSoftReboot" if policy == "AllowSoftReboot" else None


def _seconds(
    rollout: Mapping[str, Any], name: str, problems: list[str], where: str = "spec.rollout"
) -> float | None:
    """``<where>.<name>`` in seconds; 0 or unset: None (no limit)."""
    value = rollout.get(name)
    if value is None or value == 0:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        problems.append(f"{where}.{name} must be a non-negative integer, not {json.dumps(value)}")
        return None
    return float(value)


ON_TIMEOUT = ("Halt", "Skip", "Force")


def _drain_policy(rollout: Mapping[str, Any], problems: list[str]) -> DrainPolicy:
    """``spec.rollout.drain``; its timeoutSeconds, when set (0 too), wins over
    ``drainTimeoutSeconds``."""
    legacy = _seconds(rollout, "drainTimeoutSeconds", problems)
    drain = rollout.get("drain")
    if drain is None:
        return DrainPolicy(timeout=legacy)
    if not isinstance(drain, Mapping):
        problems.append("spec.rollout.drain must be an object")
        return DrainPolicy(timeout=legacy)
    where = "spec.rollout.drain"
    timeout = _seconds(drain, "timeoutSeconds", problems, where)
    if drain.get("timeoutSeconds") is None:
        timeout = legacy
    on_timeout = drain.get("onTimeout")
    if on_timeout is not None and on_timeout not in ON_TIMEOUT:
        problems.append(
            f"{where}.onTimeout must be one of {', '.join(ON_TIMEOUT)}, "
            f"not {json.dumps(on_timeout)}"
        )
        on_timeout = None
    grace = drain.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool) or grace < 0):
        problems.append(
            f"{where}.gracePeriodSeconds must be a non-negative integer, not {json.dumps(grace)}"
        )
        grace = None
    if grace == 0:
        # 0 would remove the pod from the API at once, without its kubelet confirming
        # that its containers stopped (a StatefulSet could run two web-0): taken as 1,
        # as kubectl delete does without --force (issue 37 §12)
        grace = MIN_GRACE_PERIOD
    delete_emptydir = drain.get("deleteEmptyDirData")
    if delete_emptydir is not None and not isinstance(delete_emptydir, bool):
        problems.append(
            f"{where}.deleteEmptyDirData must be true or false, not {json.dumps(delete_emptydir)}"
        )
        delete_emptydir = None
    return DrainPolicy(
        timeout=timeout,
        on_timeout=on_timeout,
        grace_period=grace,
        delete_emptydir_data=delete_emptydir,
    )


def _health_policy(health: Any, problems: list[str]) -> HealthPolicy | None:
    """``spec.health`` as a ``HealthPolicy``; problems go to ``problems``."""
    if health is None:
        return None
    if not isinstance(health, Mapping):
        problems.append("spec.health must be an object")
        return None

    def number(name: str, minimum: int, default: int) -> int:
        value = health.get(name)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            problems.append(f"spec.health.{name} must be an integer >= {minimum}, not {value!r}")
            return default
        return value

    pods = health.get("pods")
    selector: Mapping[str, Any] | None = None
    namespaces: frozenset[str] = frozenset()
    if pods is not None:
        selector = (pods or {}).get("selector") if isinstance(pods, Mapping) else None
        try:
            if selector is None:
                raise InvalidSelector("is required")
            validate_selector(selector)
        except InvalidSelector as err:
            problems.append(f"spec.health.pods.selector: {err}")
            selector = None
        namespaces = frozenset((pods or {}).get("namespaces") or ())
    return HealthPolicy(
        queries=_health_queries(health.get("queries"), problems),
        min_ready_seconds=number("minReadySeconds", 0, 0),
        boot_complete=bool(health.get("bootComplete")),
        pods_selector=selector,
        pods_namespaces=namespaces,
        timeout_seconds=float(number("timeoutSeconds", 1, defaults.HEALTH_TIMEOUT_SECONDS)),
        rollback=health.get("onFailure", defaults.HEALTH_ON_FAILURE) == "Rollback",
    )


def _health_queries(raw: Any, problems: list[str]) -> tuple[HealthQuery, ...]:
    """``spec.health.queries``; an entry with a problem is left out (and reported)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("spec.health.queries must be a list")
        return ()
    out: list[HealthQuery] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"spec.health.queries[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where} must be an object")
            continue
        name, expr = item.get("name"), item.get("expr")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name is required")
            continue
        if name in seen:
            problems.append(f"{where}.name {name!r} is used twice")
            continue
        seen.add(name)
        if not isinstance(expr, str) or not expr.strip():
            problems.append(f"{where}.expr is required")
            continue
        hold = parse_hold(item.get("for"))
        if hold is None:
            problems.append(
                f'{where}.for must be a duration like "30s", "5m" or "1m30s", not '
                f"{json.dumps(item.get('for'))}"
            )
            continue
        out.append(HealthQuery(name, expr, hold))
    return tuple(out)
