"""One informer per (resource, namespace, label selector, field selector) per process.

Interface::

    factory = SharedInformerFactory(api)
    nodes = factory.informer(NODES)                  # same object for every caller
    pools = factory.informer(BOOTC_NODE_POOLS, indexers={...})
    factory.start()                                  # starts every informer not running
    await factory.wait_for_cache_sync()
    ...
    await factory.stop()

Informers asked for after ``start()`` start at once. Indexers asked for by
different callers are merged into the shared informer's store (the same name
must mean the same function). Options given to the factory (transform, resync
period, page size, watch timeout, backoff, streaming list or LIST, metrics
registry) apply to every informer it creates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from bootc_operator.informers.backoff import Backoff
from bootc_operator.informers.informer import Informer
from bootc_operator.informers.store import IndexFunc
from bootc_operator.informers.transform import Transform, strip_bulk
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import Api

InformerKey = tuple[Resource, str, str, str]


class SharedInformerFactory:
    def __init__(
        self,
        api: Api,
        *,
        transform: Transform = strip_bulk,
        resync_period: float | None = None,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        backoff: Callable[[], Backoff] = Backoff,
        watch_list: bool = True,
        registry: CollectorRegistry | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.api = api
        self._watch_list = watch_list
        self._transform = transform
        self._resync_period = resync_period
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._backoff = backoff
        self._registry = registry
        self._log = log
        self._informers: dict[InformerKey, Informer] = {}
        self._started = False

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
    ) -> Informer:
        """The shared informer for these arguments (created on first request).

        ``transform`` overrides the factory's for a newly created informer; the
        first caller decides, so consumers of one resource must agree on it.
        """
        key = (resource, namespace or "", label_selector, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(
                self.api,
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                transform=transform or self._transform,
                resync_period=self._resync_period,
                page_size=self._page_size,
                min_watch_timeout=self._min_watch_timeout,
                backoff=self._backoff(),
                watch_list=self._watch_list,
                registry=self._registry,
                log=self._log,
            )
            self._informers[key] = inf
            if self._started:
                inf.start()
        if indexers:
            inf.add_indexers(indexers)
        return inf

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def start(self) -> None:
        """Start every informer that is not running (call from the event loop)."""
        self._started = True
        for inf in self._informers.values():
            inf.start()

    async def wait_for_cache_sync(self) -> None:
        """Wait until every informer created so far has synced."""
        await asyncio.gather(*(inf.wait_for_sync() for inf in self._informers.values()))

    @property
    def has_synced(self) -> bool:
        return all(inf.has_synced for inf in self._informers.values())

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()))
