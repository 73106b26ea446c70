"""Raw JSON access to the API server through any :class:`Api` client.

Requests go through ``api.call_api(..., _preload_content=False)`` so the
client's host, TLS, bearer-token refresh and default headers apply, but bodies
are parsed with :func:`json.loads` into plain dicts: no model classes. :class:`Api`
is the one method this needs: ``kubernetes_asyncio``'s ``ApiClient`` (the
controller) and :class:`~bootc_operator.kube.lite.LiteClient` (the daemon, which
must not import ``kubernetes_asyncio``) both satisfy it, so nothing here imports
either.

- :func:`request_json` / :func:`request_bytes`: one request, whole body.
- :func:`open_stream` + :func:`iter_json_lines`: a streaming GET (watch),
  one JSON document per line, lines of any length.
- :func:`get_object`, :func:`list_objects`, :func:`create_object`,
  :func:`patch_object`, :func:`delete_object`: thin verbs over a :class:`Resource`.
- :class:`ApiError`: any non-2xx answer, with the server's ``Status`` fields.

Every request is counted in ``bootc_operator_api_requests_total{verb,resource,code}``
(:data:`API_REQUESTS`), with the API server's own spelling so the figures can be
compared with its ``apiserver_request_total``: verb ``GET``/``LIST``/``WATCH``/
``POST``/``PATCH``/``APPLY``/``PUT``/``DELETE``, resource the plural with
its subresource (``nodes/status``), code the HTTP status (``error`` when no
answer came).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

import aiohttp
from prometheus_client import Counter

from bootc_operator.kube.resources import Resource

Obj = dict[str, Any]
Query = Mapping[str, str | int | bool] | Sequence[tuple[str, str]]

DEFAULT_TIMEOUT: Final = 60.0
PATCH_TYPES: Final = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


class Api(Protocol):
    """What :mod:`.rest` needs of a client: ``call_api`` with these keywords, answering
    the unread ``aiohttp.ClientResponse`` when ``_preload_content=False``, and ``close``.
    """

    def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: list[tuple[str, str]],
        header_params: dict[str, str],
        body: Any,
        auth_settings: list[str],
        _preload_content: bool,
        _request_timeout: aiohttp.ClientTimeout,
    ) -> Awaitable[Any]: ...

    async def close(self) -> None: ...


API_REQUESTS: Final = Counter(
    "bootc_operator_api_requests_total",
    "Requests to the Kubernetes API by verb (apiserver spelling), resource and HTTP code",
    ["verb", "resource", "code"],
)
_counters: dict[tuple[str, str, str], Any] = {}


def request_kind(method: str, path: str, query: list[tuple[str, str]]) -> tuple[str, str]:
    """(verb, resource) of a request as kube-apiserver's metrics name them.

    ``GET`` on a collection is ``LIST``, with ``watch=true`` ``WATCH``; resource is
    the plural plus subresource (``pods/eviction``); ``""`` for non-resource paths.
    """
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return method, ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return method, ""
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    verb = method
    if method == "GET" and len(rest) == 1:
        verb = "WATCH" if ("watch", "true") in query else "LIST"
    return verb, resource


def _count(verb: str, resource: str, code: str) -> None:
    key = (verb, resource, code)
    child = _counters.get(key)
    if child is None:
        child = _counters[key] = API_REQUESTS.labels(verb, resource, code)
    child.inc()


class ApiError(Exception):
    """A non-2xx answer. ``status`` is the HTTP code, ``reason``/``message`` the Status'."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @classmethod
    def from_body(cls, status: int, raw: bytes) -> ApiError:
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status":
            return cls(status, str(doc.get("reason", "")), str(doc.get("message", "")), doc)
        return cls(status, "", raw[:500].decode("utf-8", "replace").strip())

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


def _query(query: Query | None) -> list[tuple[str, str]]:
    if not query:
        return []
    items = query.items() if isinstance(query, Mapping) else query
    out = []
    for k, v in items:
        out.append((k, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return out


def _timeout(request_timeout: float | aiohttp.ClientTimeout | None) -> aiohttp.ClientTimeout:
    if isinstance(request_timeout, aiohttp.ClientTimeout):
        return request_timeout
    return aiohttp.ClientTimeout(total=request_timeout)


async def _send(
    api: Api,
    method: str,
    path: str,
    query: Query | None,
    body: Any,
    content_type: str,
    request_timeout: float | aiohttp.ClientTimeout | None,
) -> aiohttp.ClientResponse:
    params = _query(query)
    verb, resource = request_kind(method, path, params)
    if verb == "PATCH" and content_type == PATCH_TYPES["apply"]:
        verb = "APPLY"
    try:
        resp: aiohttp.ClientResponse = await api.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=_timeout(request_timeout),
        )
    except BaseException:
        _count(verb, resource, "error")
        raise
    _count(verb, resource, str(resp.status))
    return resp


async def request_bytes(
    api: Api,
    method: str,
    path: str,
    *,
    query: Query | None = None,
    body: Any = None,
    content_type: str = "application/json",
    request_timeout: float | aiohttp.ClientTimeout | None = DEFAULT_TIMEOUT,
) -> bytes:
    """The raw body of a 2xx answer; :class:`ApiError` otherwise (e.g. for ``/metrics``)."""
    resp = await _send(api, method, path, query, body, content_type, request_timeout)
    async with resp:
        raw = await resp.read()
        if not 200 <= resp.status < 300:
            raise ApiError.from_body(resp.status, raw)
        return raw


async def request_json(
    api: Api,
    method: str,
    path: str,
    *,
    query: Query | None = None,
    body: Any = None,
    content_type: str = "application/json",
    request_timeout: float | aiohttp.ClientTimeout | None = DEFAULT_TIMEOUT,
) -> Obj:
    """The JSON object of a 2xx answer as a dict; :class:`ApiError` otherwise."""
    raw = await request_bytes(
        api,
        method,
        path,
        query=query,
        body=body,
        content_type=content_type,
        request_timeout=request_timeout,
    )
    doc = json.loads(raw) if raw else {}
    if not isinstance(doc, dict):
        raise ApiError(0, "BadResponse", f"{method} {path}: expected a JSON object")
    return doc


@asynccontextmanager
async def open_stream(
    api: Api,
    path: str,
    *,
    query: Query | None = None,
    request_timeout: aiohttp.ClientTimeout | None = None,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """A streaming GET; raises :class:`ApiError` before yielding on a non-2xx answer.

    The response is released when the block exits (also on cancellation).
    """
    resp = await _send(api, "GET", path, query, None, "application/json", request_timeout)
    async with resp:
        if not 200 <= resp.status < 300:
            raise ApiError.from_body(resp.status, await resp.read())
        yield resp


async def iter_json_lines(resp: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """Each newline-terminated JSON document of a streaming body, parsed."""
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        start = 0
        while (end := buf.find(b"\n", start)) >= 0:
            if end > start:
                yield json.loads(buf[start:end])
            start = end + 1
        del buf[:start]
    if buf.strip():
        yield json.loads(buf)


# ---------------------------------------------------------------- verbs


async def get_object(api: Api, resource: Resource, name: str, namespace: str | None = None) -> Obj:
    return await request_json(api, "GET", resource.path(namespace, name))


async def list_objects(
    api: Api,
    resource: Resource,
    namespace: str | None = None,
    *,
    label_selector: str = "",
    field_selector: str = "",
    page_size: int = 500,
    request_timeout: float | aiohttp.ClientTimeout | None = DEFAULT_TIMEOUT,
    transform: Callable[[Obj], Obj] | None = None,
) -> tuple[list[Obj], str]:
    """Every object and the list's resourceVersion (a consistent, most recent read).

    Pages of ``page_size`` are followed through ``continue``; if a continue
    token expires (410) the list restarts unpaginated. Items get ``apiVersion``
    and ``kind`` filled in (a LIST leaves them out), so listed and watched
    objects look alike. ``transform`` runs on each item as its page arrives, so
    only one page is ever held untransformed.
    """
    path = resource.path(namespace)
    items: list[Obj] = []
    cont = ""
    limit: int | None = page_size
    while True:
        query: dict[str, str | int] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        if limit:
            query["limit"] = limit
        if cont:
            query["continue"] = cont
        try:
            page = await request_json(
                api, "GET", path, query=query, request_timeout=request_timeout
            )
        except ApiError as e:
            if e.gone and cont:
                items, cont, limit = [], "", None
                continue
            raise
        api_version = page.get("apiVersion") or resource.api_version
        kind = str(page.get("kind") or "").removesuffix("List") or resource.kind
        for item in page.get("items") or ():
            item.setdefault("apiVersion", api_version)
            if kind:
                item.setdefault("kind", kind)
            items.append(transform(item) if transform else item)
        meta = page.get("metadata") or {}
        cont = meta.get("continue") or ""
        if not cont:
            return items, str(meta.get("resourceVersion", ""))


async def create_object(
    api: Api,
    resource: Resource,
    body: Obj,
    namespace: str | None = None,
    *,
    field_manager: str | None = None,
) -> Obj:
    query = {"fieldManager": field_manager} if field_manager else None
    return await request_json(api, "POST", resource.path(namespace), query=query, body=body)


async def patch_object(
    api: Api,
    resource: Resource,
    name: str,
    patch: Any,
    namespace: str | None = None,
    *,
    patch_type: str = "merge",
    subresource: str | None = None,
    field_manager: str | None = None,
    force: bool = False,
) -> Obj:
    """PATCH with ``patch_type`` one of merge, strategic, json, apply (server-side apply)."""
    query: dict[str, str | bool] = {}
    if field_manager:
        query["fieldManager"] = field_manager
    if force:
        query["force"] = True
    return await request_json(
        api,
        "PATCH",
        resource.path(namespace, name, subresource),
        query=query,
        body=patch,
        content_type=PATCH_TYPES[patch_type],
    )


async def delete_object(
    api: Api,
    resource: Resource,
    name: str,
    namespace: str | None = None,
    *,
    preconditions: Obj | None = None,
) -> Obj:
    body = {"preconditions": preconditions} if preconditions else None
    return await request_json(api, "DELETE", resource.path(namespace, name), body=body)
