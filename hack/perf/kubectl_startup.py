"""How fast ``kubectl bootc`` starts: figures, not tests (issue 28 §1).

``python -m hack.perf.kubectl_startup [--runs N] [--nodes M]`` starts a fresh etcd +
kube-apiserver (``hack.testenv``), creates one pool with M members (Nodes and
BootcNodes, no controller needed), and times, each N times (median and min of the
wall time, in ms):

- ``kubectl-bootc --help`` (argument parsing only: the floor);
- ``kubectl-bootc status POOL`` and ``status POOL -o json`` (kubeconfig, three LISTs,
  the policy code, the table);
- ``kubectl bootc status POOL`` through the real kubectl (kubectl's own start-up
  and plugin lookup on top);
- the same two through the krew archive (``hack.krewpkg``: the zipapp of pure-Python
  modules, run by the Python the venv was made from, no site-packages; the first
  run unpacks it into the cache, the median is of the runs after);
- for reference ``kubectl get bootcnodepools POOL`` and a bare
  ``python -c 'import kubernetes_asyncio.client'`` (what the full client alone would
  cost).

Then the ten imports ``status`` pays most for (``python -X importtime``, cumulative
microseconds). The machine is shared: the load average is printed with the figures;
repeat before trusting a difference. Nothing fails on a number.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from hack import krewpkg
from hack.perf.procinfo import machine
from hack.testenv.controlplane import ControlPlane

POOL = "bench"
DIGEST = "sha256:" + "1" * 64


def _objects(nodes: int) -> list[dict[str, object]]:
    docs: list[dict[str, object]] = [
        {
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": POOL},
            "spec": {
                "nodeSelector": {"matchLabels": {"bench": POOL}},
                "image": {"ref": f"registry.example.com/os@{DIGEST}"},
            },
        }
    ]
    for i in range(nodes):
        name = f"{POOL}-{i:03d}"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"bench": POOL}},
            }
        )
        docs.append(
            {
                "apiVersion": "node.bootc.dev/v1alpha1",
                "kind": "BootcNode",
                "metadata": {"name": name, "labels": {"bootc.dev/pool": POOL}},
                "spec": {
                    "desiredImage": f"registry.example.com/os@{DIGEST}",
                    "desiredImageState": "Staged",
                },
            }
        )
    return docs


def _time(argv: Sequence[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """(median, min) wall seconds of ``argv``, which must succeed."""
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        took.append(time.perf_counter() - start)
    return statistics.median(took), min(took)


def top_imports(argv: Sequence[str], env: dict[str, str], n: int = 10) -> list[tuple[int, str]]:
    """The ``n`` top-level-ish imports with the largest cumulative time (µs)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 1:
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=20)
    args = parser.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    plugin = str(bin_dir / "kubectl-bootc")
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(krewpkg.build(Path(tmp), krewpkg.version())) as tar:
            tar.extractall(tmp, filter="data")
        zipapp = [
            str(Path(sys.base_prefix) / "bin" / "python3"),
            "-I",
            "-S",
            f"{tmp}/{krewpkg.BIN}",
        ]
        kubectl = str(cp.bin_dir / "kubectl")
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_objects(args.nodes)))
        env = {
            **os.environ,
            "KUBECONFIG": str(cp.kubeconfig),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "XDG_CACHE_HOME": f"{tmp}/cache",  # the archive's first run unpacks here
        }
        cases = [
            ("kubectl-bootc --help", [plugin, "--help"]),
            (f"kubectl-bootc status {POOL}", [plugin, "status", POOL]),
            (f"kubectl-bootc status {POOL} -o json", [plugin, "status", POOL, "-o", "json"]),
            ("krew archive: --help", [*zipapp, "--help"]),
            (f"krew archive: status {POOL}", [*zipapp, "status", POOL]),
            (f"kubectl bootc status {POOL}", [kubectl, "bootc", "status", POOL]),
            (f"kubectl get bootcnodepools {POOL}", [kubectl, "get", "bootcnodepools", POOL]),
            (
                "python -c 'import kubernetes_asyncio.client'",
                [sys.executable, "-c", "import kubernetes_asyncio.client"],
            ),
        ]
        print(f"machine: {machine()}")
        print(f"pool {POOL} with {args.nodes} members; {args.runs} runs each\n")
        print(f"{'command':<48} {'median ms':>10} {'min ms':>8}")
        for label, command in cases:
            median, least = _time(command, env, args.runs)
            print(f"{label:<48} {median * 1000:>10.0f} {least * 1000:>8.0f}")
        print("\nlargest imports of `status` (cumulative µs, python -X importtime):")
        for micros, name in top_imports(["-m", "bootc_operator.kubectl.main", "status", POOL], env):
            print(f"  {micros:>8}  {name}")
        print(f"\nload average after: {machine()['load_average']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
