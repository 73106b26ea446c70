"""The Prometheus gates fail closed on anything that is not Prometheus JSON (issue 37 item 3).

A loopback aiohttp server plays Prometheus' query endpoint and answers, on demand,
what an outside Prometheus (or whatever sits in front of it) might: garbage that is
not UTF-8, an auth proxy's HTML error page, JSON nested too deep, a huge body (with
and without Content-Length), an endless stream (fast, and a trickle), JSON of the
wrong shape. The real ``PrometheusClient`` turns each into one ``PrometheusError``;
the alert gate built on it closes (it was open), and a health-query poll breaks its
run (no "holding since") and keeps polling, so a fixed Prometheus is seen again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from bootc_operator.gates.alertgate import AlertReconciler
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.gates.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusOptions,
    parse_answer,
)
from bootc_operator.gates.queries import HealthQuery, QueryState
from hack.testenv.waiting import wait_for

LIMIT = 64 * 1024  # the client's cap in these tests (the real default is 4 MiB)
ONE = {"metric": {"__name__": "ALERTS", "alertname": "NodeDown"}, "value": [1.5, "1"]}
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def vector(*series: Any) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": list(series)}}
    ).encode()


class FakePrometheus:
    """``/api/v1/query`` answering as ``mode`` says."""

    def __init__(self) -> None:
        self.mode = "empty"
        self.asked = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/v1/query", self.query)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def query(self, request: web.Request) -> web.StreamResponse:
        self.asked += 1
        mode = self.mode
        if mode == "empty":
            return web.Response(body=vector(), content_type="application/json")
        if mode == "firing":
            return web.Response(body=vector(ONE), content_type="application/json")
        if mode == "not-utf8":
            return web.Response(body=b'{"status": "\xff\xfe\xfd"}', content_type="application/json")
        if mode == "proxy-page":  # an auth proxy's error page, Latin-1, with an ESC
            page = "<html><body>Zugriff verweigert \x1b[31m</body></html>".encode("latin-1")
            return web.Response(status=502, body=page + b"\xe4", content_type="text/html")
        if mode == "deep":
            return web.Response(body=b"[" * 10_000, content_type="application/json")
        if mode == "huge":
            pad = "x" * (LIMIT * 2)
            body = json.dumps({"status": "success", "pad": pad}).encode()
            return web.Response(body=body, content_type="application/json")
        if mode in ("huge-chunked", "endless", "trickle"):
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await resp.write(b'{"status": "success", "pad": "')
            chunk = b"x" * 4096 if mode != "trickle" else b"x"
            sent = 0
            while mode != "huge-chunked" or sent < LIMIT * 2:
                await resp.write(chunk)
                sent += len(chunk)
                if mode == "trickle":
                    await asyncio.sleep(0.05)
            await resp.write(b'"}')
            return resp
        if mode == "wrong-shape":
            bad = {"metric": {"alertname": "X"}, "value": "1"}
            return web.Response(body=vector(bad), content_type="application/json")
        if mode == "a-list":
            return web.Response(body=b"[1, 2]", content_type="application/json")
        raise AssertionError(mode)


def polled_after(server: FakePrometheus, asked: int) -> Callable[[], bool]:
    """Asked twice more since ``asked``: a whole poll after this moment."""
    return lambda: server.asked > asked + 1


@pytest.fixture
async def prom() -> AsyncIterator[FakePrometheus]:
    server = FakePrometheus()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def client_of(
    server: FakePrometheus, answer_within: float = 5.0
) -> AsyncIterator[PrometheusClient]:
    client = PrometheusClient(
        PrometheusOptions(url=server.url, timeout=answer_within, max_body=LIMIT)
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("not-utf8", "answered something that is not Prometheus JSON: not UTF-8 text"),
        ("proxy-page", "answered HTTP 502: <html><body>Zugriff verweigert ?[31m</body></html>"),
        ("deep", "answered something that is not Prometheus JSON: nested more than 64 levels"),
        ("huge", f"more than {LIMIT} (refused)"),
        ("huge-chunked", f"answered more than {LIMIT} bytes (refused)"),
        ("endless", f"answered more than {LIMIT} bytes (refused)"),
        ("wrong-shape", 'series 0 is not {"metric": {labels}, "value": [time, "value"]}'),
        ("a-list", "answered HTTP 200 with a JSON list, not a Prometheus answer"),
    ],
)
async def test_anything_but_prometheus_json_is_one_prometheus_error(
    prom: FakePrometheus, mode: str, says: str
) -> None:
    prom.mode = mode
    async with client_of(prom) as client:
        with pytest.raises(PrometheusError) as err:
            await client.query("up")
    message = str(err.value)
    assert message.startswith(f"Prometheus at {prom.url} ")
    assert says in message, message
    assert "\x1b" not in message and "\n" not in message and len(message) < 400


async def test_an_endless_trickle_ends_at_the_timeout(prom: FakePrometheus) -> None:
    prom.mode = "trickle"
    async with client_of(prom, answer_within=1.0) as client:
        with pytest.raises(PrometheusError) as err:
            await client.query("up")
    assert str(err.value) == f"Prometheus at {prom.url} did not answer within 1s"


def test_the_answer_is_checked_for_an_instant_vectors_shape() -> None:
    where = "Prometheus at x"
    assert parse_answer(200, vector(ONE), where) == [ONE]
    histogram = {"metric": {}, "histogram": [1.5, {"count": "2", "sum": "3"}]}
    assert parse_answer(200, vector(histogram), where) == [histogram]
    bad: list[Any] = [
        {"metric": {"a": 1}, "value": [1, "1"]},
        {"metric": {}, "value": [True, "1"]},
        {"metric": {}, "value": [1, 1]},
        {"value": [1, "1"]},
        ["x"],
    ]
    for series in bad:
        with pytest.raises(PrometheusError, match="series 0 is not"):
            parse_answer(200, vector(series), where)
    for body, says in [
        (b'{"status": "error", "error": "parse error\\u001b"}', "answered error: parse error?"),
        (b'{"status": "success", "data": []}', "answered a None, not a vector"),
        (b'{"status": "success", "data": {"resultType": "matrix"}}', "a matrix, not a vector"),
        (b'{"status": "success", "data": {"resultType": "vector", "result": {}}}', "not a list"),
        (b'{"error": "too many requests"}', "answered HTTP 429: too many requests"),
    ]:
        with pytest.raises(PrometheusError) as err:
            parse_answer(429 if b"too many" in body else 200, body, where)
        assert says in str(err.value), (body, str(err.value))


async def test_the_alert_gate_closes_on_a_garbage_answer(prom: FakePrometheus) -> None:
    pool = {"metadata": {"name": "p"}, "spec": {"rollout": {"blockingAlerts": ['severity="x"']}}}
    woken: list[str] = []
    async with client_of(prom) as client:
        gate = AlertReconciler(
            {"p": pool}.get, client, interval=30.0, on_change=woken.append, url=prom.url
        )
        assert await gate.reconcile("p") == 30.0
        opened = gate.gate(pool)
        assert opened is not None and not opened.blocked  # nothing fires: open
        for mode in ("not-utf8", "deep", "endless", "wrong-shape"):
            prom.mode = mode
            assert await gate.reconcile("p") == 5.0  # retried with backoff, not raised
            closed = gate.gate(pool)
            assert closed is not None and closed.blocked, mode
            assert closed.message.endswith(
                "; no new reboots until Prometheus answers (fail closed)"
            ), closed.message
            prom.mode = "empty"
            await gate.reconcile("p")
            reopened = gate.gate(pool)
            assert reopened is not None and not reopened.blocked
    assert len(woken) == 9  # open, then closed and open again four times


async def test_a_health_query_poll_breaks_its_run_on_garbage_and_keeps_polling(
    prom: FakePrometheus,
) -> None:
    query = HealthQuery("ceph", 'ceph_up{host="$node"}', hold=300.0)
    told = asyncio.Event()
    prom.mode = "firing"
    async with client_of(prom) as client:
        polls = HealthQueries(
            client, interval=0.05, on_change=lambda n, p: told.set(), now=lambda: NOW
        )
        try:
            polls.states("n1", "p", (query,))

            def state() -> QueryState:
                known = polls.peek("n1", (query,))
                return (known.states.get("ceph") if known else None) or QueryState(None, "?")

            def holding() -> bool:
                return state().holding_since is not None and not state().error

            def broken() -> bool:
                return state().holding_since is None and state().error.startswith("Prometheus")

            await wait_for(holding, 10, "holding")
            for mode in ("not-utf8", "deep", "huge", "endless"):
                prom.mode = mode
                await wait_for(broken, 10, f"{mode}: the run broken")
                assert state().error.startswith(f"Prometheus at {prom.url} "), state()
                assert polls.polling() == {"n1"}
                # still polling: the next answers are asked for and count again
                asked = prom.asked
                prom.mode = "firing"
                await wait_for(polled_after(prom, asked), 10, f"{mode}: polled again")
                await wait_for(holding, 10, f"{mode}: holding again")
        finally:
            await polls.stop()


class Broken:
    """A querier that fails in a way no client should (a defect): the gates still close."""

    async def query(self, promql: str) -> list[dict[str, Any]]:
        raise RuntimeError("a defect")


async def test_an_unexpected_failure_closes_the_gates_too() -> None:
    pool = {"metadata": {"name": "p"}, "spec": {"rollout": {"blockingAlerts": ['severity="x"']}}}
    gate = AlertReconciler({"p": pool}.get, Broken(), interval=30.0, on_change=lambda p: None)
    assert await gate.reconcile("p") == 5.0
    closed = gate.gate(pool)
    assert closed is not None and closed.blocked
    assert "the query failed unexpectedly (RuntimeError)" in closed.message
    query = HealthQuery("ceph", "ceph_up", hold=0.0)
    polls = HealthQueries(Broken(), interval=0.05, on_change=lambda n, p: None, now=lambda: NOW)
    try:
        polls.states("n1", "p", (query,))

        def said() -> QueryState | None:
            known = polls.peek("n1", (query,))
            return known.states.get("ceph") if known else None

        await wait_for(said, 10, "an answer")
        assert said() == QueryState(None, "the query failed unexpectedly (RuntimeError)")
        assert polls.polling() == {"n1"}
    finally:
        await polls.stop()
