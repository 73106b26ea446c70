"""The safety monitor: watches a cluster during a scenario and checks the invariants.

The kit's one monitor, for every tier that rolls a pool out: the controller
scenarios on the in-process fleet (``e2e/test_controller_*.py``), the kwok drain
test and the system and chaos tiers on the simulated cluster (``e2e.simenv``).

``SafetyMonitor(api, pool, max_unavailable)`` runs informers on Nodes,
BootcNodes, Pods and PodDisruptionBudgets from ``start()`` to ``stop()`` and
records a timeline. ``violations`` lists every breach of:

- never more than ``max_unavailable`` of the pool's nodes in reboot slots, never
  more than that many cordoned by us (nodes cordoned before the scenario started
  are not ours), and never more than that many *unavailable* (cordoned by us or
  NotReady, the way a workload sees the pool);
- no node reboots (its BootcNode reports ``Idle=False/Rebooting``, or its Node
  turns NotReady while in a reboot slot) while a pod that must be evicted
  (not DaemonSet-owned, not a mirror pod, not terminal) is still bound to it;
- no PodDisruptionBudget below its desired healthy count after it was first
  satisfied (``status.currentHealthy < status.desiredHealthy``);
- the pool turns ``UpToDate=True`` only when, at the revision of that status
  write, no member holds a reboot slot and none is cordoned by us (cordoned, not
  before the scenario, and its last slot's ``was-cordoned`` was not "true"): what
  ``kubectl wait --for=condition=UpToDate`` promises. Judged, like a take, once
  both the Node and the BootcNode watches have passed that revision (or at
  ``stop()``); ``up_to_date_at`` lists the revisions of those transitions.

A pool's members are the BootcNodes it owns, as the operator judges it
(``ownership.pool_of``: the controller ownerReference, the ``bootc.dev/pool``
label as fallback), so BootcNodes the Go operator wrote (no labels) count too.

``final_check(target_digest)`` adds the end-state invariants: every node runs
the target, none is cordoned by us, the pool is ``UpToDate=True``; nodes named in
``exclude`` (known-broken ones the rollout had to go around) are exempt from the
first, and then the pool must instead count every other node updated and the
excluded ones degraded.

Optional invariants of the rollout policies (``spec.rollout``), each on only
when given, so a scenario checks what its pool asks for:

- ``outside_causes=True`` (the unavailability-aware budget): whenever a node that
  was schedulable takes a new reboot slot, the slot holders plus the members that
  are NotReady or cordoned *by anyone* must not exceed ``max_unavailable`` (a node
  someone else had cordoned may take a slot whatever the others: updating it costs
  no capacity). Slots come from the BootcNode watch and cordons from the Node
  watch, two streams that may lag each other, so each take is judged against the
  cluster *as it was at the take's resourceVersion* (etcd revisions order both
  streams), once the Node stream has passed that revision (or at ``stop()``).
  A node cordoned or turning NotReady at the very instant of a take (faster than
  the controller's cache can tell) counts too: enable it where nothing outside
  the test changes nodes during takes.
- ``windows`` (the pool's ``maintenanceWindows``, as written in the spec): no new
  slot outside a window, judged by ``bootc_operator.policy.windows`` at the
  time the slot annotation records and at the time the monitor saw it (allowing
  ``WINDOW_GRACE`` for the watch's delay past a closing).
- ``stage_ahead`` with ``target`` (a digest): never more than ``stage_ahead``
  members *on their way*: ``desiredImage`` names the target, the node does not
  run it yet, holds no slot and is not Degraded (the planner does not count
  degraded members: they are not staging).

- ``topology_key`` (``spec.rollout.topology.key``): the reboot slots of the
  pool's members are never in more than one domain (the value of that Node label;
  ``(unlabelled)`` without it) at once. Judged on the BootcNode stream alone (one
  stream, so no lag between two watches), with each node's label as the Node
  watch has it (labels do not change during a scenario). ``summary.max_domains``
  is the most domains seen with slots at once; ``domains`` lists each change of
  the set of disrupted domains (monitor time, domains), ``max_per_domain`` the
  most slots seen at once in each domain, ``reboot_order`` the
  nodes in the order they took slots, ``current_domains`` each value the pool's
  ``status.currentDomain`` took (recorded whatever the options).

Optional invariants of the system tiers, each on only when given:

- ``audit_log`` (the apiserver's, ``ControlPlane(audit=True)``): **at most one
  controller writing at any moment.** Every write the operator's controllers
  made (``hack.testenv.audit``: told apart by their user agent, one per process)
  is judged by a :class:`WriterCheck` as the apiserver logged it: a write
  received after another controller's Lease take completed (or after its own
  release) is a violation. ``summary.max_writers`` is the most controllers seen
  writing in one leadership term; ``writers.handovers`` times each change of
  leader (the old leader's last renewal and last write, the new one's take and
  first write), ``writers.report()`` prints them. Writes logged before
  ``start()`` only set who holds the Lease.
- ``once_per_node=True``: no member reboots twice while monitored (checked when
  the second reboot starts) and, at ``final_check``, each non-excluded member was
  seen rebooting once.
- ``converge_within`` (seconds) with ``target``: once ``faults_stopped()`` is
  called, the pool must report ``UpToDate=True`` on ``target`` within that many
  seconds (checked at every event and at ``final_check``);
  ``summary.converged_after`` says how long it took.

``summary`` gives max concurrent slot holders / cordoned / NotReady / unavailable
nodes, staging nodes (``Idle=False/Staging``) and, with ``target``, nodes on their
way, the reboots seen and the duration; ``wall(t)`` turns a monitor time into
wall-clock time. The monitor also watches the pool
itself: ``takes``/``releases`` list every reboot slot taken/released (monitor
time, node) and ``halts`` every period the pool reported ``Degraded/RolloutHalted``
(``halt_messages`` what it said), so a scenario can check that no slot was taken
while the rollout was halted (``takes_between``).

Checks run at every event the informers deliver, except in the middle of a
re-LIST (after a watch broke, e.g. an apiserver restart), which an informer
applies object by object: its store then mixes states from before and after
the gap, so the monitor checks once the re-LIST is fully applied instead.
"""

from __future__ import annotations

import bisect
import builtins
import datetime as dt
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import parse_time
from bootc_operator.informers import DeletedFinalStateUnknown, EventHandler, Informer, Obj, unwrap
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, Resource
from bootc_operator.kube.rest import get_object
from bootc_operator.policy.drainplan import must_leave
from bootc_operator.policy.ownership import pool_of
from bootc_operator.policy.windows import Window, parse_windows, window_state
from bootc_operator.wording import counted
from hack.testenv.audit import ApiWrite, AuditTail

PDBS = Resource("policy", "v1", "poddisruptionbudgets", namespaced=True, kind="PodDisruptionBudget")

#: how late the monitor may see a slot taken just before a maintenance window closed
WINDOW_GRACE = dt.timedelta(seconds=5)

T = TypeVar("T")


class _Informer(Informer):
    """An informer that says when it is in the middle of applying a re-LIST.

    ``Informer.replace`` applies a re-LIST (after a watch broke, e.g. an apiserver
    restart) one object at a time and notifies after each; in between, its store
    mixes objects from before and after the gap (a slot already taken by one node
    but not yet seen released by another), so the monitor checks nothing while
    ``relisting`` and once when the re-LIST is fully applied.
    """

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        relisted: Callable[[_Informer], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(api, resource, **kwargs)
        self.relisting = False
        self._relisted = relisted

    def replace(self, items: builtins.list[Obj]) -> None:
        self.relisting = True
        try:
            super().replace(items)
        finally:
            self.relisting = False
        self._relisted(self)


@dataclass
class Summary:
    max_slots: int = 0
    max_cordoned_by_us: int = 0
    #: most pool nodes NotReady at once
    max_not_ready: int = 0
    #: most pool nodes cordoned by us or NotReady at once
    max_unavailable: int = 0
    #: most pool members reporting Idle=False/Staging at once
    max_staging: int = 0
    #: most pool members on their way to ``target`` at once (with ``target`` only)
    max_on_the_way: int = 0
    reboots: int = 0
    #: most domains with reboot slots at once (with ``topology_key``)
    max_domains: int = 0
    #: most controllers seen writing in one leadership term (with ``audit_log``)
    max_writers: int = 0
    #: seconds from ``faults_stopped()`` to the pool UpToDate (with ``converge_within``)
    converged_after: float | None = None
    slots_taken: int = 0
    duration: float = 0.0
    events: int = 0
    violations: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"max reboot slots {self.max_slots}, max cordoned by us {self.max_cordoned_by_us}, "
            f"max NotReady {self.max_not_ready}, max unavailable {self.max_unavailable}, "
            f"max staging {self.max_staging}, max on their way {self.max_on_the_way}, "
            f"slots taken {self.slots_taken}, reboots {self.reboots}, "
            f"max controllers writing {self.max_writers}, "
            f"{counted(self.events, 'event')} over {self.duration:.1f}s, "
            f"{counted(len(self.violations), 'violation')}"
        )


def _ready(node: dict[str, Any] | None) -> bool:
    return any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in (node or {}).get("status", {}).get("conditions") or ()
    )


def _rv(obj: Mapping[str, Any]) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


class Versions(Generic[T]):
    """Every object's successive states by resourceVersion (etcd revision), so the
    cluster can be read as it was at one revision: ``at(name, rv)``."""

    def __init__(self) -> None:
        self._rvs: dict[str, list[int]] = {}
        self._states: dict[str, list[T | None]] = {}

    def record(self, name: str, rv: int, state: T | None) -> None:
        """``name`` is in ``state`` (None: gone) from revision ``rv`` on; a revision not
        newer than the last one recorded (a re-LIST re-delivering it) changes nothing."""
        rvs = self._rvs.setdefault(name, [])
        if rvs and rv <= rvs[-1]:
            return
        states = self._states.setdefault(name, [])
        if states and states[-1] == state:
            return
        rvs.append(rv)
        states.append(state)

    def at(self, name: str, rv: int) -> T | None:
        """``name``'s state at revision ``rv`` (None: unknown or gone then)."""
        rvs = self._rvs.get(name) or []
        i = bisect.bisect_right(rvs, rv)
        return self._states[name][i - 1] if i else None

    def until(self, name: str, rv: int) -> list[T | None]:
        """``name``'s states up to and including the one at revision ``rv``."""
        i = bisect.bisect_right(self._rvs.get(name) or [], rv)
        return list(self._states.get(name, [])[:i])

    def names(self) -> list[str]:
        return sorted(self._rvs)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    unschedulable: bool
    ready: bool


@dataclass(frozen=True, slots=True)
class MemberFacts:
    member: bool  # labelled with the monitored pool
    in_slot: bool
    was_cordoned: bool  # the slot's ``was-cordoned`` annotation says "true"


def on_the_way(bn: Mapping[str, Any], target: str) -> bool:
    """``desiredImage`` names ``target`` (a digest), the node does not run it yet, holds
    no reboot slot and is not Degraded (see the module docstring)."""
    desired = str((bn.get("spec") or {}).get("desiredImage") or "")
    if desired.rpartition("@")[2] != target:
        return False
    if c.IN_REBOOT_SLOT_ANNOTATION in ((bn.get("metadata") or {}).get("annotations") or {}):
        return False
    status = bn.get("status") or {}
    booted = status.get("booted") or {}
    if target in (booted.get("imageDigest"), str(booted.get("image") or "").rpartition("@")[2]):
        return False
    return not any(
        x.get("type") == c.COND_DEGRADED and x.get("status") == "True"
        for x in status.get("conditions") or ()
    )


def staging(bn: Mapping[str, Any]) -> bool:
    """The node reports ``Idle=False/Staging``."""
    return any(
        x.get("type") == c.COND_IDLE
        and x.get("status") == "False"
        and x.get("reason") == c.REASON_STAGING
        for x in (bn.get("status") or {}).get("conditions") or ()
    )


@dataclass
class Handover:
    """One change of leader, from the audit log (epoch seconds; None: not seen)."""

    old: str | None
    new: str
    taken: float
    #: the old leader's last successful Lease write before the take
    old_renewed: float | None = None
    lease_duration: float = 0.0
    #: the old leader's last write of anything but the Lease (so far)
    old_last_write: float | None = None
    new_first_write: float | None = None

    def figures(self) -> dict[str, float]:
        """Seconds: ``last_write_after_renewal`` and ``last_write_before_expiry`` (the old
        leader's last write against its last renewal and its Lease's expiry),
        ``take_after_renewal``, ``new_first_write_after_old_last`` (what was seen)."""
        out: dict[str, float] = {}
        r, w = self.old_renewed, self.old_last_write
        if r is not None:
            out["take_after_renewal"] = round(self.taken - r, 3)
            if w is not None:
                out["last_write_after_renewal"] = round(w - r, 3)
                out["last_write_before_expiry"] = round(r + self.lease_duration - w, 3)
        if w is not None and self.new_first_write is not None:
            out["new_first_write_after_old_last"] = round(self.new_first_write - w, 3)
        return out

    def describe(self) -> str:
        if self.old is None:
            return f"{self.new} took the Lease with no leader before it"
        parts = [f"{self.old} -> {self.new}"]
        r = self.old_renewed
        if r is not None:
            parts.append(f"took the Lease {self.taken - r:.2f}s after {self.old}'s last renewal")
        if self.old_last_write is not None and r is not None:
            expiry = r + self.lease_duration
            parts.append(
                f"{self.old} last wrote {self.old_last_write - r:+.2f}s from its last renewal "
                f"({self.old_last_write - expiry:+.2f}s from its Lease's expiry)"
            )
        if self.new_first_write is not None:
            parts.append(f"{self.new} first wrote {self.new_first_write - self.taken:.2f}s after")
            if self.old_last_write is not None:
                gap = self.new_first_write - self.old_last_write
                parts.append(f"{gap:.2f}s after {self.old}'s last write")
        return "; ".join(parts)


class WriterCheck:
    """At most one controller writing at any moment (see the module docstring).

    Fed every write in the audit log's order (``record``); pure, so unit tests feed
    it by hand. The Lease's holder changes at each successful Lease write: to its
    writer, or to nobody when it wrote an empty holder (a release). A controller's
    write received (``ApiWrite.received``) after the current term began while
    another holds the Lease (or nobody does) is a violation; one received before
    the take completed overlaps it and is not judged.
    """

    def __init__(self, lease_name: str, violation: Callable[[str], None]) -> None:
        self.lease_name = lease_name
        self._violation = violation
        self.checking = True
        self.holder: str | None = None
        self.term_start = 0.0
        self.term_writers: set[str] = set()
        self.max_writers = 0
        self.writes = 0
        self.handovers: list[Handover] = []
        self._renewed: dict[str, tuple[float, float]] = {}  # writer -> (completed, duration)
        self._last_write: dict[str, float] = {}

    def record(self, w: ApiWrite) -> None:
        if w.writer is None or not w.ok:
            return
        if w.resource == "leases" and w.name == self.lease_name:
            self._lease(w)
            return
        self.writes += 1
        self._last_write[w.writer] = w.completed
        for h in self.handovers[-3:]:
            if h.old == w.writer and w.completed > h.taken:
                h.old_last_write = w.completed
            if h.new == w.writer and h.new_first_write is None:
                h.new_first_write = w.completed
        if w.writer == self.holder or w.received < self.term_start:
            if w.writer == self.holder:
                self._count(w.writer)
            return
        self._count(w.writer)
        if self.checking:
            held = f"while {self.holder} held the Lease" if self.holder else "holding no Lease"
            self._violation(f"controller {w.writer} wrote {held}: {w.describe()}")

    def _count(self, writer: str) -> None:
        self.term_writers.add(writer)
        self.max_writers = max(self.max_writers, len(self.term_writers))

    def _lease(self, w: ApiWrite) -> None:
        assert w.writer is not None
        new = w.writer if w.holder else None
        if new is not None:
            self._renewed[new] = (w.completed, w.lease_duration)
        if new == self.holder:
            return
        if new is not None:
            old = self.holder
            renewed, duration = self._renewed.get(old or "", (None, 0.0))
            self.handovers.append(
                Handover(
                    old,
                    new,
                    w.completed,
                    renewed,
                    duration,
                    self._last_write.get(old or ""),
                )
            )
        self.holder = new
        self.term_start = w.completed
        self.term_writers = set()

    def report(self) -> list[str]:
        return [h.describe() for h in self.handovers]


class SafetyMonitor:
    def __init__(
        self,
        api: ApiClient,
        pool: str,
        max_unavailable: int,
        *,
        outside_causes: bool = False,
        windows: Sequence[Mapping[str, Any]] | None = None,
        stage_ahead: int | None = None,
        target: str | None = None,
        audit_log: Path | None = None,
        lease_name: str = "bootc-operator-controller",
        once_per_node: bool = False,
        converge_within: float | None = None,
        topology_key: str | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        """See the module docstring; ``clock`` (wall time) is for the window check."""
        self.api = api
        self.pool = pool
        self.max_unavailable = max_unavailable
        self.outside_causes = outside_causes
        self.windows: list[Window] | None = None
        if windows is not None:
            parsed, problems = parse_windows(windows)
            if problems:
                raise ValueError("; ".join(problems))
            self.windows = parsed
        self.stage_ahead = stage_ahead
        self.target = target
        self.once_per_node = once_per_node
        self.converge_within = converge_within
        self.topology_key = topology_key
        #: (monitor time, domains with slots) at each change (with ``topology_key``)
        self.domains: list[tuple[float, tuple[str, ...]]] = []
        #: the most slots seen at once in each domain (with ``topology_key``)
        self.max_per_domain: dict[str, int] = {}
        #: each value the pool's status.currentDomain took, in order (None: unset)
        self.current_domains: list[str | None] = []
        self.reboot_counts: dict[str, int] = {}
        self._faults_stopped: float | None = None
        self._late = False
        self.writers = WriterCheck(lease_name, self._violation)
        self.audit = AuditTail(audit_log, self._write) if audit_log is not None else None
        self.clock = clock
        self._wall_start = clock()
        self._node_versions: Versions[NodeFacts] = Versions()
        self._member_versions: Versions[MemberFacts] = Versions()
        self._node_rv = 0  # the Node watch has delivered every change up to this revision
        self._member_rv = 0  # the BootcNode watch, likewise
        self._pending_up: list[int] = []  # revisions of UpToDate=True transitions to judge
        self._up: bool | None = None  # the pool's UpToDate, as last seen
        #: revisions at which the pool turned UpToDate=True (after the start)
        self.up_to_date_at: list[int] = []
        self._pending_takes: list[tuple[int, str]] = []  # (revision, node) to judge
        self.summary = Summary()
        self.timeline: list[tuple[float, str]] = []
        self._start = 0.0
        self._precordoned: set[str] | None = None
        self._rebooting: set[str] = set()
        self._pdb_ok: set[str] = set()
        self._slotted: set[str] = set()
        #: (monitor time, node) of every reboot slot taken / released
        self.takes: list[tuple[float, str]] = []
        self.releases: list[tuple[float, str]] = []
        #: [start, end) monitor times of every Degraded/RolloutHalted period (end None: ongoing)
        self.halts: list[tuple[float, float | None]] = []
        self.halt_messages: list[str] = []
        relisted = self._relisted
        self.bootc_nodes = _Informer(api, BOOTC_NODES, relisted)
        self.nodes = _Informer(api, NODES, relisted)
        self.pods = _Informer(api, PODS, relisted)
        self.pdbs = _Informer(api, PDBS, relisted)
        self.pools = _Informer(
            api, BOOTC_NODE_POOLS, relisted, field_selector=f"metadata.name={pool}"
        )
        # Versions first: a take's check reads the revision its event brought.
        self.nodes.add_event_handler(
            EventHandler(
                on_add=self._node_version,
                on_update=lambda _o, n: self._node_version(n),
                on_delete=self._node_gone,
            )
        )
        self.bootc_nodes.add_event_handler(
            EventHandler(
                on_add=self._member_version,
                on_update=lambda _o, n: self._member_version(n),
                on_delete=self._member_gone,
            )
        )
        on = EventHandler(on_add=self._event, on_update=lambda _o, n: self._event(n))
        for inf in self._informers:
            inf.add_event_handler(on)

    @property
    def _informers(self) -> tuple[_Informer, ...]:
        return (self.bootc_nodes, self.nodes, self.pods, self.pdbs, self.pools)

    def now(self) -> float:
        """Seconds since ``start()`` (the time base of ``takes``, ``halts``, ``timeline``)."""
        return time.monotonic() - self._start

    def holders(self) -> set[str]:
        """The pool's nodes holding a reboot slot, as last seen."""
        return set(self._slotted)

    def wall(self, t: float) -> dt.datetime:
        """Monitor time ``t`` as wall-clock time (``clock``)."""
        return self._wall_start + dt.timedelta(seconds=t)

    def takes_between(self, start: float, end: float | None = None) -> list[str]:
        """Nodes that took a reboot slot in [start, end] (monitor time)."""
        return [n for t, n in self.takes if t >= start and (end is None or t <= end)]

    @property
    def violations(self) -> list[str]:
        return self.summary.violations

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> SafetyMonitor:
        self._start = time.monotonic()
        self._wall_start = self.clock()
        for inf in self._informers:
            inf.start()
        for inf in self._informers:
            await inf.wait_for_sync()
        if self.audit is not None:
            self.writers.checking = False  # before the scenario: who holds the Lease
            self.audit.read()
            self.writers.checking = True
            self.writers.term_writers = set()
            self.writers.handovers = []
            self.audit.start()
        self.begin()
        return self

    def begin(self) -> None:
        """Start checking the informers' caches as they are (``start()`` does it once
        they synced; a unit test feeding the informers itself calls it directly)."""
        self._precordoned = {
            n["metadata"]["name"]
            for n in self.nodes.list()
            if n.get("spec", {}).get("unschedulable")
        }
        self._event({"kind": "start", "metadata": {"name": self.pool}})

    async def stop(self) -> Summary:
        if self.audit is not None:
            await self.audit.stop()
        for inf in self._informers:
            await inf.stop()
        self.judge_takes(force=True)
        self.judge_up_to_date(force=True)
        self.summary.duration = time.monotonic() - self._start
        return self.summary

    async def __aenter__(self) -> SafetyMonitor:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ checks

    def members(self) -> list[dict[str, Any]]:
        return [b for b in self.bootc_nodes.list() if pool_of(b) == self.pool]

    def _violation(self, text: str) -> None:
        at = time.monotonic() - self._start
        self.summary.violations.append(f"t={at:.2f}s {text}")

    def _write(self, w: ApiWrite) -> None:
        """Each write the audit log records: the writers check, on every one."""
        self.writers.record(w)
        self.summary.max_writers = max(self.summary.max_writers, self.writers.max_writers)

    def faults_stopped(self) -> None:
        """The faults stopped now: the pool must converge within ``converge_within``."""
        self._faults_stopped = self.now()
        self._check_convergence()

    def _check_convergence(self) -> None:
        if self._faults_stopped is None or self.summary.converged_after is not None:
            return
        pool = self.pools.get(self.pool) or {}
        up = any(
            x.get("type") == c.COND_UP_TO_DATE and x.get("status") == "True"
            for x in (pool.get("status") or {}).get("conditions") or ()
        )
        if up and (
            self.target is None or (pool.get("status") or {}).get("targetDigest") == self.target
        ):
            self.summary.converged_after = self.now() - self._faults_stopped
            return
        bound = self.converge_within
        if bound is not None and not self._late and self.now() - self._faults_stopped > bound:
            self._late = True
            self._violation(
                f"the pool did not converge within {bound:.0f}s after the faults stopped"
            )

    def _relisted(self, informer: _Informer) -> None:
        self._event({"kind": "relist", "metadata": {"name": informer.resource.plural}})

    # ------------------------------------------------------------ versions

    def _node_version(self, node: Obj) -> None:
        rv = _rv(node)
        if rv is None:
            return
        spec = node.get("spec") or {}
        facts = NodeFacts(bool(spec.get("unschedulable")), _ready(node))
        self._node_versions.record(node["metadata"]["name"], rv, facts)
        self._node_rv = max(self._node_rv, rv)
        self.judge_takes()

    def _node_gone(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        node = unwrap(obj)
        rv = _rv(node) if not isinstance(obj, DeletedFinalStateUnknown) else None
        rv = rv or _rv({"metadata": {"resourceVersion": self.nodes.resource_version}})
        if rv is not None:
            self._node_versions.record(node["metadata"]["name"], rv, None)

    def _member_version(self, bn: Obj) -> None:
        rv = _rv(bn)
        if rv is None:
            return
        meta = bn.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        facts = MemberFacts(
            member=pool_of(bn) == self.pool,
            in_slot=c.IN_REBOOT_SLOT_ANNOTATION in annotations,
            was_cordoned=annotations.get(c.WAS_CORDONED_ANNOTATION) == "true",
        )
        self._member_versions.record(meta["name"], rv, facts)
        self._member_rv = max(self._member_rv, rv)
        self.judge_up_to_date()

    def _member_gone(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        bn = unwrap(obj)
        rv = _rv(bn) if not isinstance(obj, DeletedFinalStateUnknown) else None
        rv = rv or _rv({"metadata": {"resourceVersion": self.bootc_nodes.resource_version}})
        if rv is not None:
            self._member_versions.record(bn["metadata"]["name"], rv, None)

    def judge_takes(self, *, force: bool = False) -> None:
        """Check the budget at every pending take the Node watch has caught up with
        (``force``: all of them, e.g. at ``stop()``); see ``outside_causes``."""
        if not self._pending_takes:
            return
        if not force and any(inf.relisting for inf in self._informers):
            return  # the Node versions may be half-recorded; judged once the re-LIST is in
        # a bookmark or a list moves the Node watch past revisions that changed no Node
        listed = _rv({"metadata": {"resourceVersion": self.nodes.resource_version}})
        self._node_rv = max(self._node_rv, listed or 0)
        ready = [(rv, n) for rv, n in self._pending_takes if force or rv <= self._node_rv]
        if not ready:
            return
        self._pending_takes = [t for t in self._pending_takes if t not in ready]
        for rv, name in ready:
            self._judge_take(rv, name)

    def judge_up_to_date(self, *, force: bool = False) -> None:
        """Check every pending ``UpToDate=True`` transition both watches have caught up
        with (``force``: all of them); see the module docstring."""
        if not self._pending_up:
            return
        if not force and any(inf.relisting for inf in self._informers):
            return
        for inf in (self.nodes, self.bootc_nodes):
            listed = _rv({"metadata": {"resourceVersion": inf.resource_version}}) or 0
            if inf is self.nodes:
                self._node_rv = max(self._node_rv, listed)
            else:
                self._member_rv = max(self._member_rv, listed)
        seen = min(self._node_rv, self._member_rv)
        ready = [rv for rv in self._pending_up if force or rv <= seen]
        self._pending_up = [rv for rv in self._pending_up if rv not in ready]
        for rv in ready:
            self._judge_up_to_date(rv)

    def _judge_up_to_date(self, rv: int) -> None:
        pre = self._precordoned or set()
        holders, cordoned = [], []
        for n in self._member_versions.names():
            history = self._member_versions.until(n, rv)
            if not history or history[-1] is None or not history[-1].member:
                continue
            if history[-1].in_slot:
                holders.append(n)
            node = self._node_versions.at(n, rv)
            slots = [f for f in history if f is not None and f.in_slot]
            ours = bool(slots) and not slots[-1].was_cordoned
            if node is not None and node.unschedulable and n not in pre and ours:
                cordoned.append(n)
        if holders or cordoned:
            self._violation(
                f"pool {self.pool} turned UpToDate=True (revision {rv}) with members still "
                f"in reboot slots {holders} / cordoned by us {cordoned}"
            )

    def _judge_take(self, rv: int, name: str) -> None:
        members = {}
        for n in self._member_versions.names():
            facts = self._member_versions.at(n, rv)
            if facts is not None and facts.member:
                members[n] = facts
        holders = sorted(n for n, f in members.items() if f.in_slot)
        outside = []
        for n in sorted(set(members) - set(holders)):
            node = self._node_versions.at(n, rv)
            if node is not None and (node.unschedulable or not node.ready):
                why = "NotReady" if not node.ready else "cordoned"
                outside.append(f"{n} {why}")
        taker = self._node_versions.at(name, rv)
        own = members.get(name)
        if taker is not None and taker.unschedulable and own is not None and own.was_cordoned:
            return  # already cordoned by someone else: its update costs no capacity
        if len(holders) + len(outside) > self.max_unavailable:
            self._violation(
                f"{name} took a reboot slot (revision {rv}) with "
                f"{counted(len(holders), 'slot holder')} {holders} and "
                f"{counted(len(outside), 'other member')} unavailable {outside}: "
                f"more than maxUnavailable {self.max_unavailable}"
            )

    def _check_window(self, name: str, bn: dict[str, Any]) -> None:
        if self.windows is None:
            return
        seen = self.clock()
        stamp = parse_time(
            (bn["metadata"].get("annotations") or {}).get(c.IN_REBOOT_SLOT_ANNOTATION)
        )
        if stamp is not None and not window_state(self.windows, stamp).open:
            self._violation(
                f"{name} took a reboot slot at {stamp:%Y-%m-%d %H:%M:%S} UTC, outside every "
                "maintenance window"
            )
        elif not (
            window_state(self.windows, seen).open
            or window_state(self.windows, seen - WINDOW_GRACE).open
        ):
            self._violation(
                f"{name} took a reboot slot seen at {seen:%Y-%m-%d %H:%M:%S} UTC, outside every "
                "maintenance window"
            )

    # ------------------------------------------------------------ the checks at each event

    def _event(self, obj: Any) -> None:
        self.summary.events += 1
        if self._precordoned is None or any(inf.relisting for inf in self._informers):
            # not started yet, or a half-applied re-LIST: no state the cluster was ever in
            return
        members = {b["metadata"]["name"]: b for b in self.members()}
        slots = [
            n
            for n, b in members.items()
            if c.IN_REBOOT_SLOT_ANNOTATION in (b["metadata"].get("annotations") or {})
        ]
        pre = self._precordoned or set()
        cordoned = [
            n
            for n in members
            if n not in pre and ((self.nodes.get(n) or {}).get("spec", {}).get("unschedulable"))
        ]
        not_ready = [n for n in members if self.nodes.get(n) and not _ready(self.nodes.get(n))]
        unavailable = sorted(set(cordoned) | set(not_ready))
        at = self.now()
        starting = unwrap(obj).get("kind") == "start"
        for name in sorted(set(slots) - self._slotted):
            self.takes.append((at, name))
            self.summary.slots_taken += 1
            if starting:
                continue  # held before the scenario: not a take the monitor saw
            self._check_window(name, members[name])
            rv = _rv(members[name])
            if self.outside_causes and rv is not None:
                self._pending_takes.append((rv, name))
        for name in sorted(self._slotted - set(slots)):
            self.releases.append((at, name))
        self._slotted = set(slots)
        if self.topology_key is not None:
            self._check_domains(at, slots)
        s = self.summary
        s.max_slots = max(s.max_slots, len(slots))
        s.max_cordoned_by_us = max(s.max_cordoned_by_us, len(cordoned))
        s.max_not_ready = max(s.max_not_ready, len(not_ready))
        s.max_unavailable = max(s.max_unavailable, len(unavailable))
        if len(slots) > self.max_unavailable:
            self._violation(f"{counted(len(slots), 'node')} in reboot slots: {sorted(slots)}")
        if len(cordoned) > self.max_unavailable:
            self._violation(f"{counted(len(cordoned), 'node')} cordoned by us: {sorted(cordoned)}")
        if len(unavailable) > self.max_unavailable:
            self._violation(f"{counted(len(unavailable), 'node')} unavailable: {unavailable}")
        s.max_staging = max(s.max_staging, sum(1 for b in members.values() if staging(b)))
        if self.target is not None:
            way = sorted(n for n, b in members.items() if on_the_way(b, self.target))
            s.max_on_the_way = max(s.max_on_the_way, len(way))
            if self.stage_ahead is not None and len(way) > self.stage_ahead:
                self._violation(
                    f"{counted(len(way), 'node')} on their way to the target {way}: more than "
                    f"stageAhead {self.stage_ahead}"
                )
        self.judge_takes()
        self._check_pool(starting=starting)
        self._check_convergence()
        what = f"{unwrap(obj).get('kind', '')} {unwrap(obj)['metadata'].get('name')}"
        self.timeline.append(
            (
                at,
                f"{what}: slots={len(slots)} cordoned={len(cordoned)} notReady={len(not_ready)}",
            )
        )
        for name, bn in members.items():
            self._check_reboot(name, bn)
        self._check_pdbs()

    @property
    def reboot_order(self) -> list[str]:
        """The nodes in the order they took reboot slots."""
        return [name for _, name in self.takes]

    def _check_domains(self, at: float, slots: Collection[str]) -> None:
        key = self.topology_key or ""
        of = [
            ((self.nodes.get(n) or {}).get("metadata", {}).get("labels") or {}).get(key)
            or "(unlabelled)"
            for n in slots
        ]
        domains = tuple(sorted(set(of)))
        for d in domains:
            self.max_per_domain[d] = max(self.max_per_domain.get(d, 0), of.count(d))
        if not self.domains or self.domains[-1][1] != domains:
            self.domains.append((at, domains))
        self.summary.max_domains = max(self.summary.max_domains, len(domains))
        if len(domains) > 1:
            self._violation(f"reboot slots in {len(domains)} domains at once: {sorted(slots)}")

    def _check_pool(self, *, starting: bool = False) -> None:
        pool = self.pools.get(self.pool)
        degraded: dict[str, Any] = {}
        up = False
        for cond in ((pool or {}).get("status") or {}).get("conditions") or ():
            if cond.get("type") == c.COND_DEGRADED:
                degraded = cond
            if cond.get("type") == c.COND_UP_TO_DATE:
                up = cond.get("status") == "True"
        rv = _rv(pool) if pool is not None else None
        current = ((pool or {}).get("status") or {}).get("currentDomain")
        if pool is not None and (not self.current_domains or self.current_domains[-1] != current):
            self.current_domains.append(current)
        if up and self._up is False and not starting and rv is not None:
            self.up_to_date_at.append(rv)
            self._pending_up.append(rv)
            self.judge_up_to_date()
        self._up = up
        halted = (
            degraded.get("status") == "True" and degraded.get("reason") == c.REASON_ROLLOUT_HALTED
        )
        ongoing = bool(self.halts) and self.halts[-1][1] is None
        if halted and degraded.get("message") not in self.halt_messages[-1:]:
            self.halt_messages.append(str(degraded.get("message")))
        if halted and not ongoing:
            self.halts.append((self.now(), None))
            self.timeline.append((self.now(), f"pool halted: {degraded.get('message')}"))
        elif ongoing and not halted:
            self.halts[-1] = (self.halts[-1][0], self.now())
            self.timeline.append((self.now(), "pool no longer halted"))

    def _is_rebooting(self, name: str, bn: dict[str, Any]) -> bool:
        for cond in (bn.get("status") or {}).get("conditions") or ():
            if cond.get("type") == c.COND_IDLE and cond.get("reason") == c.REASON_REBOOTING:
                return True
        node = self.nodes.get(name) or {}
        in_slot = c.IN_REBOOT_SLOT_ANNOTATION in (bn["metadata"].get("annotations") or {})
        return in_slot and bool(node) and not _ready(node)

    def _check_reboot(self, name: str, bn: dict[str, Any]) -> None:
        rebooting = self._is_rebooting(name, bn)
        if rebooting and name not in self._rebooting:
            self.summary.reboots += 1
            self.reboot_counts[name] = self.reboot_counts.get(name, 0) + 1
            if self.once_per_node and self.reboot_counts[name] > 1:
                self._violation(f"{name} rebooted a second time in this rollout")
            bound = [
                f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
                for p in self.pods.list()
                if p.get("spec", {}).get("nodeName") == name
                and must_leave(p)
                and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            ]
            if bound:
                self._violation(f"{name} rebooted with pods still bound: {bound}")
        if rebooting:
            self._rebooting.add(name)
        else:
            self._rebooting.discard(name)

    def _check_pdbs(self) -> None:
        for pdb in self.pdbs.list():
            key = f"{pdb['metadata'].get('namespace')}/{pdb['metadata']['name']}"
            st = pdb.get("status") or {}
            healthy, desired = st.get("currentHealthy"), st.get("desiredHealthy")
            if healthy is None or desired is None:
                continue
            if healthy >= desired:
                self._pdb_ok.add(key)
            elif key in self._pdb_ok:
                self._violation(f"PDB {key} below its budget: {healthy} healthy < {desired}")

    async def final_check(self, target_digest: str, exclude: Collection[str] = ()) -> list[str]:
        """End-state invariants; returns (and records) any violations."""
        problems: list[str] = []
        pre = self._precordoned or set()
        pool = await get_object(self.api, BOOTC_NODE_POOLS, self.pool)
        status = pool.get("status") or {}
        up = [x for x in status.get("conditions") or () if x["type"] == "UpToDate"]
        members = self.members()
        if not exclude and (not up or up[0]["status"] != "True"):
            problems.append(f"pool {self.pool} not UpToDate: {up}")
        if exclude:
            want = (len(members) - len(exclude), len(exclude))
            got = (status.get("updatedCount"), status.get("degradedCount"))
            if got != want:
                problems.append(
                    f"pool {self.pool}: (updated, degraded) = {got}, expected {want} "
                    f"with {sorted(exclude)} excluded"
                )
        for bn in members:
            name = bn["metadata"]["name"]
            booted = (bn.get("status") or {}).get("booted") or {}
            if name not in exclude and target_digest not in (
                booted.get("imageDigest"),
                (booted.get("image") or "").rpartition("@")[2],
            ):
                problems.append(f"{name} runs {booted.get('imageDigest')}, not {target_digest}")
            node = await get_object(self.api, NODES, name)
            if name not in pre and node.get("spec", {}).get("unschedulable"):
                problems.append(f"{name} left cordoned")
            if self.once_per_node and name not in exclude and not self.reboot_counts.get(name):
                problems.append(f"{name} never seen rebooting")
        self._check_convergence()
        if self._faults_stopped is not None and self.summary.converged_after is None:
            problems.append("the pool has not converged since the faults stopped")
        self.summary.violations.extend(problems)
        return problems
