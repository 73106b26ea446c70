"""The parts that keep reconciles cheap at scale: event filters, bounded fan-out, view memo."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bootc_operator.informers import Informer
from bootc_operator.kube import BOOTC_NODES, NODES
from bootc_operator.policy.nodestate import NodeState
from bootc_operator.reconcilers.context import Context
from bootc_operator.reconcilers.fanout import each, settle
from bootc_operator.reconcilers.triggers import membership_changed, node_membership_changed

T = frozenset({"sha256:b"})


def bn(rv: str, *, idle: str = "Staged", generation: int = 1, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "resourceVersion": rv, "generation": generation, **meta},
        "spec": {"desiredImage": "r@sha256:b", "desiredImageState": "Staged"},
        "status": {
            "booted": {"image": "r@sha256:a", "imageDigest": "sha256:a"},
            "staged": {"image": "r@sha256:b", "imageDigest": "sha256:b"},
            "conditions": [
                {"type": "Idle", "status": "False", "reason": idle},
                {"type": "Degraded", "status": "False", "reason": "Healthy"},
            ],
        },
    }


def test_status_and_annotation_updates_do_not_concern_membership() -> None:
    old = bn("1")
    assert not membership_changed(old, bn("2", idle="Rebooting"))
    assert not membership_changed(old, bn("2", annotations={"bootc.dev/in-reboot-slot": "t"}))
    # the rollout loop's writes: Booted, a retarget (with its label), a release
    booted = bn("2", generation=2)
    booted["spec"]["desiredImageState"] = "Booted"
    assert not membership_changed(old, booted)
    moved = bn("2", generation=2, labels={"bootc.dev/desired-digest": "c"})
    moved["spec"]["desiredImage"] = "r@sha256:c"
    assert not membership_changed(old, moved)
    # membership's own spec fields, changed by anyone: it restores or re-seals them
    for field, value in (("pullSecretHash", "h2"), ("rebootPolicy", "Never")):
        changed = bn("2", generation=2)
        changed["spec"][field] = value
        assert membership_changed(old, changed), field
    assert membership_changed(old, bn("2", labels={"x": "y"}))
    assert membership_changed(old, bn("2", ownerReferences=[{"name": "p"}]))
    assert membership_changed(old, bn("2", deletionTimestamp="t"))
    # a daemon's new sealing key: the pull secret is sealed to it again
    keyed = bn("2")
    keyed["status"]["sealingKey"] = "A" * 43 + "="
    assert membership_changed(old, keyed)
    assert not membership_changed(keyed, {**keyed, "metadata": {**keyed["metadata"]}})


def test_only_label_and_deletion_node_updates_concern_membership() -> None:
    def node(**meta: Any) -> dict[str, Any]:
        return {"metadata": {"name": "n1", **meta}, "spec": {}}

    base = node(labels={"a": "b"})
    assert not node_membership_changed(base, {**node(labels={"a": "b"}), "spec": {"x": 1}})
    assert node_membership_changed(base, node(labels={"a": "c"}))
    assert node_membership_changed(base, node(labels={"a": "b"}, deletionTimestamp="t"))


async def test_each_is_bounded_ordered_and_complete() -> None:
    running = peak = 0

    async def step(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (i % 3))
        running -= 1
        return i * 2

    assert await each(list(range(50)), step, limit=4) == [i * 2 for i in range(50)]
    assert peak == 4
    assert await each([], step) == []


async def test_each_stops_starting_steps_after_a_failure_and_raises_it() -> None:
    started: list[int] = []

    async def step(i: int) -> None:
        started.append(i)
        await asyncio.sleep(0)
        if i == 1:
            raise ValueError("boom")
        await asyncio.sleep(0.01)

    with pytest.raises(ValueError, match="boom"):
        await each(list(range(20)), step, limit=2)
    assert len(started) < 20  # the rest never started
    assert 0 in started and 1 in started


async def test_settle_runs_every_step_whatever_the_others_do() -> None:
    """One node's refused write never stops another node's step (issue 37 item 4)."""

    async def step(name: str) -> str:
        await asyncio.sleep(0)
        if name == "bad":
            raise ValueError("refused")
        return name.upper()

    names = ["a", "bad", *(f"n{i}" for i in range(20))]
    done, errors = await settle(names, step, limit=2)
    assert done == {n: n.upper() for n in names if n != "bad"}
    assert list(errors) == ["bad"] and str(errors["bad"]) == "refused"
    assert await settle([], step) == ({}, {})


def test_view_is_memoised_by_resource_versions_and_targets() -> None:
    api: Any = None  # never used: the informers are not started
    bns, nodes = Informer(api, BOOTC_NODES), Informer(api, NODES)
    ctx = Context(api, Informer(api, BOOTC_NODES), bns, nodes, api)
    bns.store.upsert(bn("5"))
    nodes.store.upsert(
        {
            "metadata": {"name": "n1", "resourceVersion": "7"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    first = ctx.view(bn("5"), T)
    assert first.state is NodeState.STAGED and first.ready
    assert ctx.view(bn("5"), T) is first  # same versions: reused
    assert ctx.view(bn("6", idle="Rebooting"), T).state is NodeState.REBOOTING
    assert ctx.view(bn("5"), frozenset({"sha256:a"})).state is NodeState.UP_TO_DATE
    nodes.store.upsert(
        {
            "metadata": {"name": "n1", "resourceVersion": "8"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        }
    )
    assert not ctx.view(bn("6", idle="Rebooting"), T).ready  # the Node moved
    unversioned = bn("")
    assert ctx.view(unversioned, T) is not ctx.view(unversioned, T)  # never cached


def test_the_pool_spec_is_read_once_per_revision_and_tag_resolution() -> None:
    api: Any = None  # never used: the informers are not started
    ctx = Context(
        api, Informer(api, BOOTC_NODES), Informer(api, BOOTC_NODES), Informer(api, NODES), api
    )
    C = "sha256:" + "c" * 64
    resolved = ctx.knowledge.tags  # the tags loop's part of the pools' knowledge

    def pool(rv: str, ref: str = "quay.io/x/os:v1") -> dict[str, Any]:
        spec = {"nodeSelector": {}, "image": {"ref": ref}}
        return {"metadata": {"name": "p", "uid": "u", "resourceVersion": rv}, "spec": spec}

    first = ctx.policy(pool("1"))
    assert first.target_digest is None and ctx.policy(pool("1")) is first  # reused
    resolved["p"] = ("quay.io/x/os:v1", "sha256:b")
    again = ctx.policy(pool("1"))
    assert again is not first and again.target_digest == "sha256:b"  # the tag resolved
    moved = ctx.policy(pool("2", f"quay.io/x/os@{C}"))
    assert moved.target_digest == C  # a new revision is read again
    ctx.forget_policy("p")
    assert ctx.policy(pool("2", f"quay.io/x/os@{C}")) is not moved
    unversioned = pool("")
    del unversioned["metadata"]["resourceVersion"]
    assert ctx.policy(unversioned) is not ctx.policy(unversioned)  # never cached
