"""``Sim``: a whole simulated cluster of bootc nodes, as a Python object.

``Sim(SimConfig(nodes=3, reboot_seconds=1)).start()`` brings up, in one state
directory (``common`` lists its layout):

1. a real control plane (``hack.testenv.ControlPlane``): etcd, kube-apiserver,
   kube-controller-manager (garbage collection, namespaces, service accounts, node
   lifecycle, deployments, replica sets, disruption budgets), kube-scheduler and
   kwok (the Pods of the simulated Nodes); the CRDs, the ``bootc-operator``
   namespace and, when ``manifests/rbac`` exists, the RBAC;
2. a real OCI registry (``hack.testenv.registry.Registry``, Debian's
   docker-registry) with a first OS image pushed (``os:v1``), or, with
   ``SimConfig(registry=..., first_image=...)``, another simulation's registry and
   image (a fleet of clusters, ``hack.simlib.clusters``);
3. one simulated bootc host per node (``hack.fakebootc``) booted into that image;
   with a registry the hosts pull only what it (or a registry with a CA they trust)
   serves, like real bootc: a digest it does not have, or a registry that is down,
   fails the switch (``accept_any_digest`` off). With ``SimConfig(real_bootc=N)``
   (``hack/sim up --real-bootc N``) the first N nodes' hosts are real-bootc ones
   (``hack.simlib.hosts``: the real bootc on a real ostree sysroot, pulling from the
   registry; root only), which the node simulator boots;
4. the node simulator process (``hack.simlib.nodesim``), which creates the Nodes
   and runs the controllers, the daemons and the reboots;
5. with ``SimConfig(prometheus=True)`` (``hack/sim up --prometheus``), a real
   Prometheus scraping the controllers and the managed nodes' daemons, the kit's
   alerting rules loaded on the simulation's clock (``hack.simlib.monitoring``):
   ``sim.prometheus`` (its URL in ``info.prometheus``), its targets kept in step
   by a thread while the simulation runs. It starts before the node simulator,
   whose controllers get its URL (``--prometheus-url``: the alert gate queries it);
   the rules are loaded once every target answers a scrape.

The owner applies the ``registry-down`` fault (``hack.simlib.faults``):
``apply_faults()`` stops the registry while ``DIR/control/faults.json`` lists it
and starts it again (same port, same images) once it does not; the supervisor
calls it every second.

``close()`` stops it all and removes the directory. Tests use it in-process
(children die with the test process by PR_SET_PDEATHSIG); ``hack/sim up`` runs it
in a detached supervisor (``hack.simlib.supervisor``) and talks to it later through
``AttachedSim``. Both offer the same operations (``SimOps``): ``push_image``,
``deploy_workload``, ``kubectl``, ``host``, ``processes``, ``kill``, ``hold`` …
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

from bootc_operator.wording import counted
from hack.fakebootc import Host
from hack.simlib import faults, hosts, images, monitoring, workload
from hack.simlib.common import (
    CONTROL_DIR,
    LEASE_NAME,
    MARKER_ENV,
    NAMESPACE,
    NODESIM_FILE,
    REBOOTS_FILE,
    SIM_FILE,
    SIM_NODE_LABEL,
    SimConfig,
    SimInfo,
    kwok_config,
    node_names,
    read_json,
    zone_of,
)
from hack.simlib.reaper import marked_pids, terminate
from hack.testenv.controlplane import (
    ADMISSION_DIR,
    DEFAULT_CONTROLLERS,
    KWOK_CONTROLLERS,
    REPO_ROOT,
    ControlPlane,
    resolve_bin_dir,
)
from hack.testenv.procs import Component, Process, StartupError, spawn
from hack.testenv.prometheus import Prometheus

RBAC_DIR = REPO_ROOT / "manifests" / "rbac"
FIRST_IMAGE = "os:v1"
KCM_CONTROLLERS = (
    *DEFAULT_CONTROLLERS,
    *KWOK_CONTROLLERS,
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
)
# kwok's Lease renewals can lag on a loaded 2-core machine; the node-lifecycle
# controller would then mark Nodes Unknown and their Pods NotReady for good.
KCM_ARGS = ("--node-monitor-grace-period=10m",)


class SimError(RuntimeError):
    """The simulation could not do what it was asked."""


class SimOps:
    """Operations on a running simulation, given its ``SimInfo``."""

    info: SimInfo

    @property
    def state_dir(self) -> Path:
        return self.info.dir

    @property
    def kubeconfig(self) -> Path:
        return Path(self.info.kubeconfig)

    @property
    def nodes(self) -> list[str]:
        return list(self.info.nodes)

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against the simulation."""
        argv = [
            str(self.info.kubectl),
            f"--kubeconfig={self.info.kubeconfig}",
            f"--cache-dir={self.state_dir / 'kubectl-cache'}",
            *args,
        ]
        res = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise SimError(f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stderr}")
        return res

    def push_image(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """Push a new, distinct image ``NAME[:TAG]`` (``labels`` on its config, e.g.
        ``images.failing_boot()``); returns ``REPO:TAG@sha256:...``."""
        return images.push_image(self.info, name, labels)

    def deploy_workload(self, replicas: int | None = None) -> list[str]:
        """The sample Deployment (spread over nodes and zones) and its PodDisruptionBudget."""
        count = replicas if replicas is not None else len(self.info.nodes)
        docs = workload.manifests(count)
        self.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"kind": "List", "apiVersion": "v1", "items": docs}),
        )
        return [f"{d['kind']}/{d['metadata']['name']}" for d in docs]

    def host(self, node: str) -> Host:
        """The simulated (fake bootc) host of ``node``."""
        found = self.any_host(node)
        if not isinstance(found, Host):
            raise SimError(f"{node} runs on a real-bootc host (hack/sim up --real-bootc)")
        return found

    def any_host(self, node: str) -> hosts.SimHost:
        """``node``'s host, fake or real (``hack.simlib.hosts``)."""
        return hosts.open_host(self.info.host_root(node))

    def booted_image(self, node: str) -> str | None:
        """``repo@digest`` ``node``'s host runs (a real host: what ``bootc status`` says)."""
        booted = hosts.booted(self.any_host(node))
        return None if booted is None else booted.image

    def nodesim_state(self) -> dict[str, Any]:
        return read_json(self.state_dir / NODESIM_FILE) or {}

    def processes(self) -> dict[str, dict[str, Any]]:
        """``controller-1``/``daemon/<node>`` -> {pid, metrics_port, probe_port, restarts, log}."""
        procs = self.nodesim_state().get("processes") or {}
        return dict(procs)

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Signal a controller or daemon (``controller-1``, ``daemon/worker-2``); the node
        simulator restarts it as a Deployment/DaemonSet would. Returns the PID."""
        pid = (self.processes().get(name) or {}).get("pid")
        if not isinstance(pid, int):
            raise SimError(f"{name} is not running")
        os.killpg(pid, sig)
        return pid

    def leader(self) -> str:
        """The leader's identity (``controller-N_<suffix>``), "" when there is none."""
        res = self.kubectl("get", "lease", "-n", NAMESPACE, LEASE_NAME, "-o", "json", check=False)
        if res.returncode != 0:
            return ""
        return str((json.loads(res.stdout).get("spec") or {}).get("holderIdentity") or "")

    def hold(self, node: str, held: bool = True) -> None:
        """While held, ``node`` stays down (NotReady, no daemon) after its next reboot."""
        path = self.state_dir / CONTROL_DIR / f"hold-{node}"
        path.parent.mkdir(exist_ok=True)
        if held:
            path.touch()
        else:
            path.unlink(missing_ok=True)

    def reboots(self) -> list[dict[str, Any]]:
        """Every simulated reboot so far (``node``, ``requested``/``down``/``up`` times,
        ``booted`` image), oldest first."""
        try:
            lines = (self.state_dir / REBOOTS_FILE).read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def log_dirs(self) -> list[Path]:
        return [self.state_dir / "logs", self.state_dir / "controlplane" / "logs"]


class AttachedSim(SimOps):
    """A simulation started elsewhere (``hack/sim up``), found by its state directory."""

    def __init__(self, info: SimInfo) -> None:
        self.info = info

    @classmethod
    def open(cls, state_dir: Path) -> AttachedSim:
        info = SimInfo.load(state_dir)
        if info is None:
            raise SimError(f"no simulation in {state_dir} (start one with: hack/sim up)")
        return cls(info)


class Sim(SimOps, Component):
    """Owner of a simulation (see the module docstring)."""

    def __init__(
        self,
        config: SimConfig | None = None,
        state_dir: Path | None = None,
        *,
        die_with_parent: bool = True,
        use_registry: bool = True,
        log: Any = None,
        kubeconfigs: Callable[[ControlPlane, list[str]], Mapping[str, Path]] | None = None,
    ) -> None:
        """``kubeconfigs(control_plane, processes)``, called once the control plane is up,
        may give processes (``controller-1``, ``daemon/<node>``) kubeconfigs of their own,
        e.g. through a fault proxy (``hack.testenv.faultproxy``)."""
        self.config = config or SimConfig()
        if state_dir is None:
            state_dir = Path(tempfile.mkdtemp(prefix="bootc-sim-"))
        elif (state_dir / SIM_FILE).exists():
            raise SimError(f"{state_dir} already holds a simulation (hack/sim down --dir ...)")
        state_dir.mkdir(parents=True, exist_ok=True)
        self.info = SimInfo(
            state_dir=str(state_dir.resolve()), config=self.config, owner=os.getpid()
        )
        self.die_with_parent = die_with_parent
        self.use_registry = use_registry
        self._kubeconfigs = kubeconfigs
        self.keep = False
        self._log = log
        self.control_plane: ControlPlane | None = None
        self.registry: Any = None  # hack.testenv.registry.Registry
        self.nodesim: Process | None = None
        self.prometheus: Prometheus | None = None
        self._targets: monitoring.TargetSync | None = None
        self._faults = faults.FaultWatch(self.state_dir)
        self._closed = False
        (self.state_dir / "logs").mkdir(exist_ok=True)
        (self.state_dir / "hosts").mkdir(exist_ok=True)
        (self.state_dir / CONTROL_DIR).mkdir(exist_ok=True)
        self.info.save()

    def say(self, msg: str) -> None:
        if self._log is not None:
            self._log(msg)

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float | None = None) -> Self:
        """Bring everything up; on failure clean up and raise."""
        try:
            self._start(timeout)
        except BaseException as exc:
            self.info.error = str(exc)
            with contextlib.suppress(Exception):
                self.info.save()
            self.close()
            raise
        return self

    def _start(self, timeout: float | None) -> None:
        started = time.monotonic()
        cfg = self.config
        refused = hosts.refusal(cfg, registry=bool(cfg.registry) or self.use_registry)
        if refused:
            raise SimError(refused)
        bin_dir = resolve_bin_dir()
        self.info.bin_dir = str(bin_dir)
        self.say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok")
        cp = ControlPlane(
            bin_dir=bin_dir,
            state_dir=self.state_dir / "controlplane",
            admission_dir=ADMISSION_DIR,  # as installed: pull secrets are sealed
            controllers=KCM_CONTROLLERS,
            scheduler=True,
            controller_manager_args=KCM_ARGS,
            audit=cfg.audit,
            die_with_parent=self.die_with_parent,
        )
        self.control_plane = cp
        cp.start()
        kwok_yaml = self.state_dir / "kwok.yaml"
        kwok_yaml.write_text(kwok_config())
        cp.start_kwok(node_label_selector=f"{SIM_NODE_LABEL}=true", config=kwok_yaml)
        self.info.kubeconfig = str(cp.kubeconfig)
        self.info.server = cp.server
        self.info.audit_log = str(cp.audit_log or "")
        self._record_pids()
        cp.kubectl("create", "namespace", NAMESPACE)
        if (RBAC_DIR / "kustomization.yaml").exists():
            res = cp.kubectl("apply", "--server-side", "-k", str(RBAC_DIR), check=False)
            if res.returncode != 0:
                self.say(f"warning: applying {RBAC_DIR} failed (ignored):\n{res.stderr.strip()}")

        if cfg.registry:
            self.say(f"using the OCI registry {cfg.registry} (another simulation's)")
            self.info.registry = cfg.registry
        elif self.use_registry:
            from hack.testenv.registry import Registry  # noqa: PLC0415

            self.say("starting the OCI registry (docker-registry)")
            self.registry = Registry(self.state_dir / "registry").start()
            self.info.registry = str(self.registry.host)
        else:
            self.info.catalog = str(self.state_dir / "catalog.json")
        self._record_pids()
        if cfg.first_image:
            self.info.first_image = cfg.first_image
        else:
            self.info.first_image = self.push_image(FIRST_IMAGE)
            self.say(f"pushed {self.info.first_image}")

        names = node_names(cfg.nodes, cfg.node_prefix)
        self.info.nodes = names
        booted = images.digest_ref(self.info.first_image)
        version = images.tag_of(self.info.first_image) or FIRST_IMAGE.rsplit(":", 1)[-1]
        if cfg.real_bootc:
            self.say(
                f"making {counted(cfg.real_bootc, 'real-bootc host')} "
                f"({', '.join(self.info.real_bootc_nodes)}): the real bootc, built by "
                "hack/build-bootc.sh on first use (cold: about 15 minutes)"
            )
        for i, name in enumerate(names):
            hosts.make(self.info, name, booted, version)
            self.info.zones[name] = zone_of(i)
        if self._kubeconfigs is not None:
            processes = [f"controller-{i}" for i in range(1, cfg.controllers + 1)]
            processes += [f"daemon/{n}" for n in names]
            given = self._kubeconfigs(cp, processes)
            self.info.kubeconfigs = {k: str(v) for k, v in given.items()}
        self.info.save()

        if cfg.prometheus:
            self._launch_prometheus()
        self.say(
            f"starting the node simulator: {counted(cfg.nodes, 'node')}, "
            f"{counted(cfg.controllers, 'controller')}"
        )
        nodesim = self._spawn_nodesim()
        limit = timeout if timeout is not None else 120.0 + 4.0 * cfg.nodes
        deadline = started + limit
        while not self.nodesim_state().get("ready"):
            if not nodesim.alive():
                raise StartupError(
                    f"the node simulator {nodesim.describe_exit()}; last lines of "
                    f"{nodesim.log_path}:\n{nodesim.tail()}"
                )
            if time.monotonic() > deadline:
                raise StartupError(
                    f"timed out after {limit:.0f}s waiting for the node simulator to be ready; "
                    f"last lines of {nodesim.log_path}:\n{nodesim.tail()}"
                )
            time.sleep(0.2)
        if cfg.prometheus:
            self._scrape(deadline)
        self.info.ready = True
        self.info.save()

    def _launch_prometheus(self) -> None:
        """Prometheus with no targets nor rules yet (the controllers get its URL)."""
        self.say("starting Prometheus (the controllers, the managed nodes' daemons, the rules)")
        cp = self.control_plane
        assert cp is not None
        token_file = monitoring.reader_token_file(cp, self.state_dir)
        self.info.metrics_token = str(token_file)
        self.prometheus = monitoring.new_prometheus(
            self.state_dir, token_file, die_with_parent=self.die_with_parent
        ).start()
        self.info.prometheus = self.prometheus.url
        self._record_pids()

    def _scrape(self, deadline: float) -> None:
        """Prometheus' targets synced by a thread; once every target answers, the rules
        loaded (``monitoring.load_rules``: the simulation's start-up is not on its clock)."""
        cp = self.control_plane
        assert cp is not None and self.prometheus is not None
        self._targets = monitoring.TargetSync(
            self.prometheus, self.processes, lambda: monitoring.managed_nodes(cp)
        )
        self._targets.sync_once()
        self._targets.start()
        # Prometheus applies new targets every 5 s: the first scrapes come 5-6 s later.
        deadline = max(deadline, time.monotonic() + 30.0)
        while not monitoring.scraping(
            self.prometheus, self.processes(), monitoring.managed_nodes(cp)
        ):
            if time.monotonic() > deadline:
                raise StartupError(
                    f"Prometheus ({self.prometheus.url}) does not scrape every target; "
                    f"last lines of {self.prometheus.log_path}:\n{self.prometheus.tail()}"
                )
            time.sleep(0.2)
        monitoring.load_rules(self.prometheus)

    def _spawn_nodesim(self) -> Process:
        env = {
            **os.environ,
            MARKER_ENV: str(self.state_dir),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        self.nodesim = spawn(
            "nodesim",
            [sys.executable, "-m", "hack.simlib.nodesim", "--dir", str(self.state_dir)],
            self.state_dir / "logs" / "nodesim.log",
            env=env,
            die_with_parent=self.die_with_parent,
        )
        self._record_pids()
        return self.nodesim

    def ensure_nodesim(self) -> bool:
        """Restart the node simulator if it died (its daemons and controllers died with
        it); True if it had to. The supervisor calls this every second."""
        if self._closed or self.nodesim is None or self.nodesim.alive():
            return False
        self.say(f"the node simulator {self.nodesim.describe_exit()}; restarting it")
        self.nodesim.stop(grace=1.0)  # reap it
        self._spawn_nodesim()
        return True

    def apply_faults(self) -> None:
        """Stop the registry while a ``registry-down`` fault is recorded, start it again
        (same port, same images) once it is not."""
        if self._closed or self.registry is None:
            return
        down = faults.registry_down(self._faults.read())
        if down and self.registry.running:
            self.say("fault registry-down: stopping the registry")
            self.registry.stop()
        elif not down and not self.registry.running:
            self.say("fault registry-down cleared: starting the registry")
            self.registry.start()
            self._record_pids()

    def _record_pids(self) -> None:
        pids: dict[str, int] = dict(self.info.pids)
        if self.control_plane is not None:
            pids.update({n: p.pid for n, p in self.control_plane.processes.items()})
        if self.registry is not None and self.registry.process is not None:
            pids["docker-registry"] = self.registry.process.pid
        if self.nodesim is not None:
            pids["nodesim"] = self.nodesim.pid
        if self.prometheus is not None and self.prometheus.process is not None:
            pids["prometheus"] = self.prometheus.process.pid
        self.info.pids = pids
        self.info.save()

    def close(self) -> None:
        """Stop everything (operator processes first) and remove the state directory."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._targets is not None:
                self._targets.stop()
            if self.prometheus is not None:
                self.prometheus.close()
            if self.nodesim is not None:
                self.nodesim.stop(grace=60.0)
            if self.registry is not None:
                self.registry.close()
            if self.control_plane is not None:
                self.control_plane.close()
            stragglers = marked_pids(self.state_dir)
            if stragglers:
                terminate(stragglers, grace=2.0)
        finally:
            if not self.keep:
                hosts.release(self.state_dir)
                shutil.rmtree(self.state_dir, ignore_errors=True)
