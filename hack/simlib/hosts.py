"""The simulated nodes' bootc hosts: the fake one, or the real bootc for some of them.

Every node of a simulation has a host under ``DIR/hosts/<node>``: a ``hack.fakebootc``
host, or, for the first ``SimConfig.real_bootc`` nodes (``hack/sim up --real-bootc N``),
a ``hack.realbootc`` one: the real bootc 1.16.9 and libostree on a real ostree sysroot,
booted as ``/`` of a mount + PID namespace, pulling the simulation's images from its
registry (they are real bootc images: ``hack.simlib.images``). Both answer what the
node simulator and ``hack.testenv.machine`` ask (reboot requests, reboots, boot IDs);
this module is where they differ:

- ``make(info, node, booted)``: the owner makes a node's host. A real one gets its
  first deployment pulled from the registry but is not booted: the node simulator,
  the hosts' power buttons, boots it (``power_on``) and ends it at shutdown
  (``power_off``), so its PID 1 is the node simulator's child and dies with it, as a
  machine does in a power cut;
- ``open_host(root)``: the host in a directory, of whichever kind it is;
- ``daemon_flags(host)``: where the node's daemon finds it. The fake: its directory
  (``--host-root``, the shims on PATH). The real one: as on a node, its PID 1 (a new
  one every boot): ``--host-root /proc/PID/root`` and the daemon's nsenter line;
- ``booted(host)``: the booted image, its version and the kernel, for the Node's
  ``nodeInfo``. The real host's is what ``bootc status`` says; its kernel is the
  machine's (the host is a namespace, not a VM);
- ``release(state_dir)``: makes real hosts' directories deletable after their node
  simulator died without ending them (ostree's immutable deployment roots);
- ``refusal(config, registry=...)``: why a configuration cannot have its real hosts
  (more than ``--nodes``, no registry, not root), checked before anything starts.
"""

from __future__ import annotations

import contextlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from hack.fakebootc import FakeHostError
from hack.fakebootc import Host as FakeHost
from hack.fakebootc import make_host as make_fake_host
from hack.fakebootc import open_host as open_fake_host
from hack.realbootc.build import resolve_build
from hack.realbootc.host import HOST_EXEC, RealHostError, clear_immutable
from hack.realbootc.host import Host as RealHost
from hack.realbootc.host import make_host as make_real_host
from hack.simlib.common import SimConfig, SimInfo

SimHost = FakeHost | RealHost
#: what either kind of host raises (one readable line)
HostError = (FakeHostError, RealHostError)
STATUS_TIMEOUT = 10.0


@dataclass(frozen=True)
class BootedInfo:
    """What a Node's ``nodeInfo`` says of its host's boot."""

    image: str
    version: str
    kernel: str


def is_real(root: Path) -> bool:
    """The host in ``root`` is a real-bootc one."""
    return (root / "realbootc" / "host.json").exists()


def make(info: SimInfo, node: str, booted: str, version: str) -> SimHost:
    """``node``'s host, booted into ``booted`` (``repo@digest``) of ``version`` (the
    module docstring: a real one is not booted yet)."""
    cfg = info.config
    root = info.host_root(node)
    if node in info.real_bootc_nodes:
        return make_real_host(
            root,
            booted=booted,
            insecure_registries=[info.registry],
            boot_complete_delay=cfg.boot_complete_delay,
            boot=False,
        )
    return make_fake_host(
        root,
        booted=booted,
        version=version,
        stage_delay=cfg.stage_seconds,
        boot_complete_delay=cfg.boot_complete_delay,
        catalogs=[info.catalog] if info.catalog else [],
        accept_any_digest=not info.registry,
    )


def open_host(root: Path) -> SimHost:
    if is_real(root):
        return RealHost(root.resolve(), resolve_build())
    return open_fake_host(root)


def power_on(host: SimHost) -> None:
    """Boot a real host that is not running (a fake one has nothing to run)."""
    if isinstance(host, RealHost) and not host.running():
        host.boot()


def power_off(host: SimHost) -> None:
    """End a real host (every process and mount of it); stop a fake one's units."""
    if isinstance(host, RealHost):
        host.close()
        return
    for unit in host.active_units():
        host.run("systemctl", "stop", unit)


def daemon_flags(host: SimHost) -> list[str]:
    """The daemon's ``--host-root`` (and ``--host-exec``) for ``host`` as it runs now."""
    if isinstance(host, RealHost):
        pid = host.pid
        return ["--host-root", f"/proc/{pid}/root", "--host-exec", HOST_EXEC.format(pid=pid)]
    return ["--host-root", str(host.root)]


def booted(host: SimHost) -> BootedInfo | None:
    """The booted image, version and kernel (the module docstring); None when unknown
    (no booted deployment, or ``bootc status`` did not answer)."""
    if isinstance(host, FakeHost):
        state = host.state().booted
        if state is None:
            return None
        version = state.version or state.image.rsplit("@", 1)[-1][:19]
        return BootedInfo(state.image, version, state.kernel)
    try:
        doc = host.status(timeout=STATUS_TIMEOUT)
    except (RealHostError, OSError, ValueError, TimeoutError):
        return None
    entry = (doc.get("status") or {}).get("booted") or {}
    image = entry.get("image") or {}
    ref = str(((image.get("image") or {}).get("image")) or "")
    if not ref:
        return None
    version = str(image.get("version") or ref.rsplit("@", 1)[-1][:19])
    return BootedInfo(ref, version, platform.release())


def release(state_dir: Path) -> None:
    """Clear the immutable flag of every real host's deployment roots under
    ``state_dir/hosts`` (the module docstring)."""
    for deployment in state_dir.glob("hosts/*/sysroot/ostree/deploy/*/deploy/*"):
        if deployment.is_dir():
            clear_immutable(deployment)


def describe(host: SimHost) -> str:
    """One line for logs: the kind and, for a running real host, its PID 1."""
    if isinstance(host, RealHost):
        with contextlib.suppress(RealHostError):
            return f"real bootc (PID 1: {host.pid})"
        return "real bootc (off)"
    return "fake bootc"


def refusal(config: SimConfig, *, registry: bool) -> str | None:
    """Why a simulation of ``config`` cannot have its real-bootc hosts (``registry``: it
    has one), or None."""
    n = config.real_bootc
    if not n:
        return None
    if not 0 < n <= config.nodes:
        return f"--real-bootc {n}: give at most --nodes ({config.nodes})"
    if not registry:
        return "real-bootc hosts pull from the simulation's registry: not with --no-registry"
    if os.geteuid() != 0:
        return "real-bootc hosts need root (mount and PID namespaces)"
    return None
