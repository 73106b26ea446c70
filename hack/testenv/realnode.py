"""One real Kubernetes node on this machine: kubelet + containerd + runc, joined to a
harness control plane, on a simulated bootc host that is the node's PID 1.

``RealNode(control_plane, host, images=[...]).start()``:

- ``prerequisites()`` names, in one line, what is missing (root, Debian's
  containerd/runc/containernetworking-plugins, gcc for ``pause``, the cached
  kubelet); ``install_prerequisites()`` apt-installs the packages as root.
- The node runs under ``unshare --pid --fork --mount --mount-proc``: its PID 1 is a
  small init (``INIT``) whose environment puts the simulated host's tools (the fake
  ``bootc``, ``systemctl``, ``systemd-run``) first on PATH, so a hostPID pod's
  ``nsenter --target 1 --env`` reaches that host exactly as on a bootc machine. It
  starts containerd (its own root, state and socket under the state directory;
  sandbox image: a static ``pause`` built from the Kubernetes module's ``pause.c``,
  ``FROM scratch``), imports the images, then the kubelet (client certificate
  ``O=system:nodes, CN=system:node:<name>`` from the control plane's CA; cgroupfs
  under its own cgroup root; loopback-only CNI: every pod the tier runs uses the
  host network, so no packet leaves loopback).
- ``stop()`` kills PID 1: the kernel kills everything in the namespace (containers
  included), and the private mount namespace takes the containers' mounts with it.
  ``close()`` also removes the node's cgroups and restores the sysctls the kubelet
  sets (``kernel.panic``, ``kernel.panic_on_oops``, ``vm.overcommit_memory``).
- ``reboot()``: stop, boot the staged image on the simulated host, start again: the
  pods' containers restart as after a real reboot.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hack.fakebootc.host import Host
from hack.testenv import certs
from hack.testenv.controlplane import REPO_ROOT, ControlPlane, free_port
from hack.testenv.procs import Process, ServerComponent, StartupError, log_tail, spawn

PODMAN = REPO_ROOT / "hack" / "podman"
PAUSE_IMAGE = "localhost/bootc-operator-pause:e2e"
# Where PID 1 of every node sees its simulated host (a bind mount in the node's own
# mount namespace): the DaemonSet's --host-root is /proc/1/root + this.
HOST_MOUNT = "/mnt"
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

INIT = """#!/bin/bash
# PID 1 of the node's namespaces: the simulated host's "init".
set -u
trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 0' TERM INT
# The simulated host at one path on every node (the DaemonSet's --host-root).
mount --bind "$FAKEBOOTC_ROOT" "$HOST_MOUNT"
# containerd's shims put their sockets under /run/containerd: this node's own.
mkdir -p /run/containerd && mount -t tmpfs tmpfs /run/containerd
containerd --config "$NODE/containerd.toml" >>"$NODE/logs/containerd.log" 2>&1 &
for _ in $(seq 200); do [[ -S "$NODE/containerd.sock" ]] && break; sleep 0.05; done
for image in "$NODE"/images/*.tar; do
  ctr --address "$NODE/containerd.sock" -n k8s.io images import --no-unpack=false "$image" \
    >>"$NODE/logs/ctr.log" 2>&1 || echo "init: import of $image failed" >&2
done
kubelet --config "$NODE/kubelet.yaml" --kubeconfig "$NODE/kubelet.kubeconfig" \
  --root-dir "$NODE/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
  >>"$NODE/logs/kubelet.log" 2>&1 &
echo "init: up"
wait
"""


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


class RealNode(ServerComponent):
    NAME = "realnode"
    STOP_GRACE = 5.0

    def __init__(
        self,
        control_plane: ControlPlane,
        host: Host,
        *,
        name: str = "real-node",
        images: Sequence[str] = (),
        cache: Path,
        state_dir: Path | None = None,
    ) -> None:
        self.cp = control_plane
        self.host = host
        self.name = name
        self.images = tuple(images)
        self.cache = cache
        self.dir = state_dir or Path(tempfile.mkdtemp(prefix="bootc-realnode-"))
        self.log_path = self.dir / "logs" / "init.log"
        self.cgroup_root = f"/bootc-realnode-{self.dir.name}"
        self.sysctls = read_sysctls(KUBELET_SYSCTLS)
        self.kubelet_port = free_port()
        # The kubelet refuses a loopback node IP: the node's address is on a veth
        # made here (its peer in a network namespace made here), so every packet to
        # it is delivered on this machine. 198.18.0.0/15: benchmarking, never routed.
        tag = hashlib.sha256(str(self.dir).encode()).hexdigest()[:6]
        self.link = f"bocn{tag}"
        self.node_ip = f"198.18.{int(tag[:2], 16)}.{int(tag[2:4], 16) % 254 + 1}"
        self.healthz_port = free_port()
        self._prepared = False

    # ------------------------------------------------------------------ files

    def _prepare(self) -> None:
        d = self.dir
        for sub in ("logs", "images", "cni", "kubelet", "containerd/root", "containerd/state"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(pause_archive(self.cache), d / "images" / "pause.tar")
        for i, image in enumerate(self.images):
            save_image(image, d / "images" / f"image-{i}.tar")
        pair = certs.issue_client(self.cp.pki, f"system:node:{self.name}", ("system:nodes",))
        doc = self.cp._kubeconfig_doc("admin")
        doc["users"] = [
            {
                "name": "node",
                "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)},
            }
        ]
        doc["contexts"][0]["context"]["user"] = "node"
        (d / "kubelet.kubeconfig").write_text(yaml.safe_dump(doc))
        (d / "cni" / "10-loopback.conflist").write_text(
            '{"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]}\n'
        )
        (d / "containerd.toml").write_text(self._containerd_config())
        (d / "kubelet.yaml").write_text(yaml.safe_dump(self._kubelet_config()))
        (d / "init").write_text(INIT)
        (d / "init").chmod(0o755)
        self._make_cgroups()
        self._make_link()
        (d / "sysctls.yaml").write_text(yaml.safe_dump(self.sysctls))
        self._prepared = True

    def _make_link(self) -> None:
        ip = ["ip"]
        subprocess.run([*ip, "netns", "add", self.link], check=True, capture_output=True)
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
        d = self.dir
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.ttrpc.sock"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{d}/cni"
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
            "containerRuntimeEndpoint": f"unix://{self.dir}/containerd.sock",
            "address": self.node_ip,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": self.node_ip,
            "healthzPort": self.healthz_port,
            "authentication": {
                "x509": {"clientCAFile": str(self.cp.pki.ca.cert)},
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
            "podLogsDir": str(self.dir / "pod-logs"),
        }

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RealNode:
        if not self._prepared:
            self._prepare()
        self._stop_at_exit()
        env = self.host.env(
            {
                "PATH": f"{self.cp.bin_dir}:/usr/local/sbin:/usr/local/bin:"
                "/usr/sbin:/usr/bin:/sbin:/bin"
            }
        )
        env.update(
            NODE=str(self.dir), NODE_NAME=self.name, NODE_IP=self.node_ip, HOST_MOUNT=HOST_MOUNT
        )
        self.process = spawn(
            self.NAME,
            [
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount",
                "--mount-proc",
                str(self.dir / "init"),
            ],
            self.log_path,
            env=env,
        )
        self._wait_until(lambda: "init: up" in self.tail(5), 60, "did not start")
        return self

    def stop(self) -> None:
        """Everything in the node's namespaces dies with its PID 1."""
        proc: Process | None = self.process
        if proc is not None:
            proc.stop(grace=self.STOP_GRACE)
            self.process = None

    def reboot(self) -> None:
        self.stop()
        self.host.reboot()
        self.start()

    def close(self) -> None:
        try:
            super().close()
        finally:
            write_sysctls(self.sysctls)
            self._remove_link()
            self._remove_cgroups()
        if not os.environ.get("BOOTC_OPERATOR_KEEP_STATE"):
            _rm_tree_unmounting(self.dir)

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

    def kubelet_log(self, lines: int = 40) -> str:
        return log_tail(self.dir / "logs" / "kubelet.log", lines)


def _rm_tree_unmounting(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        raise StartupError(f"{path} could not be removed")
