"""``kubectl bootc``'s API access: kubeconfig like kubectl, reads and writes, one-line errors.

Where the cluster is comes from kubectl's rules: ``--kubeconfig``, else
``$KUBECONFIG``, else ``~/.kube/config``, else (in a Pod) the service account;
``--context`` picks a context. Requests go through ``kube.lite`` (aiohttp, no
generated models): the plugin starts in a fraction of the full client's time.

Every answer is cleaned of control characters (``safetext``) before anything
reads it, so no cluster text reaches the terminal raw.

Every failure becomes a :class:`PluginError` whose message is the one line
``kubectl bootc`` prints: no cluster (no kubeconfig, connection refused, TLS),
no permission (``cannot list bootcnodepools.node.bootc.dev: User "…" cannot …``),
no such pool or node.

An answer that says "come back shortly" (429 Too Many Requests: priority and
fairness, or a resource's storage (re)initializing right after an apiserver
restart or a CRD install) is retried after the Status' ``retryAfterSeconds``, a
few times, as kubectl's client does (:func:`retry_delay`); only then is it the
one-line error.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from bootc_operator.api import constants as c
from bootc_operator.kube.lite import ConfigError, LiteClient, default_kubeconfig, load_access
from bootc_operator.kube.resources import BOOTC_NODE_POOLS, BOOTC_NODES, NODES, PODS, Resource
from bootc_operator.kube.rest import (
    ApiError,
    Obj,
    get_object,
    list_objects,
    open_stream,
    patch_object,
)
from bootc_operator.kubectl.safetext import clean_obj

#: how often a 429 answer is retried, and the longest wait asked for that is honoured
RETRIES_ON_429 = 5
LONGEST_RETRY_AFTER = 5.0
#: how the retry waits (the unit tests record the waits instead)
pause: Callable[[float], Awaitable[None]] = asyncio.sleep


def retry_delay(err: ApiError, attempt: int) -> float | None:
    """How long to wait before sending again a request that got ``err`` on its
    ``attempt``-th try (0-based), or None when it is not to be retried: only a 429
    (the request was not processed, so any verb may be sent again), at most
    :data:`RETRIES_ON_429` times, after the Status' ``details.retryAfterSeconds``
    (1 s when absent or unusable; at most :data:`LONGEST_RETRY_AFTER`)."""
    if err.status != 429 or attempt >= RETRIES_ON_429:
        return None
    details = (err.body or {}).get("details")
    asked = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(asked, bool) or not isinstance(asked, int | float) or not asked > 0:
        return 1.0
    return min(float(asked), LONGEST_RETRY_AFTER)


CORE_EVENTS = Resource("", "v1", "events", namespaced=True, kind="Event")
#: what ``status -w`` watches: (resource, from resourceVersion, selector query)
Watches = list[tuple[Resource, str, dict[str, str]]]


#: fieldSelectors on Events, each with the involvedObject kinds kept from its answer
EventQueries = list[tuple[str, frozenset[str]]]


def event_queries(pool: str | None, nodes: Iterable[str]) -> EventQueries:
    """What finds a rollout's Events: the pool's own (kind and name) and, per node,
    its BootcNode's and Node's. A node's two kinds share its name and one
    selector (selectors cannot say "either kind"); the kind is checked on the
    answer."""
    queries: EventQueries = []
    if pool is not None:
        selector = f"involvedObject.kind={c.POOL_KIND},involvedObject.name={pool}"
        queries.append((selector, frozenset({c.POOL_KIND})))
    kinds = frozenset({c.NODE_KIND, "Node"})
    queries += [(f"involvedObject.name={node}", kinds) for node in sorted(set(nodes))]
    return queries


class PluginError(Exception):
    """What ``kubectl bootc`` prints (one line) before exiting non-zero."""


def open_client(kubeconfig: str | None, context: str | None) -> LiteClient:
    """A client for the cluster kubectl would talk to (module docstring)."""
    env = os.environ
    try:
        path: str | Path | None = kubeconfig
        if not path:
            default = default_kubeconfig(env)
            in_pod = env.get("KUBERNETES_SERVICE_HOST") and not default.exists()
            if not default.exists() and not in_pod:
                raise PluginError(
                    f"no cluster: no kubeconfig at {default} (set KUBECONFIG or pass --kubeconfig)"
                )
            path = None if in_pod else default
        return LiteClient(load_access(path, context=context), max_connections=10)
    except ConfigError as e:
        raise PluginError(f"no cluster: {e}") from None


def _verb(method: str, name: str | None) -> str:
    return {"GET": "get" if name else "list", "PATCH": "patch"}.get(method, method.lower())


def explain_api_error(err: ApiError, verb: str, resource: Resource, name: str | None) -> str:
    """The one line for a refused request."""
    what = f"{resource} {name}" if name else str(resource)
    if err.status == 403:
        detail = err.message.split(": ", 1)[-1] if err.message else ""
        return f"no permission to {verb} {resource}: {detail or 'forbidden'}"
    if err.status == 401:
        return f"not authorised: the cluster refused the credentials ({err.message or err.reason})"
    if err.status == 404 and resource == BOOTC_NODE_POOLS and name:
        return f'no such pool "{name}" (kubectl get bootcnodepools lists them)'
    if err.status == 404 and name:
        return f'no such {resource.kind or resource} "{name}"'
    if err.status == 404:
        return f"{resource} is not served: are the bootc-operator CRDs installed?"
    return f"cannot {verb} {what}: {err}"


class Cluster:
    """The reads and writes ``kubectl bootc`` makes; errors become :class:`PluginError`."""

    def __init__(self, client: LiteClient) -> None:
        self.client = client

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def _call(
        self,
        method: str,
        resource: Resource,
        name: str | None,
        request: Callable[[], Awaitable[Any]],
    ) -> Any:
        attempt = 0
        while True:
            try:
                # every cell the plugin prints comes from here: control characters go
                return clean_obj(await request())
            except ApiError as e:
                delay = retry_delay(e, attempt)
                if delay is None:
                    raise PluginError(
                        explain_api_error(e, _verb(method, name), resource, name)
                    ) from None
            except aiohttp.ClientConnectorError as e:
                raise PluginError(
                    f"no cluster: cannot connect to {self.client.host}: {e.os_error.strerror or e}"
                ) from None
            except (aiohttp.ClientError, TimeoutError) as e:
                raise PluginError(
                    f"no cluster: {self.client.host}: {e or type(e).__name__}"
                ) from None
            attempt += 1
            await pause(delay)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return dict(
            await self._call(
                "GET", resource, name, lambda: get_object(self.client, resource, name, namespace)
            )
        )

    async def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[Obj], str]:
        items, rv = await self._call(
            "GET",
            resource,
            None,
            lambda: list_objects(
                self.client,
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            ),
        )
        return list(items), str(rv)

    async def patch(self, resource: Resource, name: str, body: Mapping[str, Any]) -> Obj:
        return dict(
            await self._call(
                "PATCH",
                resource,
                name,
                lambda: patch_object(self.client, resource, name, dict(body)),
            )
        )

    async def pool_objects(
        self, pool: str | None
    ) -> tuple[list[Obj], list[Obj], dict[str, Obj], Watches]:
        """The pool (or every pool), the BootcNodes, the Nodes by name, and where to
        watch each from (the reads' resourceVersions and selectors)."""
        label = f"{c.POOL_LABEL}={pool}" if pool else ""

        async def pools() -> tuple[list[Obj], str]:
            if pool is None:
                return await self.list_all(BOOTC_NODE_POOLS)
            obj = await self.get(BOOTC_NODE_POOLS, pool)
            return [obj], str(obj["metadata"].get("resourceVersion") or "")

        results = await asyncio.gather(
            pools(),
            self.list_all(BOOTC_NODES, label_selector=label),
            self.list_all(NODES),
            return_exceptions=True,
        )
        for result in results:  # the first failure in this order, whichever came first
            if isinstance(result, BaseException):
                raise result
        (ps, prv), (bns, brv), (ns, nrv) = results  # type: ignore[misc]
        watches: Watches = [
            (BOOTC_NODE_POOLS, prv, {"fieldSelector": f"metadata.name={pool}"} if pool else {}),
            (BOOTC_NODES, brv, {"labelSelector": label} if label else {}),
            (NODES, nrv, {}),
        ]
        return ps, bns, {str(n["metadata"]["name"]): n for n in ns}, watches

    async def pods_on(self, nodes: list[str]) -> dict[str, list[Obj]]:
        """The Pods on each of ``nodes`` (for a ``pods`` health check); a node whose
        pods cannot be listed (no permission) is left out."""

        async def one(node: str) -> tuple[str, list[Obj] | None]:
            try:
                items, _ = await self.list_all(PODS, field_selector=f"spec.nodeName={node}")
            except PluginError:
                return node, None
            return node, items

        found = await asyncio.gather(*(one(n) for n in nodes))
        return {n: items for n, items in found if items is not None}

    async def events(self, namespace: str | None, queries: EventQueries) -> list[Obj]:
        """The Events ``queries`` find (:func:`event_queries`), each once: the
        apiserver selects them, not a list of every Event of the namespace."""

        async def one(selector: str, kinds: frozenset[str]) -> list[Obj]:
            items, _ = await self.list_all(CORE_EVENTS, namespace, field_selector=selector)
            return [ev for ev in items if (ev.get("involvedObject") or {}).get("kind") in kinds]

        found: dict[str, Obj] = {}
        for items in await asyncio.gather(*(one(s, k) for s, k in queries)):
            for ev in items:
                meta = ev.get("metadata") or {}
                found[f"{meta.get('namespace')}/{meta.get('name')}"] = ev
        return list(found.values())

    async def wait_change(self, watches: Watches, seconds: float) -> None:
        """Return when an object of ``watches`` changes after its resourceVersion, or
        after ``seconds`` (the times shown move on)."""

        async def watch(resource: Resource, rv: str, selector: Mapping[str, str]) -> None:
            query: dict[str, str | int | bool] = {
                "watch": "true",
                "timeoutSeconds": max(1, int(seconds)),
                **selector,
            }
            if rv:
                query["resourceVersion"] = rv
            try:
                async with open_stream(self.client, resource.path(), query=query) as resp:
                    async for _line in resp.content:
                        return
            except (ApiError, aiohttp.ClientError):
                await asyncio.sleep(seconds)  # the next full read reports the error

        tasks = [asyncio.create_task(watch(*w)) for w in watches]
        try:
            await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
