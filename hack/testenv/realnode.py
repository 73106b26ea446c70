"""One real Kubernetes node on this machine: kubelet + containerd + runc, joined to a
harness control plane, as services of a real-bootc host (``hack.realbootc``).

``RealNode(control_plane, host, images=[...]).start()``:

- ``missing_prerequisites()`` names, in one line, what is missing (root, Debian's
  containerd/runc/containernetworking-plugins, gcc for ``pause``, the cached
  kubelet); ``install_prerequisites()`` apt-installs the packages as root.
- The node *is* the host: a real ostree deployment booted as ``/`` of a mount + PID
  namespace whose PID 1 is the host's service manager (``hack.realbootc.hostinit``).
  containerd and the kubelet run as its units (``systemd-run --unit containerd`` /
  ``--unit kubelet``), so they, every container and every hostPID pod live in the
  host's namespaces: the daemon pod's ``nsenter --target 1`` reaches the host's PID 1
  and runs the real ``bootc`` on the booted deployment, as on a bootc machine.
- The node's configuration is an admin's, where a bootc node keeps it: in ``/etc``
  (``/etc/kubernetes``: the kubelet's configuration, its kubeconfig with a client
  certificate ``O=system:nodes, CN=system:node:<name>`` from the control plane's CA;
  ``/etc/containerd``; ``/etc/cni/net.d``: loopback only, every pod the tier runs uses
  the host network, so no packet leaves the machine; ``/etc/hosts``), which ostree's
  ``/etc`` merge carries into each new deployment; the state in ``/var``
  (``/var/lib/containerd`` with the imported images, ``/var/lib/kubelet``, the logs
  in ``/var/log/realnode``), which every deployment shares; the kubelet binary in
  ``/usr/local/bin`` (the cached one; ``/usr`` is the machine's, with Debian's
  containerd, runc and CNI plugins). The sandbox image is a static ``pause`` built
  from the Kubernetes module's ``pause.c``, ``FROM scratch``.
- ``reboot()``: the host's reboot (``hack.realbootc.host.Host.reboot``: every unit
  and container killed, ``ostree admin finalize-staged``, the new default deployment
  booted, ``/run`` empty), then containerd and the kubelet started again on the new
  deployment: the pods' containers start again as after a real reboot.
- ``close()`` ends the host (no process, no mount left), removes the node's cgroups,
  its veth and network namespace, and restores the sysctls the kubelet sets
  (``kernel.panic``, ``kernel.panic_on_oops``, ``vm.overcommit_memory``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import yaml

from hack.testenv import certs
from hack.testenv.controlplane import REPO_ROOT, ControlPlane, free_port
from hack.testenv.procs import Component, StartupError, log_tail

PODMAN = REPO_ROOT / "hack" / "podman"
PAUSE_IMAGE = "localhost/bootc-operator-pause:e2e"
CNI_BIN_DIR = Path("/usr/lib/cni")
PACKAGES = ("containerd", "runc", "containernetworking-plugins", "gcc", "libc6-dev", "iproute2")
# What the kubelet changes on the machine (protectKernelDefaults: false).
KUBELET_SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")
# Controllers a real node needs besides the harness's defaults.
NODE_CONTROLLERS = (
    "daemonset-controller",
    "replicaset-controller",
    "deployment-controller",
    "node-lifecycle-controller",
    "disruption-controller",
)
# Where the node keeps things, as the host sees them.
ETC_KUBERNETES = Path("/etc/kubernetes")
CONTAINERD_CONFIG = Path("/etc/containerd/config.toml")
CONTAINERD_SOCKET = Path("/run/containerd/containerd.sock")
CNI_CONF_DIR = Path("/etc/cni/net.d")
IMAGES_DIR = Path("/var/lib/realnode/images")
LOG_DIR = Path("/var/log/realnode")
KUBELET_ROOT = Path("/var/lib/kubelet")
START_TIMEOUT = 60.0


class NodeHost(Protocol):
    """What a node needs of its bootc host (``hack.realbootc.host.Host``; named here so
    the kit's rooms do not import each other)."""

    @property
    def root(self) -> Path: ...

    @property
    def run_dir(self) -> Path: ...

    @property
    def usr_local(self) -> Path: ...

    @property
    def stateroot_var(self) -> Path: ...

    def booted_deployment(self) -> Path: ...

    def run(
        self, tool: str, *args: str, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]: ...

    def active_units(self) -> list[str]: ...

    def reboot(self) -> object: ...

    def close(self) -> None: ...


H = TypeVar("H", bound=NodeHost)


class RealNodeUnavailable(RuntimeError):
    """What this machine lacks for a real node (one line)."""


def missing_prerequisites(bin_dir: Path) -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for tool in ("containerd", "ctr", "runc", "unshare", "gcc", "ip"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not (CNI_BIN_DIR / "loopback").exists():
        missing.append(f"{CNI_BIN_DIR}/loopback (containernetworking-plugins)")
    if not (bin_dir / "kubelet").exists():
        missing.append(f"{bin_dir}/kubelet (hack/build-binaries.sh)")
    return missing


def install_prerequisites() -> None:
    """apt-get install what is missing (root only; as hack/lib/apt-install.sh does)."""
    if os.geteuid() != 0:
        return
    for package in PACKAGES:
        if subprocess.run(["dpkg", "-s", package], capture_output=True, check=False).returncode:
            subprocess.run(
                [
                    "bash",
                    "-c",
                    f'source "$1"; apt_install_quietly realnode {package}',
                    "_",
                    str(REPO_ROOT / "hack" / "lib" / "apt-install.sh"),
                ],
                check=True,
            )


def pause_archive(cache: Path) -> Path:
    """A docker-archive of ``PAUSE_IMAGE``: static ``pause`` from the Kubernetes module's
    ``pause.c``, ``FROM scratch``; cached by the source's hash."""
    src = _pause_source()
    key = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = cache / f"pause-{key}.tar"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        subprocess.run(
            ["gcc", "-Os", "-static", "-o", str(work / "pause"), str(src)],
            check=True,
            capture_output=True,
        )
        subprocess.run(["strip", str(work / "pause")], check=False)
        (work / "Containerfile").write_text(
            'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n'
        )
        subprocess.run(
            [str(PODMAN), "build", "-q", "-t", PAUSE_IMAGE, str(work)],
            check=True,
            capture_output=True,
        )
        tar = work / "pause.tar"
        subprocess.run(
            [str(PODMAN), "save", "-o", str(tar), PAUSE_IMAGE], check=True, capture_output=True
        )
        tar.rename(out)
    return out


def _pause_source() -> Path:
    gomodcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    found = sorted(Path(gomodcache).glob("k8s.io/kubernetes@v*/build/pause/linux/pause.c"))
    if not found:
        raise RealNodeUnavailable(
            "pause.c not found in the Go module cache (hack/build-binaries.sh)"
        )
    return found[-1]


def save_image(image: str, dest: Path) -> Path:
    subprocess.run([str(PODMAN), "save", "-o", str(dest), image], check=True, capture_output=True)
    return dest


def read_sysctls(names: Sequence[str]) -> dict[str, str]:
    return {n: Path("/proc/sys", *n.split(".")).read_text().strip() for n in names}


def write_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys", *name.split("."))
        if path.read_text().strip() != value:
            path.write_text(value)


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` with ``source``'s bytes: a hard link where both are on one filesystem
    (the kubelet is 80 MB), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


class RealNode(Component, Generic[H]):
    """A kubelet node on a real-bootc host (module docstring); owns the host from here on:
    ``close()`` ends it."""

    def __init__(
        self,
        control_plane: ControlPlane,
        host: H,
        *,
        name: str = "real-node",
        images: Sequence[str] = (),
        cache: Path,
    ) -> None:
        self.cp = control_plane
        self.host = host
        self.name = name
        self.images = tuple(images)
        self.cache = cache
        self.sysctls = read_sysctls(KUBELET_SYSCTLS)
        self.kubelet_port = free_port()
        self.healthz_port = free_port()
        # The kubelet refuses a loopback node IP: the node's address is on a veth
        # made here (its peer in a network namespace made here), so every packet to
        # it is delivered on this machine. 198.18.0.0/15: benchmarking, never routed.
        tag = hashlib.sha256(str(host.root).encode()).hexdigest()[:6]
        self.link = f"bocn{tag}"
        self.node_ip = f"198.18.{int(tag[:2], 16)}.{int(tag[2:4], 16) % 254 + 1}"
        self.cgroup_root = f"/bootc-realnode-{tag}"
        self._prepared = False
        self._linked = False

    # ------------------------------------------------------------------ paths

    def outside(self, path: Path) -> Path:
        """Where the host's ``path`` (under ``/etc``, ``/var`` or ``/usr/local``) is on the
        machine: ``/etc`` in the booted deployment, ``/var`` the stateroot's."""
        rel = path.relative_to("/")
        top, rest = rel.parts[0], Path(*rel.parts[1:])
        if top == "etc":
            return self.host.booted_deployment() / "etc" / rest
        if top == "var":
            return self.host.stateroot_var / rest
        if top == "run":
            return self.host.run_dir / rest
        if rel.parts[:2] == ("usr", "local"):
            return self.host.usr_local / Path(*rel.parts[2:])
        raise ValueError(f"{path}: not a path the harness writes on the host")

    # ------------------------------------------------------------------ files

    def _prepare(self) -> None:
        """What an admin provisions once on the host: binaries, configuration, images."""
        _link_or_copy(self.cp.bin_dir / "kubelet", self.outside(Path("/usr/local/bin/kubelet")))
        pki = ETC_KUBERNETES / "pki"
        pair = certs.issue_client(self.cp.pki, f"system:node:{self.name}", ("system:nodes",))
        files: dict[Path, bytes] = {
            pki / "ca.crt": self.cp.pki.ca.cert.read_bytes(),
            pki / "kubelet-client.crt": pair.cert.read_bytes(),
            pki / "kubelet-client.key": pair.key.read_bytes(),
            ETC_KUBERNETES / "kubelet.conf": yaml.safe_dump(self._kubeconfig(pki)).encode(),
            ETC_KUBERNETES / "kubelet.yaml": yaml.safe_dump(self._kubelet_config()).encode(),
            CONTAINERD_CONFIG: self._containerd_config().encode(),
            CNI_CONF_DIR / "10-loopback.conflist": (
                b'{"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]}\n'
            ),
            # the kubelet gives hostNetwork pods the node's /etc/hosts
            Path("/etc/hosts"): f"127.0.0.1 localhost\n{self.node_ip} {self.name}\n".encode(),
        }
        for path, data in files.items():
            target = self.outside(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        images = self.outside(IMAGES_DIR)
        images.mkdir(parents=True, exist_ok=True)
        shutil.copy(pause_archive(self.cache), images / "pause.tar")
        for i, image in enumerate(self.images):
            save_image(image, images / f"image-{i}.tar")
        self.outside(LOG_DIR).mkdir(parents=True, exist_ok=True)
        self._make_cgroups()
        self._make_link()
        self._prepared = True

    def _kubeconfig(self, pki: Path) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "harness",
                    "cluster": {
                        "server": self.cp.server,
                        "certificate-authority": str(pki / "ca.crt"),
                    },
                }
            ],
            "users": [
                {
                    "name": "node",
                    "user": {
                        "client-certificate": str(pki / "kubelet-client.crt"),
                        "client-key": str(pki / "kubelet-client.key"),
                    },
                }
            ],
            "contexts": [{"name": "node", "context": {"cluster": "harness", "user": "node"}}],
            "current-context": "node",
        }

    def _make_link(self) -> None:
        ip = ["ip"]
        subprocess.run([*ip, "netns", "add", self.link], check=True, capture_output=True)
        self._linked = True
        subprocess.run(
            [
                *ip,
                "link",
                "add",
                self.link,
                "type",
                "veth",
                "peer",
                "name",
                f"{self.link}p",
                "netns",
                self.link,
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [*ip, "addr", "add", f"{self.node_ip}/32", "dev", self.link],
            check=True,
            capture_output=True,
        )
        subprocess.run([*ip, "link", "set", self.link, "up"], check=True, capture_output=True)

    def _remove_link(self) -> None:
        if not self._linked:
            return
        subprocess.run(["ip", "link", "del", self.link], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", self.link], check=False, capture_output=True)

    def _cgroup_dirs(self) -> list[Path]:
        """The node's cgroup root in every hierarchy (cgroup v2: one; v1: each controller)."""
        top = Path("/sys/fs/cgroup")
        name = self.cgroup_root.lstrip("/")
        if (top / "cgroup.controllers").exists():
            return [top / name]
        return [h / name for h in sorted(top.iterdir()) if (h / "cgroup.procs").exists()]

    def _make_cgroups(self) -> None:
        """The cgroup root, with (cgroup v2) the controllers the kubelet needs delegated
        to it from the top."""
        top = Path("/sys/fs/cgroup")
        v2 = (top / "cgroup.controllers").exists()
        wanted: list[str] = []
        if v2:
            available = (top / "cgroup.controllers").read_text().split()
            wanted = [c for c in ("cpuset", "cpu", "io", "memory", "pids") if c in available]
            enabled = (top / "cgroup.subtree_control").read_text().split()
            for c in wanted:
                if c not in enabled:
                    (top / "cgroup.subtree_control").write_text(f"+{c}")
        for d in self._cgroup_dirs():
            d.mkdir(exist_ok=True)
            if v2:
                (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))

    def _containerd_config(self) -> str:
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "{CONTAINERD_SOCKET}"
[ttrpc]
  address = "{CONTAINERD_SOCKET}.ttrpc"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{CNI_CONF_DIR}"
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{shutil.which("runc")}"
"""

    def _kubelet_config(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "maxOpenFiles": 20000,
            "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
            "address": self.node_ip,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": self.node_ip,
            "healthzPort": self.healthz_port,
            "authentication": {
                "x509": {"clientCAFile": str(ETC_KUBERNETES / "pki" / "ca.crt")},
                "webhook": {"enabled": False},
                "anonymous": {"enabled": False},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "failSwapOn": False,
            "resolvConf": "",
            "registerNode": True,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "nodeStatusReportFrequency": "10s",
            "serializeImagePulls": False,
            "podLogsDir": "/var/log/pods",
        }

    # ------------------------------------------------------------------ lifecycle

    def _service(self, unit: str, *argv: str) -> None:
        """Start ``argv`` as the host's unit ``unit``, its output in ``/var/log/realnode``."""
        command = shlex.join(argv)
        log = LOG_DIR / f"{unit}.log"
        done = self.host.run(
            "systemd-run",
            f"--unit={unit}",
            "--collect",
            "--quiet",
            "sh",
            "-c",
            f"exec {command} >>{log} 2>&1",
        )
        if done.returncode != 0:
            raise StartupError(f"{self.name}: starting {unit} failed: {done.stderr.strip()}")

    def _wait(self, ready: Any, unit: str, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            if unit not in {u.removesuffix(".service") for u in self.host.active_units()}:
                raise StartupError(f"{self.name}: {unit} exited:\n{self.log(unit, 30)}")
            if time.monotonic() > deadline:
                raise StartupError(f"{self.name}: {what} within {START_TIMEOUT:g}s")
            time.sleep(0.05)

    def start(self) -> RealNode[H]:
        """containerd and the kubelet as the booted host's services (module docstring);
        on failure the node is closed (its host too)."""
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> RealNode[H]:
        if not self._prepared:
            self._prepare()
        socket = self.outside(CONTAINERD_SOCKET)
        self._service("containerd", "containerd", "--config", str(CONTAINERD_CONFIG))
        self._wait(socket.exists, "containerd", "containerd did not listen")
        imported = self.outside(IMAGES_DIR / "imported")
        if not imported.exists():  # /var/lib/containerd keeps them across reboots
            for archive in sorted(self.outside(IMAGES_DIR).glob("*.tar")):
                done = self.host.run(
                    "ctr",
                    "--address",
                    str(CONTAINERD_SOCKET),
                    "-n",
                    "k8s.io",
                    "images",
                    "import",
                    str(IMAGES_DIR / archive.name),
                    timeout=300.0,
                )
                if done.returncode != 0:
                    raise StartupError(f"{self.name}: importing {archive.name}: {done.stderr}")
            imported.touch()
        self._service(
            "kubelet",
            "kubelet",
            "--config",
            str(ETC_KUBERNETES / "kubelet.yaml"),
            "--kubeconfig",
            str(ETC_KUBERNETES / "kubelet.conf"),
            "--root-dir",
            str(KUBELET_ROOT),
            "--hostname-override",
            self.name,
            "--node-ip",
            self.node_ip,
        )
        return self

    def reboot(self) -> None:
        """The host's reboot, then its services again (module docstring)."""
        self.host.reboot()
        self.start()

    def close(self) -> None:
        try:
            self.host.close()
        finally:
            write_sysctls(self.sysctls)
            self._remove_link()
            self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        """Deepest first; a cgroup whose last process is still exiting is retried."""
        deadline = time.monotonic() + 10
        for root in self._cgroup_dirs():
            if not root.is_dir():
                continue
            subs = [p for p in root.rglob("*") if p.is_dir()]
            for sub in [*sorted(subs, key=lambda p: -len(p.parts)), root]:
                while True:
                    try:
                        sub.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)

    def log(self, unit: str, lines: int = 40) -> str:
        """The end of a service's log (``kubelet``, ``containerd``)."""
        with contextlib.suppress(OSError):
            return log_tail(self.outside(LOG_DIR / f"{unit}.log"), lines)
        return ""

    def kubelet_log(self, lines: int = 40) -> str:
        return self.log("kubelet", lines)
