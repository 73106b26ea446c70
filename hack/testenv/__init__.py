"""Test environment shared by the e2e fixtures and ``hack/`` tools.

- :mod:`hack.testenv.controlplane`: a real etcd + kube-apiserver (+ KCM, scheduler, kwok);
- :mod:`hack.testenv.certs`: the PKI it uses (and a CA + serving certificate for other servers);
- :mod:`hack.testenv.registry`: a real OCI registry (Debian's docker-registry) on loopback;
- :mod:`hack.testenv.procs`: child-process spawning and guaranteed killing, and
  ``Component``, the ``with`` protocol of what runs them;
- :mod:`hack.testenv.kube`: async API clients from a kubeconfig;
- :mod:`hack.testenv.waiting`: ``wait_for``, polling with a deadline;
- :mod:`hack.testenv.cli`: ``hack/controlplane up|down|status``.
"""

from hack.testenv.controlplane import ControlPlane, ControlPlaneError
from hack.testenv.kube import api_client
from hack.testenv.procs import StartupError
from hack.testenv.waiting import wait_for

__all__ = ["ControlPlane", "ControlPlaneError", "StartupError", "api_client", "wait_for"]
