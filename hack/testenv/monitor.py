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
  satisfied (``status.currentHealthy < status.desiredHealthy``).

``final_check(target_digest)`` adds the end-state invariants: every node runs
the target, none is cordoned by us, the pool is ``UpToDate=True``; nodes named in
``exclude`` (known-broken ones the rollout had to go around) are exempt from the
first, and then the pool must instead count every other node updated and the
excluded ones degraded.

``summary`` gives max concurrent slot holders / cordoned / NotReady / unavailable
nodes, the reboots seen and the duration. The monitor also watches the pool
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

import builtins
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer, Obj, unwrap
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, Resource
from bootc_operator.kube.rest import get_object
from bootc_operator.reconcilers.drainplan import must_leave

PDBS = Resource("policy", "v1", "poddisruptionbudgets", namespaced=True, kind="PodDisruptionBudget")


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
    reboots: int = 0
    slots_taken: int = 0
    duration: float = 0.0
    events: int = 0
    violations: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"max reboot slots {self.max_slots}, max cordoned by us {self.max_cordoned_by_us}, "
            f"max NotReady {self.max_not_ready}, max unavailable {self.max_unavailable}, "
            f"slots taken {self.slots_taken}, reboots {self.reboots}, "
            f"{self.events} events over {self.duration:.1f}s, "
            f"{len(self.violations)} violations"
        )


def _ready(node: dict[str, Any] | None) -> bool:
    return any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in (node or {}).get("status", {}).get("conditions") or ()
    )


class SafetyMonitor:
    def __init__(self, api: ApiClient, pool: str, max_unavailable: int) -> None:
        self.api = api
        self.pool = pool
        self.max_unavailable = max_unavailable
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

    def takes_between(self, start: float, end: float | None = None) -> list[str]:
        """Nodes that took a reboot slot in [start, end] (monitor time)."""
        return [n for t, n in self.takes if t >= start and (end is None or t <= end)]

    @property
    def violations(self) -> list[str]:
        return self.summary.violations

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> SafetyMonitor:
        self._start = time.monotonic()
        for inf in self._informers:
            inf.start()
        for inf in self._informers:
            await inf.wait_for_sync()
        self._precordoned = {
            n["metadata"]["name"]
            for n in self.nodes.list()
            if n.get("spec", {}).get("unschedulable")
        }
        self._event({"kind": "start", "metadata": {"name": self.pool}})
        return self

    async def stop(self) -> Summary:
        for inf in self._informers:
            await inf.stop()
        self.summary.duration = time.monotonic() - self._start
        return self.summary

    async def __aenter__(self) -> SafetyMonitor:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ checks

    def members(self) -> list[dict[str, Any]]:
        return [
            b
            for b in self.bootc_nodes.list()
            if (b["metadata"].get("labels") or {}).get(c.POOL_LABEL) == self.pool
        ]

    def _violation(self, text: str) -> None:
        at = time.monotonic() - self._start
        self.summary.violations.append(f"t={at:.2f}s {text}")

    def _relisted(self, informer: _Informer) -> None:
        self._event({"kind": "relist", "metadata": {"name": informer.resource.plural}})

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
        for name in sorted(set(slots) - self._slotted):
            self.takes.append((at, name))
            self.summary.slots_taken += 1
        for name in sorted(self._slotted - set(slots)):
            self.releases.append((at, name))
        self._slotted = set(slots)
        s = self.summary
        s.max_slots = max(s.max_slots, len(slots))
        s.max_cordoned_by_us = max(s.max_cordoned_by_us, len(cordoned))
        s.max_not_ready = max(s.max_not_ready, len(not_ready))
        s.max_unavailable = max(s.max_unavailable, len(unavailable))
        if len(slots) > self.max_unavailable:
            self._violation(f"{len(slots)} nodes in reboot slots: {sorted(slots)}")
        if len(cordoned) > self.max_unavailable:
            self._violation(f"{len(cordoned)} nodes cordoned by us: {sorted(cordoned)}")
        if len(unavailable) > self.max_unavailable:
            self._violation(f"{len(unavailable)} nodes unavailable: {unavailable}")
        self._check_pool()
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

    def _check_pool(self) -> None:
        pool = self.pools.get(self.pool)
        degraded = {}
        for cond in ((pool or {}).get("status") or {}).get("conditions") or ():
            if cond.get("type") == c.COND_DEGRADED:
                degraded = cond
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
        self.summary.violations.extend(problems)
        return problems
