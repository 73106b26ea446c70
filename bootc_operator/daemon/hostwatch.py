"""Noticing host deployment changes at once, with pyinotify on the event loop.

bootc touches ``/ostree/bootc`` after it changed deployments (an ``IN_ATTRIB``);
composefs hosts have no such file but get a new entry under ``/sysroot/state/deploy``
per deployment (an ``IN_CREATE``). ``watch_target(host_root)`` picks the first of the
two that exists (pure, apart from the existence checks).

``HostWatch`` integrates pyinotify with asyncio without a thread: pyinotify's
``AsyncioNotifier`` registers the inotify file descriptor with ``loop.add_reader``;
when the kernel has events, the loop calls it, it reads what is queued (a
non-blocking read of the available bytes) and calls ``on_change()`` once per batch,
on the loop. ``on_change`` must be quick (it enqueues a status re-read). If the
watched path goes away (``IN_IGNORED``), the watch is re-armed on whatever target
exists then.

``bootc install`` makes ``/ostree/bootc``; a host deployed by ostree-ext instead
(Anaconda's ``ostreecontainer``, ``ostree container image deploy``) has none until
bootc first changes its deployments (seen with the real bootc 1.16), so without any
target the parent ``/ostree`` is watched for its creation (``creation_target``): the
first staging then both re-reads status and arms the watch on ``/ostree/bootc``.
Without even that the daemon relies on its periodic poll, which runs regardless, as
it does when no inotify instance can be had (seen on a busy shared machine:
``EMFILE``, the per-user instance limit). ``stop()`` removes the reader and closes
the descriptor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyinotify

log = logging.getLogger("daemon.watch")

OSTREE_BOOTC = Path("ostree/bootc")
COMPOSEFS_DEPLOY = Path("sysroot/state/deploy")


def watch_target(host_root: Path) -> tuple[Path, int] | None:
    """The path to watch and the inotify mask, or None when neither exists."""
    if (host_root / OSTREE_BOOTC).exists():
        return host_root / OSTREE_BOOTC, pyinotify.IN_ATTRIB
    if (host_root / COMPOSEFS_DEPLOY).is_dir():
        return host_root / COMPOSEFS_DEPLOY, pyinotify.IN_CREATE | pyinotify.IN_MOVED_TO
    return None


def creation_target(host_root: Path) -> tuple[Path, int] | None:
    """Where ``/ostree/bootc`` will appear (``/ostree``, for ``IN_CREATE``), when it exists."""
    parent = host_root / OSTREE_BOOTC.parent
    if parent.is_dir():
        return parent, pyinotify.IN_CREATE | pyinotify.IN_MOVED_TO | pyinotify.IN_ONLYDIR
    return None


class HostWatch:
    def __init__(self, host_root: Path, on_change: Callable[[], None]) -> None:
        self.host_root = host_root
        self.on_change = on_change
        self.watching: Path | None = None
        self._wm: Any = None
        self._notifier: Any = None
        self._changed = False
        self._lost = False
        #: watching /ostree until bootc makes /ostree/bootc
        self._awaiting = False
        self._wds: list[int] = []

    def start(self) -> Path | None:
        """Start watching (on the running loop); returns the watched path, if any. Without
        an inotify instance (the per-user limit, ``fs.inotify.max_user_instances``, is
        shared by every root process of the node) the daemon relies on its poll."""
        loop = asyncio.get_running_loop()
        try:
            self._wm = pyinotify.WatchManager()
        except OSError as exc:
            log.warning("cannot use inotify (%s); relying on the periodic poll", exc)
            return None
        self._notifier = pyinotify.AsyncioNotifier(
            self._wm, loop, callback=self._after_batch, default_proc_fun=self._event
        )
        self._arm()
        return self.watching

    def _arm(self) -> None:
        for wd in self._wds:
            self._wm.rm_watch(wd, quiet=True)
        self._wds = []
        target = watch_target(self.host_root)
        self.watching = None
        self._awaiting = target is None
        if target is None:
            target = creation_target(self.host_root)
        if target is None:
            log.warning(
                "no host deployment path to watch; relying on the periodic poll",
                extra={"tried": f"{OSTREE_BOOTC}, {COMPOSEFS_DEPLOY}", "root": self.host_root},
            )
            return
        path, mask = target
        added = self._wm.add_watch(str(path), mask, quiet=True)
        wd = added.get(str(path), -1)
        if wd < 0:
            log.warning("cannot watch %s; relying on the periodic poll", path)
            return
        self._wds = [wd]
        self.watching = path
        if self._awaiting:
            log.info(
                "watching for bootc's first deployment change",
                extra={"path": str(path), "awaiting": OSTREE_BOOTC.name},
            )
        else:
            log.info("watching host deployments", extra={"path": str(path)})

    def _event(self, event: Any) -> None:
        if self._awaiting:
            if event.name != OSTREE_BOOTC.name and not event.mask & pyinotify.IN_IGNORED:
                return  # something else in /ostree (its lock, a repo file)
            self._lost = True  # bootc made its directory: watch that instead
        self._changed = True
        if event.mask & pyinotify.IN_IGNORED:
            self._lost = True

    def _after_batch(self, _notifier: Any) -> None:
        if self._lost:
            self._lost = False
            log.info("re-arming the host watch", extra={"path": str(self.watching)})
            self._arm()
        if self._changed:
            self._changed = False
            self.on_change()

    def stop(self) -> None:
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.stop()
        self.watching = None
