"""A slot's fields have one writer, the rollout loop (docs/development.md's field table).

The slot annotations on a BootcNode (``in-reboot-slot``, ``was-cordoned``,
``reboot-requested`` ...) and the cordon and autoscaler annotations on its Node are
written by rollout alone: membership hands a leaving holder over
(``PoolKnowledge.departures``) and deletes its BootcNode once rollout gave the Node
back; rollout retargets a slot holder itself (slot given back in the same write).

The real :class:`~bootc_operator.controller.Controller`'s loops over its informers,
without a server: each write is merged into the object and echoed back as the watch
event the API server would send, and recorded with the loop that made it.
Real API server: e2e/test_controller_scenarios.py (a node leaving mid-drain, an image
change mid-drain), e2e/test_autoscalers.py.
"""

from __future__ import annotations

from typing import Any

from bootc_operator.api import constants as c
from unit.reconcilers.echo import NEW, OLD, REPO, SLOT, EchoWorld, pool_body


class World(EchoWorld):
    """One pool (digest ref: its target is known), one member ``n1`` for ``desired``: in a
    reboot slot, cordoned by us, draining (``holder``), or not."""

    def __init__(self, *, node_labels: dict[str, str], desired: str, holder: bool = True) -> None:
        super().__init__()
        self.loop = ""
        self.writes: list[tuple[str, str, dict[str, Any]]] = []  # (loop, what, patch)
        self.ctl.ctx.delete_bootc_node = self._delete_bn  # type: ignore[method-assign]
        pool = pool_body()
        node = {
            "metadata": {
                "name": "n1",
                "resourceVersion": "2",
                "labels": {**node_labels, c.MANAGED_LABEL: "", c.LEGACY_MANAGED_LABEL: ""},
            },
            "spec": {"unschedulable": holder},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        bn = {
            "apiVersion": c.API_VERSION,
            "kind": c.NODE_KIND,
            "metadata": {
                "name": "n1",
                "uid": "b1",
                "resourceVersion": "3",
                "generation": 1,
                "labels": {c.POOL_LABEL: "p"},
                "ownerReferences": [{"kind": c.POOL_KIND, "name": "p", "controller": True}],
                "annotations": dict(SLOT) if holder else {},
            },
            "spec": {"desiredImage": f"{REPO}@{desired}", "desiredImageState": "Staged"},
        }
        self.ctl.pools.replace([pool])
        self.ctl.nodes.replace([node])
        self.ctl.bootc_nodes.replace([bn])
        for queue in self.ctl.queues.values():
            while (key := queue.get_nowait()) is not None:
                queue.done(key)

    def record(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.writes.append((self.loop, kind, patch))

    async def _delete_bn(self, obj: Any) -> None:
        self.writes.append((self.loop, "delete BootcNode", {}))
        self.ctl.bootc_nodes.apply("DELETED", obj)

    async def run(self, loop: str) -> None:
        self.loop = loop
        if loop == "membership":
            await self.ctl.membership.reconcile("p")
        else:
            await self.ctl.rollout.reconcile("p")

    def queued(self, loop: str) -> bool:
        return len(self.ctl.queues[loop]) > 0

    def slot_writes(self, loop: str) -> list[dict[str, Any]]:
        """``loop``'s writes of a slot's fields: the cordon, the slot annotations."""
        found = []
        for who, what, patch in self.writes:
            annotations = (patch.get("metadata") or {}).get("annotations") or {}
            cordon = what == "Node" and "unschedulable" in (patch.get("spec") or {})
            if who == loop and (cordon or c.IN_REBOOT_SLOT_ANNOTATION in annotations):
                found.append(patch)
        return found


async def test_a_holder_leaving_is_given_back_by_rollout_then_deleted_by_membership() -> None:
    w = World(node_labels={"g": "elsewhere"}, desired=NEW)
    await w.run("membership")
    assert w.slot_writes("membership") == []  # never membership's fields
    assert w.ctl.bootc_nodes.get("n1") is not None  # its Node is not given back yet
    assert w.ctl.ctx.knowledge.departing("p") == {"n1"}
    assert w.queued("rollout")
    await w.run("rollout")
    node = w.ctl.nodes.get("n1")
    assert node is not None and not node["spec"].get("unschedulable")  # uncordoned
    bn = w.ctl.bootc_nodes.get("n1")
    assert bn is not None and c.IN_REBOOT_SLOT_ANNOTATION not in bn["metadata"]["annotations"]
    assert w.queued("membership")  # membership finishes the release
    await w.run("membership")
    assert w.ctl.bootc_nodes.get("n1") is None
    node = w.ctl.nodes.get("n1")
    assert node is not None and c.MANAGED_LABEL not in node["metadata"]["labels"]
    assert w.ctl.ctx.knowledge.departing("p") == frozenset()
    assert w.slot_writes("membership") == []


async def test_a_holder_retargeted_before_its_reboot_is_retargeted_by_rollout() -> None:
    w = World(node_labels={"g": "p"}, desired=OLD)
    await w.run("membership")
    assert w.slot_writes("membership") == []
    assert all("desiredImage" not in (p.get("spec") or {}) for _, _, p in w.writes)
    await w.run("rollout")
    bn = w.ctl.bootc_nodes.get("n1")
    assert bn is not None
    # desiredImage and Staged in one write, the slot given back in it
    assert bn["spec"] == {"desiredImage": f"{REPO}@{NEW}", "desiredImageState": "Staged"}
    assert c.IN_REBOOT_SLOT_ANNOTATION not in bn["metadata"]["annotations"]
    node = w.ctl.nodes.get("n1")
    assert node is not None and not node["spec"].get("unschedulable")
    # the cordon was restored before the BootcNode's write (a failure leaves no node
    # cordoned without a slot)
    order = [what for who, what, _ in w.writes if who == "rollout"]
    assert order[:2] == ["Node", "BootcNode"]


async def test_a_member_is_retargeted_by_rollout_membership_writes_no_target() -> None:
    w = World(node_labels={"g": "p"}, desired=OLD, holder=False)
    await w.run("membership")
    assert all("desiredImage" not in (p.get("spec") or {}) for _, _, p in w.writes)
    await w.run("rollout")
    bn = w.ctl.bootc_nodes.get("n1")
    assert bn is not None
    assert bn["spec"] == {"desiredImage": f"{REPO}@{NEW}", "desiredImageState": "Staged"}
    assert bn["metadata"]["labels"][c.DESIRED_DIGEST_LABEL] == NEW.split(":")[1][:12]
    assert [(who, what) for who, what, _ in w.writes] == [("rollout", "BootcNode")]
    assert w.queued("status")  # status counts it now (it claims the generation then)


async def test_a_bootc_node_without_the_digest_label_gets_it_from_rollout() -> None:
    # written before the label, or by the Go operator: the label goes with desiredImage
    w = World(node_labels={"g": "p"}, desired=NEW, holder=False)
    await w.run("membership")
    assert w.writes == []
    await w.run("rollout")
    assert w.writes == [
        ("rollout", "BootcNode", {"metadata": {"labels": {c.DESIRED_DIGEST_LABEL: "b" * 12}}})
    ]
