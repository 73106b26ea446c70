"""What every part of the simulation shares: configuration, the persisted info, file names.

A simulation lives in one state directory (``DIR``)::

    DIR/sim.json            SimInfo: addresses, paths, node names, PIDs (written by the owner)
    DIR/nodesim.json        the node simulator's view: its PID, every daemon/controller
                            process (PID, ports, restarts), nodes currently rebooting
    DIR/reboots.jsonl       one line per simulated reboot (node, times, image booted)
    DIR/control/            files other processes drop to steer the node simulator
                            (``hold-<node>``: the node stays down after its next reboot)
                            and ``faults.json``, the faults ``hack/sim fault`` applied
                            (``hack.simlib.faults``)
    DIR/controlplane/       the ControlPlane's state (PKI, etcd, kubeconfigs, its logs)
    DIR/registry/           the OCI registry's storage and config
    DIR/hosts/<node>/       one bootc host per node (hack.simlib.hosts: hack.fakebootc, or
                            hack.realbootc for the first ``real_bootc`` nodes)
    DIR/logs/               supervisor, node simulator, daemons, controllers
    DIR/kwok.yaml           kwok's configuration (see ``kwok_config``)
    DIR/prometheus/         with ``--prometheus``: its configuration, scrape targets,
                            rules, TSDB and log (``hack.simlib.monitoring``)

Every process the simulation starts carries ``BOOTC_SIM_DIR=DIR`` in its environment
(inherited by their children too), which is how a teardown finds stragglers.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hack.testenv.controlplane import REPO_ROOT

DEFAULT_DIR = REPO_ROOT / ".cache" / "sim"
SIM_FILE = "sim.json"
NODESIM_FILE = "nodesim.json"
REBOOTS_FILE = "reboots.jsonl"
CONTROL_DIR = "control"
#: every process of a simulation has this in its environment (value: the state dir)
MARKER_ENV = "BOOTC_SIM_DIR"

NAMESPACE = "bootc-operator"
LEASE_NAME = "bootc-operator-controller"
#: kwok manages (runs the pods of, renews the Leases of) Nodes with this label
SIM_NODE_LABEL = "sim.bootc.dev/node"
WORKER_LABEL = "node-role.kubernetes.io/worker"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONES = ("zone-a", "zone-b", "zone-c")
IMAGE_REPOSITORY = "bootc/os"


def node_names(count: int, prefix: str = "worker") -> list[str]:
    """``worker-1`` … zero-padded so that names sort like numbers (``worker-01``…``worker-50``)."""
    width = len(str(count))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, count + 1)]


def zone_of(index: int) -> str:
    """Round-robin zone of the ``index``-th node (0-based)."""
    return ZONES[index % len(ZONES)]


@dataclass(frozen=True)
class SimConfig:
    """What ``hack/sim up`` is asked for."""

    nodes: int = 3
    #: how long a rebooting Node stays NotReady
    reboot_seconds: float = 5.0
    #: how long a soft-rebooting Node stays NotReady (userspace only; None: a quarter
    #: of ``reboot_seconds``, ``hack.testenv.machine.SOFT_DOWN_FRACTION``)
    soft_reboot_seconds: float | None = None
    #: how long ``bootc switch`` takes on each simulated host (pull + stage)
    stage_seconds: float = 1.0
    #: how long after each boot the host reaches boot-complete.target (or its boot
    #: assessment fails, for an image labelled so: ``hack.fakebootc.boot``)
    boot_complete_delay: float = 0.0
    #: controller processes (leader-elected)
    controllers: int = 2
    #: each daemon's --poll-interval (inotify catches the changes that matter)
    poll_interval: str = "5m"
    node_prefix: str = "worker"
    #: log level of the operator's processes
    log_level: str = "info"
    #: the controllers' --tag-resolution-interval (how soon a moved tag is noticed)
    tag_resolution_interval: str = "30s"
    #: a PEM bundle the controllers trust when resolving tags (--registry-ca-file), for
    #: a TLS registry besides the simulation's own (which is plain HTTP and listed insecure)
    registry_ca_file: str = ""
    #: also run a Prometheus scraping the controllers and daemons, with the kit's alert
    #: rules on the simulation's clock (``hack.simlib.monitoring``)
    prometheus: bool = False
    #: the controllers' --alert-check-interval (with ``prometheus``, whose URL they are
    #: given as --prometheus-url: the alert gate queries the simulation's Prometheus)
    alert_check_interval: str = "2s"
    #: kube-apiserver writes an audit log (``hack.testenv.audit``; ``SimInfo.audit_log``)
    audit: bool = False
    #: the daemons run with --enforce-container-sigpolicy (the hosts' containers policy:
    #: ``hack/fake-host policy DIR/hosts/<node> FILE``)
    enforce_container_sigpolicy: bool = False
    #: ``host:port`` of a registry another simulation runs: this one starts none and its
    #: nodes pull from that one (``hack/sim up --clusters N``: one registry per fleet)
    registry: str = ""
    #: the image the nodes boot first (``REPO:TAG@sha256:...`` in ``registry``); none:
    #: ``os:v1`` is pushed
    first_image: str = ""
    #: how many nodes (the first ones) run on real-bootc hosts (``hack.simlib.hosts``:
    #: the real bootc and libostree; needs root and the registry)
    real_bootc: int = 0
    #: the controllers' leader election (--lease-duration, --renew-deadline, --retry-period)
    lease_duration: str = "4s"
    renew_deadline: str = "3s"
    retry_period: str = "1s"


@dataclass
class SimInfo:
    """Everything needed to talk to a running simulation; persisted as ``DIR/sim.json``."""

    state_dir: str
    config: SimConfig
    #: PID of the process that owns the simulation (supervisor or a test process)
    owner: int
    kubeconfig: str = ""
    server: str = ""
    bin_dir: str = ""
    #: ``host:port`` of the OCI registry ("" when images come from a catalog)
    registry: str = ""
    #: the repository images are pushed to, e.g. ``127.0.0.1:5000/bootc/os``
    repository: str = ""
    #: a catalog file the hosts resolve images from (when there is no registry)
    catalog: str = ""
    first_image: str = ""
    #: the URL of the simulation's Prometheus ("" when it runs none)
    prometheus: str = ""
    #: a file with the token Prometheus scrapes /metrics with (a ServiceAccount bound
    #: to bootc-operator-metrics-reader; "" without Prometheus)
    metrics_token: str = ""
    #: the apiserver's audit log ("" without ``SimConfig.audit``)
    audit_log: str = ""
    #: a kubeconfig per process (``controller-1``, ``daemon/worker-1``) that does not
    #: use ``kubeconfig``, e.g. one through a fault proxy (``Sim(kubeconfigs=...)``)
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    zones: dict[str, str] = field(default_factory=dict)
    #: name -> PID of the processes the owner started directly
    pids: dict[str, int] = field(default_factory=dict)
    ready: bool = False
    error: str = ""

    @property
    def dir(self) -> Path:
        return Path(self.state_dir)

    @property
    def kubectl(self) -> Path:
        return Path(self.bin_dir) / "kubectl"

    def kubeconfig_of(self, process: str) -> str:
        """The kubeconfig process ``process`` (``controller-1``, ``daemon/<node>``) uses."""
        return self.kubeconfigs.get(process) or self.kubeconfig

    @property
    def real_bootc_nodes(self) -> list[str]:
        """The nodes on real-bootc hosts: the first ``config.real_bootc``."""
        return self.nodes[: self.config.real_bootc]

    def host_root(self, node: str) -> Path:
        return self.dir / "hosts" / node

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SimInfo:
        data = dict(doc)
        data["config"] = SimConfig(**data.get("config", {}))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self) -> None:
        write_json(self.dir / SIM_FILE, self.to_dict())

    @classmethod
    def load(cls, state_dir: Path) -> SimInfo | None:
        doc = read_json(state_dir / SIM_FILE)
        return None if doc is None else cls.from_dict(doc)


def write_json(path: Path, doc: Any) -> None:
    """Replace ``path`` atomically with ``doc`` as JSON."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when it does not exist or is not (yet) valid."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        return json.loads(path.read_text())
    return None


def kwok_config() -> str:
    """kwok's configuration: default Pod stages, *no* Node stages of its own.

    kwok replaces its built-in Node stages by the Node stages of its config. One
    that never matches means kwok never writes Node status: the node simulator owns
    the Ready condition (and capacity, addresses, nodeInfo), so it can hold a Node
    NotReady through a reboot without kwok turning it Ready again. kwok still runs
    the Pods bound to its Nodes and renews their Leases (which keeps the
    node-lifecycle controller from marking them Unknown).
    """
    return """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: 40
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: sim-node-status-owned-by-the-node-simulator
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.metadata.annotations["sim.bootc.dev/never"]'
      operator: 'In'
      values: ['never']
  next:
    statusTemplate: ""
"""
