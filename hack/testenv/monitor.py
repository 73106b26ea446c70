"""The safety monitor: watches a cluster during a scenario and checks the invariants.

``SafetyMonitor(api, pool, max_unavailable)`` runs informers on Nodes,
BootcNodes, Pods and PodDisruptionBudgets from ``start()`` to ``stop()`` and
records a timeline. ``violations`` lists every breach of:

- never more than ``max_unavailable`` of the pool's nodes in reboot slots, and
  never more than that many cordoned by us (nodes cordoned before the scenario
  started are not ours);
- no node reboots (its BootcNode reports ``Idle=False/Rebooting``, or its Node
  turns NotReady while in a reboot slot) while a pod that must be evicted
  (not DaemonSet-owned, not a mirror pod, not terminal) is still bound to it;
- no PodDisruptionBudget below its desired healthy count after it was first
  satisfied (``status.currentHealthy < status.desiredHealthy``).

``final_check(target_digest)`` adds the end-state invariants: every node runs
the target, none is cordoned by us, the pool is ``UpToDate=True``.
``summary()`` gives max concurrent slot holders/cordons and the duration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, Resource
from bootc_operator.kube.rest import get_object
from bootc_operator.reconcilers.drainplan import must_leave

PDBS = Resource("policy", "v1", "poddisruptionbudgets", namespaced=True, kind="PodDisruptionBudget")


@dataclass
class Summary:
    max_slots: int = 0
    max_cordoned_by_us: int = 0
    reboots: int = 0
    duration: float = 0.0
    events: int = 0
    violations: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"max reboot slots {self.max_slots}, max cordoned by us {self.max_cordoned_by_us}, "
            f"reboots {self.reboots}, {self.events} events over {self.duration:.1f}s, "
            f"{len(self.violations)} violations"
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
        self.bootc_nodes = Informer(api, BOOTC_NODES)
        self.nodes = Informer(api, NODES)
        self.pods = Informer(api, PODS)
        self.pdbs = Informer(api, PDBS)
        on = EventHandler(on_add=self._event, on_update=lambda _o, n: self._event(n))
        for inf in (self.bootc_nodes, self.nodes, self.pods, self.pdbs):
            inf.add_event_handler(on)

    @property
    def violations(self) -> list[str]:
        return self.summary.violations

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> SafetyMonitor:
        self._start = time.monotonic()
        for inf in (self.bootc_nodes, self.nodes, self.pods, self.pdbs):
            inf.start()
        for inf in (self.bootc_nodes, self.nodes, self.pods, self.pdbs):
            await inf.wait_for_sync()
        self._precordoned = {
            n["metadata"]["name"]
            for n in self.nodes.list()
            if n.get("spec", {}).get("unschedulable")
        }
        return self

    async def stop(self) -> Summary:
        for inf in (self.bootc_nodes, self.nodes, self.pods, self.pdbs):
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

    def _event(self, obj: Any) -> None:
        self.summary.events += 1
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
        s = self.summary
        s.max_slots = max(s.max_slots, len(slots))
        s.max_cordoned_by_us = max(s.max_cordoned_by_us, len(cordoned))
        if len(slots) > self.max_unavailable:
            self._violation(f"{len(slots)} nodes in reboot slots: {sorted(slots)}")
        if len(cordoned) > self.max_unavailable:
            self._violation(f"{len(cordoned)} nodes cordoned by us: {sorted(cordoned)}")
        what = f"{unwrap(obj).get('kind', '')} {unwrap(obj)['metadata'].get('name')}"
        at = time.monotonic() - self._start
        self.timeline.append((at, f"{what}: slots={len(slots)} cordoned={len(cordoned)}"))
        for name, bn in members.items():
            self._check_reboot(name, bn)
        self._check_pdbs()

    def _is_rebooting(self, name: str, bn: dict[str, Any]) -> bool:
        for cond in (bn.get("status") or {}).get("conditions") or ():
            if cond.get("type") == c.COND_IDLE and cond.get("reason") == c.REASON_REBOOTING:
                return True
        node = self.nodes.get(name) or {}
        in_slot = c.IN_REBOOT_SLOT_ANNOTATION in (bn["metadata"].get("annotations") or {})
        ready = any(
            x.get("type") == "Ready" and x.get("status") == "True"
            for x in node.get("status", {}).get("conditions") or ()
        )
        return in_slot and bool(node) and not ready

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

    async def final_check(self, target_digest: str) -> list[str]:
        """End-state invariants; returns (and records) any violations."""
        problems: list[str] = []
        pre = self._precordoned or set()
        pool = await get_object(self.api, BOOTC_NODE_POOLS, self.pool)
        up = [
            x for x in (pool.get("status") or {}).get("conditions") or () if x["type"] == "UpToDate"
        ]
        if not up or up[0]["status"] != "True":
            problems.append(f"pool {self.pool} not UpToDate: {up}")
        for bn in self.members():
            name = bn["metadata"]["name"]
            booted = (bn.get("status") or {}).get("booted") or {}
            if target_digest not in (
                booted.get("imageDigest"),
                (booted.get("image") or "").rpartition("@")[2],
            ):
                problems.append(f"{name} runs {booted.get('imageDigest')}, not {target_digest}")
            node = await get_object(self.api, NODES, name)
            if name not in pre and node.get("spec", {}).get("unschedulable"):
                problems.append(f"{name} left cordoned")
        self.summary.violations.extend(problems)
        return problems
