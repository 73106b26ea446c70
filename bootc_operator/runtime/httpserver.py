"""The probe and metrics HTTP endpoints (aiohttp): /healthz, /readyz, /metrics.

Interface::

    server = ProbeServer(ready=lambda: factory.has_synced(), registry=REGISTRY,
                         metrics_tls=ctx, authorize=MetricsAuthorizer(api).check)
    await server.start(metrics_addr=":8080", probe_addr=":8081")   # "0" disables one
    ...
    await server.stop()

``/readyz`` answers 503 with the reason until ``ready()`` is true. The probes
are always plain HTTP (a kubelet's httpGet probe sends no token). With
``metrics_tls`` the metrics port speaks HTTPS only, and with ``authorize``
(:mod:`.metricsauth`) every ``/metrics`` request's ``Authorization`` header is
checked first: 401/403/503 with a one-line reason unless allowed. Both
addresses may be the same only when metrics are plain HTTP (each endpoint is
then served once); probes never move to HTTPS.

An address without a host (``":8081"``) listens on every interface, IPv4 and
IPv6, on one port (one dual-stack socket, as Go's ``net.Listen(":8081")`` does):
an IPv6-only cluster's kubelet probes the Pod's IPv6 address. Where the kernel
has no IPv6 it falls back to IPv4 alone.
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from bootc_operator.runtime.metricsauth import Verdict

log = logging.getLogger("http")

Authorize = Callable[[str | None], Awaitable[Verdict]]


class BindError(ValueError):
    """The addresses cannot be served as asked (one readable line)."""


#: errors that mean "this kernel has no IPv6" (disabled, or no address to bind)
_NO_IPV6 = frozenset({errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT})


def parse_bind_address(addr: str) -> tuple[str, int] | None:
    """``":8080"`` → ("", 8080): every interface; ``"127.0.0.1:0"`` → ephemeral;
    ``"[::1]:80"`` → ("::1", 80); ``"0"`` (or empty) → None: disabled."""
    if addr in ("", "0"):
        return None
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise BindError(f"bind address {addr!r} must look like HOST:PORT or :PORT")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise BindError(f"bind address {addr!r}: write an IPv6 host in brackets, [::1]:PORT")
    return host.strip("[]"), int(port)


def separate_ports(metrics_addr: str, probe_addr: str) -> None:
    """BindError unless HTTPS metrics and plain probes get listeners of their own."""
    metrics = parse_bind_address(metrics_addr)
    if metrics and metrics[1] != 0 and metrics == parse_bind_address(probe_addr):
        raise BindError(
            "metrics over HTTPS and probes (plain HTTP) need two ports: "
            f"--metrics-bind-address and --health-probe-bind-address are both {probe_addr!r}"
        )


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; ``host`` "" is every interface, IPv4 and IPv6 on one port."""
    if host:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family)
    try:
        return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
    except OSError as exc:
        if exc.errno not in _NO_IPV6:
            raise
        log.info("no IPv6 on this host (%s): listening on IPv4 only", exc.strerror)
        return socket.create_server(("0.0.0.0", port))


class ProbeServer:
    def __init__(
        self,
        ready: Callable[[], bool | str],
        registry: CollectorRegistry = REGISTRY,
        healthy: Callable[[], bool | str] = lambda: True,
        *,
        metrics_tls: ssl.SSLContext | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self._ready = ready
        self._healthy = healthy
        self._registry = registry
        self._tls = metrics_tls
        self._authorize = authorize
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

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._authorize is not None:
            verdict = await self._authorize(request.headers.get("Authorization"))
            if not verdict.allowed:
                headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else {}
                if verdict.status == 503:
                    headers["Retry-After"] = "1"
                return web.Response(status=verdict.status, text=verdict.text, headers=headers)
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, metrics_addr: str, probe_addr: str) -> None:
        metrics = parse_bind_address(metrics_addr)
        probes = parse_bind_address(probe_addr)
        # One listener per distinct address; port 0 (ephemeral) is never shared.
        plans: dict[tuple[str, int, str], list[str]] = {}
        if metrics:
            plans[(*metrics, "metrics" if metrics[1] == 0 else "")] = ["metrics"]
        if probes:
            if self._tls is not None:
                separate_ports(metrics_addr, probe_addr)
            plans.setdefault((*probes, "probes" if probes[1] == 0 else ""), []).append("probes")
        for (host, port, _), roles in plans.items():
            app = web.Application()
            if "metrics" in roles:
                app.router.add_get("/metrics", self._metrics)
            if "probes" in roles:
                app.router.add_get("/healthz", self._healthz)
                app.router.add_get("/readyz", self._readyz)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            self._runners.append(runner)
            sock = listen_socket(host, port)
            tls = self._tls if "metrics" in roles else None
            site = web.SockSite(runner, sock, ssl_context=tls)
            await site.start()
            bound = sock.getsockname()[1]
            for role in roles:
                self.ports[role] = bound
            where = f"[{host}]" if ":" in host else host
            log.info(
                "serving %s on %s:%s%s",
                "+".join(roles),
                where or "all interfaces (IPv4+IPv6)",
                bound,
                " (HTTPS)" if tls else "",
            )

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
