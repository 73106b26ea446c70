"""The owner of a detached simulation (what ``hack/sim up`` leaves running).

``python -m hack.simlib.supervisor --dir DIR --config JSON`` runs ``Sim(...).start()``
in this process, so every component is its child and dies with it
(PR_SET_PDEATHSIG): killing the supervisor, even with SIGKILL, takes the whole
simulation down. SIGTERM (what ``hack/sim down`` sends) stops everything in order
and removes DIR. When the start fails the processes are stopped but DIR is kept
(``sim.json`` says why and ``logs/`` has the details) for ``hack/sim up`` to report;
it removes DIR afterwards. While it runs it restarts a dead node simulator and
applies the ``registry-down`` fault (``Sim.apply_faults``) every second.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from hack.simlib.common import SimConfig
from hack.simlib.sim import Sim


def _log(msg: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} {msg}", flush=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Stop once: a second signal must not interrupt the orderly shutdown.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.simlib.supervisor")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--config", default="{}", help="SimConfig fields as JSON")
    parser.add_argument("--no-registry", action="store_true", help="images from a catalog")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    config = SimConfig(**json.loads(args.config))
    sim = Sim(config, args.dir, die_with_parent=True, use_registry=not args.no_registry, log=_log)
    sim.info.pids["supervisor"] = os.getpid()
    sim.info.save()
    try:
        started = time.monotonic()
        sim.keep = True  # if the start fails, for `hack/sim up` to show why; it removes DIR
        sim.start()
        sim.keep = False
        _log(f"ready after {time.monotonic() - started:.1f}s")
        while True:
            time.sleep(1.0)
            sim.ensure_nodesim()
            try:
                sim.apply_faults()
            except Exception as exc:  # the simulation goes on; the fault command times out
                _log(f"applying the faults failed (retrying): {exc}")
    except KeyboardInterrupt:
        _log("stopping")
        return 0
    except Exception as exc:
        _log(f"error: {exc}")
        return 1
    finally:
        sim.close()
        if not sim.keep:
            _log("stopped")


if __name__ == "__main__":
    sys.exit(main())
