"""Several simulated clusters side by side: a fleet (``hack/sim up --clusters N``).

A fleet lives in one directory (``DIR``)::

    DIR/clusters.json    the clusters' state directories, in order
    DIR/cluster-1/       an ordinary simulation (``hack.simlib.sim``): control plane,
                         controllers, nodes, and the fleet's OCI registry
    DIR/cluster-2/ ...   ordinary simulations whose nodes pull from cluster-1's
                         registry (``SimConfig.registry``) and boot its first image
                         (``SimConfig.first_image``)

Each cluster has its own control plane, controllers and simulated nodes; they share
only the registry, as the clusters of a fleet pull one image from one place. Each
is started, run and torn down as a simulation of its own (its own supervisor);
``hack/sim --cluster K CMD`` runs ``CMD`` on ``DIR/cluster-K``, and ``down`` and
``status`` of ``DIR`` take in every cluster (cluster-1, which owns the registry,
last).
"""

from __future__ import annotations

from pathlib import Path

from hack.simlib.common import SIM_FILE, read_json, write_json

CLUSTERS_FILE = "clusters.json"


def cluster_dir(root: Path, number: int) -> Path:
    """``root/cluster-NUMBER`` (numbered from 1)."""
    return root / f"cluster-{number}"


def cluster_dirs(root: Path, count: int) -> list[Path]:
    return [cluster_dir(root, k) for k in range(1, count + 1)]


def save(root: Path, dirs: list[Path]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / CLUSTERS_FILE, {"clusters": [str(d) for d in dirs]})


def load(root: Path) -> list[Path] | None:
    """The clusters of the fleet in ``root``, in order; None when ``root`` is no fleet."""
    doc = read_json(root / CLUSTERS_FILE)
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list):
        return None
    return [Path(str(d)) for d in doc["clusters"]]


def is_fleet(root: Path) -> bool:
    return (root / CLUSTERS_FILE).exists() and not (root / SIM_FILE).exists()
