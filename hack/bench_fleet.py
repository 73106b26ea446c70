"""A fleet's rollout, cluster by cluster, timed (not a test): ``hack/bench-fleet``.

Starts a fleet of simulated clusters (``hack/sim up --clusters N --nodes M``, in a
scratch directory, torn down at the end) or uses a running one (``--dir``), then
plays the GitOps controller (``hack.simlib.waves``): the pool ``fleet`` (every
worker node, ``--max-unavailable``, ``health.bootComplete`` with rollback) applied
to cluster 1, read back and judged by kstatus and Argo CD's own health code until
``Current``/``Healthy``, then cluster 2, and so on. Prints each wave's time (apply
to ``Current``/``Healthy`` as the gate saw it, polling every ``--poll`` seconds) and
the fleet's wall time. ``--bad`` then rolls out an image whose boots fail: the
first cluster halts (kstatus ``Failed``) and the script checks and says that no
other cluster was touched. ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
sys.path.insert(0, str(SCRIPT.parents[1]))

from bootc_operator.wording import counted  # noqa: E402
from hack.simlib import clusters  # noqa: E402
from hack.simlib.cli import clean, start_clusters  # noqa: E402
from hack.simlib.common import WORKER_LABEL, SimConfig  # noqa: E402
from hack.simlib.images import failing_boot  # noqa: E402
from hack.simlib.sim import AttachedSim, SimOps  # noqa: E402
from hack.simlib.waves import DONE, Wave, roll_out  # noqa: E402
from hack.testenv.pools import pool_body  # noqa: E402

POOL = "fleet"


def fleet_pool(image: str, max_unavailable: int) -> dict[str, Any]:
    """The pool every cluster gets: its workers, ``image``, boots checked, a failed
    one rolled back (and the rollout halted)."""
    body = pool_body(POOL, {WORKER_LABEL: ""}, image, max_unavailable)
    body["spec"]["health"] = {"bootComplete": True, "onFailure": "Rollback"}
    return body


def attach(root: Path) -> list[tuple[str, SimOps]]:
    dirs = clusters.load(root)
    if not dirs:
        raise SystemExit(f"bench-fleet: {root} holds no fleet (hack/sim up --clusters N)")
    return [(d.name, AttachedSim.open(d)) for d in dirs]


def untouched(sim: SimOps, image: str, since: float) -> list[str]:
    """What shows that ``sim``'s cluster was touched since ``since``: its pool not on
    ``image``, a reboot."""
    problems = []
    res = sim.kubectl("get", "bootcnodepool", POOL, "-o", "json")
    ref = json.loads(res.stdout)["spec"]["image"]["ref"]
    if ref != image:
        problems.append(f"its pool names {ref}")
    rebooted = [r["node"] for r in sim.reboots() if r["requested"] >= since]
    if rebooted:
        problems.append(f"{', '.join(rebooted)} rebooted")
    return problems


def report(title: str, waves: list[Wave]) -> dict[str, Any]:
    total = sum(w.seconds for w in waves)
    print(f"{title}: {counted(len(waves), 'wave')}, {total:.1f}s in all")
    for w in waves:
        print(f"  {w.describe()}")
    return {
        "waves": [
            {"cluster": w.cluster, "outcome": w.outcome, "seconds": w.seconds} for w in waves
        ],
        "seconds": total,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/bench-fleet", description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=6, help="per cluster (default: %(default)s)")
    parser.add_argument("--max-unavailable", type=int, default=2)
    parser.add_argument("--reboot-seconds", type=float, default=1.0)
    parser.add_argument("--stage-seconds", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=1.0, help="the gate's poll interval")
    parser.add_argument("--deadline", type=float, default=600.0, help="per wave, seconds")
    parser.add_argument("--bad", action="store_true", help="then roll out a failing image")
    parser.add_argument("--dir", type=Path, help="a running fleet (default: start one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    own = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-")) / "sim" if own else args.dir.resolve()
    figures: dict[str, Any] = {
        "clusters": args.clusters,
        "nodes": args.nodes,
        "load": os.getloadavg(),
    }
    try:
        if own:
            started = time.monotonic()
            config = SimConfig(
                nodes=args.nodes,
                controllers=1,
                reboot_seconds=args.reboot_seconds,
                stage_seconds=args.stage_seconds,
            )
            start_clusters(root, config, args.clusters, progress=False)
            figures["up_seconds"] = time.monotonic() - started
            print(f"fleet up in {figures['up_seconds']:.1f}s: {args.clusters} x {args.nodes} nodes")
        fleet = attach(root)
        first = fleet[0][1]
        good = first.push_image("os:v2")
        waves = roll_out(
            fleet, fleet_pool(good, args.max_unavailable), deadline=args.deadline, poll=args.poll
        )
        figures["good"] = report(f"rollout of {good}", waves)
        ok = all(w.outcome == DONE for w in waves) and len(waves) == len(fleet)
        if args.bad and ok:
            bad = first.push_image("os:bad", failing_boot())
            since = time.time()
            waves = roll_out(
                fleet, fleet_pool(bad, args.max_unavailable), deadline=args.deadline, poll=args.poll
            )
            figures["bad"] = report(f"rollout of {bad} (boots fail)", waves)
            for name, sim in fleet[len(waves) :]:
                problems = untouched(sim, good, since)
                print(f"  {name}: {'touched: ' + '; '.join(problems) if problems else 'untouched'}")
                ok = ok and not problems
        figures["load_after"] = os.getloadavg()
        if args.json:
            print(json.dumps(figures, indent=2))
        return 0 if ok else 1
    finally:
        if own:
            clean(root, quiet=True)
            root.parent.rmdir()


if __name__ == "__main__":
    sys.exit(main())
