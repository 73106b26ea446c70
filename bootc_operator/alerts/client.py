"""A small Prometheus HTTP API client: instant queries, nothing else.

``PrometheusClient(options).query(promql)`` GETs ``/api/v1/query`` and returns
the result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``). Options a
user of a real cluster needs: a CA bundle (``ca_file``), a bearer token read
from a file on every request (a projected service-account token rotates), and
``insecure_skip_verify`` for a lab. Every failure is one ``PrometheusError`` whose
message is one readable line naming the URL and the cause (the server's
``error`` field for a bad query), never the token.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp


class PrometheusError(Exception):
    """A query failed; ``str(err)`` says why in one line."""


@dataclass(frozen=True, slots=True)
class PrometheusOptions:
    url: str  # base URL, e.g. http://prometheus.monitoring:9090 (a path prefix is kept)
    ca_file: str | None = None
    bearer_token_file: str | None = None
    insecure_skip_verify: bool = False
    timeout: float = 10.0


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

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` evaluates to now."""
        url = self.options.url.rstrip("/") + "/api/v1/query"
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
        where = f"Prometheus at {self.options.url}"
        try:
            async with self._session.get(
                url, params={"query": promql}, headers=self._headers()
            ) as resp:
                text = await resp.text()
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = None
                if resp.status != 200 or not isinstance(body, dict):
                    why = body.get("error") if isinstance(body, dict) else text[:200].strip()
                    raise PrometheusError(f"{where} answered HTTP {resp.status}: {why}")
        except TimeoutError as err:
            raise PrometheusError(
                f"{where} did not answer within {self.options.timeout:g}s"
            ) from err
        except aiohttp.ClientError as err:
            raise PrometheusError(f"cannot query {where}: {err}") from err
        if body.get("status") != "success":
            raise PrometheusError(f"{where} answered {body.get('status')}: {body.get('error')}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise PrometheusError(f"{where} answered a {data.get('resultType')}, not a vector")
        result = data.get("result") or []
        return [r for r in result if isinstance(r, dict)]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
