"""A real Kubernetes control plane on loopback for e2e tests and ``hack/controlplane``.

This module owns the lifecycle of etcd, kube-apiserver, kube-controller-manager
and, on request, kube-scheduler and kwok: free ports, generated PKI,
kubeconfigs, readiness checks with deadlines, CRD installation, and teardown
that always kills every process and removes the state directory (``close()``,
the context manager, and an ``atexit`` hook; children also die with the
harness process through ``PR_SET_PDEATHSIG``).

It is synchronous (subprocess + urllib) so that it works from a plain CLI and
from sync pytest fixtures alike; async tests call the slow methods through
``asyncio.to_thread``. It is not thread-safe: one call at a time. Processes
started from a thread other than the main thread are not tied to the harness
process by PDEATHSIG (a worker thread may exit any time); ``close()`` and the
``atexit`` hook still kill them.

Contract other code relies on (keep these names): attributes ``kubeconfig``,
``server``, ``etcd_endpoint``, ``bin_dir``, ``state_dir``, ``log_dir``,
``processes``; methods ``start()``/``close()`` (and ``with``), ``detach()``,
``stop_apiserver()``/``start_apiserver()``, ``compact_etcd()``, ``kubectl()``,
``install_crds()``, ``start_controller_manager()``/``stop_controller_manager()``,
``start_scheduler()``/``stop_scheduler()``, ``start_kwok()``/``stop_kwok()``,
``log_path()``.
"""

from __future__ import annotations

import atexit
import base64
import collections
import contextlib
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from hack.testenv import audit, certs
from hack.testenv.procs import (
    Component,
    Process,
    StartupError,
    cmdline,
    log_tail,
    pid_alive,
    spawn,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CRD_DIR = REPO_ROOT / "manifests" / "crd"
#: the daemons' node-scope admission policy (without it the controller seals no pull secret)
ADMISSION_DIR = REPO_ROOT / "manifests" / "admission"
BIN_DIR_ENV = "BOOTC_OPERATOR_BIN_DIR"
KEEP_STATE_ENV = "BOOTC_OPERATOR_KEEP_STATE"

# Enough for real ownerReference garbage collection and namespace deletion, plus
# the ServiceAccount machinery pods and TokenRequest users expect.
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
)
# kwok's Nodes keep the node.kubernetes.io/not-ready taint (so nothing schedules
# there) unless the node-lifecycle controller removes it once kwok reports Ready.
KWOK_CONTROLLERS: tuple[str, ...] = ("node-lifecycle-controller",)
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
STATE_FILE = "state.json"
TEMP_PREFIX = "bootc-controlplane-"
FIELD_MANAGER = "bootc-operator-testenv"
# The order components are stopped in (dependants first).
STOP_ORDER = ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class ControlPlaneError(RuntimeError):
    """Something the control plane was asked to do failed."""


_HANDED_OUT: set[int] = set()
#: private, seeded from the OS: tests that seed the global ``random`` must not make
#: two processes pick the same ports
_PICK = random.Random()
#: how long a claim (below) outlives its hand-out (the child binds the port long before),
#: and how many a process holds at most (each is a file descriptor)
CLAIM_SECONDS = 60.0
MAX_CLAIMS = 256
_CLAIMS: collections.deque[tuple[float, socket.socket]] = collections.deque()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ``bind(0)`` and outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def claim_name(port: int) -> str:
    """The abstract Unix socket name of a claim on ``port``."""
    return f"\0bootc-operator-testenv-port-{port}"


def claim_port(port: int) -> bool:
    """Claim ``port`` among all the processes on this machine (its network namespace),
    for :data:`CLAIM_SECONDS`: False when another process holds the claim.

    A claim is an abstract Unix socket named after the port: the kernel keeps the
    name unique and frees it when the socket is closed or its process dies, so
    parallel test workers (pytest-xdist) and other checkouts' test runs never hand
    out the same port at once, with no file left behind.
    """
    now = time.monotonic()
    while _CLAIMS and (_CLAIMS[0][0] < now - CLAIM_SECONDS or len(_CLAIMS) >= MAX_CLAIMS):
        _CLAIMS.popleft()[1].close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(claim_name(port))
    except OSError:
        sock.close()
        return False
    _CLAIMS.append((now, sock))
    return True


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1, never one this process handed out before,
    nor one another process's ``free_port`` handed out in the last minutes.

    Picked at random *below* the kernel's ephemeral range, where neither ``bind(0)`` nor
    an outgoing connection (of this or any other process on the machine) lands: a port
    from ``bind(0)`` could be taken by such a connection between the hand-out and the
    child's bind, and a daemon once died with "address already in use". Another test
    process picking the same port in that window is ruled out by a claim
    (:func:`claim_port`). Falls back to ``bind(0)`` where the ephemeral range leaves no
    room below it.
    """
    low, _ = _ephemeral_range()
    floor = 10000
    if low - floor >= 1000:
        for _ in range(200):
            port = _PICK.randrange(floor, low)
            if port not in _HANDED_OUT and _bindable(port) and claim_port(port):
                _HANDED_OUT.add(port)
                return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT and claim_port(port):
            _HANDED_OUT.add(port)
            return port


def cached_tool(env: str, script: str) -> Path:
    """``$env`` (``hack/test.sh`` exports it), else what ``hack/<script>`` builds and
    caches, printed as its last line (built on first use: minutes on a cold cache)."""
    if path := os.environ.get(env):
        return Path(path)
    res = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / script)],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if res.returncode != 0:
        raise RuntimeError(f"hack/{script} failed ({res.returncode}):\n{res.stderr[-4000:]}")
    return Path(res.stdout.strip().splitlines()[-1])


def resolve_bin_dir() -> Path:
    """$BOOTC_OPERATOR_BIN_DIR, else whatever ``hack/build-binaries.sh`` builds/prints."""
    env = os.environ.get(BIN_DIR_ENV)
    if env:
        path = Path(env)
    else:
        script = REPO_ROOT / "hack" / "build-binaries.sh"
        res = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True, check=False)
        if res.returncode != 0:
            raise ControlPlaneError(f"{script} failed with exit code {res.returncode}")
        path = Path(res.stdout.strip().splitlines()[-1])
    missing = [b for b in _BINARIES if not (path / b).is_file()]
    if missing:
        raise ControlPlaneError(f"binaries missing in {path}: {', '.join(missing)}")
    return path


def sweep_stale_state_dirs(max_age_without_state: float = 3600.0) -> list[Path]:
    """Remove temporary state dirs left by harness processes that were killed (SIGKILL).

    A dir is stale when its owner process is gone and none of its recorded
    components still runs (their command lines name the dir). Dirs without a
    state file are only removed after ``max_age_without_state`` seconds; dirs
    kept on purpose (``$BOOTC_OPERATOR_KEEP_STATE``) never.
    Returns the removed dirs.
    """
    removed: list[Path] = []
    for path in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        try:
            state = json.loads((path / STATE_FILE).read_text())
        except FileNotFoundError:
            try:
                if time.time() - path.stat().st_mtime < max_age_without_state:
                    continue
            except FileNotFoundError:
                continue
            state = {}
        except (OSError, ValueError):
            continue
        owner = state.get("owner")
        if state.get("kept") or (isinstance(owner, int) and pid_alive(owner)):
            continue
        pids = state.get("pids") or {}
        if any(
            isinstance(pid, int) and pid_alive(pid) and any(str(path) in a for a in cmdline(pid))
            for pid in pids.values()
        ):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


_live: set[ControlPlane] = set()


@atexit.register
def _close_all() -> None:
    for cp in list(_live):
        cp.close()


class ControlPlane(Component):
    """etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler, kwok) on loopback.

    ``start()`` brings everything up and installs the CRDs; ``close()`` (or
    leaving the ``with`` block) kills every process and removes ``state_dir``
    (kept when ``$BOOTC_OPERATOR_KEEP_STATE`` is set, for debugging).
    """

    def __init__(
        self,
        *,
        bin_dir: Path | None = None,
        state_dir: Path | None = None,
        crd_dir: Path | None = DEFAULT_CRD_DIR,
        admission_dir: Path | None = None,
        controller_manager: bool = True,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        scheduler: bool = False,
        apiserver_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        watch_cache: bool = True,
        audit: bool = False,
        die_with_parent: bool = True,
        startup_timeout: float = 120.0,
    ) -> None:
        self.bin_dir: Path = bin_dir if bin_dir is not None else resolve_bin_dir()
        if state_dir is None:
            sweep_stale_state_dirs()
            self.state_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        else:
            if state_dir.exists() and any(state_dir.iterdir()):
                raise ControlPlaneError(f"state directory {state_dir} is not empty")
            state_dir.mkdir(parents=True, exist_ok=True)
            self.state_dir = state_dir.resolve()
        self.crd_dir = crd_dir
        self.admission_dir = admission_dir
        self.want_controller_manager = controller_manager
        self.controllers = tuple(controllers)
        self.want_scheduler = scheduler
        self.apiserver_extra_args = tuple(apiserver_args)
        self.controller_manager_extra_args = tuple(controller_manager_args)
        self.watch_cache = watch_cache
        #: with ``audit``: the apiserver's audit log (``hack.testenv.audit.POLICY``)
        self.audit_log: Path | None = self.state_dir / "audit.log" if audit else None
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self.keep_state = bool(os.environ.get(KEEP_STATE_ENV))
        self.log_dir = self.state_dir / "logs"
        try:
            self.log_dir.mkdir(exist_ok=True)
            self.pki = certs.generate_pki(self.state_dir / "pki")
        except BaseException:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            raise
        self.kubeconfig: Path = self.state_dir / "admin.kubeconfig"
        self._etcd_port = free_port()
        self._etcd_peer_port = free_port()
        self._apiserver_port = free_port()
        self._procs: dict[str, Process] = {}
        self._closed = False
        self._ssl: ssl.SSLContext | None = None
        self._write_state()
        _live.add(self)

    # ------------------------------------------------------------ public API

    @property
    def server(self) -> str:
        """The kube-apiserver URL (https://127.0.0.1:PORT)."""
        return f"https://127.0.0.1:{self._apiserver_port}"

    @property
    def etcd_endpoint(self) -> str:
        """The etcd client URL (http://127.0.0.1:PORT)."""
        return f"http://127.0.0.1:{self._etcd_port}"

    @property
    def processes(self) -> dict[str, Process]:
        """Running components by name (a copy)."""
        return dict(self._procs)

    def log_path(self, name: str) -> Path:
        """Where component ``name`` logs (e.g. ``kube-apiserver``)."""
        return self.log_dir / f"{name}.log"

    def start(self) -> Self:
        """Start every component and install the CRDs; on failure, clean up and raise."""
        try:
            self._write_kubeconfigs()
            self._start_etcd()
            self.start_apiserver()
            if self.crd_dir is not None:
                self.install_crds(sorted(self.crd_dir.glob("*.yaml")))
            if self.admission_dir is not None:
                self.install_admission(self.admission_dir / "policy.yaml")
            if self.want_controller_manager:
                self.start_controller_manager()
            if self.want_scheduler:
                self.start_scheduler()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every process (dependants first) and remove the state directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for name in (*STOP_ORDER, *self._procs):
                proc = self._procs.pop(name, None)
                if proc is not None:
                    proc.stop()
        finally:
            _live.discard(self)
            if self.keep_state:
                self._write_state(kept=True)
            else:
                shutil.rmtree(self.state_dir, ignore_errors=True)

    def detach(self) -> None:
        """Leave the processes running (for ``hack/controlplane up``); ``close()`` becomes a no-op.

        The PIDs are in ``state_dir/state.json``; ``hack/controlplane down`` kills them.
        """
        self._closed = True
        self._write_state()
        _live.discard(self)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM, then SIGKILL); etcd and the rest keep running."""
        self._stop("kube-apiserver")

    def start_apiserver(self) -> None:
        """(Re)start kube-apiserver on the same etcd, port and certificates; wait for /readyz.

        A running kube-controller-manager is restarted with it: after an outage of a
        minute its informers back off up to 30 s between retries, and the tests after
        the one that stopped the apiserver (on this control plane) would wait for them
        (seen: no ServiceAccount in a new namespace within 30 s)."""
        if "kube-apiserver" in self._procs and self._procs["kube-apiserver"].alive():
            raise ControlPlaneError("kube-apiserver is already running")
        proc = self._spawn("kube-apiserver", self._apiserver_argv())
        self._wait(proc, lambda: self._get("/readyz")[0] == 200, "/readyz to return 200")
        if "kube-controller-manager" in self._procs:
            self.stop_controller_manager()
            self.start_controller_manager()

    def compact_etcd(self) -> int:
        """Compact etcd up to its current revision; returns that revision.

        Does what kube-apiserver's own compactor does (record the revision under
        ``compact_rev_key``, which the apiserver watches, then compact), through
        etcd's gRPC-gateway JSON API. Afterwards reads and watches that reach etcd
        with an older resourceVersion fail with 410 Gone (``Expired``). Note that
        with the watch cache (the default) the apiserver still serves watches
        from its in-memory window; to get 410 for old watch resourceVersions
        either construct with ``watch_cache=False`` or restart the apiserver
        (``stop_apiserver()``/``start_apiserver()``), which resets the window.
        """
        key = base64.b64encode(b"compact_rev_key").decode()
        header = self._etcd_call("/v3/kv/range", {"key": key})
        revision = int(header["header"]["revision"])
        value = base64.b64encode(str(revision).encode()).decode()
        self._etcd_call("/v3/kv/put", {"key": key, "value": value})
        try:
            self._etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        except ControlPlaneError as e:
            if "compacted" not in str(e):  # already compacted to this revision: fine
                raise
        return revision

    def kubectl(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this control plane; raise on failure if ``check``."""
        argv = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.state_dir / 'kubectl-cache'}",
            *args,
        ]
        res = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed with exit code {res.returncode}:\n{res.stderr}"
            )
        return res

    def install_crds(self, paths: Iterable[Path], timeout: float = 60.0) -> list[str]:
        """Server-side apply every CRD in ``paths``; wait until each is Established and served."""
        names: list[tuple[str, str, str]] = []  # (crd name, group/version, plural)
        for path in paths:
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = doc["metadata"]["name"]
                status, body = self._request(
                    "PATCH",
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                    f"?fieldManager={FIELD_MANAGER}&force=true",
                    json.dumps(doc).encode(),
                    "application/apply-patch+yaml",
                )
                if status not in (200, 201):
                    raise ControlPlaneError(
                        f"applying CRD {name} from {path}: HTTP {status}: {body}"
                    )
                spec = doc["spec"]
                served = [v["name"] for v in spec["versions"] if v.get("served", True)]
                names += [(name, f"{spec['group']}/{v}", spec["names"]["plural"]) for v in served]

        def ready() -> bool:
            for name, group_version, plural in names:
                status, body = self._get(
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                if status != 200:
                    return False
                conditions = (json.loads(body).get("status") or {}).get("conditions") or []
                if not any(
                    c["type"] == "Established" and c["status"] == "True" for c in conditions
                ):
                    return False
                status, body = self._get(f"/apis/{group_version}")
                if status != 200 or plural not in {
                    r["name"] for r in json.loads(body)["resources"]
                }:
                    return False
            return True

        self._poll(ready, timeout, "CRDs to be Established and served", None)
        return sorted({n for n, _, _ in names})

    def install_admission(self, path: Path) -> list[str]:
        """Server-side apply the ValidatingAdmissionPolicies and bindings of ``path``
        (``ADMISSION_DIR``'s policy.yaml: what install.yaml ships); their names."""
        names = []
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            plural = {
                "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
                "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
            }[doc["kind"]]
            name = doc["metadata"]["name"]
            status, body = self._request(
                "PATCH",
                f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}"
                f"?fieldManager={FIELD_MANAGER}&force=true",
                json.dumps(doc).encode(),
                "application/apply-patch+yaml",
            )
            if status not in (200, 201):
                raise ControlPlaneError(
                    f"applying {doc['kind']} {name} from {path}: {status}: {body}"
                )
            names.append(f"{doc['kind']}/{name}")
        return names

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager with ``controllers``; wait for /healthz (and the
        default ServiceAccount, when the serviceaccount controller runs)."""
        port = free_port()
        kubeconfig = self._component_kubeconfig("kube-controller-manager")
        argv = [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'kube-controller-manager'}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            f"--service-account-private-key-file={self.pki.sa_key}",
            f"--root-ca-file={self.pki.ca.cert}",
            f"--cluster-signing-cert-file={self.pki.ca.cert}",
            f"--cluster-signing-key-file={self.pki.ca.key}",
            f"--service-cluster-ip-range={certs.SERVICE_CLUSTER_IP_RANGE}",
            *self.controller_manager_extra_args,
        ]
        proc = self._spawn("kube-controller-manager", argv)
        self._wait(proc, lambda: _insecure_ok(port, "/healthz"), "/healthz to return ok")
        if {"serviceaccount-controller", "*"} & set(self.controllers):
            self._wait(
                proc,
                lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
                "the default ServiceAccount to be created",
            )

    def start_scheduler(self) -> None:
        """Start kube-scheduler; wait for /healthz."""
        port = free_port()
        kubeconfig = self._component_kubeconfig("kube-scheduler")
        argv = [
            str(self.bin_dir / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'kube-scheduler'}",
            "--leader-elect=false",
        ]
        proc = self._spawn("kube-scheduler", argv)
        self._wait(proc, lambda: _insecure_ok(port, "/healthz"), "/healthz to return ok")

    def start_kwok(
        self,
        *extra_args: str,
        node_label_selector: str | None = "type=kwok",
        config: Path | None = None,
    ) -> None:
        """Start kwok managing the Nodes matching ``node_label_selector`` (all Nodes if None).

        ``config`` is a kwok config file (stages etc.); without it kwok's built-in
        defaults apply. ``extra_args`` are passed through. Waits for kwok's /healthz.
        For Pods to be scheduled onto kwok Nodes, run kube-scheduler and add
        ``KWOK_CONTROLLERS`` to ``controllers`` (the not-ready taint stays otherwise).
        """
        port = free_port()
        argv = [
            str(self.bin_dir / "kwok"),
            f"--kubeconfig={self._component_kubeconfig('kwok')}",
            f"--server-address=127.0.0.1:{port}",
        ]
        if config is not None:
            argv.append(f"--config={config}")
        if node_label_selector is None:
            argv.append("--manage-all-nodes=true")
        else:
            argv += [
                "--manage-all-nodes=false",
                f"--manage-nodes-with-label-selector={node_label_selector}",
            ]
        argv += extra_args
        # kwok reads ~/.kwok/kwok.yaml by default; an empty HOME keeps it hermetic.
        home = self.state_dir / "kwok-home"
        home.mkdir(exist_ok=True)
        proc = self._spawn("kwok", argv, env={**os.environ, "HOME": str(home)})
        self._wait(proc, lambda: _plain_ok(port, "/healthz"), "/healthz to return ok")

    def stop_kwok(self) -> None:
        self._stop("kwok")

    def stop_scheduler(self) -> None:
        self._stop("kube-scheduler")

    def stop_controller_manager(self) -> None:
        self._stop("kube-controller-manager")

    # ------------------------------------------------------------ internals

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        if self._closed:
            raise ControlPlaneError("control plane is closed")
        proc = spawn(name, argv, self.log_path(name), env=env, die_with_parent=self.die_with_parent)
        self._procs[name] = proc
        self._write_state()
        return proc

    def _stop(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.stop()
            self._write_state()

    def _wait(self, proc: Process, check: Callable[[], bool], what: str) -> None:
        self._poll(check, self.startup_timeout, f"{proc.name}: {what}", proc)

    def _poll(
        self, check: Callable[[], bool], timeout: float, what: str, proc: Process | None
    ) -> None:
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            if proc is not None and not proc.alive():
                raise StartupError(
                    f"{proc.name} {proc.describe_exit()} while waiting for {what}; "
                    f"last lines of {proc.log_path}:\n{proc.tail()}"
                )
            try:
                if check():
                    return
            except (OSError, ValueError, KeyError) as e:
                last_error = f" (last error: {e})"
            if time.monotonic() > deadline:
                tail = f"; last lines of {proc.log_path}:\n{proc.tail()}" if proc else ""
                raise StartupError(
                    f"timed out after {timeout:.0f}s waiting for {what}{last_error}{tail}"
                )
            time.sleep(0.1)

    def _write_state(self, kept: bool = False) -> None:
        state = {
            # Kept on purpose ($BOOTC_OPERATOR_KEEP_STATE): sweep_stale_state_dirs leaves it.
            "kept": kept,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "etcd": self.etcd_endpoint,
            "bin_dir": str(self.bin_dir),
            # The process that owns the components; None once detached.
            "owner": None if self._closed else os.getpid(),
            "pids": {name: p.pid for name, p in self._procs.items()},
        }
        tmp = self.state_dir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_dir / STATE_FILE)

    def _start_etcd(self) -> None:
        data_dir = self.state_dir / "etcd"
        # Ports were free when picked; retry with new ones if something grabbed them since.
        for attempt in range(3):
            client, peer = self.etcd_endpoint, f"http://127.0.0.1:{self._etcd_peer_port}"
            argv = [
                str(self.bin_dir / "etcd"),
                "--name=bootc-test",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=bootc-test={peer}",
                "--unsafe-no-fsync=true",  # throw-away data: no fsync, much faster on CI
                "--log-level=warn",
            ]
            proc = self._spawn("etcd", argv)
            try:
                self._wait(proc, self._etcd_healthy, "/health to report healthy")
                return
            except StartupError:
                if attempt == 2 or "address already in use" not in log_tail(proc.log_path):
                    raise
                self._stop("etcd")
                shutil.rmtree(data_dir, ignore_errors=True)
                self._etcd_port, self._etcd_peer_port = free_port(), free_port()

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(f"{self.etcd_endpoint}/health", timeout=2) as resp:
            return bool(json.load(resp).get("health") == "true")

    def _etcd_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.etcd_endpoint}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                result: dict[str, Any] = json.load(resp)
                return result
        except urllib.error.HTTPError as e:
            raise ControlPlaneError(f"etcd {path}: HTTP {e.code}: {e.read().decode()}") from e

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_endpoint}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self._apiserver_port}",
            f"--cert-dir={self.state_dir / 'kube-apiserver'}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            f"--service-account-issuer={SA_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--api-audiences={SA_ISSUER}",
            "--authorization-mode=Node,RBAC",
            # As every real cluster: a kubelet may change only its own Node and Pods,
            # and no node-restriction.kubernetes.io label (the daemon's placement).
            "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={certs.SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            # Front-proxy trust like a real cluster (also quiets delegated authn in KCM).
            f"--requestheader-client-ca-file={pki.ca.cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            # The "kubernetes" Service cannot point at a loopback address; nothing needs it.
            "--endpoint-reconciler-type=none",
            f"--watch-cache={str(self.watch_cache).lower()}",
            # Without this, SIGTERM waits ~forever for clients' watches to drain.
            "--shutdown-watch-termination-grace-period=2s",
            *self._audit_args(),
            *self.apiserver_extra_args,
        ]

    def _audit_args(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(audit.POLICY)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}"]

    def _kubeconfig_doc(self, user: str) -> dict[str, Any]:
        pair = self.pki.client(user)

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "bootc-test",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self.pki.ca.cert),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(pair.cert),
                        "client-key-data": b64(pair.key),
                    },
                }
            ],
            "contexts": [
                {"name": "bootc-test", "context": {"cluster": "bootc-test", "user": user}}
            ],
            "current-context": "bootc-test",
        }

    def _component_kubeconfig(self, user: str) -> Path:
        path = self.state_dir / f"{user}.kubeconfig"
        if not path.exists():
            path.write_text(yaml.safe_dump(self._kubeconfig_doc(user), sort_keys=False))
            path.chmod(0o600)
        return path

    def _write_kubeconfigs(self) -> None:
        self.kubeconfig.write_text(yaml.safe_dump(self._kubeconfig_doc("admin"), sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            ctx = ssl.create_default_context(cafile=str(self.pki.ca.cert))
            admin = self.pki.client("admin")
            ctx.load_cert_chain(str(admin.cert), str(admin.key))
            self._ssl = ctx
        return self._ssl

    def _request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, str]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, context=self._ssl_context(), timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def _get(self, path: str) -> tuple[int, str]:
        return self._request("GET", path)


def _insecure_ok(port: int, path: str) -> bool:
    """GET https://127.0.0.1:port/path without verifying the (self-signed) serving cert."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with contextlib.closing(
        urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=2)
    ) as resp:
        return bool(resp.status == 200)


def _plain_ok(port: int, path: str) -> bool:
    with contextlib.closing(
        urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2)
    ) as r:
        return bool(r.status == 200)
