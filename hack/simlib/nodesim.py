"""The node simulator: the kubelets and the power buttons of a simulated cluster.

``python -m hack.simlib.nodesim --dir DIR`` reads ``DIR/sim.json`` and then, until
SIGTERM:

- **owns the Nodes' status.** It creates every Node (labels: worker role, zone,
  hostname, ``sim.bootc.dev/node``) and writes its status like a kubelet would:
  ``Ready`` (plus the pressure conditions), capacity, addresses and ``nodeInfo``
  (``osImage`` names the booted image, ``kernelVersion`` its kernel; ``bootID`` is the
  host's kernel boot ID: new after a full reboot, kept by a soft one). kwok
  runs the Pods bound to these Nodes and renews their Leases but, by its
  configuration (``common.kwok_config``), never writes Node status, so a Node this
  process marks NotReady stays NotReady;
- **runs the operator's processes like a Deployment and a DaemonSet would**: K
  leader-elected ``bootc-operator controller`` processes (the simulation's registry
  listed with ``--insecure-registry``, so tag refs resolve; ``SimConfig`` sets the tag
  resolution interval and an extra CA; with a Prometheus, its URL as
  ``--prometheus-url``) and one ``bootc-operator
  daemon`` per node on its host (``DIR/hosts/<node>``), restarting any
  that exits unexpectedly (1 s, doubling up to 10 s, like a crash-loop backoff);
- **powers the real-bootc hosts** (``hack/sim up --real-bootc N``, ``hack.simlib.hosts``):
  boots them at its start (their PID 1 is its child and dies with it), runs their
  daemons as on a node (``--host-root /proc/PID/root``, nsenter into that PID 1: the
  real ``bootc`` there pulls from the simulation's registry), ends them at its end;
- **performs the reboots the daemons request** (``systemctl reboot`` on a simulated
  host records a reboot request in the host's state; a daemon allowed to soft-reboot
  applies a userspace-only update with ``bootc ... --apply --soft-reboot=required``),
  as ``hack.testenv.machine`` does for every real daemon of the kit: daemon stopped
  (SIGTERM, as at shutdown) → Node ``Ready=False`` → ``reboot_seconds`` later
  (``soft_reboot_seconds`` for a soft reboot; longer while ``DIR/control/hold-<node>``
  exists) the host reboots (staged → booted, see
  ``hack.fakebootc.host.simulate_reboot``; a real host: ``ostree admin
  finalize-staged`` and the new deployment booted) → Node ``Ready=True`` (a new bootID after a
  full reboot) → daemon started. Each reboot is appended to ``DIR/reboots.jsonl``
  (``kind``: "full" or "soft");
- **re-reports Pod readiness as a kubelet's status sync would**: the node-lifecycle
  controller marks a Pod bound to a Node it still believes NotReady (up to 5 s after
  a reboot) NotReady, kwok never sets it Ready again, and the Pod would hold its
  PodDisruptionBudget at 0 disruptions allowed, stalling every later drain. A
  running Pod with ready containers on an up Node gets Ready=True back
  (``hack.testenv.kubelet.pod_ready_again``), at most once a second per Pod;
- **plays a kubelet that never gets Ready** on a node with a ``not-ready`` fault
  (``hack.simlib.faults``, ``hack/sim fault not-ready NODE``; ``DIR/control/faults.json``
  is re-read whenever it changes): from its next reboot on, the host boots and its
  daemon starts, but the Node stays ``Ready=False`` and its Pods are not reported
  Ready, until the fault is cleared; then the Node turns Ready and its Pods are
  reported again.

Its children get SIGKILL if it dies (PR_SET_PDEATHSIG). ``DIR/nodesim.json`` lists
every process it runs (PID, ports, restarts), the nodes that are down and those a
``not-ready`` fault holds NotReady (``not_ready``); it says
``"ready": true`` once every Node is Ready, every daemon answers ``/healthz`` and a
controller holds the leader Lease.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers import EventHandler, Informer, Obj, object_key
from bootc_operator.kube import (
    LEASES,
    NODES,
    PODS,
    ApiError,
    create_object,
    get_object,
    patch_object,
)
from bootc_operator.wording import counted
from hack.simlib import hosts
from hack.simlib.common import (
    CONTROL_DIR,
    HOSTNAME_LABEL,
    LEASE_NAME,
    NAMESPACE,
    NODESIM_FILE,
    REBOOTS_FILE,
    SIM_NODE_LABEL,
    WORKER_LABEL,
    ZONE_LABEL,
    SimInfo,
    read_json,
    write_json,
)
from hack.simlib.faults import FaultWatch, not_ready_nodes
from hack.testenv.controlplane import free_port
from hack.testenv.kube import api_client
from hack.testenv.kubelet import node_conditions, pod_ready_again, report_pods_after_boot
from hack.testenv.machine import RebootRequests, reboot
from hack.testenv.procs import Process, kill_group, spawn

log = logging.getLogger("nodesim")

OPERATOR_BIN = Path(sys.executable).with_name("bootc-operator")
TICK = 0.2
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
STOP_GRACE = 10.0
POD_STATUS_SYNC = 1.0  # seconds between two Ready re-reports of one Pod
NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkPluginNotReady "
    "(simulated: hack/sim fault not-ready; clear it with hack/sim fault clear not-ready NODE)"
)


@dataclass
class Slot:
    """One supervised process: what to run, and the current incarnation."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    metrics_port: int
    probe_port: int
    #: flags computed at each start (a real-bootc host's PID 1 is new every boot)
    late_flags: Callable[[], list[str]] | None = None
    process: Process | None = None
    wanted: bool = True
    restarts: int = 0
    backoff: float = BACKOFF_INITIAL
    next_start: float = 0.0
    started_at: float = 0.0

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def new_ports(self) -> None:
        """Fresh metrics/probe ports: after a crash, the old ones may have been taken
        (``free_port`` only says a port was free when asked), and would fail every
        restart the same way."""
        self.metrics_port, self.probe_port = free_port(), free_port()
        flags = {
            "--metrics-bind-address": self.metrics_port,
            "--health-probe-bind-address": self.probe_port,
        }
        for i, arg in enumerate(self.argv):
            flag = arg.split("=", 1)[0]
            if flag in flags:
                self.argv[i] = f"{flag}=127.0.0.1:{flags[flag]}"

    def describe(self) -> dict[str, Any]:
        return {
            "pid": self.process.pid if self.alive() and self.process else None,
            "metrics_port": self.metrics_port,
            "probe_port": self.probe_port,
            "restarts": self.restarts,
            "log": str(self.log_path),
        }


@dataclass
class NodeState:
    name: str
    index: int
    zone: str
    host: hosts.SimHost
    daemon: Slot
    rebooting: bool = False
    #: what the host booted, as last known (a real host's ``bootc status`` may not answer)
    booted: hosts.BootedInfo | None = None
    #: came back from a reboot under a not-ready fault: its Node stays NotReady
    stuck: bool = False


class NodeSim:
    """See the module docstring."""

    def __init__(self, info: SimInfo) -> None:
        self.info = info
        self.dir = info.dir
        self.cfg = info.config
        self.log_dir = self.dir / "logs"
        self.control = self.dir / CONTROL_DIR
        self.env = dict(os.environ)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.pop("KUBECONFIG", None)
        self.controllers = [self._controller_slot(i) for i in range(1, self.cfg.controllers + 1)]
        self.nodes: dict[str, NodeState] = {}
        for index, name in enumerate(info.nodes):
            host = hosts.open_host(info.host_root(name))
            self.nodes[name] = NodeState(
                name, index, info.zones.get(name, ""), host, self._daemon_slot(name, host)
            )
        self.ready = False
        self.stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._dirty = True
        self._api: ApiClient | None = None
        self._requests = RebootRequests()
        self._pods: Informer | None = None
        self._pod_syncs: set[str] = set()  # Pods whose Ready is being re-reported
        self._faults = FaultWatch(self.dir)
        # a restarted node simulator keeps holding what its predecessor held NotReady
        before = read_json(self.dir / NODESIM_FILE) or {}
        held = set(before.get("not_ready") or ()) & not_ready_nodes(self._faults.read())
        for name in held & set(self.nodes):
            self.nodes[name].stuck = True

    # ------------------------------------------------------------ process slots

    def _controller_slot(self, i: int) -> Slot:
        name = f"controller-{i}"
        metrics, probe = free_port(), free_port()
        argv = [
            str(OPERATOR_BIN),
            "controller",
            f"--kubeconfig={self.info.kubeconfig_of(name)}",
            "--leader-elect",
            f"--lease-duration={self.cfg.lease_duration}",
            f"--renew-deadline={self.cfg.renew_deadline}",
            f"--retry-period={self.cfg.retry_period}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--log-level={self.cfg.log_level}",
            f"--tag-resolution-interval={self.cfg.tag_resolution_interval}",
        ]
        if self.info.registry:  # plain HTTP on loopback: tag refs need it listed
            argv.append(f"--insecure-registry={self.info.registry}")
        if self.cfg.registry_ca_file:
            argv.append(f"--registry-ca-file={self.cfg.registry_ca_file}")
        if self.info.prometheus:  # the alert gate asks the simulation's Prometheus
            argv.append(f"--prometheus-url={self.info.prometheus}")
            argv.append(f"--alert-check-interval={self.cfg.alert_check_interval}")
        env = {**self.env, "POD_NAME": name, "POD_NAMESPACE": NAMESPACE}
        return Slot(name, argv, env, self.log_dir / f"{name}.log", metrics, probe)

    def _daemon_slot(self, node: str, host: hosts.SimHost) -> Slot:
        metrics, probe = free_port(), free_port()
        argv = [
            str(OPERATOR_BIN),
            "daemon",
            f"--node-name={node}",
            f"--kubeconfig={self.info.kubeconfig_of(f'daemon/{node}')}",
            f"--poll-interval={self.cfg.poll_interval}",
            "--backoff-initial=2s",
            "--backoff-max=30s",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--log-level={self.cfg.log_level}",
            *(["--enforce-container-sigpolicy"] if self.cfg.enforce_container_sigpolicy else []),
        ]
        env = host.env(self.env)
        return Slot(
            f"daemon/{node}",
            argv,
            env,
            self.log_dir / f"daemon-{node}.log",
            metrics,
            probe,
            late_flags=lambda: hosts.daemon_flags(host),
        )

    def _start(self, slot: Slot) -> None:
        argv = [*slot.argv, *(slot.late_flags() if slot.late_flags is not None else ())]
        slot.process = spawn(slot.name, argv, slot.log_path, env=slot.env)
        slot.started_at = time.monotonic()
        self._dirty = True

    def _supervise(self, slot: Slot) -> None:
        """Start ``slot`` if it should run and does not (restarting with backoff)."""
        if not slot.wanted or slot.alive():
            return
        now = time.monotonic()
        if slot.process is not None:  # it died on its own
            exit_text = slot.process.describe_exit()
            slot.process = None
            lived = now - slot.started_at
            slot.backoff = BACKOFF_INITIAL if lived > 30 else min(slot.backoff * 2, BACKOFF_MAX)
            slot.next_start = now + slot.backoff
            slot.restarts += 1
            slot.new_ports()
            log.warning("%s %s; restarting in %.0fs", slot.name, exit_text, slot.backoff)
            self._dirty = True
            return
        if now >= slot.next_start:
            self._start(slot)

    async def _stop_slot(self, slot: Slot) -> None:
        slot.wanted = False
        process, slot.process = slot.process, None
        if process is not None:
            await asyncio.to_thread(process.stop, STOP_GRACE)
        self._dirty = True

    # ------------------------------------------------------------ Node objects

    def _node_body(self, node: NodeState) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": {
                    SIM_NODE_LABEL: "true",
                    WORKER_LABEL: "",
                    ZONE_LABEL: node.zone,
                    HOSTNAME_LABEL: node.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
        }

    def _node_status(self, node: NodeState, ready: bool, message: str) -> dict[str, Any]:
        node.booted = hosts.booted(node.host) or node.booted
        booted = node.booted or hosts.BootedInfo("unknown", "unknown", "unknown")
        kind = "real bootc" if node.name in self.info.real_bootc_nodes else "simulated"
        return {
            "conditions": node_conditions(ready, message),
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "addresses": [
                {
                    "type": "InternalIP",
                    "address": f"10.88.{node.index // 250}.{node.index % 250 + 2}",
                },
                {"type": "Hostname", "address": node.name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": f"bootc {booted.version} ({kind})",
                "kernelVersion": booted.kernel,
                "kubeletVersion": "v1.36.3-sim",
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "kwok://0.7.0",
                "bootID": node.host.boot_id,
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, node.name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, node.name)),
            },
        }

    async def _patch_status(self, node: NodeState, ready: bool, message: str) -> None:
        assert self._api is not None
        # a real host's booted image is what `bootc status` says: not on the loop
        body = {"status": await asyncio.to_thread(self._node_status, node, ready, message)}
        delay = 0.2
        while True:
            try:
                await patch_object(
                    self._api, NODES, node.name, body, patch_type="strategic", subresource="status"
                )
                return
            except ApiError as err:
                log.warning("patching Node %s status: %s; retrying", node.name, err)
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                log.warning("patching Node %s status: %r; retrying", node.name, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _ensure_node(self, node: NodeState) -> None:
        assert self._api is not None
        try:
            await create_object(self._api, NODES, self._node_body(node))
        except ApiError as err:
            if err.status != 409:
                raise
        if node.stuck:
            await self._patch_status(node, False, NOT_READY_MESSAGE)
        else:
            await self._patch_status(node, True, "kubelet is posting ready status (simulated)")

    # ------------------------------------------------------------ reboots

    def held(self, node: str) -> bool:
        return (self.control / f"hold-{node}").exists()

    async def _set_ready(self, node: NodeState, ready: bool) -> None:
        if not ready:
            await self._patch_status(node, False, "node is rebooting (simulated)")
            return
        if node.name in not_ready_nodes(self._faults.read()):
            node.stuck = True
            self._dirty = True
            log.info("%s: booted, held NotReady by a not-ready fault", node.name)
            await self._patch_status(node, False, NOT_READY_MESSAGE)
            return
        if node.stuck:  # cleared while it rebooted
            node.stuck = False
            self._dirty = True
        # the bootID is the host's: new after a full reboot, the same after a soft one
        await self._patch_status(node, True, "kubelet is posting ready status (simulated)")

    async def _start_daemon(self, node: NodeState) -> None:
        node.daemon.wanted = True
        node.daemon.backoff = BACKOFF_INITIAL
        node.daemon.next_start = 0.0
        self._start(node.daemon)

    async def _report_pods(self, node: NodeState) -> None:
        """kwok leaves a Ready pod as it was: report it Ready again, as of now."""
        assert self._api is not None
        if node.stuck:  # a kubelet that is not Ready reports no Pod Ready
            return
        try:
            await report_pods_after_boot(self._api, node.name)
        except (ApiError, OSError, TimeoutError) as err:
            log.warning("%s: re-reporting its pods after the reboot: %s", node.name, err)

    async def _unstick(self, node: NodeState) -> None:
        """The not-ready fault was cleared: the Node turns Ready, its Pods are reported."""
        log.info("%s: not-ready fault cleared; Ready again", node.name)
        await self._patch_status(node, True, "kubelet is posting ready status (simulated)")
        await self._report_pods(node)
        self._pods_back_up(node.name)

    async def _reboot(self, node: NodeState) -> None:
        log.info("%s: reboot requested; stopping its daemon", node.name)
        done = await reboot(
            node.name,
            node.host,
            stop_daemon=lambda: self._stop_slot(node.daemon),
            set_ready=lambda ready: self._set_ready(node, ready),
            start_daemon=lambda: self._start_daemon(node),
            report_pods=lambda: self._report_pods(node),
            down_seconds=self.cfg.reboot_seconds,
            soft_down_seconds=self.cfg.soft_reboot_seconds,
            held=lambda: self.held(node.name),
        )
        self._requests.forget(node.host)
        node.rebooting = False
        self._pods_back_up(node.name)
        # The state file first, then the record: whoever sees the reboot recorded also
        # sees the node up in the state file (its daemon's pid, a not-ready hold), not a
        # state from mid-reboot that the main loop would rewrite only at its next tick.
        self._write_state()
        with (self.dir / REBOOTS_FILE).open("a") as f:
            f.write(json.dumps(done.record()) + "\n")
        log.info(
            "%s: back up on %s after %.1fs (%s reboot)",
            node.name,
            done.booted,
            done.up - done.requested,
            done.kind,
        )
        self._dirty = True

    def _spawn_task(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ Pod readiness

    def _watch_pods(self) -> None:
        assert self._api is not None
        self._pods = Informer(self._api, PODS, log=log)
        self._pods.add_event_handler(
            EventHandler(on_add=self._pod_changed, on_update=lambda _o, new: self._pod_changed(new))
        )
        self._pods.start()

    def _pod_changed(self, pod: Obj) -> None:
        node = self.nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if node is None or node.rebooting or node.stuck or pod_ready_again(pod) is None:
            return
        key = object_key(pod)
        if key not in self._pod_syncs:
            self._pod_syncs.add(key)
            self._spawn_task(self._sync_pod_ready(key, node))

    def _pods_back_up(self, node: str) -> None:
        """A node is up again: its Pods marked NotReady meanwhile get Ready back."""
        for pod in self._pods.list() if self._pods is not None else ():
            if (pod.get("spec") or {}).get("nodeName") == node:
                self._pod_changed(pod)

    async def _sync_pod_ready(self, key: str, node: NodeState) -> None:
        assert self._api is not None and self._pods is not None
        namespace, name = key.split("/", 1)
        try:
            # The node-lifecycle controller may mark it again until it looks at the
            # Node afresh: re-read and re-report until the Pod stays Ready.
            while not (node.rebooting or node.stuck) and (pod := self._pods.get(key)) is not None:
                patch = pod_ready_again(pod)
                if patch is None:
                    return
                log.info(
                    "%s on %s: marked NotReady, its containers ready: Ready again", key, node.name
                )
                try:
                    await patch_object(
                        self._api,
                        PODS,
                        name,
                        patch,
                        namespace,
                        patch_type="strategic",
                        subresource="status",
                    )
                except ApiError as err:
                    if err.not_found:
                        return
                    log.warning("patching Pod %s status: %s; retrying", key, err)
                except (TimeoutError, aiohttp.ClientError, OSError) as err:
                    log.warning("patching Pod %s status: %r; retrying", key, err)
                await asyncio.sleep(POD_STATUS_SYNC)
        finally:
            self._pod_syncs.discard(key)

    # ------------------------------------------------------------ readiness

    async def _healthy(self, session: aiohttp.ClientSession, slot: Slot) -> bool:
        try:
            async with session.get(f"http://127.0.0.1:{slot.probe_port}/healthz") as resp:
                return resp.status == 200
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    async def _has_leader(self) -> bool:
        assert self._api is not None
        try:
            lease = await get_object(self._api, LEASES, LEASE_NAME, NAMESPACE)
        except ApiError:
            return False
        return bool((lease.get("spec") or {}).get("holderIdentity"))

    async def _wait_ready(self) -> None:
        timeout = aiohttp.ClientTimeout(total=2)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            pending = [n.daemon for n in self.nodes.values()]
            while pending and not self.stopping.is_set():
                results = await asyncio.gather(*(self._healthy(session, s) for s in pending))
                pending = [s for s, ok in zip(pending, results, strict=True) if not ok]
                if pending:
                    await asyncio.sleep(0.5)
        while self.controllers and not await self._has_leader():
            if self.stopping.is_set():
                return
            await asyncio.sleep(0.3)
        self.ready = True
        self._dirty = True
        log.info(
            "ready: %s, %s",
            counted(len(self.nodes), "node"),
            counted(len(self.controllers), "controller"),
        )

    # ------------------------------------------------------------ state file

    def _write_state(self) -> None:
        processes = {s.name: s.describe() for s in self.controllers}
        processes.update({n.daemon.name: n.daemon.describe() for n in self.nodes.values()})
        write_json(
            self.dir / NODESIM_FILE,
            {
                "pid": os.getpid(),
                "ready": self.ready,
                "processes": processes,
                "down": sorted(n.name for n in self.nodes.values() if n.rebooting),
                "not_ready": sorted(n.name for n in self.nodes.values() if n.stuck),
            },
        )
        self._dirty = False

    # ------------------------------------------------------------ main

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        self.control.mkdir(exist_ok=True)
        self._api = await api_client(self.info.kubeconfig)
        try:
            limit = asyncio.Semaphore(8)

            async def ensure(node: NodeState) -> None:
                async with limit:
                    await self._ensure_node(node)

            real = [n for n in self.nodes.values() if n.name in self.info.real_bootc_nodes]
            await asyncio.gather(*(asyncio.to_thread(hosts.power_on, n.host) for n in real))
            if real:
                log.info(
                    "booted %s", ", ".join(f"{n.name}: {hosts.describe(n.host)}" for n in real)
                )
            await asyncio.gather(*(ensure(n) for n in self.nodes.values()))
            log.info("%d Nodes Ready", len(self.nodes))
            self._watch_pods()
            for slot in self.controllers:
                self._start(slot)
            for node in self.nodes.values():
                self._start(node.daemon)
                self._requests.forget(node.host)
            self._write_state()
            self._spawn_task(self._wait_ready())
            while not self.stopping.is_set():
                for slot in self.controllers:
                    self._supervise(slot)
                held = not_ready_nodes(self._faults.read())
                for node in self.nodes.values():
                    if node.stuck and not node.rebooting and node.name not in held:
                        node.stuck = False
                        self._dirty = True
                        self._spawn_task(self._unstick(node))
                for node in self.nodes.values():
                    if node.rebooting:
                        continue
                    if self._requests.asked(node.host):
                        node.rebooting = True
                        self._dirty = True
                        self._spawn_task(self._reboot(node))
                    else:
                        self._supervise(node.daemon)
                if self._dirty:
                    self._write_state()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), TICK)
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        log.info("stopping")
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._pods is not None:
            await self._pods.stop()
        slots = [*self.controllers, *(n.daemon for n in self.nodes.values())]
        procs = [s.process for s in slots if s.process is not None]
        for slot in slots:
            slot.wanted = False
            slot.process = None
        await asyncio.to_thread(_stop_all, procs)
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                await asyncio.to_thread(hosts.power_off, node.host)
        self._write_state()
        if self._api is not None:
            await self._api.close()


def _stop_all(procs: list[Process]) -> None:
    """SIGTERM every process group at once, then wait (SIGKILL stragglers)."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while any(p.alive() for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    for proc in procs:
        kill_group(proc.pid, 0.0, proc.popen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.simlib.nodesim")
    parser.add_argument("--dir", type=Path, required=True, help="the simulation's state dir")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    info = SimInfo.load(args.dir.resolve())
    if info is None:
        print(f"nodesim: no simulation in {args.dir}", file=sys.stderr)
        return 1
    asyncio.run(NodeSim(info).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
