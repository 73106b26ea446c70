"""The probe and metrics HTTP endpoints (aiohttp): /healthz, /readyz, /metrics.

Interface::

    server = ProbeServer(ready=lambda: factory.has_synced(), registry=REGISTRY)
    await server.start(metrics_addr=":8080", probe_addr=":8081")   # "0" disables one
    ...
    await server.stop()

Both addresses may be the same; each endpoint is then served once. ``/readyz``
answers 503 with the reason until ``ready()`` is true.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger("http")


def parse_bind_address(addr: str) -> tuple[str, int] | None:
    """``":8080"`` → ("0.0.0.0", 8080); ``"127.0.0.1:0"`` → ephemeral; ``"0"`` → None."""
    if addr in ("", "0"):
        return None
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bind address {addr!r} must look like HOST:PORT or :PORT")
    return (host.strip("[]") or "0.0.0.0"), int(port)


class ProbeServer:
    def __init__(
        self,
        ready: Callable[[], bool | str],
        registry: CollectorRegistry = REGISTRY,
        healthy: Callable[[], bool | str] = lambda: True,
    ) -> None:
        self._ready = ready
        self._healthy = healthy
        self._registry = registry
        self._runners: list[web.AppRunner] = []
        self.ports: dict[str, int] = {}

    @staticmethod
    def _answer(state: bool | str, what: str) -> web.Response:
        if state is True:
            return web.Response(text="ok\n")
        reason = state if isinstance(state, str) else f"not {what}"
        return web.Response(status=503, text=f"{reason}\n")

    async def _healthz(self, _: web.Request) -> web.Response:
        return self._answer(self._healthy(), "healthy")

    async def _readyz(self, _: web.Request) -> web.Response:
        return self._answer(self._ready(), "ready")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, metrics_addr: str, probe_addr: str) -> None:
        metrics = parse_bind_address(metrics_addr)
        probes = parse_bind_address(probe_addr)
        plans: dict[tuple[str, int], list[str]] = {}
        if metrics:
            plans.setdefault(metrics, []).append("metrics")
        if probes:
            plans.setdefault(probes, []).append("probes")
        for (host, port), roles in plans.items():
            app = web.Application()
            if "metrics" in roles:
                app.router.add_get("/metrics", self._metrics)
            if "probes" in roles:
                app.router.add_get("/healthz", self._healthz)
                app.router.add_get("/readyz", self._readyz)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, port)
            await site.start()
            self._runners.append(runner)
            bound = runner.addresses[0][1] if runner.addresses else port
            for role in roles:
                self.ports[role] = bound
            log.info("serving %s on %s:%s", "+".join(roles), host, bound)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
