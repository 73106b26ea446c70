"""Prometheus for a simulation: ``hack/sim up --prometheus``, ``SimConfig(prometheus=True)``.

A real Prometheus (``hack.testenv.prometheus``, Debian's package) in the state
directory (``DIR/prometheus/``), scraping every controller and daemon process of
the node simulator each second, with the project's alerting rules loaded
(rendered from ``manifests/prometheus/prometheusrule.yaml``).

What the kit's ServiceMonitors would find on a real install, Prometheus scrapes
here: every controller, and the daemons of the *managed* Nodes only (label
``MANAGED_LABEL``, set while a pool selects the Node): the install's DaemonSet
runs its Pods there alone, while the node simulator runs a daemon on every Node.
(A daemon outside every pool never reads ``bootc status``, so its
``..._last_status_refresh_timestamp_seconds`` stays 0, which a real cluster never
shows.) The targets carry what the ServiceMonitors' scrape adds:
``job="bootc-operator-controller-metrics"`` / ``"bootc-operator-daemon-metrics"``
(the metrics Services' names, which the rules and the dashboard select on),
``namespace``, ``pod`` (the process' POD_NAME: ``controller-1``, ``daemon-worker-1``),
``service``, ``endpoint`` and, for daemons, ``node``. Like the ServiceMonitors,
it scrapes over HTTPS (the self-signed certificates accepted) with a bearer
token: ServiceAccount ``monitoring/prometheus``'s, bound to the ClusterRole
``bootc-operator-metrics-reader`` (``reader_token_file``); the processes review it
with the API server.

The simulation runs on a compressed clock (reboots of seconds, not minutes), so
the rules' ``for`` durations are compressed too: ``FOR_SCALE`` (minutes become
seconds; ``for: 30m`` fires after 30 s). Their expressions are unchanged.

``scrape_targets`` maps the node simulator's process table and the managed Nodes
to targets (pure); ``sync`` hands Prometheus the current ones (a crashed process
restarts on new ports, pools take and release Nodes); ``TargetSync`` does that
every second in a thread; ``scraping`` says whether every expected target has
answered a scrape. The owner of the simulation (``Sim``) starts it before the
node simulator (the controllers are given its URL), keeps a ``TargetSync``
running, loads the rules (``load_rules``) once every target answers, and stops both.

The rules are loaded last because the simulation's start-up is not on its clock:
with the rules loaded from the start, ``BootcOperatorControllerDown``
(``absent(up{...} == 1)``, ``for: 10m`` → 10 s) is pending from Prometheus' first
evaluation, before the controllers exist, until their first scrape; on a loaded
2-core machine that took 8-13 s (the controllers serving 5-8 s after the node
simulator starts, then up to 5 s until Prometheus applies new targets), so it
fired before any test began. On a cluster the rules come with the install and its
controllers answer well inside the real 10 minutes.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Self

from bootc_operator.api import constants as c
from hack.simlib.common import MARKER_ENV, NAMESPACE
from hack.testenv.controlplane import ControlPlane
from hack.testenv.metricsreader import reader_token
from hack.testenv.prometheus import (
    ALERT_TIMEOUT,
    CONTROLLER_JOB,
    DAEMON_JOB,
    Prometheus,
    PrometheusError,
    Target,
    bearer_https,
    render_rules,
)

#: the rules' ``for`` durations on the simulation's clock: minutes become seconds
FOR_SCALE = 1 / 60
RULES_NAME = "bootc-operator"
#: whom Prometheus scrapes as (a token of this ServiceAccount, bound to the
#: bootc-operator-metrics-reader ClusterRole, as docs/install.md tells admins to do)
PROMETHEUS_NAMESPACE = "monitoring"
PROMETHEUS_ACCOUNT = "prometheus"


log = logging.getLogger("sim.monitoring")

Processes = Mapping[str, Mapping[str, Any]]


def scrape_targets(
    processes: Processes, managed: Collection[str] | None = None
) -> dict[str, list[Target]]:
    """job → targets for the node simulator's processes (``controller-N``,
    ``daemon/<node>`` → their ``metrics_port``), labelled as a ServiceMonitor would;
    daemons only on the ``managed`` nodes (all when None)."""
    jobs: dict[str, list[Target]] = {CONTROLLER_JOB: [], DAEMON_JOB: []}
    for name in sorted(processes):
        port = processes[name].get("metrics_port")
        if not isinstance(port, int):
            continue
        labels = {"namespace": NAMESPACE, "endpoint": "metrics"}
        if name.startswith("daemon/"):
            node = name.split("/", 1)[1]
            if managed is not None and node not in managed:
                continue
            labels |= {"pod": f"daemon-{node}", "node": node, "service": DAEMON_JOB}
            jobs[DAEMON_JOB].append(Target(f"127.0.0.1:{port}", labels))
        else:
            labels |= {"pod": name, "service": CONTROLLER_JOB}
            jobs[CONTROLLER_JOB].append(Target(f"127.0.0.1:{port}", labels))
    return jobs


def reader_token_file(cp: ControlPlane, state_dir: Path) -> Path:
    """The token Prometheus scrapes with, as on a cluster: ServiceAccount
    ``monitoring/prometheus`` bound to ``bootc-operator-metrics-reader``, in
    ``DIR/prometheus/token`` (mode 0600)."""
    path = state_dir / "prometheus" / "token"
    path.parent.mkdir(parents=True, exist_ok=True)
    token = reader_token(cp.kubectl, PROMETHEUS_NAMESPACE, PROMETHEUS_ACCOUNT)
    path.touch(mode=0o600)
    path.write_text(token)
    return path


def new_prometheus(
    state_dir: Path, token_file: Path, *, die_with_parent: bool = True
) -> Prometheus:
    """The simulation's Prometheus (not started), scraping over HTTPS with the token in
    ``token_file`` (``reader_token_file``); no rules yet (``load_rules``)."""
    secure = bearer_https(token_file)
    return Prometheus(
        state_dir / "prometheus",
        die_with_parent=die_with_parent,
        env={MARKER_ENV: str(state_dir)},
        scrape={CONTROLLER_JOB: secure, DAEMON_JOB: secure},
    )


def load_rules(prom: Prometheus, timeout: float = ALERT_TIMEOUT) -> None:
    """Load the kit's alerting rules on the simulation's clock and return once each
    was evaluated (health no longer "unknown"): their ``for`` clocks start now (the
    module docstring says why not with Prometheus)."""
    doc = render_rules(for_scale=FOR_SCALE)
    names = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    prom.set_rules(RULES_NAME, doc)
    prom.wait_evaluated(names, timeout)


def managed_nodes(cp: ControlPlane) -> set[str]:
    """Names of the Nodes labelled for the daemon (``MANAGED_LABEL``; one GET, as the admin)."""
    ctx = ssl.create_default_context(cafile=str(cp.pki.ca.cert))
    admin = cp.pki.client("admin")
    ctx.load_cert_chain(str(admin.cert), str(admin.key))
    query = urllib.parse.urlencode({"labelSelector": c.MANAGED_LABEL})
    request = urllib.request.Request(f"{cp.server}/api/v1/nodes?{query}")
    with urllib.request.urlopen(request, context=ctx, timeout=5) as resp:
        doc = json.loads(resp.read())
    return {item["metadata"]["name"] for item in doc.get("items") or ()}


def sync(prom: Prometheus, processes: Processes, managed: Collection[str] | None = None) -> bool:
    """Give ``prom`` the current targets; True if any job changed."""
    wanted = scrape_targets(processes, managed)
    current = prom.jobs()
    changed = False
    for job, targets in wanted.items():
        if current.get(job) != targets:
            prom.set_targets(job, targets)
            changed = True
    return changed


def scraping(
    prom: Prometheus, processes: Processes, managed: Collection[str] | None = None
) -> bool:
    """Every target of ``processes`` has been scraped successfully (health "up")."""
    wanted = {t.address for targets in scrape_targets(processes, managed).values() for t in targets}
    try:
        up = {t["labels"].get("instance") for t in prom.targets() if t.get("health") == "up"}
    except (PrometheusError, OSError):
        return False
    return wanted <= up


class TargetSync:
    """A thread that keeps ``prom``'s targets in step with ``processes()`` and
    ``managed()`` every ``interval`` seconds (errors are logged and retried)."""

    def __init__(
        self,
        prom: Prometheus,
        processes: Callable[[], Processes],
        managed: Callable[[], Collection[str]],
        interval: float = 1.0,
    ) -> None:
        self.prom = prom
        self.processes = processes
        self.managed = managed
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync_once(self) -> bool:
        return sync(self.prom, self.processes(), self.managed())

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="prometheus-targets", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                self.sync_once()
                failing = False
            except (OSError, urllib.error.URLError, ValueError, PrometheusError) as exc:
                if not failing:  # once per outage, not every second
                    log.warning("syncing the Prometheus targets failed (retrying): %s", exc)
                failing = True
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
