"""Finding and killing a simulation's processes, whoever started them and whatever crashed.

Three nets, used together by ``teardown``:

1. the supervisor (the owner of a detached simulation) is asked to stop
   (SIGTERM): it stops everything in order and removes nothing it does not own;
2. every PID recorded in the state directory (``sim.json``, the control plane's
   ``state.json``, ``nodesim.json``) that still runs *and* still belongs to the
   simulation (its command line names the directory, or its environment carries
   ``BOOTC_SIM_DIR=DIR``; a recycled PID does neither) is terminated;
3. every process whose environment carries ``BOOTC_SIM_DIR=DIR`` is killed: that
   catches what nobody recorded, e.g. a ``bootc switch`` unit of a simulated host
   (the fake ``systemd-run`` runs units in their own session, as systemd does, so
   they outlive a killed daemon).

The calling process and its ancestors are never signalled. Real-bootc hosts
(``hack/sim up --real-bootc``) need no net of their own: their PID 1 dies with the
node simulator that booted it, and every process of a host with its PID 1; their
directories are made deletable (``hosts.release``) before the state directory goes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from hack.simlib import hosts
from hack.simlib.common import MARKER_ENV, NODESIM_FILE, SIM_FILE, read_json
from hack.testenv.procs import cmdline, pid_alive


def _ancestors() -> set[int]:
    pids = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        pids.add(pid)
    return pids


def _environ_marker(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{MARKER_ENV}=".encode()
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def belongs(pid: int, state_dir: Path) -> bool:
    """``pid`` runs and is part of the simulation in ``state_dir``."""
    if not pid_alive(pid):
        return False
    if _environ_marker(pid) == str(state_dir):
        return True
    return mentions(cmdline(pid), state_dir)


def mentions(argv: list[str], state_dir: Path) -> bool:
    """Some argument is ``state_dir`` or a path inside it."""
    d = str(state_dir)
    return any(arg == d or arg.endswith(f"={d}") or f"{d}/" in arg for arg in argv)


def marked_pids(state_dir: Path) -> list[int]:
    """Live processes whose environment says they belong to ``state_dir`` (not us)."""
    skip = _ancestors()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in skip:
            continue
        if _environ_marker(pid) == str(state_dir) and pid_alive(pid):
            found.append(pid)
    return sorted(found)


def recorded_pids(state_dir: Path) -> dict[str, int]:
    """name -> PID of every recorded process that still belongs to ``state_dir``."""
    recorded: dict[str, int] = {}
    nodesim = read_json(state_dir / NODESIM_FILE) or {}
    for name, proc in (nodesim.get("processes") or {}).items():
        if isinstance(proc, dict) and isinstance(proc.get("pid"), int):
            recorded[name] = proc["pid"]
    if isinstance(nodesim.get("pid"), int):
        recorded["nodesim"] = nodesim["pid"]
    control_plane = read_json(state_dir / "controlplane" / "state.json") or {}
    for name, pid in (control_plane.get("pids") or {}).items():
        if isinstance(pid, int):
            recorded[name] = pid
    sim = read_json(state_dir / SIM_FILE) or {}
    for name, pid in (sim.get("pids") or {}).items():
        if isinstance(pid, int):
            recorded[name] = pid
    skip = _ancestors()
    return {n: p for n, p in recorded.items() if p not in skip and belongs(p, state_dir)}


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def terminate(pids: Iterable[int], grace: float = 10.0) -> list[int]:
    """SIGTERM (their groups, when they lead one), SIGKILL after ``grace``; returns the
    PIDs that needed SIGKILL."""
    pending = [p for p in pids if pid_alive(p)]
    for pid in pending:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [p for p in pending if pid_alive(p)]
    for pid in pending:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    left = list(pending)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if pid_alive(p)]
    return pending


def stop_supervisor(state_dir: Path, timeout: float = 90.0) -> bool:
    """Ask the supervisor of ``state_dir`` (if one runs) to stop everything; wait for it.

    True if there was one. It is SIGKILLed after ``timeout`` (its children then die
    by PR_SET_PDEATHSIG, and the other nets catch the rest).
    """
    sim = read_json(state_dir / SIM_FILE) or {}
    pid = (sim.get("pids") or {}).get("supervisor")
    if not isinstance(pid, int) or pid in _ancestors() or not belongs(pid, state_dir):
        return False
    terminate([pid], grace=timeout)
    return True


def teardown(state_dir: Path, *, remove: bool = True) -> list[str]:
    """Stop everything of the simulation in ``state_dir``; remove the directory.

    Returns what had to be killed by the second and third nets (empty after a clean
    stop by the supervisor).
    """
    killed: list[str] = []
    stop_supervisor(state_dir)
    recorded = recorded_pids(state_dir)
    if recorded:
        killed += [f"{name} (pid {pid})" for name, pid in recorded.items()]
        terminate(recorded.values(), grace=10.0)
    stragglers = marked_pids(state_dir)
    if stragglers:
        killed += [f"pid {pid} ({' '.join(cmdline(pid))[:80]})" for pid in stragglers]
        terminate(stragglers, grace=2.0)
    if remove:
        hosts.release(state_dir)
        shutil.rmtree(state_dir, ignore_errors=True)
    return killed


def leftovers(state_dir: Path) -> list[int]:
    """PIDs still belonging to ``state_dir`` (by environment marker or command line)."""
    skip = _ancestors()
    found = set(marked_pids(state_dir))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in skip:
            pid = int(entry.name)
            if mentions(cmdline(pid), state_dir) and pid_alive(pid):
                found.add(pid)
    return sorted(found)
