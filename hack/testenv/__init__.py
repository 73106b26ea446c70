"""The harness: what the e2e fixtures, ``hack.simlib`` and ``hack.perf`` build clusters from.

(``hack/README.md`` maps the whole kit and says which tests use what.)

- :mod:`hack.testenv.controlplane`: a real etcd + kube-apiserver (+ KCM, scheduler, kwok);
- :mod:`hack.testenv.certs`: the PKI it uses (and a CA + serving certificate for other servers);
- :mod:`hack.testenv.registry`: a real OCI registry (Debian's docker-registry) on loopback;
- :mod:`hack.testenv.push`: tiny OCI images and indexes, pushed with the project's client;
- :mod:`hack.testenv.procs`: child-process spawning and guaranteed killing, and
  ``Component``, the ``with`` protocol of what runs them;
- :mod:`hack.testenv.kube`: async API clients from a kubeconfig;
- :mod:`hack.testenv.waiting`: ``wait_for``, polling with a deadline;
- :mod:`hack.testenv.mergepatch`: a JSON merge patch applied in memory (unit tests);
- :mod:`hack.testenv.pools`: ``BootcNodePool`` bodies;
- :mod:`hack.testenv.kubelet`: what a kubelet writes about its Node (Ready and friends);
- :mod:`hack.testenv.fleet`: the simulated fleet (every node's daemon in one process);
- :mod:`hack.testenv.machine`: the reboot simulation for real daemons on simulated hosts;
- :mod:`hack.testenv.monitor`: the safety monitor of rollout scenarios;
- :mod:`hack.testenv.controller`: the real controller in-process (``running_controller``);
- :mod:`hack.testenv.cli`: ``hack/controlplane up|down|status``.
"""

from hack.testenv.controlplane import ControlPlane, ControlPlaneError
from hack.testenv.kube import api_client
from hack.testenv.procs import StartupError
from hack.testenv.waiting import wait_for

__all__ = ["ControlPlane", "ControlPlaneError", "StartupError", "api_client", "wait_for"]
