"""The simulated host's on-disk state: paths under ROOT, deployment records, faults, locks.

A host is a directory ROOT standing for the host's ``/``. Files a real host has live
where they really are (``ROOT/ostree/bootc``, ``ROOT/run/ostree/auth.json``,
``ROOT/run/reboot-required``, ``ROOT/sysroot/ostree/lock``, ``ROOT/sysroot/state/deploy``,
the kernel's ``ROOT/proc/sys/kernel/random/boot_id``);
what only the simulation needs lives in ``ROOT/.fakebootc/``: ``state.json`` (this
module's ``State``), ``catalog.json``, the shim ``bin/`` directory, running ``units/``,
the ``journal/`` of units started without ``--pipe`` and ``calls.jsonl`` (one line per
tool invocation, plus a ``pull`` line per image a switch or upgrade fetched, so tests
can assert what was, or was not, run or pulled).

Two locks, always taken in this order: the *sysroot lock* (``ROOT/sysroot/ostree/lock``,
what ostree really locks; held by ``bootc switch``/``rollback``/``status`` and the
simulated reboot for their whole run) and the *state lock* (``.fakebootc/state.lock``,
held only around a read-modify-write of ``state.json``). Fault injection takes just
the state lock, so a fault can be cleared while a switch hangs holding the sysroot
lock. ``state.json`` is replaced atomically, so plain reads need no lock.

Standard library only: the fake tools run under any ``python3``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hack.fakebootc.boot import Boot, decide_boot

FAKE_DIR = ".fakebootc"
STATE_VERSION = 1
LOCK_POLL_SECONDS = 0.02
#: the kernel of every image that does not name one (so images share it by default)
DEFAULT_KERNEL = "6.12.0-sim"
#: the image config label (catalog key ``kernel``) naming an image's kernel
KERNEL_LABEL = "fakebootc.kernel"


class HostError(Exception):
    """A test host's operation failed, on the fake bootc or the real one; the message
    is one readable line. (The real host's ``RealHostError`` derives from it too, so
    ``hack.testenv`` catches both without importing ``hack.realbootc``.)"""


class FakeHostError(HostError):
    """A simulated-host operation failed; the message is one readable line."""


@dataclass(frozen=True)
class Paths:
    """Every path of one simulated host."""

    root: Path

    @property
    def fake(self) -> Path:
        return self.root / FAKE_DIR

    @property
    def state(self) -> Path:
        return self.fake / "state.json"

    @property
    def state_lock(self) -> Path:
        return self.fake / "state.lock"

    @property
    def catalog(self) -> Path:
        return self.fake / "catalog.json"

    @property
    def bin(self) -> Path:
        return self.fake / "bin"

    @property
    def units(self) -> Path:
        return self.fake / "units"

    @property
    def journal(self) -> Path:
        return self.fake / "journal"

    @property
    def calls(self) -> Path:
        return self.fake / "calls.jsonl"

    @property
    def sysroot_lock(self) -> Path:
        return self.root / "sysroot" / "ostree" / "lock"

    @property
    def ostree_bootc(self) -> Path:
        """Touched (mtime/atime via utime, an inotify IN_ATTRIB) after every staging."""
        return self.root / "ostree" / "bootc"

    @property
    def composefs_deploy(self) -> Path:
        """Composefs hosts get a new entry here for each deployment (IN_CREATE)."""
        return self.root / "sysroot" / "state" / "deploy"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def reboot_required(self) -> Path:
        return self.run / "reboot-required"

    @property
    def boot_id(self) -> Path:
        """The running kernel's boot ID: new at every full boot, kept by a soft reboot."""
        return self.root / "proc" / "sys" / "kernel" / "random" / "boot_id"

    def certs_dirs(self, registry: str) -> list[Path]:
        """Where containers/image looks for a registry's CAs: ``certs.d/<host:port>/*.crt``."""
        return [
            self.root / "etc" / "containers" / "certs.d" / registry,
            self.root / "etc" / "docker" / "certs.d" / registry,
        ]

    @property
    def auth_files(self) -> list[Path]:
        """Where bootc looks for registry credentials; the first that exists wins."""
        return [
            self.run / "ostree" / "auth.json",
            self.root / "etc" / "ostree" / "auth.json",
            self.root / "usr" / "lib" / "ostree" / "auth.json",
        ]


@dataclass
class Deployment:
    """One deployment: the image bootc was pointed at and what it resolved to."""

    image: str
    digest: str
    architecture: str
    checksum: str
    transport: str = "registry"
    version: str | None = None
    timestamp: str | None = None
    deploy_serial: int = 0
    stateroot: str = "default"
    pinned: bool = False
    #: the kernel (and initramfs) the image ships: a deployment with the booted one's
    #: kernel can be soft-rebooted into (``State.soft_reboot_capable``)
    kernel: str = DEFAULT_KERNEL
    incompatible: bool = False
    #: staged with ``bootc upgrade --download-only`` (ostree's finalization lock): a
    #: reboot discards it instead of booting it, until ``--from-downloaded`` unlocks it
    download_only: bool = False
    #: the image's own boot-assessment label (``boot.LABEL``), read when it was pulled
    boot_assessment: str | None = None
    #: ``spec.image.signature``: ``containerPolicy`` when switched to with
    #: ``--enforce-container-sigpolicy`` (``policy.py``; a later upgrade enforces it too)
    signature: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Deployment:
        return cls(
            image=str(data["image"]),
            digest=str(data["digest"]),
            architecture=str(data.get("architecture") or "amd64"),
            checksum=str(data["checksum"]),
            transport=str(data.get("transport") or "registry"),
            version=data.get("version"),
            timestamp=data.get("timestamp"),
            deploy_serial=int(data.get("deploy_serial", 0)),
            stateroot=str(data.get("stateroot") or "default"),
            pinned=bool(data.get("pinned", False)),
            kernel=str(data.get("kernel") or DEFAULT_KERNEL),
            incompatible=bool(data.get("incompatible", False)),
            download_only=bool(data.get("download_only", False)),
            boot_assessment=data.get("boot_assessment"),
            signature=data.get("signature"),
        )

    @property
    def key(self) -> str:
        """Which deployment this is (ostree's checksum and deploy serial)."""
        return f"{self.checksum}.{self.deploy_serial}"


@dataclass
class Faults:
    """Injected misbehaviour; see ``cli.py`` ``fault`` for what each does."""

    switch_fail: str | None = None
    switch_hang: bool = False
    status_garbage: bool = False
    status_block: bool = False
    incompatible: bool = False
    not_bootc: bool = False
    #: boots whose check fails / never finishes: scope ("*" or a digest) -> the unit
    #: (``boot.py``; decided at the next boot)
    boot_fail: dict[str, str] = field(default_factory=dict)
    boot_hang: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Faults:
        return cls(
            switch_fail=data.get("switch_fail"),
            switch_hang=bool(data.get("switch_hang", False)),
            status_garbage=bool(data.get("status_garbage", False)),
            status_block=bool(data.get("status_block", False)),
            incompatible=bool(data.get("incompatible", False)),
            not_bootc=bool(data.get("not_bootc", False)),
            boot_fail={str(k): str(v) for k, v in (data.get("boot_fail") or {}).items()},
            boot_hang={str(k): str(v) for k, v in (data.get("boot_hang") or {}).items()},
        )

    def active(self) -> list[str]:
        return [name for name, value in asdict(self).items() if value]


@dataclass
class Config:
    """How the host behaves."""

    architecture: str = "amd64"
    #: "ostree" (the common case) or "composefs" (entries report ``ostree: null``).
    backend: str = "ostree"
    #: seconds ``bootc switch`` spends "pulling" while holding the sysroot lock.
    stage_delay: float = 0.0
    #: a digest ref found neither in a registry nor in a catalog is accepted as is.
    accept_any_digest: bool = True
    #: systemd can soft-reboot (``soft-reboot.target`` exists; not on RHEL 9's systemd):
    #: without it no deployment is ``softRebootCapable`` and ``systemctl soft-reboot`` fails.
    soft_reboot: bool = True
    #: registry hosts ("host" or "host:port") contacted besides loopback ones.
    registries: list[str] = field(default_factory=list)
    #: registry hosts spoken to over plain http (loopback ones always are).
    insecure_registries: list[str] = field(default_factory=list)
    #: catalog files consulted after ROOT/.fakebootc/catalog.json.
    catalogs: list[str] = field(default_factory=list)
    registry_timeout: float = 10.0
    #: how long ``systemctl stop`` waits after SIGTERM before SIGKILL.
    stop_timeout: float = 10.0
    #: seconds after a boot until boot-complete.target is reached (or its check fails).
    boot_complete_delay: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        default = cls()
        return cls(
            architecture=str(data.get("architecture") or default.architecture),
            backend=str(data.get("backend") or default.backend),
            stage_delay=float(data.get("stage_delay", default.stage_delay)),
            accept_any_digest=bool(data.get("accept_any_digest", default.accept_any_digest)),
            soft_reboot=bool(data.get("soft_reboot", default.soft_reboot)),
            registries=[str(r) for r in data.get("registries", [])],
            insecure_registries=[str(r) for r in data.get("insecure_registries", [])],
            catalogs=[str(c) for c in data.get("catalogs", [])],
            registry_timeout=float(data.get("registry_timeout", default.registry_timeout)),
            stop_timeout=float(data.get("stop_timeout", default.stop_timeout)),
            boot_complete_delay=float(data.get("boot_complete_delay", default.boot_complete_delay)),
        )


@dataclass
class State:
    """Everything ``state.json`` holds."""

    booted: Deployment | None
    staged: Deployment | None = None
    rollback: Deployment | None = None
    rollback_queued: bool = False
    #: ``{"kind": "reboot"|"soft-reboot", "by": "<command>", "at": <unix time>}``
    reboot_request: dict[str, Any] | None = None
    #: the deployment (``Deployment.key``) prepared for a soft reboot by ``bootc ...
    #: --soft-reboot`` (ostree's ``/run/nextroot``): the next ``systemctl reboot``
    #: soft-reboots into it, as systemd >= 256 does when ``/run/nextroot`` is set up
    soft_reboot_target: str | None = None
    boots: int = 1
    #: how the current boot started: "full" or "soft" (a userspace-only reboot)
    boot_kind: str = "full"
    #: systemd's ``SoftRebootsCount``: soft reboots since the last full boot
    soft_reboots: int = 0
    config: Config = field(default_factory=Config)
    faults: Faults = field(default_factory=Faults)
    #: how the current boot is assessed (None in a state written before boots were)
    boot: Boot | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> State:
        def dep(key: str) -> Deployment | None:
            value = data.get(key)
            return Deployment.from_dict(value) if isinstance(value, dict) else None

        return cls(
            booted=dep("booted"),
            staged=dep("staged"),
            rollback=dep("rollback"),
            rollback_queued=bool(data.get("rollback_queued", False)),
            reboot_request=data.get("reboot_request"),
            soft_reboot_target=data.get("soft_reboot_target"),
            boots=int(data.get("boots", 1)),
            boot_kind=str(data.get("boot_kind") or "full"),
            soft_reboots=int(data.get("soft_reboots", 0)),
            config=Config.from_dict(data.get("config") or {}),
            faults=Faults.from_dict(data.get("faults") or {}),
            boot=Boot.from_dict(data["boot"]) if isinstance(data.get("boot"), dict) else None,
        )

    def current_boot(self) -> Boot:
        """``boot``, or a boot that completed long ago for a state without one."""
        return self.boot if self.boot is not None else Boot(started=0.0)

    def decide_boot(self, now: float) -> Boot | None:
        """How a boot of the booted deployment starting at ``now`` goes (``boot.py``)."""
        dep = self.booted
        if dep is None:
            return None
        return decide_boot(
            image=dep.image,
            digest=dep.digest,
            label=dep.boot_assessment,
            fail=self.faults.boot_fail,
            hang=self.faults.boot_hang,
            delay=self.config.boot_complete_delay,
            now=now,
        )

    def deployments(self) -> list[Deployment]:
        return [d for d in (self.staged, self.booted, self.rollback) if d is not None]

    def soft_reboot_capable(self, dep: Deployment) -> bool:
        """bootc's ``softRebootCapable`` of ``dep``: another deployment than the booted one,
        with the booted one's kernel, on a systemd that can soft-reboot. (Real bootc also
        requires the same kernel arguments and SELinux policy; the simulation's images
        differ only in their kernel.)"""
        booted = self.booted
        return (
            self.config.soft_reboot
            and booted is not None
            and dep.key != booted.key
            and not dep.incompatible
            and dep.kernel == booted.kernel
        )

    @property
    def booted_image(self) -> str | None:
        """The booted deployment's image reference (``hack.testenv.machine.BootRecord``)."""
        return self.booted.image if self.booted is not None else None

    def next_deployment(self) -> Deployment | None:
        """What a reboot boots if it changes deployments: a staged deployment that is not
        download-only (ostree finalizes it at shutdown, before anything else), else a
        queued rollback; None: the booted one again. (A switch after ``bootc rollback``
        leaves the rollback queued in status, and the staged image boots: the real bootc
        1.16.)"""
        if self.staged is not None and not self.staged.download_only:
            return self.staged
        if self.rollback_queued and self.rollback is not None:
            return self.rollback
        return None

    def reboot_kind(self) -> str:
        """How the requested reboot goes, "soft" or "full": ``systemctl soft-reboot`` is
        soft; ``systemctl reboot`` (what ``bootc ... --apply`` runs) is soft when a soft
        reboot into the next deployment was prepared; anything else (no request: the
        power button) is full."""
        kind = (self.reboot_request or {}).get("kind")
        if not self.config.soft_reboot or kind not in ("reboot", "soft-reboot"):
            return "full"
        if kind == "soft-reboot":
            return "soft"
        target = self.next_deployment()
        prepared = target is not None and target.key == self.soft_reboot_target
        return "soft" if prepared else "full"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` through a temporary file and a rename: readers see old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(paths: Paths) -> State:
    try:
        raw = paths.state.read_text()
    except FileNotFoundError:
        raise FakeHostError(
            f"{paths.root} is not a simulated host (no {paths.state}); run `init` first"
        ) from None
    try:
        return State.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise FakeHostError(f"corrupt simulated-host state {paths.state}: {exc}") from exc


def save_state(paths: Paths, state: State) -> None:
    text = json.dumps(state.to_dict(), indent=2, sort_keys=True) + "\n"
    atomic_write(paths.state, text.encode())


@contextlib.contextmanager
def flocked(
    path: Path, *, waiting_message: str | None = None, timeout: float | None = None
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed) for the block.

    If the lock is busy, ``waiting_message`` goes to stderr once (as ostree's
    "Waiting for sysroot lock..."), then this waits: forever, or ``timeout``
    seconds before raising ``TimeoutError``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting_message:
                print(waiting_message, file=sys.stderr, flush=True)
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise TimeoutError(f"{path} stayed locked for {timeout}s") from None
                        time.sleep(LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(fd)


def lock_is_held(path: Path) -> bool:
    """True when another process holds the ``flock`` on ``path``."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)


def lock_waiters(path: Path) -> set[int]:
    """The pids blocked in ``flock`` on ``path``, read from ``/proc/locks``.

    A blocked request is listed there (``->``) only once its process sleeps in the
    kernel waiting for the lock: proof, not a guess, that it is waiting.
    """
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text()
    except FileNotFoundError:
        return set()
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    waiters: set[int] = set()
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[1] == "->" and fields[2] == "FLOCK" and fields[6] == where:
            waiters.add(int(fields[5]))
    return waiters


def update_state(paths: Paths, change: Callable[[State], None]) -> State:
    """Apply ``change`` to the state under the state lock and save it; returns the new state."""
    with flocked(paths.state_lock):
        state = load_state(paths)
        change(state)
        save_state(paths, state)
        return state


def record_call(paths: Paths, tool: str, argv: list[str]) -> None:
    """Append one invocation to ``calls.jsonl`` (O_APPEND: concurrent lines stay whole)."""
    line = json.dumps({"tool": tool, "argv": argv, "pid": os.getpid(), "time": time.time()})
    with contextlib.suppress(OSError):
        paths.fake.mkdir(parents=True, exist_ok=True)
        fd = os.open(paths.calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def read_calls(paths: Paths) -> list[dict[str, Any]]:
    try:
        lines = paths.calls.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]
