"""The process shape both modes share: stop signals, the probe/metrics server, waiting.

``serve`` runs one mode's work: SIGTERM and SIGINT set a stop event, the probe and
metrics server is up for as long as the work runs, and afterwards (whatever
happened) the server stops before the API clients close, so a probe never
answers from a half-closed process. The work owns its own shutdown and returns
the exit code::

    async def work(stop: asyncio.Event) -> int:
        ...
        if not await unless_stopped(start_syncing(), stop):
            return 0
        ...

    return await serve(args, work, ready=..., healthy=..., close=(api.close,))

``wait_first`` and ``unless_stopped`` are the one way to wait for a task *or*
the stop signal, whichever comes first.

``/metrics`` is guarded as ``args`` say (``metrics_guard``): with
``--metrics-secure`` (the default) HTTPS with the mounted certificate
(``--metrics-cert-path``) or a self-signed one, and each request's bearer token
reviewed through ``api`` (:mod:`.metricsauth`); with ``--metrics-secure=false``
plain HTTP, open to whoever reaches the port. A guard that cannot be set up (a
certificate that does not load) stops the work and ends the process with one
error line and exit code 1. The probes are up before the work starts; the
guarded metrics listener comes up beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bootc_operator.kube.rest import Api
from bootc_operator.runtime import servingcert
from bootc_operator.runtime.httpserver import Authorize, BindError, ProbeServer, separate_ports
from bootc_operator.runtime.metricsauth import MetricsAuthorizer

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("process")


class SetupError(Exception):
    """The probe/metrics server cannot start as configured (one readable line)."""


async def metrics_guard(
    args: argparse.Namespace, api: Api | None
) -> tuple[ssl.SSLContext | None, Authorize | None]:
    """The metrics TLS context and request check ``args`` ask for (None, None: plain HTTP)."""
    if not _guarded(args):
        return None, None
    if api is None:
        raise SetupError("--metrics-secure needs an API client to review tokens")
    cert_dir = getattr(args, "metrics_cert_path", "")
    if cert_dir:
        cert = Path(cert_dir) / args.metrics_cert_name
        key = Path(cert_dir) / args.metrics_cert_key
        try:
            tls = servingcert.mounted(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise SetupError(f"--metrics-cert-path: cannot load {cert} with {key}: {exc}") from None
        log.info("metrics certificate loaded from %s (reloaded when it changes)", cert)
    else:
        try:
            tls = await servingcert.self_signed()
        except (OSError, RuntimeError, ssl.SSLError) as exc:
            raise SetupError(str(exc)) from None
        log.info("metrics certificate: self-signed, made at start (no --metrics-cert-path)")
    return tls, MetricsAuthorizer(api).check


async def wait_first(stop: asyncio.Event, *tasks: asyncio.Future[Any]) -> None:
    """Return once one of ``tasks`` is done or ``stop`` is set; the tasks keep running."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()


async def unless_stopped(task: asyncio.Future[Any], stop: asyncio.Event) -> bool:
    """Wait for ``task`` unless ``stop`` comes first; True if ``task`` finished.

    When the stop comes first the task is cancelled, and is gone when this returns.
    A task that finished is left for the caller to read (a lease acquired just
    as the stop came is still released by the caller's shutdown).
    """
    await wait_first(stop, task)
    if task.done():
        return True
    task.cancel()
    # asyncio.wait, not ``await task``: a cancellation of *this* task must propagate.
    await asyncio.wait([task])
    return False


async def serve(
    args: argparse.Namespace,
    work: Callable[[asyncio.Event], Awaitable[int]],
    *,
    ready: Callable[[], bool | str],
    healthy: Callable[[], bool | str] = lambda: True,
    close: Sequence[Callable[[], Awaitable[object]]] = (),
    api: Api | None = None,
) -> int:
    """Run ``work(stop)`` with the probe/metrics server up; its exit code.

    ``args`` carries ``--metrics-bind-address``, ``--health-probe-bind-address``
    and the ``--metrics-secure`` / ``--metrics-cert-*`` flags; ``api`` reviews the
    metrics requests' tokens; ``close`` (the API clients) runs in order once the
    server has stopped.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    servers: list[ProbeServer] = []
    failed: list[str] = []
    guarded: asyncio.Task[None] | None = None

    async def listen(server: ProbeServer, metrics_addr: str, probe_addr: str) -> None:
        servers.append(server)
        await server.start(metrics_addr, probe_addr)

    async def listen_guarded() -> None:
        # Beside the work, not before it: a self-signed certificate takes a child
        # process (about half a second on a busy node), which a daemon's start-up
        # after a reboot (its first status write) need not wait for.
        try:
            tls, authorize = await metrics_guard(args, api)
            server = ProbeServer(ready=ready, healthy=healthy, metrics_tls=tls, authorize=authorize)
            await listen(server, args.metrics_bind_address, "0")
        except (SetupError, BindError, OSError) as exc:
            failed.append(_describe(exc))
            log.error("%s; stopping", failed[-1])
            stop.set()

    try:
        try:
            if _guarded(args):
                separate_ports(args.metrics_bind_address, args.health_probe_bind_address)
                await listen(
                    ProbeServer(ready, healthy=healthy), "0", args.health_probe_bind_address
                )
                guarded = asyncio.create_task(listen_guarded(), name="metrics-listener")
            else:
                await listen(
                    ProbeServer(ready, healthy=healthy),
                    args.metrics_bind_address,
                    args.health_probe_bind_address,
                )
        except (BindError, OSError) as exc:
            log.error("%s", _describe(exc))
            return 1
        code = await work(stop)
        return 1 if failed else code
    finally:
        if guarded is not None:
            guarded.cancel()
            await asyncio.wait([guarded])
        for server in servers:
            await server.stop()
        for closer in close:
            await closer()


def _guarded(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "metrics_secure", False)) and args.metrics_bind_address not in (
        "",
        "0",
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, SetupError):
        return f"cannot listen for probes/metrics: {exc.strerror or exc}"
    return str(exc)
