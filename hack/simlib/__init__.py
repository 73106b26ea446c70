"""A local cluster of simulated bootc nodes running the real operator (``hack/sim``, the demo).

Real control plane, real OCI registry, real controller and daemon processes; only
the hosts (``hack.fakebootc``) and the kubelets (``nodesim`` and kwok) are simulated.

- :mod:`hack.simlib.sim`: ``Sim`` (owns a simulation; tests use it in-process) and
  ``AttachedSim`` (a detached one, by its state directory), both with ``SimOps``;
- :mod:`hack.simlib.nodesim`: the node simulator process (Node status, controller and
  daemon processes, reboots);
- :mod:`hack.simlib.supervisor`: the owner process of a detached simulation;
- :mod:`hack.simlib.cli`: ``hack/sim up|down|status|image push|workload|pool|fault|kubectl``;
- :mod:`hack.simlib.faults`: the faults of ``hack/sim fault`` (one for each gate);
- :mod:`hack.simlib.demo` / :mod:`hack.simlib.view`: ``make demo`` and its live view;
- :mod:`hack.simlib.images`, :mod:`hack.simlib.workload`: images to push, the sample workload;
- :mod:`hack.simlib.clusters`: a fleet, several simulations sharing one registry
  (``hack/sim up --clusters N``); :mod:`hack.simlib.waves`: a pool rolled out over it
  cluster by cluster, gated on kstatus and Argo CD's health (``hack/bench-fleet``);
- :mod:`hack.simlib.reaper`: finding and killing every process of a simulation;
- :mod:`hack.simlib.common`: configuration, persisted info, state-directory layout.
"""

from hack.simlib.common import SimConfig, SimInfo
from hack.simlib.sim import AttachedSim, Sim, SimError, SimOps

__all__ = ["AttachedSim", "Sim", "SimConfig", "SimError", "SimInfo", "SimOps"]
