"""The programs inside a real-bootc host: its boot, its PID 1 and its systemd shims.

A real-bootc host (``hack.realbootc.host``) is a mount + PID namespace whose ``/`` is
the booted ostree deployment. No systemd runs there, so this module stands in for the
parts of it that bootc, ostree and the daemon talk to. It runs *inside* the host, by
the Debian ``python3`` of the host's ``/usr`` (``-IS``, standard library only, plus the
stdlib-only ``hack.fakebootc.boot`` for the boot assessment and ``hack.fakebootc.shims``
for what ``systemctl`` prints, the same on both hosts), reached through the kit's
read-only bind at ``/usr/local/lib/realbootc-kit``. The tools in ``/usr/local/bin``
(``systemd-run``, ``systemctl``, ``journalctl`` and the ``bootc`` / ``ostree`` /
``ostree-container`` wrappers) are stubs that call :func:`main` with their name.

- ``boot CONFIG`` (PID 1 of a fresh ``unshare --mount --pid --fork``, still in the
  machine's root): writes its PID as the machine sees it, mounts what libostree
  calls "booted" (the deployment bound on itself as ``/``, ``/sysroot``, ``/boot``,
  the stateroot's ``/var``, a fresh ``/proc`` of the new PID namespace with a
  ``/proc/cmdline`` carrying ``ostree=``, the per-boot ``/run`` with
  ``/run/ostree-booted``, the kernel's ``boot_id``), the machine's ``/usr`` (see the
  package docstring for why), ``/dev``, ``/sys`` and a tmpfs ``/tmp``, then
  ``pivot_root`` into the deployment and becomes ``init``.
- ``init``: PID 1. Reaps every process, and is the service manager: transient units
  (``systemd-run``) are its children, in their own session, so killing a
  ``systemd-run --wait`` client does not stop its unit, and ``systemctl stop`` does
  (SIGTERM to the unit's process group, SIGKILL after ``STOP_TIMEOUT``). Clients talk
  to it over ``/run/realbootc/init.sock`` (SOCK_SEQPACKET, one JSON document per
  message; ``--pipe`` passes the client's stdin/stdout/stderr along as file
  descriptors). Unit records are files under ``/run/realbootc/units`` (the harness
  reads them from outside), the output of units started without ``--pipe`` goes to
  ``/run/realbootc/journal/UNIT.log``. Dies only by SIGKILL from outside (a reboot).
- ``systemd-run [--wait] [--collect] [--pipe] [--quiet] [--unit U] [-p ...] CMD...``:
  as the fake's (``hack.fakebootc.shims``), with the same sharp edges (a loaded unit
  of that name refuses the start; a failed unit stays until ``reset-failed`` unless
  ``--collect``; the exit code is the unit's, 255 when a signal ended it).
- ``systemctl``: ``stop``, ``reset-failed``, ``is-active``, ``is-system-running``,
  ``list-units --failed``, ``show`` (``SoftRebootsCount``), ``start`` (ostree's
  ``ostree-finalize-staged.service``: a no-op, the harness finalizes at reboot),
  ``daemon-reload``, and ``reboot`` / ``soft-reboot``, which only record the request in
  ``/run/realbootc/reboot-request.json`` for the harness (``soft-reboot`` fails where
  the host's systemd has none). ``boot-complete.target`` and the boot's check unit
  answer from ``/run/realbootc/boot.json`` (a ``hack.fakebootc.boot.Boot`` the harness
  decided at boot), exactly as on the fake host.
- ``journalctl -u U``: what units without ``--pipe`` wrote.
- ``skopeo`` (a link to ``hack/policygate``'s binary, bound at
  ``/usr/local/lib/realbootc-policygate``, ahead of the machine's ``/usr/bin/skopeo`` on
  ``PATH``): Debian's skopeo 1.9.3 with the policy check of skopeo >= 1.13's image proxy
  in front, so bootc's pulls obey the host's ``/etc/containers/policy.json`` and
  ``registries.d`` (sigstore attachments) as on a Fedora/CentOS bootc host.
- ``bootc`` / ``ostree`` / ``ostree-container``: record the call (``bootc`` and the
  shims append ``{"tool", "argv", "pid", "time"}`` to ``/var/log/realbootc/calls.jsonl``,
  which survives reboots like any ``/var/log``), then exec the real binary from the
  bootc build bound at ``/usr/local/lib/realbootc`` with its libostree on
  ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hack.fakebootc import shims
from hack.fakebootc.boot import Boot
from hack.fakebootc.shims import (
    NO_SOFT_REBOOT,
    list_failed_units,
    print_states,
    show_properties,
    unit_name,
    unit_state,
)

RUN_DIR: Final = Path("/run/realbootc")
SOCKET: Final = RUN_DIR / "init.sock"
UNITS: Final = RUN_DIR / "units"
JOURNAL: Final = RUN_DIR / "journal"
BOOT_FILE: Final = RUN_DIR / "boot.json"
REBOOT_REQUEST: Final = RUN_DIR / "reboot-request.json"
READY: Final = RUN_DIR / "ready"
PID_FILE: Final = RUN_DIR / "pid"
CMDLINE: Final = RUN_DIR / "cmdline"
BOOT_ID: Final = RUN_DIR / "boot_id"
CONFIG: Final = RUN_DIR / "host.json"
CALLS: Final = Path("/var/log/realbootc/calls.jsonl")
BUILD: Final = Path("/usr/local/lib/realbootc")
KIT: Final = Path("/usr/local/lib/realbootc-kit")
#: the directory of ``hack/policygate``, whose binary is the host's ``skopeo``
GATE: Final = Path("/usr/local/lib/realbootc-policygate")
REAL_BINARIES: Final = {
    "bootc": BUILD / "bin" / "bootc",
    "ostree-container": BUILD / "bin" / "bootc",
    "ostree": BUILD / "prefix" / "bin" / "ostree",
}
LIBRARY_PATH: Final = BUILD / "prefix" / "lib"
SHIMS: Final = ("systemd-run", "systemctl", "journalctl")
#: the environment of PID 1 (and so of every unit, and of ``nsenter --env``)
HOST_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STOP_TIMEOUT: Final = 10.0
EXIT_EXCEPTION: Final = shims.EXIT_EXCEPTION
UNIT_NOT_LOADED: Final = shims.UNIT_NOT_LOADED
MESSAGE_MAX: Final = 1 << 20
PROGRAM_NOT_RUN: Final = 203


def host_environment() -> dict[str, str]:
    """PID 1's environment: what a systemd host gives its services."""
    return {"PATH": HOST_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def record_call(tool: str, argv: Sequence[str]) -> None:
    """Append one call record (best effort: a host without a writable /var still works)."""
    line = json.dumps({"tool": tool, "argv": list(argv), "pid": os.getpid(), "time": time.time()})
    with contextlib.suppress(OSError):
        CALLS.parent.mkdir(parents=True, exist_ok=True)
        with CALLS.open("a") as f:
            f.write(line + "\n")


# ------------------------------------------------------------------ boot


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"realbootc boot: mount {' '.join(args)}: {done.stderr.strip()}")


def boot(config_path: str) -> int:
    """Mount the booted deployment as ``/`` and become PID 1 (module docstring)."""
    cfg: dict[str, Any] = json.loads(Path(config_path).read_text())
    root = Path(cfg["deployment"])
    sysroot, run = Path(cfg["sysroot"]), Path(cfg["run"])
    state = run / "realbootc"
    state.mkdir(parents=True, exist_ok=True)
    # the machine's /proc is still mounted: /proc/self is this process as the machine sees it
    _atomic_write(state / "pid", str(Path("/proc/self").readlink()).encode())
    _atomic_write(state / "cmdline", (cfg["cmdline"] + "\n").encode())
    if not (state / "boot_id").exists():  # kept across a soft reboot, like the kernel's
        _atomic_write(state / "boot_id", f"{uuid.uuid4()}\n".encode())
    _atomic_write(state / "host.json", json.dumps(cfg, indent=2).encode())
    (run / "ostree-booted").touch()
    for sub in ("units", "journal"):
        (state / sub).mkdir(exist_ok=True)

    _mount("--bind", str(root), str(root))
    _mount("--bind", str(sysroot), str(root / "sysroot"))
    _mount("--bind", str(sysroot / "boot"), str(root / "boot"))
    _mount("--bind", cfg["var"], str(root / "var"))
    _mount("--bind", "/usr", str(root / "usr"))
    _mount("-o", "remount,bind,ro", str(root / "usr"))
    _mount("--bind", cfg["usr_local"], str(root / "usr/local"))
    for source, target in ((cfg["build"], BUILD), (cfg["kit"], KIT), (cfg["policygate"], GATE)):
        _mount("--bind", source, f"{root}{target}")
        _mount("-o", "remount,bind,ro", f"{root}{target}")
    if cfg.get("systemd_units"):
        _mount("--bind", cfg["systemd_units"], str(root / "usr/lib/systemd/system"))
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(root / "proc"))
    _mount("--rbind", "/dev", str(root / "dev"))
    _mount("--rbind", "/sys", str(root / "sys"))
    _mount("--bind", str(run), str(root / "run"))
    _mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", str(root / "tmp"))
    _mount("--bind", str(state / "cmdline"), str(root / "proc/cmdline"))
    _mount("--bind", str(state / "boot_id"), str(root / "proc/sys/kernel/random/boot_id"))

    os.chdir(root)
    for argv in (["pivot_root", ".", "."], ["umount", "-l", "."]):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"realbootc boot: {' '.join(argv)}: {done.stderr.strip()}")
    os.chdir("/")
    stub = "/usr/local/bin/hostinit"
    os.execve("/usr/bin/python3", ["python3", "-IS", stub, "init"], host_environment())


# ------------------------------------------------------------------ init


@dataclass
class Unit:
    name: str
    argv: list[str]
    pid: int
    collect: bool
    invocation: str
    started: float = field(default_factory=time.time)
    state: str = "active"
    result: str = ""
    waiters: list[socket.socket] = field(default_factory=list)
    stoppers: list[socket.socket] = field(default_factory=list)
    kill_at: float | None = None

    def record(self) -> dict[str, Any]:
        return {
            "unit": self.name,
            "pid": self.pid if self.state == "active" else None,
            "pgid": self.pid if self.state == "active" else None,
            "argv": self.argv,
            "invocation": self.invocation,
            "started": self.started,
            "failed": self.state == "failed",
            "result": self.result,
        }


def ended(status: int) -> tuple[str, str, int]:
    """(result, "Main processes terminated with" text, systemd-run's exit code) of a
    ``waitpid`` status."""
    return shims.ended(os.waitstatus_to_exitcode(status))


def _send(conn: socket.socket, doc: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.send(json.dumps(doc).encode())


class Init:
    """PID 1: reaper and transient-unit manager (module docstring)."""

    def __init__(self) -> None:
        self.units: dict[str, Unit] = {}
        self.by_pid: dict[int, Unit] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        with contextlib.suppress(FileNotFoundError):
            SOCKET.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(SOCKET))
        listener.listen(64)
        self.selector.register(listener, selectors.EVENT_READ, "listen")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        for stale in UNITS.glob("*.json"):  # a soft reboot kept /run: no unit survived it
            stale.unlink()
        READY.write_text(f"{time.time()}\n")
        while True:
            timeout = self._next_deadline()
            for key, _ in self.selector.select(timeout):
                if key.data == "listen":
                    conn, _addr = listener.accept()
                    self.selector.register(conn, selectors.EVENT_READ, "client")
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                else:
                    self._client(key.fileobj)  # type: ignore[arg-type]
            self._reap()
            self._kill_overdue()

    def _next_deadline(self) -> float | None:
        deadlines = [u.kill_at for u in self.units.values() if u.kill_at is not None]
        return None if not deadlines else max(0.0, min(deadlines) - time.monotonic())

    def _client(self, conn: socket.socket) -> None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, MESSAGE_MAX, 3)
        except OSError:
            data, fds = b"", []
        if not data:
            self._drop(conn)
            return
        try:
            request = json.loads(data)
            self._handle(conn, request, fds)
        except Exception as exc:  # one bad request must not take PID 1 down
            _send(conn, {"exit": 1, "error": f"init: {type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _drop(self, conn: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        for unit in self.units.values():
            if conn in unit.waiters:
                unit.waiters.remove(conn)
            if conn in unit.stoppers:
                unit.stoppers.remove(conn)
        conn.close()

    def _handle(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        op = request.get("op")
        if op == "run":
            self._run(conn, request, fds)
        elif op == "stop":
            self._stop(conn, unit_name(str(request["unit"])), bool(request.get("block", True)))
        elif op == "reset-failed":
            names = [unit_name(u) for u in request.get("units") or []]
            for name in names or [n for n, u in self.units.items() if u.state == "failed"]:
                unit = self.units.get(name)
                if unit is not None and unit.state == "failed":
                    self._forget(unit)
            _send(conn, {"exit": 0})
        elif op == "shutdown":
            self._shutdown()
            _send(conn, {"exit": 0})
        else:
            _send(conn, {"exit": 1, "error": f"init: unknown request {op!r}"})

    def _run(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        name = unit_name(str(request["unit"]))
        argv = [str(a) for a in request["argv"]]
        if name in self.units:
            _send(
                conn,
                {
                    "exit": 1,
                    "error": f"Failed to start transient service unit: Unit {name} was "
                    "already loaded or has a fragment file.",
                },
            )
            return
        env = host_environment()
        env.update({str(k): str(v) for k, v in (request.get("setenv") or {}).items()})
        pid = os.fork()
        if pid == 0:  # the unit
            try:
                os.setsid()
                signal.set_wakeup_fd(-1)
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_DFL)
                if len(fds) == 3:
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                else:
                    JOURNAL.mkdir(parents=True, exist_ok=True)
                    log = os.open(JOURNAL / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                os.closerange(3, 65536)
                os.chdir(request.get("cwd") or "/")
                os.execvpe(argv[0], argv, env)
            except OSError as exc:
                os.write(2, f"{name}: Failed to execute {argv[0]}: {exc.strerror}\n".encode())
            os._exit(PROGRAM_NOT_RUN)
        unit = Unit(name, argv, pid, bool(request.get("collect")), uuid.uuid4().hex)
        self.units[name] = unit
        self.by_pid[pid] = unit
        self._write(unit)
        _send(conn, {"started": True, "unit": name, "invocation": unit.invocation})
        if request.get("wait"):
            unit.waiters.append(conn)

    def _stop(self, conn: socket.socket, name: str, block: bool) -> None:
        unit = self.units.get(name)
        if unit is None:
            _send(conn, {"exit": UNIT_NOT_LOADED, "error": f"Unit {name} not loaded."})
            return
        if unit.state != "active":  # a failed unit is already stopped (and stays failed)
            _send(conn, {"exit": 0})
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(unit.pid, signal.SIGTERM)
        if unit.kill_at is None:
            unit.kill_at = time.monotonic() + STOP_TIMEOUT
        if block:
            unit.stoppers.append(conn)
        else:
            _send(conn, {"exit": 0})

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for unit in list(self.units.values()):
            if unit.kill_at is not None and unit.kill_at <= now and unit.state == "active":
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(unit.pid, signal.SIGKILL)
                unit.kill_at = now + 1.0

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            unit = self.by_pid.pop(pid, None)
            if unit is not None:
                self._ended(unit, status)

    def _ended(self, unit: Unit, status: int) -> None:
        # systemd stops what the main process left behind in the unit (KillMode=control-group)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(unit.pid, signal.SIGKILL)
        result, text, code = ended(status)
        stopped = unit.kill_at is not None
        for conn in unit.waiters:
            _send(conn, {"exit": code, "result": result, "status": text})
        for conn in unit.stoppers:
            _send(conn, {"exit": 0})
        unit.waiters.clear()
        unit.stoppers.clear()
        unit.kill_at = None
        if result == "success" or unit.collect or stopped:
            self._forget(unit)
        else:  # without --collect a failed unit stays loaded until reset-failed
            unit.state, unit.result = "failed", result
            self._write(unit)

    def _forget(self, unit: Unit) -> None:
        self.units.pop(unit.name, None)
        with contextlib.suppress(FileNotFoundError):
            (UNITS / f"{unit.name}.json").unlink()

    def _write(self, unit: Unit) -> None:
        _atomic_write(UNITS / f"{unit.name}.json", json.dumps(unit.record()).encode())

    def _shutdown(self) -> None:
        """What a shutdown does before ``ostree-finalize-staged``: every process but PID 1
        is killed (units first), and reaped."""
        for unit in self.units.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(unit.pid, signal.SIGKILL)
        for _ in range(100):
            others = [
                int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and p.name != "1"
            ]
            for pid in others:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._reap()
            if not others:
                break
            time.sleep(0.02)
        for unit in list(self.units.values()):
            self._forget(unit)


def init() -> int:
    if os.getpid() != 1:
        print("realbootc init: not PID 1", file=sys.stderr)
        return 1
    Init().serve()
    return 0


# ------------------------------------------------------------------ clients


def request(doc: dict[str, Any], fds: Sequence[int] = ()) -> socket.socket:
    """Send ``doc`` to PID 1; the connection stays open for the answers."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(str(SOCKET))
    socket.send_fds(conn, [json.dumps(doc).encode()], list(fds))
    return conn


def answer(conn: socket.socket) -> dict[str, Any]:
    data = conn.recv(MESSAGE_MAX)
    if not data:
        return {"exit": EXIT_EXCEPTION, "error": "the service manager went away"}
    doc: dict[str, Any] = json.loads(data)
    return doc


def _split_systemd_run(argv: list[str]) -> tuple[dict[str, Any], list[str]] | str:
    """systemd-run's options and the command, or an error text."""
    with_value = {
        "-u": "unit",
        "--unit": "unit",
        "-p": "property",
        "--property": "property",
        "-E": "setenv",
        "--setenv": "setenv",
        "--description": None,
        "--service-type": None,
        "--uid": None,
        "--gid": None,
        "--nice": None,
        "--slice": None,
        "--working-directory": "cwd",
    }
    flags = {
        "--wait": "wait",
        "-G": "collect",
        "--collect": "collect",
        "-q": "quiet",
        "--quiet": "quiet",
        "-P": "pipe",
        "--pipe": "pipe",
        "-t": "pipe",
        "--pty": "pipe",
    }
    opts: dict[str, Any] = {"setenv": {}}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        name, eq, value = arg.partition("=")
        if name in with_value:
            if not eq:
                i += 1
                if i >= len(argv):
                    return f"option {name} requires an argument"
                value = argv[i]
            key = with_value[name]
            if key == "setenv":
                k, _, v = value.partition("=")
                opts["setenv"][k] = v
            elif key is not None:
                opts[key] = value
        elif arg in flags:
            opts[flags[arg]] = True
        elif arg in ("--no-block", "--no-ask-password", "--system", "-r", "--remain-after-exit"):
            pass
        else:
            return f"unrecognized option '{arg}'"
        i += 1
    return opts, argv[i:]


def systemd_run(argv: list[str]) -> int:
    parsed = _split_systemd_run(argv)
    if isinstance(parsed, str):
        print(f"systemd-run: {parsed}", file=sys.stderr)
        return 1
    opts, command = parsed
    if not command:
        print("Command line to execute required.", file=sys.stderr)
        return 1
    unit = unit_name(opts.get("unit") or f"run-u{os.getpid()}")
    doc = {
        "op": "run",
        "unit": unit,
        "argv": command,
        "setenv": opts["setenv"],
        "cwd": opts.get("cwd"),
        "collect": bool(opts.get("collect")),
        "wait": bool(opts.get("wait")),
    }
    conn = request(doc, [0, 1, 2] if opts.get("pipe") else [])
    started = answer(conn)
    if not started.get("started"):
        print(started.get("error", "Failed to start transient service unit."), file=sys.stderr)
        return int(started.get("exit", 1))
    quiet = bool(opts.get("quiet"))
    if not quiet:
        print(
            f"Running as unit: {unit}; invocation ID: {started.get('invocation', '')}",
            file=sys.stderr,
            flush=True,
        )
    if not opts.get("wait"):
        return 0
    t0 = time.monotonic()
    done = answer(conn)
    if not quiet:
        print(f"Finished with result: {done.get('result', 'exit-code')}", file=sys.stderr)
        print(f"Main processes terminated with: {done.get('status', '')}", file=sys.stderr)
        print(f"Service runtime: {time.monotonic() - t0:.3f}s", file=sys.stderr)
    return int(done.get("exit", EXIT_EXCEPTION))


def _unit_records() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(UNITS.glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            out[path.name.removesuffix(".json")] = json.loads(path.read_text())
    return out


def _boot() -> Boot:
    """This boot's assessment (``hack.fakebootc.boot.Boot``) as the harness decided it."""
    try:
        data = json.loads(BOOT_FILE.read_text())
    except (OSError, ValueError):
        data = {"started": 0.0}
    return Boot.from_dict(data)


def _config() -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(CONFIG.read_text())
    except (OSError, ValueError):
        doc = {}
    return doc


def systemctl(argv: list[str]) -> int:
    flags = {a for a in argv if a.startswith("-")}
    words = [a for a in argv if not a.startswith("-")]
    if not words and "--failed" in flags:
        return _list_units(argv)
    if not words:
        print("systemctl (realbootc): a verb is required", file=sys.stderr)
        return 1
    verb, units = words[0], [unit_name(u) for u in words[1:]]
    quiet = "-q" in flags or "--quiet" in flags
    if verb == "stop":
        rc = 0
        for unit in units:
            conn = request({"op": "stop", "unit": unit, "block": "--no-block" not in flags})
            done = answer(conn)
            if done.get("exit"):
                print(f"Failed to stop {unit}: {done.get('error', '')}", file=sys.stderr)
                rc = int(done["exit"])
        return rc
    if verb == "is-active":
        boot, now, records = _boot(), time.time(), _unit_records()
        return print_states([unit_state(boot, u, records.get(u), now) for u in units], quiet=quiet)
    if verb == "is-system-running":
        failed = any(r.get("failed") for r in _unit_records().values())
        state = _boot().system_state(time.time(), other_failed=failed)
        if not quiet:
            print(state)
        return 0 if state == "running" else 1
    if verb == "list-units":
        return _list_units(argv)
    if verb == "reset-failed":
        answer(request({"op": "reset-failed", "units": units}))
        return 0
    if verb in ("daemon-reload", "start"):
        # ``start``: ostree's staging starts ostree-finalize-staged.service, whose stop
        # at shutdown finalizes; the harness's reboot runs ``ostree admin finalize-staged``
        return 0
    if verb == "soft-reboot" and not _config().get("soft_reboot"):
        print(NO_SOFT_REBOOT, file=sys.stderr)
        return UNIT_NOT_LOADED
    if verb in ("reboot", "soft-reboot"):
        doc = {"kind": verb, "by": f"systemctl {verb}", "at": time.time(), "argv": argv}
        _atomic_write(REBOOT_REQUEST, json.dumps(doc).encode())
        return 0
    if verb == "show":
        return _show(argv)
    print(f"systemctl (realbootc): unsupported verb {verb!r}", file=sys.stderr)
    return 1


def _show(argv: list[str]) -> int:
    return show_properties(argv, {"SoftRebootsCount": str(_config().get("soft_reboots", 0))})


def _list_units(argv: list[str]) -> int:
    failed = [name for name, record in _unit_records().items() if record.get("failed")]
    return list_failed_units(argv, _boot(), failed, "realbootc")


def journalctl(argv: list[str]) -> int:
    units = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-u", "--unit")]
    units += [a.partition("=")[2] for a in argv if a.startswith("--unit=")]
    lines: list[str] = []
    for unit in units:
        name = unit_name(unit)
        with contextlib.suppress(OSError):
            text = (JOURNAL / f"{name}.log").read_text(errors="replace")
            cat = "cat" in argv or "-ocat" in argv or "--output=cat" in argv
            prefix = "" if cat else f"host {name.removesuffix('.service')}: "
            lines += [prefix + line for line in text.splitlines()]
    if "-n" in argv:
        count = int(argv[argv.index("-n") + 1])
        lines = lines[-count:] if count > 0 else []
    if not lines and "-q" not in argv and "--quiet" not in argv:
        print("-- No entries --")
    for line in lines:
        print(line)
    return 0


def exec_real(tool: str, argv: list[str]) -> int:
    """Record the call (bootc) and exec the real binary of the bootc build."""
    if tool == "bootc":
        record_call(tool, argv)
    env = dict(os.environ)
    libs = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{LIBRARY_PATH}:{libs}" if libs else str(LIBRARY_PATH)
    binary = REAL_BINARIES[tool]
    os.execve(binary, [tool, *argv], env)


def main(tool: str, argv: list[str]) -> int:
    """The entry of every stub in ``/usr/local/bin`` (``tool`` is its name)."""
    if tool == "hostinit":
        mode, argv = (argv[0], argv[1:]) if argv else ("", [])
        if mode == "boot":
            return boot(argv[0])
        if mode == "init":
            return init()
        print(f"hostinit: unknown mode {mode!r} (boot CONFIG | init)", file=sys.stderr)
        return 2
    if tool in REAL_BINARIES:
        return exec_real(tool, argv)
    record_call(tool, argv)
    try:
        if tool == "systemd-run":
            return systemd_run(argv)
        if tool == "systemctl":
            return systemctl(argv)
        if tool == "journalctl":
            return journalctl(argv)
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        print(f"{tool}: the service manager (PID 1) does not answer: {exc}", file=sys.stderr)
        return 1
    print(f"realbootc: unknown tool {tool!r}", file=sys.stderr)
    return 2
