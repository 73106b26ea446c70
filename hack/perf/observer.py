"""The benchmark's eyes: watches BootcNodes, Nodes and pools and timestamps every change.

Every event is reduced to a few *facts* (for a BootcNode: owned, slot annotation,
desiredImageState, desired / booted / staged digests, Idle reason; for a Node:
managed label, unschedulable, Ready) and appended with ``time.monotonic()`` to a
per-kind log when the facts changed. Running counters over the current facts
let the harness wait for milestones ("all N BootcNodes exist", "all Staged on
B", "no slot held") in O(1) per event; :meth:`Observer.wait` returns the time of
the event that completed the milestone, not the time the harness noticed.

Both ends of a reaction latency (a fleet write, the controller's answer) are
timestamps of this one watcher, so its own delay in seeing events cancels out
as long as it keeps up (it does: it only parses and counts).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, NODES

Obj = dict[str, Any]
# The Go bootc-operator (hack/bench --go-controller) writes the legacy label.
MANAGED_LABELS = frozenset({c.MANAGED_LABEL, c.LEGACY_MANAGED_LABEL})


def _digest(ref: str | None) -> str | None:
    return ref.split("@", 1)[1] if ref and "@" in ref else None


def _condition(obj: Obj, ctype: str) -> Obj:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


class BnFacts(NamedTuple):
    exists: bool
    owned: bool
    slot: bool
    state: str  # desiredImageState
    desired: str | None  # digest
    idle: str | None  # Idle reason
    booted: str | None
    staged: str | None


class NodeFacts(NamedTuple):
    exists: bool
    managed: bool
    cordoned: bool
    ready: bool


GONE_BN = BnFacts(False, False, False, "", None, None, None, None)
GONE_NODE = NodeFacts(False, False, False, False)


def bn_facts(obj: Obj) -> BnFacts:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return BnFacts(
        exists=True,
        owned=bool(meta.get("ownerReferences")),
        slot=c.IN_REBOOT_SLOT_ANNOTATION in (meta.get("annotations") or {}),
        state=str(spec.get("desiredImageState") or ""),
        desired=_digest(spec.get("desiredImage")),
        idle=_condition(obj, c.COND_IDLE).get("reason"),
        booted=((status.get("booted") or {}).get("imageDigest")),
        staged=((status.get("staged") or {}).get("imageDigest")),
    )


def node_facts(obj: Obj) -> NodeFacts:
    meta = obj.get("metadata") or {}
    return NodeFacts(
        exists=True,
        managed=bool(MANAGED_LABELS & set(meta.get("labels") or ())),
        cordoned=bool((obj.get("spec") or {}).get("unschedulable")),
        ready=_condition(obj, "Ready").get("status") == "True",
    )


def bn_features(f: BnFacts) -> list[Hashable]:
    if not f.exists:
        return []
    out: list[Hashable] = ["bn"]
    if f.owned:
        out.append("owned")
    if f.slot:
        out.append("slot")
    out.append(("desired", f.desired))
    out.append(("state", f.state))
    if f.idle == c.REASON_IDLE:
        out.append(("idle-on", f.booted))
    if f.idle == c.REASON_STAGED:
        out.append(("staged-on", f.staged))
    return out


def node_features(f: NodeFacts) -> list[Hashable]:
    if not f.exists:
        return []
    out: list[Hashable] = ["node"]
    if f.managed:
        out.append("managed")
    if f.cordoned:
        out.append("cordoned")
    if not f.ready:
        out.append("notready")
    return out


def slim_node(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k in MANAGED_LABELS},
        },
        "spec": {"unschedulable": (obj.get("spec") or {}).get("unschedulable")},
        "status": {"conditions": [_condition(obj, "Ready")]},
    }


@dataclass
class _Waiter:
    predicate: Callable[[], bool]
    future: asyncio.Future[float]


@dataclass
class Observer:
    api: Any
    prefix: str  # only nodes whose name starts with this are counted
    counts: Counter[Hashable] = field(default_factory=Counter)
    bn_log: list[tuple[float, str, BnFacts]] = field(default_factory=list)
    node_log: list[tuple[float, str, NodeFacts]] = field(default_factory=list)
    pool_log: list[tuple[float, str, str]] = field(default_factory=list)  # (t, UpToDate, reason)
    events: int = 0

    def __post_init__(self) -> None:
        self._bn: dict[str, BnFacts] = {}
        self._node: dict[str, NodeFacts] = {}
        self._pool_cond: tuple[str, str] | None = None
        self._waiters: list[_Waiter] = []
        self.bns = Informer(self.api, BOOTC_NODES)
        self.nodes = Informer(self.api, NODES, transform=slim_node)
        self.pools = Informer(self.api, BOOTC_NODE_POOLS)
        self.bns.add_event_handler(
            EventHandler(
                on_add=self._bn_event,
                on_update=lambda _o, n: self._bn_event(n),
                on_delete=lambda o: self._bn_event(o, gone=True),
            )
        )
        self.nodes.add_event_handler(
            EventHandler(
                on_add=self._node_event,
                on_update=lambda _o, n: self._node_event(n),
                on_delete=lambda o: self._node_event(o, gone=True),
            )
        )
        self.pools.add_event_handler(
            EventHandler(on_add=self._pool_event, on_update=lambda _o, n: self._pool_event(n))
        )

    async def start(self) -> None:
        for inf in (self.bns, self.nodes, self.pools):
            inf.start()
        for inf in (self.bns, self.nodes, self.pools):
            await inf.wait_for_sync()

    async def stop(self) -> None:
        for inf in (self.bns, self.nodes, self.pools):
            await inf.stop()

    # ------------------------------------------------------------ events

    def _update(
        self,
        table: dict[str, Any],
        name: str,
        new: Any,
        gone: Any,
        features: Callable[[Any], list[Hashable]],
    ) -> bool:
        old = table.get(name, gone)
        if old == new:
            return False
        self.counts.subtract(features(old))
        self.counts.update(features(new))
        table[name] = new
        return True

    def _bn_event(self, obj: Any, *, gone: bool = False) -> None:
        obj = unwrap(obj)
        name = obj["metadata"]["name"]
        if not name.startswith(self.prefix):
            return
        facts = GONE_BN if gone else bn_facts(obj)
        now = time.monotonic()
        self.events += 1
        if self._update(self._bn, name, facts, GONE_BN, bn_features):
            self.bn_log.append((now, name, facts))
            self._check(now)

    def _node_event(self, obj: Any, *, gone: bool = False) -> None:
        obj = unwrap(obj)
        name = obj["metadata"]["name"]
        if not name.startswith(self.prefix):
            return
        facts = GONE_NODE if gone else node_facts(obj)
        now = time.monotonic()
        self.events += 1
        if self._update(self._node, name, facts, GONE_NODE, node_features):
            self.node_log.append((now, name, facts))
            self._check(now)

    def _pool_event(self, obj: Obj) -> None:
        cond = _condition(obj, c.COND_UP_TO_DATE)
        key = (str(cond.get("status")), str(cond.get("reason")))
        if key != self._pool_cond:
            self._pool_cond = key
            now = time.monotonic()
            self.pool_log.append((now, *key))
            self._check(now)

    # ------------------------------------------------------------ milestones

    def count(self, feature: Hashable) -> int:
        return self.counts.get(feature, 0)

    @property
    def pool_up_to_date(self) -> bool:
        return self._pool_cond is not None and self._pool_cond[0] == "True"

    def _check(self, now: float) -> None:
        if not self._waiters:
            return
        keep = []
        for w in self._waiters:
            if w.future.done():
                continue
            if w.predicate():
                w.future.set_result(now)
            else:
                keep.append(w)
        self._waiters = keep

    async def wait(self, predicate: Callable[[], bool], within: float, what: str) -> float:
        """The monotonic time of the event after which ``predicate`` held (now if it does)."""
        if predicate():
            return time.monotonic()
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters.append(_Waiter(predicate, future))
        try:
            async with asyncio.timeout(within):
                return await future
        except TimeoutError:
            raise TimeoutError(
                f"timed out after {within:.0f}s waiting for {what}; counts: {self.summary()}"
            ) from None

    def summary(self) -> str:
        items = sorted(self.counts.items(), key=lambda kv: str(kv[0]))
        return ", ".join(f"{k}={v}" for k, v in items if v)
