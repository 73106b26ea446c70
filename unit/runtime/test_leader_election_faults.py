"""Leader election under faults on the wire: leading is proven, never assumed.

A small Lease endpoint on loopback (aiohttp) serves one Lease the way
kube-apiserver does (GET, POST, PUT with optimistic concurrency) and can be
told to misbehave on the next requests: close the connection without an answer
(aiohttp's ``ServerDisconnectedError``, not an ``OSError``), cut the body short
(``ClientPayloadError``), answer 200 with a body that is not JSON, answer a Lease
without ``resourceVersion``, answer 500, or never answer. The elector talks to it
through kubernetes_asyncio's real ``ApiClient``, as the controller does, so every
error reaches it the way it would from a real connection.

Both paths are covered for every fault: a standby's ``acquire`` never returns
(and ``is_leader`` stays False) while the attempts fail, and returns once one
succeeds; a leader whose renewals fail sets ``lost`` (``is_leader`` False) — even
while a renewal request is still hanging — and a renew task that dies counts as
a lost Lease. The controller glue (``_lead_and_work``/``_work_until``) starts no
worker without a clean acquire and cancels the work at once on loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from bootc_operator.controller import lifecycle as controller_mod
from bootc_operator.runtime.leaderelection import LeaderElector
from hack.testenv.waiting import wait_for

NAMESPACE = "bootc-operator"
NAME = "lease"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
FAULTS = ("disconnect", "cut-body", "not-json", "no-resource-version", "status-500")


class LeaseServer:
    """One Lease over HTTP; ``fail(kind, n)`` makes the next ``n`` requests misbehave."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.faults: list[str] = []
        self.requests: list[str] = []
        self.hanging = asyncio.Event()  # a "hang" request has arrived
        self._release_hang = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    def fail(self, kind: str, times: int = 1) -> None:
        self.faults.extend([kind] * times)

    def heal(self) -> None:
        self.faults.clear()
        self._release_hang.set()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        self._release_hang.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def holder(self) -> str:
        return "" if self.lease is None else str(self.lease["spec"].get("holderIdentity") or "")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.method)
        if self.faults:
            return await self._misbehave(request, self.faults.pop(0))
        if request.method == "GET":
            if self.lease is None:
                return _status(404, "NotFound")
            return web.json_response(self.lease)
        body = json.loads(await request.read())
        if request.method == "POST":
            if self.lease is not None:
                return _status(409, "AlreadyExists")
        elif request.method == "PUT":
            if self.lease is None:
                return _status(404, "NotFound")
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return _status(409, "Conflict")
        self.rv += 1
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.lease = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)

    async def _misbehave(self, request: web.Request, kind: str) -> web.StreamResponse:
        await request.read()
        if kind == "disconnect":
            assert request.transport is not None
            request.transport.close()
            return web.Response()  # never reaches the client
        if kind == "cut-body":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = 4096
            await resp.prepare(request)
            await resp.write(b'{"kind": "Lease", "metadata": {')
            assert request.transport is not None
            request.transport.close()
            return resp
        if kind == "not-json":
            return web.Response(text="<html>proxy error</html>", content_type="application/json")
        if kind == "no-resource-version":
            lease = json.loads(json.dumps(self.lease or _lease("someone")))
            lease["metadata"].pop("resourceVersion", None)
            return web.json_response(lease)
        if kind == "status-500":
            return _status(500, "InternalError")
        if kind == "hang":
            self.hanging.set()
            await self._release_hang.wait()
            return _status(503, "ServiceUnavailable")
        raise AssertionError(kind)


def _status(code: int, reason: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "status": "Failure", "reason": reason, "code": code}, status=code
    )


def _lease(holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "resourceVersion": "1"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


@pytest.fixture
async def server() -> AsyncIterator[LeaseServer]:
    s = LeaseServer()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
async def api(server: LeaseServer) -> AsyncIterator[ApiClient]:
    cfg = Configuration(host=f"http://127.0.0.1:{server.port}")
    async with ApiClient(configuration=cfg) as client:
        yield client


def elector(
    api: ApiClient, *, lease_duration: float = 3.0, renew_deadline: float = 1.0
) -> LeaderElector:
    # Short but ordered durations: the tests wait for outcomes, not for times.
    return LeaderElector(
        api,
        NAMESPACE,
        NAME,
        "me",
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=0.05,
    )


def leads(e: LeaderElector) -> bool:
    # A call, not the attribute: mypy would keep the narrowing of an earlier assert.
    return e.is_leader


async def until(predicate: Callable[[], bool], what: str) -> None:
    await wait_for(predicate, 30, what, interval=0.01)


# ----------------------------------------------------------------- standby path


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_standby_is_not_leading_while_attempts_fail(
    server: LeaseServer, api: ApiClient, fault: str
) -> None:
    server.fail(fault, times=10_000)
    e = elector(api)
    acquiring = asyncio.create_task(e.acquire())
    await until(lambda: len(server.requests) >= 3, "three failed attempts")
    assert not acquiring.done(), "acquire returned although every attempt failed"
    assert not e.is_leader
    assert server.holder() == ""
    server.heal()
    await asyncio.wait_for(acquiring, 30)  # the next attempt works
    assert leads(e)
    assert server.holder() == "me"


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_fault_while_taking_over_keeps_the_old_leaders_lease(
    server: LeaseServer, api: ApiClient, fault: str
) -> None:
    server.lease = _lease("other")
    server.rv = 1
    e = elector(api)
    server.fail(fault, times=50)
    acquiring = asyncio.create_task(e.acquire())
    await until(lambda: len(server.requests) >= 5, "attempts")
    assert not acquiring.done()
    assert not e.is_leader
    acquiring.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await acquiring
    assert server.holder() == "other"


async def test_workers_never_start_when_acquire_fails(server: LeaseServer, api: ApiClient) -> None:
    class BrokenElector(LeaderElector):
        async def acquire(self) -> None:
            raise RuntimeError("a bug in acquire")

    ctl = StubController()
    code = await controller_mod._lead_and_work(
        ctl,  # type: ignore[arg-type]
        BrokenElector(api, NAMESPACE, NAME, "me"),
        asyncio.Event(),
    )
    assert code == 1
    assert not ctl.started
    assert server.requests == []  # not even a release: it never led


# ----------------------------------------------------------------- leader path


async def leading(
    server: LeaseServer, api: ApiClient, *, lease_duration: float = 3.0, renew_deadline: float = 1.0
) -> LeaderElector:
    e = elector(api, lease_duration=lease_duration, renew_deadline=renew_deadline)
    await e.acquire()
    e.start_renewing()
    assert e.is_leader and server.holder() == "me"
    return e


@pytest.mark.parametrize("fault", FAULTS)
async def test_failed_renewals_of_any_kind_lose_the_lease(
    server: LeaseServer, api: ApiClient, fault: str
) -> None:
    e = await leading(server, api)
    server.fail(fault, times=10_000)
    await asyncio.wait_for(e.lost.wait(), 30)
    assert not e.is_leader
    assert not e.renewing()
    await e.release_and_stop()


async def test_the_lease_is_lost_while_a_renewal_still_hangs(
    server: LeaseServer, api: ApiClient
) -> None:
    """The deadline does not wait for a hanging request to give up."""
    e = await leading(server, api, renew_deadline=1.0)
    server.fail("hang", times=10_000)
    await asyncio.wait_for(server.hanging.wait(), 30)
    await asyncio.wait_for(e.lost.wait(), 30)
    assert not server._release_hang.is_set(), "the hanging request answered first"
    assert not e.is_leader
    await e.release_and_stop()


async def test_a_few_failed_renewals_within_the_deadline_keep_the_lease(
    server: LeaseServer, api: ApiClient
) -> None:
    e = await leading(server, api, renew_deadline=2.5, lease_duration=5.0)
    before = server.rv
    server.fail("disconnect", times=2)
    await until(lambda: server.rv > before, "a renewal after the faults")
    assert not e.lost.is_set() and e.is_leader
    await e.release_and_stop()
    assert server.holder() == ""  # released for a standby
    assert not e.lost.is_set()


async def test_a_dead_renew_task_is_a_lost_lease(server: LeaseServer, api: ApiClient) -> None:
    e = await leading(server, api)
    assert e._renewer is not None
    e._renewer.cancel()  # by anything but release_and_stop
    await asyncio.wait_for(e.lost.wait(), 30)
    assert not e.is_leader


async def test_a_renew_loop_that_raises_is_a_lost_lease(
    server: LeaseServer, api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = await leading(server, api)

    async def broken() -> bool:
        raise RuntimeError("a bug in the renew loop")

    monkeypatch.setattr(e, "_attempt", broken)
    await asyncio.wait_for(e.lost.wait(), 30)
    assert not e.is_leader


async def test_start_renewing_before_acquire_is_refused(api: ApiClient) -> None:
    with pytest.raises(RuntimeError, match="before acquire"):
        elector(api).start_renewing()


# ----------------------------------------------------------------- the controller glue


class StubController:
    """The two things ``_work_until`` uses of the controller, recorded."""

    def __init__(self, graceful_shutdown: asyncio.Event | None = None) -> None:
        self.started = False
        self.cancelled = False
        self.stopped_writing = False
        self.graceful_done = False
        self._hold_shutdown = graceful_shutdown

    async def run_workers(self) -> None:
        self.started = True
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def stop_writing(self, work: asyncio.Task[None]) -> None:
        self.stopped_writing = True
        work.cancel()
        await asyncio.wait([work])

    async def shutdown(self) -> None:
        if self._hold_shutdown is not None:
            await self._hold_shutdown.wait()
        self.graceful_done = True


async def test_on_loss_the_work_is_cancelled_at_once(server: LeaseServer, api: ApiClient) -> None:
    ctl = StubController()
    e = await leading(server, api)
    run = asyncio.create_task(
        controller_mod._work_until(ctl, asyncio.Event(), e)  # type: ignore[arg-type]
    )
    await until(lambda: ctl.started, "workers started")
    server.fail("disconnect", times=10_000)
    assert await asyncio.wait_for(run, 30) == 1
    assert ctl.stopped_writing and ctl.cancelled
    assert not ctl.graceful_done  # no grace for in-flight work
    await e.release_and_stop()


async def test_a_loss_during_a_graceful_stop_cuts_the_grace(
    server: LeaseServer, api: ApiClient
) -> None:
    ctl = StubController(graceful_shutdown=asyncio.Event())  # in-flight work never finishes
    e = await leading(server, api)
    stop = asyncio.Event()
    run = asyncio.create_task(
        controller_mod._work_until(ctl, stop, e)  # type: ignore[arg-type]
    )
    await until(lambda: ctl.started, "workers started")
    stop.set()
    server.fail("cut-body", times=10_000)
    assert await asyncio.wait_for(run, 30) == 1
    assert ctl.stopped_writing and ctl.cancelled and not ctl.graceful_done
    await e.release_and_stop()


async def test_a_graceful_stop_while_leading_releases_the_lease(
    server: LeaseServer, api: ApiClient
) -> None:
    ctl = StubController()
    stop = asyncio.Event()
    run = asyncio.create_task(
        controller_mod._lead_and_work(ctl, elector(api), stop)  # type: ignore[arg-type]
    )
    await until(lambda: ctl.started, "workers started")
    assert server.holder() == "me"
    stop.set()
    assert await asyncio.wait_for(run, 30) == 0
    assert ctl.graceful_done and not ctl.stopped_writing
    assert server.holder() == ""
