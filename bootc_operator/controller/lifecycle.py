"""The controller process's life: start, caches, leader election, work, and the end of it.

``run(args)`` builds the API clients (one for requests, one with an unbounded
connection pool for watches, so open drains never starve requests, one for the
leader Lease alone and one for ``/metrics`` token reviews alone, so that neither
the reconcilers' requests nor a flood of scrapes can delay a renewal) and the
``Controller``, starts the shared informers and the probe and metrics server,
waits for the caches (``/readyz`` turns ready), then, with ``--leader-elect``,
acquires the lease. Only as leader do the workers start, and only once
``acquire()`` has returned cleanly; a standby keeps warm caches and does no
writes.

Losing the lease (a renewal that failed in any way for the renew deadline, or a
renew task that died) stops writing at once, with no grace: every drain
(evictions in flight) and every reconcile is cancelled before anything else,
pending Events are dropped, and the process exits with code 1 so it restarts as
a standby, like controller-runtime. A graceful stop (SIGTERM/SIGINT) lets
in-flight reconciles finish while the lease is still ours, then releases it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

from bootc_operator.controller.core import Controller
from bootc_operator.kube import load_api_client
from bootc_operator.reconcilers import metrics as m
from bootc_operator.registry import RegistryOptions
from bootc_operator.runtime.leaderelection import LeaderElector
from bootc_operator.runtime.metricsauth import ReviewLimits
from bootc_operator.runtime.process import serve, unless_stopped, wait_first

if TYPE_CHECKING:
    from bootc_operator.gates.prometheus import PrometheusOptions

log = logging.getLogger("controller")


def prometheus_options(args: argparse.Namespace) -> PrometheusOptions | None:
    """The Prometheus client's options; None (and its module never imported) without
    ``--prometheus-url``."""
    if not args.prometheus_url:
        return None
    from bootc_operator.gates.prometheus import PrometheusOptions  # noqa: PLC0415

    return PrometheusOptions(
        url=args.prometheus_url,
        ca_file=args.prometheus_ca_file or None,
        bearer_token_file=args.prometheus_bearer_token_file or None,
        insecure_skip_verify=args.prometheus_insecure_skip_verify,
    )


async def run(args: argparse.Namespace) -> int:
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    api = await load_api_client(args.kubeconfig)
    # Watches hold a connection each for as long as they run (one per open drain):
    # they get their own, unbounded pool so requests never queue behind them.
    watch_api = await load_api_client(args.kubeconfig, max_connections=0)
    # The Lease is renewed on a connection pool nothing else uses, and /metrics token
    # reviews (anyone who reaches the port can make one up) go through their own:
    # no scrape, however many, can queue a renewal behind it.
    lease_api = await load_api_client(args.kubeconfig, max_connections=2)
    limits = ReviewLimits()
    review_api = await load_api_client(
        args.kubeconfig, max_connections=limits.max_inflight + limits.max_known_inflight
    )
    controller = _controller(args, api, watch_api, identity)

    async def work(stop: asyncio.Event) -> int:
        try:
            controller.factory.start()
            log.info("waiting for caches to sync")
            sync = asyncio.create_task(controller.factory.wait_for_cache_sync())
            if not await unless_stopped(sync, stop):
                return 0
            log.info("caches synced", extra={"identity": identity})
            elector = None
            if args.leader_elect:
                elector = LeaderElector(
                    lease_api,
                    args.leader_election_namespace,
                    args.leader_election_id,
                    identity,
                    lease_duration=args.lease_duration,
                    renew_deadline=args.renew_deadline,
                    retry_period=args.retry_period,
                )
            return await _lead_and_work(controller, elector, stop)
        finally:
            await controller.shutdown()
            await controller.factory.stop()
            m.IS_LEADER.set(0)

    return await serve(
        args,
        work,
        ready=controller.ready,
        close=(api.close, watch_api.close, lease_api.close, review_api.close),
        api=review_api,
    )


def _controller(args: argparse.Namespace, api: Any, watch_api: Any, identity: str) -> Controller:
    """The controller its flags describe."""
    return Controller(
        api,
        watch_api=watch_api,
        identity=identity,
        workers=args.workers,
        tag_resolution_interval=args.tag_resolution_interval,
        registry=RegistryOptions(
            ca_file=args.registry_ca_file or None,
            insecure_registries=frozenset(args.insecure_registry or ()),
        ),
        prometheus=prometheus_options(args),
        alert_check_interval=args.alert_check_interval,
        node_events=args.node_events,
        node_scope_policy=args.node_scope_policy,
        seal_without_node_scope=args.seal_without_node_scope,
    )


async def _lead_and_work(
    controller: Controller, elector: LeaderElector | None, stop: asyncio.Event
) -> int:
    if elector is None:
        m.IS_LEADER.set(1)
        return await _work_until(controller, stop, None)
    try:
        acquiring = asyncio.create_task(elector.acquire(), name="acquire")
        if not await unless_stopped(acquiring, stop):
            return 0
        # Leading is proven, not assumed: only an acquire that returned cleanly counts.
        if acquiring.exception() is not None or not elector.is_leader:
            log.error(
                "leader election failed; not starting any work",
                exc_info=acquiring.exception(),
            )
            return 1
        elector.start_renewing()
        m.IS_LEADER.set(1)
        return await _work_until(controller, stop, elector)
    finally:
        m.IS_LEADER.set(0)
        await elector.release_and_stop()


async def _work_until(
    controller: Controller, stop: asyncio.Event, elector: LeaderElector | None
) -> int:
    work = asyncio.create_task(controller.run_workers(), name="workers")
    lost = asyncio.create_task(elector.lost.wait(), name="lease-lost") if elector else None
    try:
        await wait_first(stop, work, *([lost] if lost is not None else []))
        if lost is None or not lost.done():
            # A graceful stop (or the workers failed): in-flight reconciles may
            # finish, but only while the lease is still ours.
            graceful = asyncio.create_task(controller.shutdown(), name="graceful-shutdown")
            await asyncio.wait(
                [graceful, *([lost] if lost is not None else [])],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not graceful.done():
                graceful.cancel()
                await asyncio.wait([graceful])
        if lost is not None and lost.done():
            await controller.stop_writing(work)
            log.error(
                "leadership lost: reconciles and drains cancelled, no more writes; "
                "exiting so a standby can take over"
            )
            return 1
        if work.done() and not work.cancelled() and work.exception() is not None:
            log.error("workers failed", exc_info=work.exception())
            return 1
        return 0
    finally:
        work.cancel()
        await asyncio.wait([work])
        if lost is not None:
            lost.cancel()
