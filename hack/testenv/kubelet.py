"""What a kubelet writes about its Node (and its pods), for every simulated node of the kit.

No kubelet runs in the kit's clusters (or kwok's, which by the sim's configuration
leaves Node status alone), so whatever plays the machine writes the Node's
conditions itself: the in-process fleet (``hack.testenv.fleet``), the hosts of real
daemons (``e2e.hostsenv``), the sim's node simulator (``hack.simlib.nodesim``) and
the benchmark's daemon figure (``hack.perf.daemons``).

- :func:`timestamp`: now, as conditions spell it;
- :func:`ready_condition`: the Ready condition (KubeletReady / KubeletNotReady);
- :func:`node_conditions`: Ready plus the pressure conditions a kubelet reports;
- :func:`set_node_ready`: patch a Node's Ready condition through the status subresource;
- :func:`report_pods_after_boot`: what a kubelet reports about the node's pods once it
  is back from a reboot: every container was killed and is started again, so each
  pod that was Ready turns Ready again with a new ``lastTransitionTime`` (until
  then its Ready is the one from before the reboot: stale). A pod that was not
  Ready stays so (its containers fail as before).
- :func:`pod_ready_again`: the Pod status patch a kubelet's status sync makes when
  someone else marked one of its running Pods NotReady (``hack.simlib.nodesim``).

(The benchmarks' Node *bodies*, created once with a fixed timestamp so their size
is part of the figures, are ``hack.perf.nodes.kubelet_node``.)
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import NODES, PODS, ApiError, list_objects, patch_object

PRESSURES = (
    ("MemoryPressure", "KubeletHasSufficientMemory"),
    ("DiskPressure", "KubeletHasNoDiskPressure"),
    ("PIDPressure", "KubeletHasSufficientPID"),
)


def timestamp() -> str:
    """Now, as the API's conditions spell it (whole seconds, UTC)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(ctype: str, status: str, reason: str, message: str, stamp: str) -> dict[str, str]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


def ready_condition(ready: bool, message: str = "simulated") -> dict[str, str]:
    """A Node's Ready condition as its kubelet writes it (KubeletReady/KubeletNotReady)."""
    reason = "KubeletReady" if ready else "KubeletNotReady"
    return _condition("Ready", "True" if ready else "False", reason, message, timestamp())


def node_conditions(ready: bool, message: str) -> list[dict[str, str]]:
    """Ready (saying ``message``) and no memory, disk or PID pressure."""
    stamp = timestamp()
    return [
        ready_condition(ready, message),
        *(_condition(t, "False", reason, "simulated", stamp) for t, reason in PRESSURES),
    ]


async def set_node_ready(
    api: ApiClient, name: str, ready: bool, message: str = "simulated"
) -> None:
    """Patch Node ``name``'s Ready condition (status subresource), as its kubelet would."""
    patch = {"status": {"conditions": [ready_condition(ready, message)]}}
    await patch_object(api, NODES, name, patch, patch_type="strategic", subresource="status")


async def report_pods_after_boot(api: ApiClient, node: str) -> list[str]:
    """Re-report the Ready pods bound to ``node`` after its reboot (see the module
    docstring); returns their ``namespace/name``."""
    pods, _ = await list_objects(api, PODS, field_selector=f"spec.nodeName={node}")
    reported = []
    for pod in pods:
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            continue
        meta = pod["metadata"]
        stamp = timestamp()
        patch = {
            "status": {
                "conditions": [
                    {"type": kind, "status": "True", "lastTransitionTime": stamp}
                    for kind in ("Ready", "ContainersReady")
                ]
            }
        }
        with contextlib.suppress(ApiError):  # deleted meanwhile: nothing to report
            await patch_object(
                api,
                PODS,
                meta["name"],
                patch,
                meta["namespace"],
                patch_type="strategic",
                subresource="status",
            )
            reported.append(f"{meta['namespace']}/{meta['name']}")
    return reported


def pod_ready_again(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status patch that turns ``pod`` Ready again, or None when it needs none.

    The node-lifecycle controller marks a Pod NotReady (``Ready=False``, nothing
    else) when it thinks the Pod's Node is not Ready, and it thinks so until its next
    look at the Node (every 5 s by default): a Pod bound to a Node that has just come
    back from a reboot is marked too. A real kubelet owns Pod status and writes
    Ready=True again on its next status sync; kwok, which plays the Pods of the
    simulated Nodes, sets Ready only once, when the Pod starts. So: a running Pod,
    not terminating, whose containers are ready (``ContainersReady=True``, which kwok
    wrote) but whose ``Ready`` is False gets Ready=True back.
    """
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
        return None
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get("ContainersReady") != "True" or conditions.get("Ready") != "False":
        return None
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": timestamp()}
    return {"status": {"conditions": [ready]}}
