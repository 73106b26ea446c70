"""Bounded drains with a policy (``spec.rollout.drain``, issue 29 §4), on the real apiserver.

Each test blocks one node's drain for real: a pod bound to it, held by a
PodDisruptionBudget no eviction can satisfy (``minAvailable: 100%``), or
refused by a ValidatingAdmissionPolicy on ``pods/eviction`` CREATE (what an
admission webhook does, written as a policy the apiserver itself enforces).
The controller runs in-process, so its metrics are read from the registry.

- ``Force``: past the timeout the pod is deleted without the Eviction API (the
  PDB is bypassed), one ``PodForceDeleted`` Warning on the pod; the node reboots.
- ``Halt``: the node keeps its slot and cordon, is never told to reboot while
  its pod is there, the pool says ``RolloutHalted`` naming the pod and node,
  and no other node takes a slot even with room for it; once the PDB goes the
  drain finishes and the rollout with it.
- ``Skip``: the node is uncordoned and let go, the other node updates, it is
  tried again, ``MAX_TRIES`` drains in all (counted from watches of its Node's
  cordons and its BootcNode's slot takes: never a fourth), the last one past its
  timeout marks it ``drain-blocked``.
- The drain timeout counts from the take, to the microsecond (the controller's
  wall clock is the test's, so the pass that decides is one the test runs): a
  drain is not cut short by a stamp rounded down to the second.
- ``gracePeriodSeconds: 0`` with Force is taken as 1: the pod is left
  terminating for its kubelet to confirm, never removed from the API at once.
- A blocked drain names only the pods still refused: not one evicted and
  terminating in its grace period (no kubelet confirms it here), nor one an
  admin deleted meanwhile.
- An eviction the admission policy denies is retried with backoff, not fatal:
  the pool names the denial; once the policy goes the drain finishes.
- ``deleteEmptyDirData``: false holds a pod with an emptyDir volume (the pool
  and a DrainBlocked Warning name it with the reason ``EmptyDirData``; the node
  keeps its slot and is not told to reboot) while a pod without one is evicted;
  set to true, the held pod is evicted and the node updates. Unset, it is
  evicted as it always was.
- A drain a PodDisruptionBudget holds waits for the budget (issue 39 §3), not a
  timer: the PDB allowing a disruption, or deleted, gets the pod evicted while the
  drain's own retry is an hour away.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import parse_time
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES, EVENTS, NODES, PODS, ApiError
from bootc_operator.kube.rest import get_object, list_objects, patch_object, request_json
from bootc_operator.policy.drainplan import MAX_TRIES
from e2e.controllerenv import (
    WallClock,
    add_nodes,
    create_blocking_pdb,
    create_pod,
    create_pool,
    delete_quietly,
    get_pool,
    pod_exists,
)
from e2e.helpers import condition, digest, image, unique_name, wait_for
from hack.testenv.controller import running_controller
from hack.testenv.disruption import budget_status
from hack.testenv.fleet import Fleet
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body

PDB_PATH = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
VAP_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def outcomes(pool: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "bootc_operator_drain_outcomes_total", {"pool": pool, "outcome": outcome}
    )
    return value or 0.0


async def events(api: ApiClient, name: str, reason: str) -> list[Any]:
    items, _ = await list_objects(
        api, EVENTS, "default", field_selector=f"regarding.name={name},reason={reason}"
    )
    return items


async def wait_event(api: ApiClient, name: str, reason: str, text: str) -> dict[str, Any]:
    """The Event about ``name`` with ``reason`` whose note holds ``text`` (Events are
    sent in the background: waited for)."""

    async def found() -> dict[str, Any] | None:
        items = await events(api, name, reason)
        return next((dict(e) for e in items if text in e["note"]), None)

    event = await wait_for(found, 60, f"a {reason} Event about {name} saying {text!r}")
    assert event is not None
    return dict(event)


async def marks_of(api: ApiClient, name: str) -> dict[str, str]:
    bn = await get_object(api, BOOTC_NODES, name)
    return dict(bn["metadata"].get("annotations") or {})


async def cordoned(api: ApiClient, name: str) -> bool:
    return bool((await get_object(api, NODES, name))["spec"].get("unschedulable"))


async def updated(api: ApiClient, pool: str, count: int) -> bool:
    status = (await get_pool(api, pool)).get("status") or {}
    return status.get("targetDigest") == digest(2) and status.get("updatedCount") == count


async def start(api: ApiClient, pool: str) -> None:
    await patch_object(api, BOOTC_NODE_POOLS, pool, {"spec": {"image": {"ref": image(2)}}})


async def held_pod(api: ApiClient, fleet: Fleet, prefix: str) -> tuple[str, list[str], str]:
    """A group of two nodes on image 1; on the first a pod a blocking PDB holds."""
    group = unique_name(prefix)
    nodes = await add_nodes(fleet, group, 2, image(1))
    pod = f"{group}-pod"
    await create_pod(api, pod, nodes[0], {"app": group})
    await create_blocking_pdb(api, group, {"app": group})
    return group, nodes, pod


async def pod_on_one_node(
    api: ApiClient,
    fleet: Fleet,
    prefix: str,
    volumes: list[dict[str, Any]] | None = None,
    grace: int = 0,
) -> tuple[str, list[str], str]:
    """A group of one node on image 1 with one pod on it (``GROUP-pod``)."""
    group = unique_name(prefix)
    nodes = await add_nodes(fleet, group, 1, image(1))
    pod = f"{group}-pod"
    await create_pod(api, pod, nodes[0], {"app": group}, volumes=volumes, grace=grace)
    return group, nodes, pod


async def pool_on_image_1(api: ApiClient, group: str, **rollout: Any) -> None:
    await create_pool(api, pool_body(group, {"group": group}, image(1), 1, **rollout))
    await wait_for(lambda: updated_on(api, group, 1), 90, "pool on image 1")


async def test_force_deletes_the_pod_a_pdb_holds_and_the_node_updates(
    api: ApiClient, fleet: Fleet
) -> None:
    group, nodes, pod = await held_pod(api, fleet, "dforce")
    drain = {"timeoutSeconds": 2, "onTimeout": "Force"}
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await pool_on_image_1(api, group, drain=drain)
        await start(api, group)
        await wait_for(lambda: updated(api, group, 2), 120, "both nodes updated")
        assert not await pod_exists(api, pod)
        forced = await wait_event(api, pod, "PodForceDeleted", "PodDisruptionBudgets bypassed")
        assert forced["type"] == "Warning"
        await wait_event(api, nodes[0], "DrainTimeout", "onTimeout Force")
        assert (outcomes(group, "Force"), outcomes(group, "ForcedPod")) == (1.0, 1.0)
        assert not await cordoned(api, nodes[0])
    # the one breach the monitor may see is the PDB Force bypassed, and nothing else
    others = [v for v in monitor.summary.violations if "PDB" not in v]
    assert not others, others
    assert monitor.summary.max_slots == 1
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def updated_on(api: ApiClient, pool: str, n: int) -> bool:
    p = await get_pool(api, pool)
    s = p.get("status") or {}
    return bool(
        s.get("targetDigest") == digest(n)
        and s.get("updatedCount") == s.get("nodeCount")
        and condition(p, "UpToDate").get("status") == "True"
    )


async def test_halt_keeps_the_slot_names_the_pod_and_starts_no_other_slot(
    api: ApiClient, fleet: Fleet
) -> None:
    group, nodes, pod = await held_pod(api, fleet, "dhalt")
    # cordoned by someone else first: it takes the first slot (already unavailable)
    await patch_object(api, NODES, nodes[0], {"spec": {"unschedulable": True}})
    # One watch of the BootcNodes: its events come in etcd order, so every state it
    # passes through is one the cluster was in. A breach: the other node in a slot
    # while nodes[0] holds its slot undrained past the halt.
    seen: dict[str, dict[str, str]] = {}
    breaches: list[str] = []
    halted = False

    def record(bn: dict[str, Any]) -> None:
        seen[bn["metadata"]["name"]] = bn["metadata"].get("annotations") or {}
        first, other = seen.get(nodes[0], {}), seen.get(nodes[1], {})
        draining = c.IN_REBOOT_SLOT_ANNOTATION in first and (
            c.REBOOT_REQUESTED_ANNOTATION not in first
        )
        if halted and draining and c.IN_REBOOT_SLOT_ANNOTATION in other:
            breaches.append(f"{nodes[1]} took a slot while {nodes[0]}'s drain halted the pool")

    watch = Informer(api, BOOTC_NODES)
    watch.add_event_handler(EventHandler(on_add=record, on_update=lambda _o, n: record(n)))
    drain = {"timeoutSeconds": 2, "onTimeout": "Halt"}
    watch.start()
    try:
        async with running_controller(api):
            await pool_on_image_1(api, group, drain=drain)
            await start(api, group)

            async def reported() -> bool:
                deg = condition(await get_pool(api, group), "Degraded")
                msg = deg.get("message", "")
                return deg.get("reason") == "RolloutHalted" and nodes[0] in msg and pod in msg

            await wait_for(reported, 120, "RolloutHalted naming the node and the pod")
            halted = True
            await wait_for(lambda: outcomes(group, "Halt") == 1.0, 60, "one Halt outcome")
            held = await marks_of(api, nodes[0])
            assert c.IN_REBOOT_SLOT_ANNOTATION in held, held
            assert c.REBOOT_REQUESTED_ANNOTATION not in held, held
            assert await cordoned(api, nodes[0])
            await wait_event(api, nodes[0], "DrainTimeout", "onTimeout Halt")
            # room for a second slot: still none while the drain halts the pool
            patch = {"spec": {"rollout": {"maxUnavailable": 2}}}
            pool = await patch_object(api, BOOTC_NODE_POOLS, group, patch)
            generation = pool["metadata"]["generation"]

            async def observed() -> bool:
                p = await get_pool(api, group)
                return (p.get("status") or {}).get("observedGeneration") == generation and (
                    condition(p, "Degraded").get("reason") == "RolloutHalted"
                )

            await wait_for(observed, 60, "the new maxUnavailable observed, still halted")
            assert c.IN_REBOOT_SLOT_ANNOTATION not in await marks_of(api, nodes[1])
            # the PDB goes: the drain ends, the halt with it, and the rollout finishes
            await request_json(api, "DELETE", f"{PDB_PATH}/{group}")
            await wait_for(lambda: updated(api, group, 2), 120, "both nodes updated")
    finally:
        await watch.stop()
    assert not breaches, breaches
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


class Tries:
    """How many times one node was cordoned and given a reboot slot, from watches of
    its Node and its BootcNode (every write is one watch event, in order)."""

    def __init__(self, api: ApiClient, node: str) -> None:
        self.node = node
        self.cordons = 0
        self.takes = 0
        self.is_cordoned = False
        self._in_slot = False
        self._watches = (Informer(api, NODES), Informer(api, BOOTC_NODES))
        self._watches[0].add_event_handler(self._handler(self._node))
        self._watches[1].add_event_handler(self._handler(self._bootc_node))

    def _handler(self, seen: Any) -> EventHandler:
        return EventHandler(on_add=seen, on_update=lambda _o, n: seen(n))

    def _node(self, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] != self.node:
            return
        cordoned = bool(obj["spec"].get("unschedulable"))
        self.cordons += cordoned and not self.is_cordoned
        self.is_cordoned = cordoned

    def _bootc_node(self, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] != self.node:
            return
        in_slot = c.IN_REBOOT_SLOT_ANNOTATION in (obj["metadata"].get("annotations") or {})
        self.takes += in_slot and not self._in_slot
        self._in_slot = in_slot

    async def __aenter__(self) -> Tries:
        for watch in self._watches:
            watch.start()
        for watch in self._watches:
            await watch.wait_for_sync()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for watch in self._watches:
            await watch.stop()


async def test_skip_lets_the_node_go_retries_it_and_gives_up_after_max_tries(
    api: ApiClient, fleet: Fleet
) -> None:
    """Issue 37 §5: ``at most 3 tries`` is three cordons and drains, not four."""
    group, nodes, pod = await held_pod(api, fleet, "dskip")
    drain = {"timeoutSeconds": 2, "onTimeout": "Skip"}
    async with (
        Tries(api, nodes[0]) as tries,
        SafetyMonitor(api, group, 1) as monitor,
        running_controller(api),
    ):
        await pool_on_image_1(api, group, drain=drain)
        await start(api, group)

        async def given_up() -> bool:
            return c.DRAIN_BLOCKED_ANNOTATION in await marks_of(api, nodes[0])

        await wait_for(given_up, 180, f"{nodes[0]} given up")
        await wait_for(lambda: updated(api, group, 1), 120, f"{nodes[1]} updated")
        marks = await marks_of(api, nodes[0])
        assert c.IN_REBOOT_SLOT_ANNOTATION not in marks
        assert c.DRAIN_SKIPPED_ANNOTATION not in marks
        assert not await cordoned(api, nodes[0])
        # the uncordon of the give-up is seen: every cordon before it was counted
        await wait_for(lambda: not tries.is_cordoned, 60, f"{nodes[0]} seen uncordoned")
        assert (tries.takes, tries.cordons) == (MAX_TRIES, MAX_TRIES)
        given = f"onTimeout Skip (try {MAX_TRIES} of {MAX_TRIES}): given up"
        assert given in marks[c.DRAIN_BLOCKED_ANNOTATION]
        assert await pod_exists(api, pod)
        await wait_for(lambda: outcomes(group, "GiveUp") == 1.0, 60, "one GiveUp outcome")
        assert outcomes(group, "Skip") == MAX_TRIES - 1
        for n in range(1, MAX_TRIES):
            await wait_event(
                api, nodes[0], "DrainTimeout", f"onTimeout Skip (try {n} of {MAX_TRIES})"
            )
        await wait_event(api, nodes[0], "DrainTimeout", given)

        async def degraded() -> bool:
            deg = condition(await get_pool(api, group), "Degraded")
            return deg.get("reason") == "NodeDegraded" and nodes[0] in deg.get("message", "")

        await wait_for(degraded, 60, f"the pool Degraded naming {nodes[0]}")
        # given up for good: no further try while the target stays
        assert (tries.takes, tries.cordons) == (MAX_TRIES, MAX_TRIES)
    assert not monitor.summary.violations, monitor.summary.violations
    assert nodes[0] not in {n for n, _ in fleet.reboots}
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_an_eviction_denied_by_admission_is_retried_until_allowed(
    api: ApiClient, fleet: Fleet
) -> None:
    group, nodes, pod = await pod_on_one_node(api, fleet, "ddeny")
    message = f"evictions of {pod} are denied by policy {group}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": group},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods/eviction"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": f"object.metadata.name != '{pod}'",
                    "message": message,
                    "reason": "Forbidden",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": group},
        "spec": {"policyName": group, "validationActions": ["Deny"]},
    }
    await request_json(api, "POST", VAP_PATH, body=policy)
    await request_json(api, "POST", VAPB_PATH, body=binding)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": "default"},
    }

    async def enforced() -> bool:
        """The apiserver loads policies asynchronously: a dry-run eviction says when."""
        try:
            await request_json(
                api,
                "POST",
                f"/api/v1/namespaces/default/pods/{pod}/eviction",
                query={"dryRun": "All"},
                body=eviction,
            )
        except ApiError as err:
            return message in err.message
        return False

    try:
        await wait_for(enforced, 60, "the admission policy enforced (dry-run eviction)")
        async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
            await pool_on_image_1(api, group)
            await start(api, group)

            async def denied() -> bool:
                up = condition(await get_pool(api, group), "UpToDate")
                return message in up.get("message", "") and outcomes(group, "Denied") >= 1

            # the policy is enforced once the apiserver has loaded it: the drain waits
            await wait_for(denied, 120, "the pool names the admission denial")
            held = await marks_of(api, nodes[0])
            assert c.IN_REBOOT_SLOT_ANNOTATION in held and await cordoned(api, nodes[0])
            assert c.REBOOT_REQUESTED_ANNOTATION not in held
            assert await pod_exists(api, pod)
            await wait_event(api, nodes[0], "DrainBlocked", message)
            await request_json(api, "DELETE", f"{VAPB_PATH}/{group}")
            await wait_for(lambda: updated(api, group, 1), 120, "evicted once allowed; updated")
            assert not await pod_exists(api, pod)
            assert outcomes(group, "Denied") == 1.0  # once per pod and drain
        assert not monitor.summary.violations, monitor.summary.violations
    finally:
        for path in (VAPB_PATH, VAP_PATH):
            with contextlib.suppress(ApiError):
                await request_json(api, "DELETE", f"{path}/{group}")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_the_drain_timeout_counts_from_the_take_to_the_microsecond(
    api: ApiClient, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37 §6: with the slot taken at hh:mm:ss.9, a drain of timeoutSeconds 4 is
    not over at +3.8 s (a whole-second stamp made it +4.7 s), and is at +4 s."""
    group, nodes, _ = await pod_on_one_node(api, fleet, "dclock")
    await create_blocking_pdb(api, group, {"app": group})
    taken_at = dt.datetime.now(dt.UTC).replace(microsecond=900_000)
    clock = WallClock(taken_at)
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api) as ctl:
        ctl.ctx.now = clock
        passes: list[dt.datetime] = []  # the clock of each rollout pass that finished
        inner = ctl.rollout._reconcile

        async def counted(pool: str) -> float | None:
            at = clock()
            try:
                return await inner(pool)
            finally:
                passes.append(at)

        monkeypatch.setattr(ctl.rollout, "_reconcile", counted)

        async def rollout_pass_at(at: dt.datetime) -> None:
            clock.at = at
            ctl.queues["rollout"].add(group)
            await wait_for(lambda: at in passes, 60, f"a rollout pass at {at}")

        await pool_on_image_1(api, group, drain={"timeoutSeconds": 4})
        await start(api, group)

        async def draining() -> bool:
            return c.IN_REBOOT_SLOT_ANNOTATION in await marks_of(api, nodes[0]) and (
                await cordoned(api, nodes[0])
            )

        await wait_for(draining, 60, f"{nodes[0]} cordoned in its slot, draining")
        await rollout_pass_at(taken_at + dt.timedelta(seconds=3.8))
        marks = await marks_of(api, nodes[0])
        assert c.DRAIN_BLOCKED_ANNOTATION not in marks, marks[c.DRAIN_BLOCKED_ANNOTATION]
        assert c.IN_REBOOT_SLOT_ANNOTATION in marks and await cordoned(api, nodes[0])
        assert parse_time(marks[c.IN_REBOOT_SLOT_ANNOTATION]) == taken_at, marks
        await rollout_pass_at(taken_at + dt.timedelta(seconds=4))
        marks = await marks_of(api, nodes[0])
        assert "drain timed out after 4s" in marks.get(c.DRAIN_BLOCKED_ANNOTATION, ""), marks
        assert c.IN_REBOOT_SLOT_ANNOTATION not in marks and not await cordoned(api, nodes[0])
    assert not monitor.summary.violations, monitor.summary.violations
    await request_json(api, "DELETE", f"{PDB_PATH}/{group}")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def pod_or_none(api: ApiClient, name: str) -> dict[str, Any] | None:
    try:
        return await get_object(api, PODS, name, "default")
    except ApiError as err:
        if err.not_found:
            return None
        raise


async def test_force_with_a_zero_grace_period_leaves_the_pod_for_its_kubelet(
    api: ApiClient, fleet: Fleet
) -> None:
    """Issue 37 §12: ``gracePeriodSeconds: 0`` would remove the pod from the API at
    once; taken as 1, the pod stays terminating until its kubelet confirms (none runs
    here: the test confirms in its stead), and only then does the node reboot."""
    group, nodes, pod = await pod_on_one_node(api, fleet, "dgrace", grace=300)
    await create_blocking_pdb(api, group, {"app": group})
    drain = {"timeoutSeconds": 2, "onTimeout": "Force", "gracePeriodSeconds": 0}
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await pool_on_image_1(api, group, drain=drain)
        await start(api, group)
        await wait_event(api, pod, "PodForceDeleted", "PodDisruptionBudgets bypassed")
        left = await pod_or_none(api, pod)
        assert left is not None, f"{pod} removed from the API at once (grace period 0)"
        assert left["metadata"].get("deletionGracePeriodSeconds") == 1, left["metadata"]
        assert c.REBOOT_REQUESTED_ANNOTATION not in await marks_of(api, nodes[0])
        await delete_pod(api, pod, 0)  # what its kubelet does once the pod stopped
        await wait_for(lambda: updated(api, group, 1), 120, "the pod gone; updated")
    others = [v for v in monitor.summary.violations if "PDB" not in v]
    assert not others, others
    await request_json(api, "DELETE", f"{PDB_PATH}/{group}")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def delete_pod(api: ApiClient, name: str, grace: int) -> None:
    with contextlib.suppress(ApiError):
        await request_json(
            api,
            "DELETE",
            f"/api/v1/namespaces/default/pods/{name}",
            body={"gracePeriodSeconds": grace},
        )


async def terminating(api: ApiClient, name: str) -> bool:
    pod = await get_object(api, PODS, name, "default")
    return bool(pod["metadata"].get("deletionTimestamp"))


async def test_a_blocked_drain_names_only_the_pods_still_blocked(
    api: ApiClient, fleet: Fleet
) -> None:
    """Issue 37 §7: the pod just evicted, terminating in its grace period, is not named
    beside the one a PDB holds; once an admin deletes the held one (terminating too)
    the pool names no pod as blocking; when both are gone the node updates."""
    group, nodes, held = await pod_on_one_node(api, fleet, "dnamed")
    slow = f"{group}-slow"
    # no kubelet: evicted, it stays terminating through its grace period
    await create_pod(api, slow, nodes[0], {"app": slow}, grace=300)
    await create_blocking_pdb(api, group, {"app": group})
    try:
        async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
            await pool_on_image_1(api, group)
            await start(api, group)
            event = await wait_event(api, nodes[0], "DrainBlocked", held)
            assert await terminating(api, slow), "the other pod was evicted"
            assert slow not in event["note"], event["note"]

            async def pool_says() -> str:
                return str(condition(await get_pool(api, group), "UpToDate").get("message", ""))

            async def names_the_held_pod() -> bool:
                return f"blocked by default/{held} (" in await pool_says()

            await wait_for(names_the_held_pod, 60, f"the pool names {held} as blocking")
            assert slow not in await pool_says()
            # an admin deletes the held pod; terminating, it blocks nothing any more
            await delete_pod(api, held, 300)
            await wait_for(lambda: terminating(api, held), 30, f"{held} terminating")

            async def names_none() -> bool:
                return "blocked by" not in await pool_says()

            await wait_for(names_none, 60, "the pool names no pod as blocking")
            assert c.REBOOT_REQUESTED_ANNOTATION not in await marks_of(api, nodes[0])
            for pod in (held, slow):
                await delete_pod(api, pod, 0)
            await wait_for(lambda: updated(api, group, 1), 120, "both pods gone; updated")
        assert not monitor.summary.violations, monitor.summary.violations
    finally:
        for pod in (held, slow):
            await delete_pod(api, pod, 0)
        await request_json(api, "DELETE", f"{PDB_PATH}/{group}")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


SCRATCH = [{"name": "scratch", "emptyDir": {}}]


async def test_delete_emptydir_data_false_holds_the_pod_and_names_it_until_set_true(
    api: ApiClient, fleet: Fleet
) -> None:
    group, nodes, kept = await pod_on_one_node(api, fleet, "dempty", SCRATCH)
    plain = f"{group}-plain"
    await create_pod(api, plain, nodes[0], {"app": group})
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await pool_on_image_1(api, group, drain={"deleteEmptyDirData": False})
        await start(api, group)

        async def named() -> bool:
            up = condition(await get_pool(api, group), "UpToDate").get("message", "")
            return f"{kept} (EmptyDirData: " in up and "deleteEmptyDirData is false" in up

        await wait_for(named, 120, "the pool names the pod held for its emptyDir data")
        await wait_event(api, nodes[0], "DrainBlocked", f"{kept} (EmptyDirData: ")

        async def plain_gone() -> bool:
            return not await pod_exists(api, plain)

        await wait_for(plain_gone, 60, "the pod without data evicted")
        assert await pod_exists(api, kept)
        held = await marks_of(api, nodes[0])
        assert c.IN_REBOOT_SLOT_ANNOTATION in held and await cordoned(api, nodes[0])
        assert c.REBOOT_REQUESTED_ANNOTATION not in held
        assert outcomes(group, "EmptyDirData") == 1.0
        patch = {"spec": {"rollout": {"drain": {"deleteEmptyDirData": True}}}}
        await patch_object(api, BOOTC_NODE_POOLS, group, patch)
        await wait_for(lambda: updated(api, group, 1), 120, "evicted once allowed; updated")
        assert not await pod_exists(api, kept)
        assert outcomes(group, "EmptyDirData") == 1.0  # once per pod and drain
    assert not monitor.summary.violations, monitor.summary.violations
    assert nodes[0] in {n for n, _ in fleet.reboots}
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_pods_with_emptydir_data_are_evicted_when_the_setting_is_unset(
    api: ApiClient, fleet: Fleet
) -> None:
    group, _, pod = await pod_on_one_node(api, fleet, "dunset", SCRATCH)
    async with SafetyMonitor(api, group, 1) as monitor, running_controller(api):
        await pool_on_image_1(api, group, drain={"onTimeout": "Halt"})
        await start(api, group)
        await wait_for(lambda: updated(api, group, 1), 120, "evicted as always; updated")
        assert not await pod_exists(api, pod)
        assert outcomes(group, "EmptyDirData") == 0.0
    assert not monitor.summary.violations, monitor.summary.violations
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def create_budget(api: ApiClient, name: str, labels: dict[str, str]) -> None:
    """A PDB (minAvailable 1) whose status, as no disruption controller runs here, the
    test writes: one healthy pod, no disruption allowed."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }
    await request_json(api, "POST", PDB_PATH, body=body)
    await budget_status(api, name, healthy=1, allowed=0)


async def test_a_drain_a_budget_holds_goes_on_when_the_budget_allows_or_goes(
    api: ApiClient, fleet: Fleet
) -> None:
    """Issue 39 §3. Two nodes, one slot, a pod on each under its own PodDisruptionBudget:
    the first one's status (written by the test: no disruption controller runs here)
    allows no disruption, the second has none yet (the apiserver refuses as well).
    Each drain's eviction is refused and the drain waits for the budget, its
    safety-net retry set an hour away: only a change of the budget can move it. The
    first PDB's status allowing a disruption (a replacement pod Ready) gets its pod
    evicted; the second PDB deleted gets the other's; both nodes update (the slot
    goes to either node first)."""
    group = unique_name("dbudget")
    nodes = await add_nodes(fleet, group, 2, image(1))
    pods = [f"{group}-pod{i}" for i in range(2)]
    for node, pod in zip(nodes, pods, strict=True):
        await create_pod(api, pod, node, {"app": pod})
    await create_budget(api, pods[0], {"app": pods[0]})
    await create_blocking_pdb(api, pods[1], {"app": pods[1]})
    try:
        async with SafetyMonitor(api, group, 1) as monitor, running_controller(api) as ctl:
            ctl.drains.budget_fallback = 3600.0

            def waiting() -> str:
                """The pod whose drain waits for its budget ("" while none does)."""
                for node, pod in zip(nodes, pods, strict=True):
                    res = ctl.drains.result(node)
                    if res is not None and f"default/{pod}" in res.budget_waits:
                        return pod
                return ""

            await pool_on_image_1(api, group)
            await start(api, group)
            for _ in pods:
                pod = await wait_for(waiting, 120, "a drain waiting for its pod's budget")
                assert await pod_exists(api, pod)
                if pod == pods[0]:
                    await budget_status(api, pod, healthy=2, allowed=1)
                else:
                    await request_json(api, "DELETE", f"{PDB_PATH}/{pod}")
                how = "allows a disruption" if pod == pods[0] else "is deleted"

                async def gone(pod: str = pod) -> bool:
                    return not await pod_exists(api, pod)

                await wait_for(gone, 30, f"{pod} evicted once its PDB {how}")
            await wait_for(lambda: updated(api, group, 2), 120, "both nodes updated")
        assert not monitor.summary.violations, monitor.summary.violations
    finally:
        for pod in pods:
            await delete_pod(api, pod, 0)
            with contextlib.suppress(ApiError):
                await request_json(api, "DELETE", f"{PDB_PATH}/{pod}")
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
