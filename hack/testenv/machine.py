"""The machine under a real daemon on a test host: noticing and performing its reboots.

A test host (``hack.fakebootc``'s simulated one, or ``hack.realbootc``'s real bootc on
a real ostree sysroot: both are a ``TestHost``) records a reboot request when its
daemon runs ``systemctl reboot`` (or ``bootc upgrade --from-downloaded --apply
--soft-reboot=required``). Whatever hosts real daemons plays the machine then: the
sim's node simulator (``hack.simlib.nodesim``), the e2e hosts (``e2e.hostsenv``) and
the benchmark's daemon figure (``hack.perf.daemons``) all do it with this module:

- :class:`RebootRequests`: which hosts ask for a reboot, cheaply (a host's state
  file is re-read only when it changed, so polling 50 hosts five times a second is
  nearly free);
- :func:`reboot`: one reboot, in the order a real node goes through it: the daemon
  stops (as at shutdown) → the Node turns NotReady → ``down_seconds`` later (longer
  while ``held()``) the host boots its staged image → the Node is Ready → its kubelet
  reports the node's pods again (``report_pods``, e.g.
  ``kubelet.report_pods_after_boot``) → the daemon starts (a DaemonSet pod starts
  once its kubelet is up). A *soft* reboot (the host
  says so: ``Host.next_reboot_kind``; userspace restarts, kubelet and every pod with
  it, the kernel keeps running) goes the same way, only faster: it skips firmware,
  boot loader, kernel and initrd, so the Node is down ``soft_down_seconds`` (default
  ``SOFT_DOWN_FRACTION`` of ``down_seconds``), and the host keeps its boot ID (the
  Node's ``bootID``). Returns a :class:`Reboot`;
- :func:`simulate_reboots`: the loop that notices requests and runs one
  :func:`reboot` task per requesting host, until cancelled.

The in-process fleet (``hack.testenv.fleet``) simulates its daemons too, so it
simulates their reboots itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hack.fakebootc.state import HostError


class BootRecord(Protocol):
    """What a host's ``reboot()`` returns: how the boot started, how many so far, and
    the image it booted (the fake's ``State``, the real host's ``Booted``)."""

    @property
    def boot_kind(self) -> str: ...

    @property
    def boots(self) -> int: ...

    @property
    def booted_image(self) -> str | None: ...


class TestHost(Protocol):
    """What this module needs of a host (``hack.fakebootc.Host``, ``hack.realbootc.Host``)."""

    @property
    def root(self) -> Path: ...

    @property
    def request_marker(self) -> Path:
        """A file whose mtime changes when a reboot is requested."""
        ...

    @property
    def reboot_request(self) -> dict[str, Any] | None: ...

    @property
    def boot_id(self) -> str: ...

    def next_reboot_kind(self) -> str: ...

    def reboot(self) -> BootRecord: ...


log = logging.getLogger("machine")

POLL = 0.2
#: a soft reboot's down time as a share of a full one's, unless given
SOFT_DOWN_FRACTION = 0.25


H = TypeVar("H", bound=TestHost)


class RebootRequests:
    """Which hosts have a pending reboot request (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}

    def asked(self, host: TestHost) -> bool:
        """True when ``host`` records a reboot request (unchanged state is not re-read)."""
        key = str(host.root)
        try:
            mtime = host.request_marker.stat().st_mtime
        except FileNotFoundError:
            return False
        if self._seen.get(key) == mtime:
            return False
        self._seen[key] = mtime
        try:
            return host.reboot_request is not None
        except HostError as err:
            log.warning("reading host state of %s: %s", host.root, err)
            self._seen.pop(key, None)
            return False

    def forget(self, host: TestHost) -> None:
        """Read ``host`` afresh next time (after its reboot, or its daemon's restart)."""
        self._seen.pop(str(host.root), None)


@dataclass
class Reboot:
    """One reboot: its kind ("soft" or "full"), what asked for it, wall-clock times of the
    request seen, the Node down and up again, what booted and the host's boot ID after."""

    node: str
    kind: str
    requested: float
    down: float
    up: float
    booted: str | None
    boots: int
    by: str = ""
    boot_id: str = ""

    def record(self) -> dict[str, Any]:
        return asdict(self)


async def reboot(
    node: str,
    host: TestHost,
    *,
    stop_daemon: Callable[[], Awaitable[object]],
    set_ready: Callable[[bool], Awaitable[object]],
    start_daemon: Callable[[], Awaitable[object]],
    report_pods: Callable[[], Awaitable[object]] | None = None,
    down_seconds: float = 0.0,
    soft_down_seconds: float | None = None,
    held: Callable[[], bool] = lambda: False,
) -> Reboot:
    """Reboot ``host`` (see the module docstring); the callbacks are the daemon's, the Node's
    and (``report_pods``) its kubelet's."""
    requested = time.time()
    request, soft = host.reboot_request or {}, host.next_reboot_kind() == "soft"
    if soft:
        down_seconds = (
            down_seconds * SOFT_DOWN_FRACTION if soft_down_seconds is None else soft_down_seconds
        )
    await stop_daemon()
    await set_ready(False)
    down = time.time()
    if down_seconds > 0:
        await asyncio.sleep(down_seconds)
    # a hold is a file a test creates and removes: nothing to wait on but the file
    while held():  # noqa: ASYNC110
        await asyncio.sleep(0.5)
    while True:
        try:
            state = await asyncio.to_thread(host.reboot)
            break
        except HostError as err:
            log.warning("%s: reboot failed (%s); retrying", node, err)
            await asyncio.sleep(1.0)
    await set_ready(True)
    up = time.time()
    if report_pods is not None:
        await report_pods()
    await start_daemon()
    return Reboot(
        node,
        state.boot_kind,
        requested,
        down,
        up,
        state.booted_image,
        state.boots,
        str(request.get("by", "")),
        await asyncio.to_thread(lambda: host.boot_id),
    )


async def simulate_reboots(
    hosts: Callable[[], Iterable[tuple[str, H]]],
    reboot_one: Callable[[str, H], Awaitable[object]],
    *,
    poll: float = POLL,
) -> None:
    """Until cancelled: every ``poll`` seconds, start ``reboot_one(node, host)`` for each of
    ``hosts()`` that asks for a reboot and is not rebooting already."""
    requests = RebootRequests()
    running: dict[str, asyncio.Task[object]] = {}

    async def one(node: str, host: H) -> object:
        try:
            return await reboot_one(node, host)
        except Exception:  # the request stays: the next poll tries again
            log.exception("%s: simulated reboot failed", node)
            return None
        finally:
            requests.forget(host)
            running.pop(node, None)

    try:
        while True:
            for node, host in list(hosts()):
                if node not in running and requests.asked(host):
                    running[node] = asyncio.create_task(one(node, host), name=f"reboot-{node}")
            await asyncio.sleep(poll)
    finally:
        tasks = list(running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
