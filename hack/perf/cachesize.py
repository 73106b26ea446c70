"""Bytes per cached Node and BootcNode: figures, not tests (issue 39 §2).

``python -m hack.perf.cachesize [--sizes 1000,5000]`` starts a fresh etcd +
kube-apiserver and, for each N, makes N Nodes as a kubelet registers them
(``kubelet_node(detailed=True)``: labels, annotations, addresses, nodeInfo,
conditions, images) and N BootcNodes as the controller and a daemon leave them
mid-life (owner, labels, a slot's annotations on a tenth of them, the daemon's
status with its kstatus conditions). It then LISTs each kind the way the
controller's informers get them (one JSON document per object, as a streaming
list's events carry them), parses and keeps them in a dict as a store does, under
``tracemalloc``: the Python heap each object costs, shared interned strings
counted once. Three ways of keeping them:

- *as listed*: the parsed JSON as it is;
- *strip_bulk + intern*: the informer default (no managedFields) with shared strings;
- *before issue 39*: that, and a Node's ``status.images`` and a BootcNode's sealed
  ciphertext dropped (what the controller kept until issue 39);
- *the controller's*: ``controller.caches`` (what it stores today).

Prints bytes per object for each; ``--json`` prints them as JSON. The figures do
not depend on the machine's load. Nothing fails on a number.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tracemalloc
from collections.abc import Sequence
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.controller.caches import BOOTC_NODE_TRANSFORM, NODE_TRANSFORM
from bootc_operator.informers import Transform, chain, drop_paths, intern_strings, strip_bulk
from bootc_operator.informers.transform import identity
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    Resource,
    create_object,
    list_objects,
    load_api_client,
    patch_object,
)
from bootc_operator.policy.ownership import member_body
from hack.perf.nodes import bounded, kubelet_node
from hack.testenv import ControlPlane
from hack.testenv.fleet import daemon_status
from hack.testenv.pools import pool_body

IMAGE = "registry.example.com/bench/os@sha256:" + "1" * 64
NEXT = "registry.example.com/bench/os@sha256:" + "2" * 64
WAYS: dict[str, Transform] = {
    "as listed": identity,
    "strip_bulk + intern": chain(strip_bulk, intern_strings),
}
#: what the controller kept before issue 39 (issue 18's transforms)
BEFORE: dict[str, Transform] = {
    "Node": chain(strip_bulk, drop_paths(("status", "images")), intern_strings),
    "BootcNode": chain(
        strip_bulk, drop_paths(("spec", "sealedPullSecret", "data")), intern_strings
    ),
}


def bootc_node_status(bn: dict[str, Any]) -> dict[str, Any]:
    status = daemon_status(bn, IMAGE, NEXT, None, ("False", "Staged"))
    status["bootAssessment"] = {"state": "Complete", "message": "boot-complete.target reached"}
    return status


async def fill(api: Any, start: int, n: int) -> None:
    """Nodes and BootcNodes ``start`` .. ``start + n - 1``."""
    pool = await create_object(
        api, BOOTC_NODE_POOLS, pool_body(f"size-{start}", {"size": str(start)}, IMAGE)
    )

    async def one(i: int) -> None:
        name = f"size-{start + i:05d}"
        labels = {"size": str(start), "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}"}
        await create_object(api, NODES, kubelet_node(start + i, name, labels, detailed=True))
        body = member_body(pool, name, {"desiredImage": NEXT, "desiredImageState": "Staged"})
        if i % 10 == 0:  # a slot holder
            body["metadata"]["annotations"] = {
                c.IN_REBOOT_SLOT_ANNOTATION: "2026-01-01T00:00:00.000000Z",
                c.WAS_CORDONED_ANNOTATION: "false",
                c.AUTOSCALER_PRIOR_ANNOTATION: "{}",
            }
        bn = await create_object(api, BOOTC_NODES, body)
        await patch_object(
            api, BOOTC_NODES, name, {"status": bootc_node_status(bn)}, subresource="status"
        )

    await bounded(n, 32, one)


async def listed(api: Any, resource: Resource, selector: str) -> list[bytes]:
    """Each object of ``resource`` as its own JSON document (as a watch event carries it)."""
    items, _ = await list_objects(api, resource, label_selector=selector)
    return [json.dumps(o).encode() for o in items]


def per_object(raw: list[bytes], way: Transform) -> float:
    """Heap bytes per object parsed from ``raw`` and kept as ``way`` keeps them."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = {}
    for doc in raw:
        obj = way(json.loads(doc))
        store[obj["metadata"]["name"]] = obj
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(store) == len(raw)
    return (after - before) / len(raw)


async def measure(sizes: Sequence[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with ControlPlane(controller_manager=False) as cp:
        api = await load_api_client(cp.kubeconfig)
        try:
            have = 0
            for n in sizes:
                if n > have:
                    await fill(api, have, n - have)
                    have = n
                # every object made so far carries a size label: all of them are listed
                selector = "size"
                node_ways = {
                    **WAYS,
                    "before issue 39": BEFORE["Node"],
                    "the controller's": NODE_TRANSFORM,
                }
                bn_ways = {
                    **WAYS,
                    "before issue 39": BEFORE["BootcNode"],
                    "the controller's": BOOTC_NODE_TRANSFORM,
                }
                row: dict[str, Any] = {"n": n, "Node": {}, "BootcNode": {}}
                nodes = await listed(api, NODES, selector)
                bootc_nodes = await listed(api, BOOTC_NODES, c.POOL_LABEL)
                assert len(nodes) == len(bootc_nodes) == n, (len(nodes), len(bootc_nodes), n)
                for way, fn in node_ways.items():
                    row["Node"][way] = round(per_object(nodes, fn))
                for way, fn in bn_ways.items():
                    row["BootcNode"][way] = round(per_object(bootc_nodes, fn))
                rows.append(row)
        finally:
            await api.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000", help="comma-separated N, ascending")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    rows = asyncio.run(measure(sizes))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"N = {row['n']}: heap bytes per cached object")
        for kind in ("Node", "BootcNode"):
            cells = ", ".join(f"{way} {b:,}" for way, b in row[kind].items())
            print(f"  {kind:<10} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
