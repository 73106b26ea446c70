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
from kubernetes_asyncio.client import ApiClient

from bootc_operator.informers.backoff import Backoff
from bootc_operator.informers.metrics import InformerMetrics
from bootc_operator.informers.objects import Obj
from bootc_operator.informers.transform import Transform, identity
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import ApiError, iter_json_lines, list_objects, open_stream

# A watch that ends sooner than this without delivering anything counts as a failure.
SHORT_WATCH: Final = 1.0
# Extra time past timeoutSeconds before the client gives up on a silent stream.
READ_SLACK: Final = 30.0
CONNECT_TIMEOUT: Final = 30.0
LIST_TIMEOUT: Final = 120.0


class Sink(Protocol):
    def replace(self, items: list[Obj]) -> None: ...

    def apply(self, event_type: str, obj: Obj) -> None: ...


@dataclass
class ReflectorStats:
    lists: int = 0
    watches: int = 0
    relists: int = 0
    errors: int = 0
    events: collections.Counter[str] = field(default_factory=collections.Counter)
    last_error: str = ""


class Expired(Exception):
    """The resourceVersion to watch from is no longer available (410 Gone)."""


class WatchFailed(Exception):
    """A watch ended in a way that deserves backoff."""


def _status_code(status: Any) -> int:
    if isinstance(status, dict):
        code = status.get("code")
        if isinstance(code, int):
            return code
    return 0


class Reflector:
    def __init__(
        self,
        api: ApiClient,
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
        self.rand = rand
        self.log = log or logging.getLogger(__name__)
        self.resource_version = ""
        self.stats = ReflectorStats()
        name = str(resource)
        self._m_lists = metrics.lists.labels(resource=name)
        self._m_watches = metrics.watches.labels(resource=name)
        self._m_relists = metrics.relists.labels(resource=name)
        self._m_events = metrics.events
        self._m_event_types: dict[str, Any] = {}
        self._m_list_errors = metrics.errors.labels(resource=name, op="list")
        self._m_watch_errors = metrics.errors.labels(resource=name, op="watch")
        self._name = name
        self._failing = False
        self._expired_again = False

    # ------------------------------------------------------------ loop

    async def run(self) -> None:
        need_list = True
        while True:
            op = "list" if need_list else "watch"
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    op = "watch"
                await self._watch()
                self._healthy()
            except Expired as e:
                need_list = True
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
                await asyncio.sleep(self._failed(op, e))

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

    async def _watch(self) -> None:
        timeout = int(self.min_watch_timeout * (1.0 + self.rand()))
        query: dict[str, str | int | bool] = {
            **self._selectors(),
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": self.resource_version,
            "timeoutSeconds": max(1, timeout),
        }
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
            raise
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
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype != "BOOKMARK":
            self.sink.apply(etype, self.transform(obj))
        if rv:
            self.resource_version = str(rv)
        if self._failing or self._expired_again:
            self._healthy()

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
