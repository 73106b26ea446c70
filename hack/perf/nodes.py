"""What both benchmarks (``hack/bench``, ``hack/bench-informer``) load a cluster with.

- :func:`kubelet_node`: a Node shaped like one a kubelet registers;
- :func:`bounded`: run N requests with at most C in flight, timed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


def kubelet_node(
    i: int, name: str, labels: Mapping[str, str], *, detailed: bool = False
) -> dict[str, Any]:
    """Node number ``i``, shaped like one a kubelet registers (labels, status with images).

    ``labels`` come on top of the kubelet's own (hostname, os, arch, instance type).
    ``detailed`` adds more of what a real kubelet writes: the beta os/arch labels,
    its annotations, pod CIDRs, an InternalIP, a full kernel version and images of
    different sizes.
    """
    stamp = "2026-01-01T00:00:00Z"
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHas{t}",
            "message": f"kubelet reports no {t}",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ] + [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    ]
    resources = {"cpu": "4", "memory": "16303120Ki", "pods": "110", "ephemeral-storage": "100Gi"}
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            **labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "m5.xlarge",
        },
    }
    spec: dict[str, Any] = {"providerID": f"bench:///{name}"}
    addresses = [{"type": "Hostname", "address": name}]
    if detailed:
        metadata["labels"] |= {"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
        metadata["annotations"] = {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
        high, low = i // 256 % 256, i % 256
        spec |= {"podCIDR": f"10.{high}.{low}.0/24", "podCIDRs": [f"10.{high}.{low}.0/24"]}
        addresses.insert(0, {"type": "InternalIP", "address": f"192.168.{high}.{low}"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": addresses,
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": f"{i:08x}-0000-0000-0000-000000000000",
                "bootID": f"{i:08x}-1111-1111-1111-111111111111",
                "kernelVersion": "6.12.0-55.el10.x86_64" if detailed else "6.12.0",
                "osImage": "Fedora bootc 42",
                "containerRuntimeVersion": "cri-o://1.33.0",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "v1.36.3",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [f"quay.io/example/image-{k}@sha256:{k:064x}"],
                    "sizeBytes": 10_000_000 * (k + 1 if detailed else 1),
                }
                for k in range(8)
            ],
        },
    }


async def bounded(n: int, concurrency: int, op: Callable[[int], Awaitable[object]]) -> float:
    """Run ``op(0..n-1)`` with at most ``concurrency`` in flight; the seconds taken."""
    started = time.perf_counter()
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            await op(i)

    async with asyncio.TaskGroup() as tg:
        for _ in range(min(concurrency, max(n, 1))):
            tg.create_task(worker())
    return time.perf_counter() - started
