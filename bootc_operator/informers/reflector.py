"""The reflector: keeps a sink in step with the API server by LIST + WATCH.

``Reflector.run()`` loops until cancelled:

1. LIST the resource (paginated with ``limit``/``continue``, label and field
   selectors applied; see :func:`~bootc_operator.kube.rest.list_objects`),
   remember the list's resourceVersion and hand the items to ``sink.replace(items)``.
   Every object, listed or watched, passes through ``transform`` first (page
   by page for a LIST, so only one raw page is held at a time).
2. WATCH from that resourceVersion with ``allowWatchBookmarks`` and a
   server-side ``timeoutSeconds`` drawn from [min, 2·min), feeding
   ``ADDED``/``MODIFIED``/``DELETED`` objects to ``sink.apply(type, obj)``.
   Every event and every ``BOOKMARK`` advances the remembered resourceVersion.
3. When the server ends the watch (its timeout) or the connection drops, WATCH
   again from the remembered resourceVersion: no LIST.
4. When that resourceVersion is gone — HTTP 410 at watch start or an ``ERROR``
   event with code 410 — LIST again (step 1; the sink diffs).

``run(listed=(items, resourceVersion))`` skips step 1 the first time: the caller
already LISTed (with the same selectors and transform), so the reflector hands
those items to the sink and goes straight to WATCH from that resourceVersion.

With ``watch_list=True`` (the default, as in client-go 1.36 where the
``WatchListClient`` gate is on) step 1 is a *streaming list* instead: one
WATCH with ``sendInitialEvents=true`` and ``resourceVersionMatch=NotOlderThan``
that the server answers from its watch cache with an ``ADDED`` event per
object and then a ``BOOKMARK`` annotated ``k8s.io/initial-events-end``; the
collected objects go to ``sink.replace`` and the same stream carries on as
step 2. No LIST request is made, so an informer started while the program runs
(the controller's per-drain Pod informers, a restarted daemon) costs the
apiserver one watch. A server that refuses those parameters (400/422/501 — the
``WatchList`` gate off, or older than 1.27) makes this reflector fall back to
LIST for good, with one log line. A streaming list that fails before its end
bookmark (a watch cache still initializing answers 429; a server drops a
watcher that does not keep up) is followed at once by one plain LIST, as
client-go does; later re-lists try streaming again.

Failures (connection errors, non-2xx answers, other ``ERROR`` events, a watch
that ends at once without any event) are logged once each, with the resource
and selectors, and retried after a capped, jittered exponential
:class:`~bootc_operator.informers.backoff.Backoff`, reset by a healthy watch.

The sink interface (:class:`Sink`) is what :class:`~bootc_operator.informers.informer.Informer`
implements. :class:`ReflectorStats` counts lists, watches, relists and events
per reflector so tests can read them without a metrics registry.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import aiohttp

from bootc_operator.informers.backoff import Backoff
from bootc_operator.informers.metrics import InformerMetrics
from bootc_operator.informers.objects import Obj
from bootc_operator.informers.transform import Transform, identity
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import Api, ApiError, iter_json_lines, list_objects, open_stream
from bootc_operator.wording import counted

# A watch that ends sooner than this without delivering anything counts as a failure.
SHORT_WATCH: Final = 1.0
# Extra time past timeoutSeconds before the client gives up on a silent stream.
READ_SLACK: Final = 30.0
CONNECT_TIMEOUT: Final = 30.0
LIST_TIMEOUT: Final = 120.0
# The annotation on the BOOKMARK that ends a streaming list's initial events.
INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
# Answers to a streaming-list request that mean "this server does not do that".
WATCH_LIST_REFUSED: Final = frozenset({400, 422, 501})


class Sink(Protocol):
    def replace(self, items: list[Obj]) -> None: ...

    def apply(self, event_type: str, obj: Obj) -> None: ...


@dataclass
class ReflectorStats:
    lists: int = 0
    watch_lists: int = 0  # streaming lists (each also counts as a watch)
    watches: int = 0
    relists: int = 0
    errors: int = 0
    events: collections.Counter[str] = field(default_factory=collections.Counter)
    last_error: str = ""


class Expired(Exception):
    """The resourceVersion to watch from is no longer available (410 Gone)."""


class WatchFailed(Exception):
    """A watch ended in a way that deserves backoff."""


class WatchListRefused(Exception):
    """The server does not support streaming lists; LIST instead."""


def _status_code(status: Any) -> int:
    if isinstance(status, dict):
        code = status.get("code")
        if isinstance(code, int):
            return code
    return 0


class Reflector:
    def __init__(
        self,
        api: Api,
        resource: Resource,
        sink: Sink,
        metrics: InformerMetrics,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
        transform: Transform = identity,
        watch_list: bool = True,
        rand: Callable[[], float] = random.random,
        log: logging.Logger | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.backoff = backoff or Backoff()
        self.transform = transform
        self.watch_list = watch_list
        self.rand = rand
        self.log = log or logging.getLogger(__name__)
        self.resource_version = ""
        self.stats = ReflectorStats()
        name = str(resource)
        self._m_lists = metrics.lists.labels(resource=name)
        self._m_watches = metrics.watches.labels(resource=name)
        self._m_watch_lists = metrics.watch_lists.labels(resource=name)
        self._m_relists = metrics.relists.labels(resource=name)
        self._m_events = metrics.events
        self._m_event_types: dict[str, Any] = {}
        self._m_list_errors = metrics.errors.labels(resource=name, op="list")
        self._m_watch_errors = metrics.errors.labels(resource=name, op="watch")
        self._name = name
        self._failing = False
        self._expired_again = False
        # While a streaming list has not seen its end bookmark: the objects so far.
        self._initial: dict[tuple[str, str], Obj] | None = None

    # ------------------------------------------------------------ loop

    async def run(self, listed: tuple[list[Obj], str] | None = None) -> None:
        need_list = True
        list_next = False
        if listed is not None:
            items, self.resource_version = listed
            self.sink.replace(items)
            need_list = False
        while True:
            op = "list" if need_list else "watch"
            try:
                if need_list and self.watch_list and not list_next:
                    op = "watch-list"
                    try:
                        await self._watch(initial=True)
                    finally:
                        # Synced once the end bookmark arrived, even if the stream broke later.
                        need_list = self._initial is not None
                        self._initial = None
                        # Like client-go: a streaming list that broke before its end is
                        # followed by a plain LIST (progress beats retrying the stream).
                        list_next = need_list
                else:
                    if need_list:
                        await self._list()
                        need_list = list_next = False
                        op = "watch"
                    await self._watch()
                self._healthy()
            except WatchListRefused as e:
                self.watch_list = list_next = False
                self.log.info(
                    "server refused a streaming list; using LIST", extra=self._ctx(error=str(e))
                )
            except Expired as e:
                need_list = True
                self.resource_version = ""
                self.stats.relists += 1
                self._m_relists.inc()
                self.log.info(
                    "watch resourceVersion expired; re-listing", extra=self._ctx(error=str(e))
                )
                if self._expired_again:
                    # Gone twice without a healthy watch in between: do not spin.
                    await asyncio.sleep(self.backoff.next())
                self._expired_again = True
            except asyncio.CancelledError:
                raise
            except Exception as e:
                delay = self._failed(op, e)
                if not (op == "watch-list" and list_next):
                    await asyncio.sleep(delay)
                # else: the LIST that follows a broken streaming list goes at once
                # (client-go's order); a LIST that fails too backs off as usual.

    # ------------------------------------------------------------ LIST

    def _selectors(self) -> dict[str, str]:
        query = {}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        return query

    async def _list(self) -> None:
        items, self.resource_version = await list_objects(
            self.api,
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.page_size,
            request_timeout=LIST_TIMEOUT,
            transform=self.transform,
        )
        self.stats.lists += 1
        self._m_lists.inc()
        self.sink.replace(items)

    # ------------------------------------------------------------ WATCH

    async def _watch(self, *, initial: bool = False) -> None:
        """One WATCH until the server ends it; ``initial``: a streaming list first."""
        timeout = int(self.min_watch_timeout * (1.0 + self.rand()))
        query: dict[str, str | int | bool] = {
            **self._selectors(),
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": self.resource_version,
            "timeoutSeconds": max(1, timeout),
        }
        if initial:
            query["sendInitialEvents"] = True
            query["resourceVersionMatch"] = "NotOlderThan"
            self._initial = {}
            self.stats.watch_lists += 1
            self._m_watch_lists.inc()
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT, sock_read=timeout + READ_SLACK
        )
        self.stats.watches += 1
        self._m_watches.inc()
        loop = asyncio.get_running_loop()
        started = loop.time()
        received = 0
        try:
            async with open_stream(
                self.api,
                self.resource.path(self.namespace),
                query=query,
                request_timeout=client_timeout,
            ) as resp:
                async for event in iter_json_lines(resp):
                    received += 1
                    self.handle_event(event)
        except ApiError as e:
            if e.gone:
                raise Expired(str(e)) from e
            if initial and e.status in WATCH_LIST_REFUSED:
                raise WatchListRefused(str(e)) from e
            raise
        if self._initial is not None:
            raise WatchFailed(
                f"streaming list ended after {counted(received, 'event')} without its bookmark"
            )
        if not received and loop.time() - started < SHORT_WATCH:
            raise WatchFailed("watch closed immediately without any event")

    def handle_event(self, event: Any) -> None:
        """Apply one decoded watch event (raises Expired / WatchFailed for ERROR events)."""
        etype = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(etype, str) or not isinstance(obj, dict):
            raise WatchFailed(f"malformed watch event: {str(event)[:200]}")
        self.stats.events[etype] += 1
        counter = self._m_event_types.get(etype)
        if counter is None:
            counter = self._m_events.labels(resource=self._name, type=etype)
            self._m_event_types[etype] = counter
        counter.inc()
        if etype == "ERROR":
            code = _status_code(obj)
            message = f"{code} {obj.get('reason', '')}: {obj.get('message', '')}"
            if code == 410:
                raise Expired(message)
            raise WatchFailed(f"watch ERROR event: {message}")
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if self._initial is not None:
            self._initial_event(etype, obj, meta)
        elif etype != "BOOKMARK":
            self.sink.apply(etype, self.transform(obj))
        if rv:
            self.resource_version = str(rv)
        if self._failing or self._expired_again:
            self._healthy()

    def _initial_event(self, etype: str, obj: Obj, meta: Obj) -> None:
        """Collect a streaming list's objects; hand them over at its end bookmark."""
        assert self._initial is not None
        if etype == "BOOKMARK":
            if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                items, self._initial = list(self._initial.values()), None
                self.sink.replace(items)
            return
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if etype == "DELETED":
            self._initial.pop(key, None)
        else:
            self._initial[key] = self.transform(obj)

    # ------------------------------------------------------------ failures

    def _ctx(self, **more: Any) -> dict[str, Any]:
        ctx: dict[str, Any] = {"resource": self._name}
        if self.namespace:
            ctx["namespace"] = self.namespace
        if self.label_selector:
            ctx["labelSelector"] = self.label_selector
        if self.field_selector:
            ctx["fieldSelector"] = self.field_selector
        ctx.update(more)
        return ctx

    def _failed(self, op: str, error: Exception) -> float:
        """Count and log one failure; return how long to wait before retrying."""
        delay = self.backoff.next()
        self.stats.errors += 1
        (self._m_list_errors if op == "list" else self._m_watch_errors).inc()
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self.stats.last_error = text
        self._failing = True
        self.log.warning(
            "%s failed; retrying in %.1fs",
            op.upper(),
            delay,
            extra=self._ctx(error=text, attempt=self.backoff.failures),
        )
        return delay

    def _healthy(self) -> None:
        """The watch delivered events or ran its course: forget past failures."""
        self.backoff.reset()
        self._expired_again = False
        if self._failing:
            self._failing = False
            self.log.info("watch healthy again", extra=self._ctx())
