"""The informer: a reflector-fed, indexed cache that calls event handlers.

Interface::

    inf = Informer(api, NODES, label_selector="bootc.dev/managed")
    inf.add_indexers({"pool": by_label("bootc.dev/pool")})
    inf.add_event_handler(EventHandler(on_add=..., on_update=..., on_delete=...))
    inf.start()                    # owns one task (plus one for resync)
    inf.start(listed=(items, rv))  # or: from a LIST the caller made, straight to WATCH
    await inf.wait_for_sync()      # the first (streaming) list is in the store
    inf.get("node-1"); inf.list(); inf.by_index("pool", "p")
    await inf.stop()               # cancels and awaits its tasks

The initial state comes from a streaming list (``watch_list=True``, the
default) or a LIST; see :mod:`~bootc_operator.informers.reflector`.
Every object passes through ``transform`` (default
:func:`~bootc_operator.informers.transform.strip_bulk`; the reflector applies
it) before it is stored and handed to handlers. Watch events update the store, then call handlers:
``ADDED``/``MODIFIED`` of an unknown key → ``on_add``, of a known key →
``on_update(old, new)``; ``DELETED`` of a known key → ``on_delete`` (a delete
for a key never seen is dropped, so handlers never see a delete without an add).
A (re-)LIST is diffed against the store by
:func:`~bootc_operator.informers.relist.diff_relist`: adds, updates of changed
objects, deletes with a ``DeletedFinalStateUnknown`` for vanished ones.

A handler added while the informer has synced gets ``on_add`` for every
cached object at once; one added earlier sees them as the first LIST lands.
With ``resync_period`` every handler gets ``on_update(obj, obj)`` for every
cached object periodically. Handler exceptions are logged and swallowed.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from bootc_operator.informers.backoff import Backoff
from bootc_operator.informers.handlers import EventHandler
from bootc_operator.informers.metrics import informer_metrics
from bootc_operator.informers.objects import DeletedFinalStateUnknown, Obj, object_key
from bootc_operator.informers.reflector import Reflector, ReflectorStats
from bootc_operator.informers.relist import DeltaType, diff_relist
from bootc_operator.informers.store import IndexFunc, Store
from bootc_operator.informers.transform import Transform, strip_bulk
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import Api

_log = logging.getLogger(__name__)


class Informer:
    def __init__(
        self,
        api: Api,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        transform: Transform = strip_bulk,
        indexers: Mapping[str, IndexFunc] | None = None,
        resync_period: float | None = None,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
        watch_list: bool = True,
        registry: CollectorRegistry | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform = transform
        self.resync_period = resync_period
        self.log = log or _log
        self._store = Store(object_key, indexers)
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.reflector = Reflector(
            api,
            resource,
            self,
            informer_metrics(registry),
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            page_size=page_size,
            min_watch_timeout=min_watch_timeout,
            backoff=backoff,
            transform=transform,
            watch_list=watch_list,
            rand=random.random,
            log=self.log,
        )

    def __repr__(self) -> str:
        sel = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"<Informer {self.resource}{' ' + sel if sel else ''}>"

    # ------------------------------------------------------------ cache reads

    @property
    def store(self) -> Store:
        return self._store

    def get(self, key: str) -> Obj | None:
        return self._store.get(key)

    def list(self) -> list[Obj]:
        return self._store.list()

    def keys(self) -> builtins.list[str]:
        return self._store.keys()

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return self._store.by_index(name, value)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self._store.add_indexers(indexers)

    @property
    def stats(self) -> ReflectorStats:
        return self.reflector.stats

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self.reflector.resource_version

    # ------------------------------------------------------------ handlers

    def add_event_handler(self, handler: EventHandler) -> EventHandler:
        """Register ``handler``; if already synced it gets adds for the cached objects now."""
        self._handlers.append(handler)
        if self.has_synced:
            for obj in self._store.list():
                self._call(handler, "add", obj)
        return handler

    def remove_event_handler(self, handler: EventHandler) -> None:
        if handler in self._handlers:
            self._handlers.remove(handler)

    # ------------------------------------------------------------ lifecycle

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, *, listed: tuple[builtins.list[Obj], str] | None = None) -> None:
        """Start the informer's task on the running loop (a no-op if running).

        ``listed``: items (already transformed) and the resourceVersion of a LIST the
        caller made with this informer's selectors: the cache starts from them and the
        first request is the WATCH from that resourceVersion."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(
                self.run(listed), name=f"informer {self.resource}"
            )

    async def stop(self) -> None:
        """Cancel the informer's tasks and wait for them; the cache stays readable."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise

    async def run(self, listed: tuple[builtins.list[Obj], str] | None = None) -> None:
        """List (unless ``listed``), watch and resync until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.reflector.run(listed), name=f"reflector {self.resource}")
            if self.resync_period:
                tg.create_task(self._resync_loop(), name=f"resync {self.resource}")

    async def _resync_loop(self) -> None:
        assert self.resync_period
        while True:
            await asyncio.sleep(self.resync_period)
            self.resync()

    def resync(self) -> None:
        """Call every handler's ``on_update(obj, obj)`` for every cached object (once synced)."""
        if self.has_synced:
            for obj in self._store.list():
                self._dispatch_update(obj, obj)

    # ------------------------------------------------------------ reflector sink

    def replace(self, items: builtins.list[Obj]) -> None:
        """A (re-)LIST's transformed items: diff against the store, apply, notify."""
        for delta in diff_relist(self._store.snapshot(), items, self._store.key):
            if delta.type is DeltaType.DELETED:
                self._store.delete(delta.key)
                self._dispatch_delete(delta.obj)
            else:
                assert isinstance(delta.obj, dict)
                self._store.upsert(delta.obj)
                if delta.old is None:
                    self._dispatch_add(delta.obj)
                else:
                    self._dispatch_update(delta.old, delta.obj)
        self._synced.set()

    def apply(self, event_type: str, obj: Obj) -> None:
        """One transformed watch object (``ADDED``, ``MODIFIED`` or ``DELETED``)."""
        if event_type == "DELETED":
            old = self._store.delete(self._store.key(obj))
            if old is not None:
                self._dispatch_delete(obj)
            return
        old = self._store.upsert(obj)
        if old is None:
            self._dispatch_add(obj)
        else:
            self._dispatch_update(old, obj)

    # ------------------------------------------------------------ dispatch

    def _dispatch_add(self, obj: Obj) -> None:
        for h in tuple(self._handlers):
            self._call(h, "add", obj)

    def _dispatch_update(self, old: Obj, new: Obj) -> None:
        for h in tuple(self._handlers):
            self._call(h, "update", old, new)

    def _dispatch_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        for h in tuple(self._handlers):
            self._call(h, "delete", obj)

    def _call(self, handler: EventHandler, what: str, *args: object) -> None:
        try:
            getattr(handler, what)(*args)
        except Exception:
            self.log.exception(
                "event handler failed",
                extra={"resource": str(self.resource), "event": what, "handler": repr(handler)},
            )
