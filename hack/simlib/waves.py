"""A GitOps controller's part over a fleet: a pool applied cluster by cluster, each wave
gated on what Flux and Argo CD read of it (docs/fleets.md).

``roll_out(clusters, pool)`` applies ``pool`` to the first cluster (``kubectl apply``:
what Flux or Argo CD syncs), then reads it back as they do and judges it with
kstatus's and Argo CD's own code (``hack.testenv.gitops``: nothing of the operator's
own reading) until

- kstatus says ``Current`` and Argo CD ``Healthy``: the wave is done, the next
  cluster gets the pool (Flux: the next Kustomization's ``dependsOn`` is Ready;
  Argo CD: the progressive sync's next step starts);
- kstatus says ``Failed`` (Flux fails the health check at once): the fleet's
  rollout stops there, and the clusters after it are never touched;
- ``deadline`` seconds pass (Flux's health-check timeout): it stops there as well.

Argo CD's ``Degraded`` alone (a degraded node while the others go on) stops
nothing and lets nothing through: a progressive sync waits for ``Healthy``.
Returns one ``Wave`` per cluster it touched, with its times and every change of
the two verdicts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hack.simlib.sim import SimError, SimOps
from hack.testenv.gitops import argocd_health, kstatus

DONE, FAILED, TIMEOUT = "done", "failed", "timeout"


@dataclass
class Wave:
    """One cluster's wave: from the apply to the gate's verdict."""

    cluster: str
    started: float  # monotonic
    finished: float = 0.0
    outcome: str = ""  # done, failed, timeout
    kstatus: str = ""  # the last verdicts, and Argo CD's message
    argocd: str = ""
    message: str = ""
    #: (seconds since the apply, kstatus, Argo CD) each time either changed
    changes: list[tuple[float, str, str]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.finished - self.started

    def describe(self) -> str:
        steps = ", ".join(f"{t:.1f}s {k}/{a}" for t, k, a in self.changes)
        return f"{self.cluster}: {self.outcome} after {self.seconds:.1f}s ({steps})"


def judge(pool: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kstatus, Argo CD, Argo CD's message) for one pool as read from a cluster."""
    (ks,) = kstatus([pool])
    (argo,) = argocd_health([pool])
    return ks.status, argo.status, argo.message or ks.message


def read_pool(sim: SimOps, name: str) -> dict[str, Any]:
    res = sim.kubectl("get", "bootcnodepool", name, "-o", "json")
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def roll_out(
    clusters: Sequence[tuple[str, SimOps]],
    pool: Mapping[str, Any],
    *,
    deadline: float = 600.0,
    poll: float = 1.0,
    say: Callable[[str], None] | None = None,
    judge: Callable[[Mapping[str, Any]], tuple[str, str, str]] = judge,
) -> list[Wave]:
    """Apply ``pool`` to each of ``clusters`` ((name, simulation), in order), one wave
    at a time (module docstring); the waves it ran. ``judge``: (kstatus, Argo CD,
    message) of a pool as read (default: by their own code)."""
    name = str(pool["metadata"]["name"])
    waves: list[Wave] = []
    for cluster, sim in clusters:
        wave = Wave(cluster, time.monotonic())
        waves.append(wave)
        sim.kubectl("apply", "-f", "-", input=json.dumps(pool))
        if say is not None:
            say(f"{cluster}: applied pool {name} ({pool['spec']['image']['ref']})")
        while True:
            try:
                wave.kstatus, wave.argocd, wave.message = judge(read_pool(sim, name))
            except (SimError, RuntimeError) as exc:  # a busy apiserver: read again
                wave.message = str(exc)
            now = time.monotonic()
            verdict = (wave.kstatus, wave.argocd)
            if not wave.changes or wave.changes[-1][1:] != verdict:
                wave.changes.append((now - wave.started, *verdict))
                if say is not None:
                    say(f"{cluster}: kstatus {verdict[0]}, Argo CD {verdict[1]}: {wave.message}")
            if verdict == ("Current", "Healthy"):
                wave.outcome = DONE
            elif wave.kstatus == "Failed":
                wave.outcome = FAILED
            elif now - wave.started > deadline:
                wave.outcome = TIMEOUT
            if wave.outcome:
                wave.finished = now
                break
            time.sleep(poll)
        if wave.outcome != DONE:
            break
    return waves
