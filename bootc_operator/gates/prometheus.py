"""A small Prometheus HTTP API client: instant queries, nothing else.

``PrometheusClient(options).query(promql)`` GETs ``/api/v1/query`` and returns
the result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``). Options a
user of a real cluster needs: a CA bundle (``ca_file``), a bearer token read
from a file on every request (a projected service-account token rotates), and
``insecure_skip_verify`` for a lab.

The gates built on it fail closed, so every way an answer can be unusable is one
``PrometheusError`` whose message is one readable line naming the URL and the
cause (the server's ``error`` field for a bad query), never the token nor the
body's control characters. There is one read path (``_read``): the body is
streamed into at most ``MAX_BODY`` bytes (an endless or huge answer is refused at
the cap; a slow one at the timeout, which covers the whole exchange), decoded with
``safejson`` (not UTF-8, nested too deep, not JSON) and checked for the shape of
an instant vector (``parse_answer``, pure): anything else, an auth proxy's HTML
error page included, is an error, never an empty result nor a crash.
``ask`` is what the gates call: it turns even an unexpected exception into
(None, why), so a poll never dies and a gate never keeps a stale "open".
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import aiohttp

from bootc_operator import safejson

log = logging.getLogger("prometheus")

#: The largest answer read. An instant vector of a few thousand series is well under
#: a MiB; a gate needs far less.
MAX_BODY: Final = 4 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_SHOWN: Final = 200  # characters of a non-JSON body quoted in an error


class PrometheusError(Exception):
    """A query failed; ``str(err)`` says why in one line."""


class Querier(Protocol):
    async def query(self, promql: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class PrometheusOptions:
    url: str  # base URL, e.g. http://prometheus.monitoring:9090 (a path prefix is kept)
    ca_file: str | None = None
    bearer_token_file: str | None = None
    insecure_skip_verify: bool = False
    timeout: float = 10.0
    max_body: int = MAX_BODY


def printable(text: str, limit: int = _SHOWN) -> str:
    """``text`` as one line: control characters (C0, DEL, C1) shown as ``?``,
    whitespace collapsed, cut to ``limit`` characters."""
    clean = "".join(ch if ch.isprintable() or ch in " \t\n" else "?" for ch in text[: limit * 4])
    flat = " ".join(clean.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _sample(sample: Any) -> bool:
    """``[<unix time>, "<value>"]``, as Prometheus writes a sample."""
    return (
        isinstance(sample, list)
        and len(sample) == 2
        and isinstance(sample[0], int | float)
        and not isinstance(sample[0], bool)
        and isinstance(sample[1], str)
    )


def _series(item: Any) -> bool:
    """``{"metric": {labels}, "value": sample}`` (a native histogram's series carries
    ``"histogram": [time, {…}]`` instead of a value)."""
    if not isinstance(item, Mapping):
        return False
    metric = item.get("metric")
    if not isinstance(metric, Mapping):
        return False
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        return False
    histogram = item.get("histogram")
    if "value" not in item and isinstance(histogram, list) and len(histogram) == 2:
        return isinstance(histogram[0], int | float) and isinstance(histogram[1], Mapping)
    return _sample(item.get("value"))


def parse_answer(status: int, raw: bytes, where: str) -> list[dict[str, Any]]:
    """The result vector of an instant query answered ``status`` with body ``raw``;
    ``PrometheusError`` for anything that is not a successful instant vector."""
    try:
        body = safejson.loads(raw)
    except safejson.JSONInputError as err:
        if status != 200:
            shown = printable(raw[: _SHOWN * 4].decode("utf-8", "replace"))
            raise PrometheusError(f"{where} answered HTTP {status}: {shown}") from None
        raise PrometheusError(
            f"{where} answered something that is not Prometheus JSON: {err.reason}"
        ) from None
    if not isinstance(body, dict):
        raise PrometheusError(
            f"{where} answered HTTP {status} with a JSON {type(body).__name__}, "
            "not a Prometheus answer"
        )
    if status != 200:
        why = printable(str(body.get("error")))
        raise PrometheusError(f"{where} answered HTTP {status}: {why}")
    if body.get("status") != "success":
        raise PrometheusError(
            f"{where} answered {printable(str(body.get('status')), 40)}: "
            f"{printable(str(body.get('error')))}"
        )
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise PrometheusError(f"{where} answered a {printable(str(kind), 40)}, not a vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{where} answered a vector whose result is not a list")
    for n, item in enumerate(result):
        if not _series(item):
            raise PrometheusError(
                f"{where} answered a vector whose series {n} is not "
                '{"metric": {labels}, "value": [time, "value"]}'
            )
    return result


async def _read(resp: aiohttp.ClientResponse, limit: int, where: str) -> bytes:
    """The body, streamed, at most ``limit`` bytes (whatever Content-Length says)."""
    if resp.content_length is not None and resp.content_length > limit:
        raise PrometheusError(
            f"{where} answered {resp.content_length} bytes, more than {limit} (refused)"
        )
    body = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise PrometheusError(f"{where} answered more than {limit} bytes (refused)")
    return bytes(body)


class PrometheusClient:
    def __init__(self, options: PrometheusOptions) -> None:
        self.options = options
        self._session: aiohttp.ClientSession | None = None

    def _ssl(self) -> ssl.SSLContext | bool:
        if self.options.insecure_skip_verify:
            return False
        context = ssl.create_default_context()
        if self.options.ca_file:
            context.load_verify_locations(cafile=self.options.ca_file)
        return context

    def _headers(self) -> dict[str, str]:
        path = self.options.bearer_token_file
        if not path:
            return {}
        try:
            token = Path(path).read_text().strip()
        except OSError as err:
            raise PrometheusError(
                f"cannot read the bearer token file {path}: {err.strerror}"
            ) from err
        return {"Authorization": f"Bearer {token}"}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            try:
                ssl_arg = self._ssl()
            except (OSError, ssl.SSLError) as err:
                raise PrometheusError(
                    f"cannot load the CA file {self.options.ca_file}: {err}"
                ) from err
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ssl_arg),
                timeout=aiohttp.ClientTimeout(total=self.options.timeout),
            )
        return self._session

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` evaluates to now."""
        url = self.options.url.rstrip("/") + "/api/v1/query"
        session = self._client()
        where = f"Prometheus at {self.options.url}"
        try:
            async with session.get(url, params={"query": promql}, headers=self._headers()) as resp:
                status = resp.status
                raw = await _read(resp, self.options.max_body, where)
        except TimeoutError as err:
            raise PrometheusError(
                f"{where} did not answer within {self.options.timeout:g}s"
            ) from err
        except aiohttp.ClientError as err:
            raise PrometheusError(f"cannot query {where}: {printable(str(err))}") from err
        except (OSError, ValueError) as err:  # a socket error, a header aiohttp refuses
            raise PrometheusError(f"cannot query {where}: {printable(str(err))}") from err
        return parse_answer(status, raw, where)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def ask(prometheus: Querier, promql: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(the result, "") or (None, why not): what a gate makes of one query. Every
    failure is an answer that closes the gate, an unexpected exception too (logged
    with its traceback: it is a defect of this client)."""
    try:
        return await prometheus.query(promql), ""
    except PrometheusError as err:
        return None, str(err)
    except Exception as err:
        log.exception("a Prometheus query failed unexpectedly")
        return None, f"the query failed unexpectedly ({type(err).__name__})"
