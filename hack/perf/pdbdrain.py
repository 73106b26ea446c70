"""A drain held by a PodDisruptionBudget: how soon the eviction follows the budget (issue 39 §3).

On a fresh etcd + kube-apiserver, one simulated node in a pool (``hack.perf.simfleet``,
the real controller as its own process) and a spare Node outside it. Each round:

1. a pod bound to the node (Running, Ready) under a PodDisruptionBudget
   (``minAvailable: 1``) whose status allows no disruption;
2. the pool is retargeted (not paused): the node stages, takes its slot, is
   cordoned and its drain's eviction is refused by the budget;
3. ``--replacement-seconds`` (5) after the slot was taken, a replacement pod turns
   Ready on the spare Node and the budget's status allows one disruption, both
   written by this harness in the same moment (no kube-controller-manager runs here:
   it stands in for the disruption controller, which does this within milliseconds);
4. the figure: from that moment (*Ready*) to the held pod's eviction (its deletion,
   seen by this harness's watch); then the node reboots and the round ends when it
   runs the new image.

A controller that retries refused evictions on a timer evicts at its next retry
(1 s doubling to 30 s since the first refusal: 1, 3, 7, 15 s...); one that watches
the budget, within the watch's latency. Figures, not tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    create_object,
    delete_object,
    load_api_client,
    patch_object,
    request_json,
)
from hack.perf import components as comp
from hack.perf.analysis import percentiles
from hack.perf.images import digest, image
from hack.perf.nodes import kubelet_node
from hack.perf.observer import Observer
from hack.testenv import ControlPlane
from hack.testenv.disruption import budget_status
from hack.testenv.pools import pool_body

PREFIX = "pdb-"
NODE = f"{PREFIX}00000"
SPARE = "spare-0"
POOL_LABEL = "bench.bootc.dev/pdb"
NS = "default"


@dataclass
class Options:
    rounds: int = 3
    replacement_seconds: float = 5.0
    reboot_seconds: float = 3.0
    stage_seconds: float = 1.0
    workers: int = 4
    controller_source: Path | None = None
    timeout: float = 120.0


def log(msg: str) -> None:
    print(f"bench: {msg}", flush=True)


async def ready_pod(api: Any, name: str, node: str, labels: dict[str, str]) -> None:
    """A pod bound to ``node`` that this harness reports Running and Ready (no kubelet),
    deleted at once when evicted (grace period 0)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "registry.example.com/app:1"}],
        },
    }
    await create_object(api, PODS, body, NS)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            ],
        }
    }
    await patch_object(api, PODS, name, status, NS, patch_type="strategic", subresource="status")


class PodGone:
    """Times (monotonic) when pods of ``default`` disappeared, from one watch."""

    def __init__(self, api: Any) -> None:
        self.gone: dict[str, float] = {}
        self.informer = Informer(api, PODS, namespace=NS)
        self.informer.add_event_handler(
            EventHandler(
                on_add=lambda _o: None,
                on_update=lambda _o, _n: None,
                on_delete=self._deleted,
            )
        )

    def _deleted(self, obj: Any) -> None:
        pod = getattr(obj, "obj", obj)
        self.gone.setdefault(pod["metadata"]["name"], time.monotonic())


def slot_taken(observer: Observer, since: int) -> Callable[[], bool]:
    """The node took its slot after the ``since``-th BootcNode change."""
    return lambda: any(facts.slot for _, _, facts in observer.bn_log[since:])


def updated(observer: Observer, n: int) -> Callable[[], bool]:
    """The node runs image ``n``, its slot released and its cordon undone."""
    return lambda: (
        observer.count(("idle-on", digest(n))) >= 1
        and observer.count("slot") == 0
        and observer.count("cordoned") == 0
    )


async def run_rounds(cp: ControlPlane, opts: Options, log_dir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "rounds": opts.rounds,
        "replacement_seconds": opts.replacement_seconds,
    }
    async with contextlib.AsyncExitStack() as stack:
        api = await load_api_client(cp.kubeconfig)
        stack.push_async_callback(api.close)
        await create_object(api, NODES, kubelet_node(0, NODE, {POOL_LABEL: "yes"}))
        await create_object(api, NODES, kubelet_node(1, SPARE, {}))
        # no kube-controller-manager makes the namespace's default ServiceAccount
        await request_json(
            api,
            "POST",
            f"/api/v1/namespaces/{NS}/serviceaccounts",
            body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        observer = Observer(api, PREFIX)
        await observer.start()
        stack.push_async_callback(observer.stop)
        pods = PodGone(api)
        pods.informer.start()
        await pods.informer.wait_for_sync()
        stack.push_async_callback(pods.informer.stop)
        fleet = await comp.FleetProcess.start(
            cp.kubeconfig,
            PREFIX,
            1,
            image(1),
            stage_delay=opts.stage_seconds,
            reboot_delay=opts.reboot_seconds,
            workers=4,
            log_path=log_dir / "simfleet.log",
        )
        stack.push_async_callback(fleet.stop)
        controller, _ = await comp.run_controller(
            cp.kubeconfig, log_dir, workers=opts.workers, source=opts.controller_source
        )
        stack.callback(controller.stop)
        await fleet.command("go")
        await create_object(api, BOOTC_NODE_POOLS, pool_body("pdb", {POOL_LABEL: "yes"}, image(1)))
        await observer.wait(
            lambda: observer.count(("idle-on", digest(1))) >= 1 and observer.pool_up_to_date,
            opts.timeout,
            "the node Idle on image 1",
        )
        reactions: list[float] = []
        requests0 = await comp.apiserver_requests(api)
        for r in range(opts.rounds):
            target = r + 2
            held, new = f"web-{r}", f"web-{r}-new"
            labels = {"app": f"web-{r}"}
            await ready_pod(api, held, NODE, labels)
            pdb = {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": held, "namespace": NS},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
            }
            await create_object(api, POD_DISRUPTION_BUDGETS, pdb, NS)
            await budget_status(api, held, healthy=1, allowed=0)
            start = len(observer.bn_log)
            await patch_object(
                api, BOOTC_NODE_POOLS, "pdb", {"spec": {"image": {"ref": image(target)}}}
            )
            t_take = await observer.wait(
                slot_taken(observer, start), opts.timeout, f"round {r}: the slot taken"
            )
            await asyncio.sleep(max(0.0, t_take + opts.replacement_seconds - time.monotonic()))
            if held in pods.gone:
                raise RuntimeError(f"round {r}: {held} evicted before its budget allowed it")
            await ready_pod(api, new, SPARE, labels)
            await budget_status(api, held, healthy=2, allowed=1)
            t_ready = time.monotonic()
            deadline = t_ready + opts.timeout
            while held not in pods.gone:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"round {r}: {held} not evicted")
                await asyncio.sleep(0.01)
            reactions.append(pods.gone[held] - t_ready)
            log(f"PDB drain round {r}: Ready -> eviction {reactions[-1] * 1000:.0f} ms")
            await observer.wait(updated(observer, target), opts.timeout, f"round {r}: updated")
            await delete_object(api, POD_DISRUPTION_BUDGETS, held, NS)
            await delete_object(api, PODS, new, NS)
        sent = comp.delta(await comp.apiserver_requests(api), requests0)
        result["ready_to_eviction"] = percentiles(reactions)
        result["samples"] = [round(x, 3) for x in reactions]
        # each round: refused tries while held, then the one that went through
        result["evictions_per_round"] = round(
            sent.get(("POST", "pods/eviction"), 0) / opts.rounds, 1
        )
    return result


def run(opts: Options, log_dir: Path) -> dict[str, Any]:
    """Start a control plane, run the rounds, tear everything down."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(controller_manager=False) as cp:
        return asyncio.run(run_rounds(cp, opts, log_dir))
