"""What each import costs the controller: figures, not tests (issue 39 §2).

``python -m hack.perf.imports [--runs N]`` starts fresh interpreters that import the
controller's dependencies one group more each time, in the order the controller
loads them, and prints per group its import time (median of N runs, wall ms) and
what it adds to the process's RSS (MiB, median). A last line is the whole
controller (``bootc_operator.controller`` and the API client loader, as
``bootc-operator controller`` starts). Then, for reference, what the controller
does *not* import unless a cluster uses it, each on top of the whole controller:
the generated kubernetes_asyncio classes (``kube.slim`` keeps them out),
``cryptography`` (sealing pull secrets; verifying signatures), the Prometheus
query client (``--prometheus-url``). The machine is shared: the load average is
printed with the figures. Nothing fails on a number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence

from hack.perf.procinfo import machine

#: (label, the statements that import the group); each run imports every group up to one
GROUPS: tuple[tuple[str, str], ...] = (
    ("Python, asyncio, ssl, json, logging", "import asyncio, ssl, json, logging, argparse"),
    ("aiohttp", "import aiohttp"),
    ("prometheus_client", "import prometheus_client"),
    ("pydantic (and pydantic_core)", "import pydantic"),
    ("PyYAML (kubeconfig)", "import yaml"),
    (
        "kubernetes_asyncio: ApiClient, Configuration, kubeconfig (kube.slim)",
        "import bootc_operator.kube.slim",
    ),
    ("the API models (api.v1alpha1: pydantic schemas built)", "import bootc_operator.api.v1alpha1"),
    (
        "the rest of the controller (bootc_operator.controller)",
        "import bootc_operator.controller; from bootc_operator.kube import load_api_client",
    ),
)

#: (label, statements) imported on top of the whole controller, one at a time
UNUSED: tuple[tuple[str, str], ...] = (
    (
        "kubernetes_asyncio's generated API and model classes",
        "import kubernetes_asyncio.client.models, kubernetes_asyncio.client",
    ),
    ("cryptography for sealing (a pool with a pull secret)", "import bootc_operator.sealing"),
    (
        "cryptography for signatures (a pool that verifies)",
        "from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa\n"
        "from cryptography.hazmat.primitives.serialization import load_pem_public_key",
    ),
    ("the Prometheus query client (--prometheus-url)", "import bootc_operator.gates.prometheus"),
)

_PROBE = """
import resource, sys, time
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
marks = []
{body}
print(__import__("json").dumps(marks))
"""


def _step(code: str) -> str:
    return "t = time.perf_counter()\n" + code + "\nmarks.append((time.perf_counter() - t, rss()))\n"


def probe(groups: Sequence[str]) -> list[tuple[float, float]]:
    """(seconds, RSS MiB after) of each group of statements, in one fresh interpreter."""
    body = "marks.append((0.0, rss()))\n" + "".join(_step(g) for g in groups)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(body=body)],
        check=True,
        capture_output=True,
        text=True,
    )
    return [(float(t), float(mib)) for t, mib in json.loads(done.stdout)]


def measure(runs: int) -> dict[str, list[dict[str, float | str]]]:
    base = [code for _, code in GROUPS]
    chain = [probe(base) for _ in range(runs)]
    rows: list[dict[str, float | str]] = []
    for i, (label, _) in enumerate(GROUPS, start=1):
        rows.append(
            {
                "group": label,
                "ms": round(statistics.median(r[i][0] for r in chain) * 1000, 1),
                "mib": round(statistics.median(r[i][1] - r[i - 1][1] for r in chain), 1),
            }
        )
    total: dict[str, float | str] = {
        "group": "the whole controller (interpreter included)",
        "ms": round(statistics.median(sum(m[0] for m in r) for r in chain) * 1000, 1),
        "mib": round(statistics.median(r[-1][1] for r in chain), 1),
    }
    unused: list[dict[str, float | str]] = []
    for label, code in UNUSED:
        extra = [probe([*base, code])[-1] for _ in range(runs)]
        whole = [r[-1][1] for r in chain]
        unused.append(
            {
                "group": label,
                "ms": round(statistics.median(e[0] for e in extra) * 1000, 1),
                "mib": round(statistics.median(e[1] for e in extra) - statistics.median(whole), 1),
            }
        )
    return {"groups": rows, "total": [total], "unused": unused}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    load = machine()["load_average"]
    figures = measure(args.runs)
    if args.json:
        print(json.dumps({"load_average": load, **figures}, indent=2))
        return 0
    print(f"load average before: {load}; median of {args.runs} fresh interpreters each\n")
    print(f"{'what the controller imports':<72} {'ms':>7} {'+MiB':>6}")
    for row in [*figures["groups"], *figures["total"]]:
        print(f"{row['group']:<72} {row['ms']:>7} {row['mib']:>6}")
    print(f"\n{'not imported unless the cluster uses it (on top of the above)':<72}")
    for row in figures["unused"]:
        print(f"{row['group']:<72} {row['ms']:>7} {row['mib']:>6}")
    print(f"\nload average after: {machine()['load_average']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
