"""A rollout pass does not make one node's steps wait for the other nodes' writes
where no safety rule asks it to (issue 39: hand-off and drain path latency).

- a taken node's drain starts as soon as its own cordon is written, while the other
  takes of the pass are still in flight (its first pod read then overlaps them);
- a holder whose drain is done gets ``desiredImageState: Booted`` without waiting for
  the pass's releases and takes, and one whose drain finished while they were written
  gets it at the end of that pass, not one pass later.

The real :class:`~bootc_operator.controller.Controller`'s rollout loop over its
informers, without a server: each write is merged into the object and echoed back as
the watch event the API server would send; a write can be held in flight (an
``asyncio.Event``) to see what the pass does meanwhile. Drains are recorded, not run.
Real API server: e2e/test_controller_scenarios.py, e2e/test_drain_policies.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.policy.ownership import desired_digest_label
from bootc_operator.reconcilers.watchers.drain import DrainResult
from unit.reconcilers.echo import NEW, OLD, REPO, SLOT, EchoWorld, pool_body


def condition(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def member(name: str, *, slot: bool, booted: str, idle: tuple[str, str]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "booted": {"image": f"{REPO}@{booted}", "imageDigest": booted},
        "conditions": [condition("Idle", *idle), condition("Degraded", "False", "Healthy")],
    }
    if idle[1] == "Staged":
        status["staged"] = {"image": f"{REPO}@{NEW}", "imageDigest": NEW}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.NODE_KIND,
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "3",
            "generation": 1,
            "labels": {c.POOL_LABEL: "p", **desired_digest_label(f"{REPO}@{NEW}")},
            "ownerReferences": [{"kind": c.POOL_KIND, "name": "p", "controller": True}],
            "annotations": dict(SLOT) if slot else {},
        },
        "spec": {"desiredImage": f"{REPO}@{NEW}", "desiredImageState": "Staged"},
        "status": status,
    }


def kube_node(name: str, *, cordoned: bool) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "2",
            "labels": {"g": "p", c.MANAGED_LABEL: "", c.LEGACY_MANAGED_LABEL: ""},
        },
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


#: (slot held, booted digest, Idle condition)
DONE = (True, NEW, ("True", "Idle"))  # rebooted into the target: releases
DRAINING = (True, OLD, ("False", "Staged"))  # holds a slot, drain under way
STAGED = (False, OLD, ("False", "Staged"))  # a candidate for a slot


class World(EchoWorld):
    """One pool (digest ref: its target is known), members as given; every write
    echoed at once unless ``hold(kind, node)`` holds it until released."""

    def __init__(self, members: dict[str, tuple[bool, str, tuple[str, str]]], max_unavailable: int):
        super().__init__()
        self.writes: list[tuple[str, str, dict[str, Any]]] = []  # (kind, node, patch)
        self.drains: list[str] = []  # nodes whose drain was started, in order
        self.drained: set[str] = set()  # nodes whose drain reports done
        self._results: dict[str, DrainResult] = {}
        drains = self.ctl.drains
        drains.ensure = self._ensure  # type: ignore[method-assign]
        drains.result = self._result  # type: ignore[method-assign]
        drains.forget = self._forget  # type: ignore[method-assign]
        pool = pool_body(maxUnavailable=max_unavailable)
        self.ctl.pools.replace([pool])
        self.ctl.nodes.replace([kube_node(n, cordoned=m[0]) for n, m in members.items()])
        self.ctl.bootc_nodes.replace(
            [member(n, slot=m[0], booted=m[1], idle=m[2]) for n, m in members.items()]
        )

    def record(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.writes.append((kind, name, patch))

    def _ensure(
        self,
        node: str,
        pool: str,
        grace_period: int | None = None,
        delete_emptydir_data: bool | None = None,
    ) -> DrainResult:
        if node not in self.drains:
            self.drains.append(node)
        res = self._results.setdefault(node, DrainResult(pool=pool))
        res.done = node in self.drained
        return res

    def _result(self, node: str) -> DrainResult | None:
        res = self._results.get(node)
        if res is not None:
            res.done = node in self.drained
        return res

    def _forget(self, node: str) -> None:
        self._results.pop(node, None)

    def booted(self, name: str) -> bool:
        bn = self.ctl.bootc_nodes.get(name)
        return bn is not None and bn["spec"]["desiredImageState"] == "Booted"

    def holds_slot(self, name: str) -> bool:
        bn = self.ctl.bootc_nodes.get(name)
        return bn is not None and c.IN_REBOOT_SLOT_ANNOTATION in bn["metadata"]["annotations"]


async def settled(until: Any) -> None:
    """Let the pass run until ``until()`` holds (a bounded number of loop turns)."""
    for _ in range(200):
        if until():
            return
        await asyncio.sleep(0)
    raise AssertionError("the pass never got there")


async def test_a_taken_nodes_drain_starts_while_another_take_is_in_flight() -> None:
    w = World({"n1": STAGED, "n2": STAGED}, max_unavailable=2)
    slow = w.hold("BootcNode", "n2")  # n2's take is still in flight
    rollout = asyncio.create_task(w.ctl.rollout.reconcile("p"))
    await settled(lambda: w.drains == ["n1"])
    # n1 is cordoned, then drained; n2 (not yet holding its slot) neither
    assert ("Node", "n1") in [(k, n) for k, n, _ in w.writes]
    assert not [p for k, n, p in w.writes if n == "n2"]
    assert not rollout.done()
    slow.set()
    await rollout
    assert w.drains == ["n1", "n2"]
    # each drain started after its own cordon
    cordons = [n for k, n, p in w.writes if k == "Node" and p["spec"].get("unschedulable")]
    assert cordons == ["n1", "n2"]
    assert w.holds_slot("n1") and w.holds_slot("n2")


async def test_a_drained_holder_is_told_to_reboot_while_a_release_is_in_flight() -> None:
    w = World({"n0": DONE, "n1": DRAINING, "n2": STAGED}, max_unavailable=2)
    w.drained.add("n1")
    slow = w.hold("Node", "n0")  # n0's release (its uncordon first) is in flight
    rollout = asyncio.create_task(w.ctl.rollout.reconcile("p"))
    await settled(lambda: w.booted("n1"))
    # n0 still holds its slot, so n2 takes none yet: never more than 2 holders
    assert w.holds_slot("n0") and not w.holds_slot("n2")
    assert [n for _, n, _ in w.writes] == ["n1"]
    assert not rollout.done()
    slow.set()
    await rollout
    assert not w.holds_slot("n0") and w.holds_slot("n1") and w.holds_slot("n2")
    # n0 was uncordoned and its slot annotations removed before n2's take was written
    order = [(k, n) for k, n, _ in w.writes]
    assert order.index(("BootcNode", "n0")) < order.index(("BootcNode", "n2"))
    assert w.drains == ["n1", "n2"]


async def test_a_drain_done_while_the_pass_writes_is_told_to_reboot_in_that_pass() -> None:
    w = World({"n0": DONE, "n1": DRAINING, "n2": STAGED}, max_unavailable=2)
    slow = w.hold("Node", "n0")  # n0's release is in flight
    rollout = asyncio.create_task(w.ctl.rollout.reconcile("p"))
    await settled(lambda: "n1" in w.drains)
    assert not w.booted("n1")  # still draining when the pass looked first
    w.drained.add("n1")  # its drain finishes meanwhile
    slow.set()
    await rollout
    assert w.booted("n1")  # this pass, not the next one
    assert w.holds_slot("n2") and not w.holds_slot("n0")
