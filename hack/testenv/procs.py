"""Child processes of the harness: spawn, check, and always kill them.

Every component runs in its own session (so its whole process group can be
signalled), with stdin closed and stdout+stderr appended to a log file (so a
caller that captures our stdout never waits on a component). When the
harness's process dies for any reason, children spawned with
``die_with_parent`` get SIGKILL from the kernel (``PR_SET_PDEATHSIG`` via
util-linux ``setpriv``), so even ``kill -9`` of pytest leaks nothing.

Killing is SIGTERM to the process group, then SIGKILL after a grace period.
Processes we did not spawn ourselves (recorded PIDs of a detached control
plane) are only signalled after checking their command line, so a recycled PID
is never hit.

:class:`Component` is the ``with`` protocol of what runs such processes (the
control plane, the registry, the simulation): entering starts it, leaving closes it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

DEFAULT_GRACE = 10.0


class StartupError(RuntimeError):
    """A component failed to start; the message carries the tail of its log."""


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (empty if it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    text = data[-64 * 1024 :].decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _pdeathsig_prefix() -> list[str]:
    # PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so
    # only use it from the main thread (a worker thread may exit any time).
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class Component(ABC):
    """Something that starts processes: ``with X(...) as x`` is ``x = X(...).start()``
    with ``x.close()`` on the way out, whatever happens."""

    @abstractmethod
    def start(self) -> Self:
        """Bring it up; returns ``self``."""

    @abstractmethod
    def close(self) -> None:
        """Stop its processes and release what it holds."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ServerComponent(Component):
    """A component that is one long-running server process (the registry, Prometheus):
    ``process`` and ``log_path``, an ``atexit`` stop once started, ``stop`` / ``close``
    / ``tail``, and the start-up wait. Subclasses set ``NAME`` and ``STOP_GRACE`` and
    spawn the process in ``start`` after ``_stop_at_exit()``."""

    NAME = "server"
    STOP_GRACE = 5.0
    process: Process | None = None
    log_path: Path
    _atexit_registered = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def _stop_at_exit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True

    def _wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``ready`` until true; a process that exits meanwhile, or ``timeout``,
        is a ``StartupError`` with the end of its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if not self.process.alive():
                raise StartupError(
                    f"{self.NAME} {self.process.describe_exit()} at startup:\n{self.tail(30)}"
                )
            if ready():
                return
            time.sleep(0.05)
        raise StartupError(f"{self.NAME} {what} within {timeout:g}s:\n{self.tail(30)}")

    def stop(self) -> None:
        """Kill the process (SIGTERM, then SIGKILL); its files stay."""
        if self.process is not None:
            self.process.stop(grace=self.STOP_GRACE)
            self.process = None

    def close(self) -> None:
        self.stop()
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    def tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


@dataclass
class Process:
    """One running (or finished) component."""

    name: str
    argv: list[str]
    log_path: Path
    pid: int
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)

    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def describe_exit(self) -> str:
        rc = self.returncode()
        if rc is None:
            return "is not running" if not self.alive() else "is running"
        if rc < 0:
            return f"was killed by signal {signal.Signals(-rc).name}"
        return f"exited with code {rc}"

    def tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds; reap the child."""
        kill_group(self.pid, grace, self.popen)


def spawn(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = True,
) -> Process:
    """Start ``argv`` in a new session, logging to ``log_path`` (appended)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full = (_pdeathsig_prefix() if die_with_parent else []) + list(argv)
    with log_path.open("ab") as log:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        log.write(f"=== {stamp} starting {name}: {shlex.join(argv)}\n".encode())
        log.flush()
        popen = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    return Process(name=name, argv=list(argv), log_path=log_path, pid=popen.pid, popen=popen)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the parenthesised command name, which may contain spaces.
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid`` (empty if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg(0) also succeeds for zombies: only count live members.
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        after = stat.rsplit(")", 1)[-1].split()
        if len(after) > 3 and int(after[3]) == pgid and after[0] not in ("Z", "X"):
            return True
    return False


def kill_group(
    pgid: int, grace: float = DEFAULT_GRACE, popen: subprocess.Popen[bytes] | None = None
) -> None:
    """Terminate process group ``pgid`` (SIGTERM, then SIGKILL after ``grace`` s).

    ``popen`` (if it is our child) is reaped so no zombie is left behind.
    """

    def done() -> bool:
        if popen is not None and popen.poll() is None:
            return False
        return not _group_alive(pgid)

    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not done():
        _signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=1)
