"""A fault-injecting HTTP proxy in front of kube-apiserver (owns faults on the wire).

``FaultProxy(server, pki, seed)`` terminates TLS with a serving certificate from the
harness CA (``certs.issue_serving``) and forwards every request to the apiserver.
Each component gets its own *listener* (``await proxy.listen("controller-1")``: a
port, and ``proxy.kubeconfig(name, user)`` a kubeconfig for it), so faults and
partitions can be aimed at one process while the others still get through.

**Identity.** A caller that presents a client certificate (the harness's
kubeconfigs all do) is forwarded the way kube-aggregator forwards: the proxy
reaches the apiserver with the ``front-proxy-client`` certificate and names the
caller in ``X-Remote-User`` / ``X-Remote-Group`` (the certificate's CN and Os),
which the harness's apiserver trusts (``--requestheader-*``). So authorization and
the audit log see the caller, not the proxy; ``X-Remote-Extra-Bootc.dev%2Fvia``
adds the listener's name to the audit record's ``user.extra``. A caller with a
bearer token instead has its ``Authorization`` header forwarded on a connection
without a client certificate. Incoming ``X-Remote-*`` headers are dropped.

**Faults.** While ``faults_on`` (``start_faults()`` / ``stop_faults()``), each
request draws from its listener's own ``random.Random(f"{seed}/{listener}")``
(a stream per component, so one component's traffic does not shift another's
draws); ``Profile.from_seed(seed)`` sets the rate and the mix. The kinds
(``KINDS``), counted in ``counts``:

- ``reset-request``: the connection is reset before the request is forwarded;
- ``reset-response``: forwarded (a write is applied), then reset before the answer
  (the client sees ``ServerDisconnectedError``);
- ``cut-body``: the answer's headers announce the whole body, part is sent, reset
  (``ClientPayloadError``);
- ``bad-json``: a complete ``2xx`` answer whose body is a cut JSON document;
- ``delay``: held ``Profile.max_delay`` at most before forwarding (dropped if the
  caller gave up meanwhile: a cancelled request must not land later);
- ``status-429`` / ``status-500`` / ``status-503``: answered by the proxy with a
  ``Status`` body and ``Retry-After``, not forwarded;
- ``reset-watch``: a watch stream is reset after a drawn number of bytes or seconds
  (possibly in the middle of an event).

``refuse(name, code, path, query)`` aims one fault instead of drawing it: listener
``name`` answers ``code`` (429, 500 or 503, as above) to every read (not a watch) of
``path`` whose query has each ``query`` pair, until ``unrefuse(name)``; counted as
``refused-<code>`` (e.g. a drain's pod LIST for one node, while its watches and
everything else get through).

``hold(name, method, path)`` holds listener ``name``'s requests ``method path``
unforwarded (their bodies read) until ``release(name)``; ``Hold.waiting`` counts
those held so far, so a test can act while one waits (e.g. replace the object an
eviction names before the eviction lands).

``partition(name, mode)`` cuts one listener off until ``heal(name)``: ``"reset"``
resets its open connections and every new request; ``"hang"`` holds every new
request unanswered (packets dropped: the caller's timeouts must fire) and resets
them at the heal; ``"lease"`` resets only its requests for Leases (the rest gets
through: a leader that cannot renew but can still write). Requests refused this
way count as ``partitioned``.

``log`` records every mutating request forwarded (listener, method, path, status)
for tests of the proxy itself; the chaos tier's record of writes is the
apiserver's audit log (``hack.testenv.audit``).

Runs on the caller's event loop; ``ProxyThread`` runs one on a loop of its own in
a thread (for a module-scoped fixture or a script that is not async).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml
from aiohttp import web
from multidict import CIMultiDict

from hack.testenv import certs

T = TypeVar("T")

KINDS = (
    "reset-request",
    "reset-response",
    "cut-body",
    "bad-json",
    "delay",
    "status-429",
    "status-500",
    "status-503",
    "reset-watch",
)
PARTITION_MODES = ("reset", "lease", "hang")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: hop-by-hop headers (RFC 9110 7.6.1) and what the proxy sets itself
_DROP_REQUEST = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}
)
_DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})
VIA_EXTRA = "X-Remote-Extra-Bootc.dev%2Fvia"
_LISTENER: web.AppKey[str] = web.AppKey("listener", str)


@dataclass(frozen=True)
class Profile:
    """How often and which faults: ``rate`` per request, ``weights`` by kind."""

    rate: float
    weights: tuple[tuple[str, float], ...]
    max_delay: float = 0.5
    retry_after: int = 1

    @classmethod
    def from_seed(cls, seed: int) -> Profile:
        rng = random.Random(f"profile/{seed}")
        return cls(
            rate=round(rng.uniform(0.03, 0.12), 3),
            weights=tuple((k, round(rng.uniform(0.2, 1.0), 2)) for k in KINDS),
        )

    def describe(self) -> str:
        mix = ", ".join(f"{k} {w:.2f}" for k, w in self.weights)
        return f"rate {self.rate:.3f} per request; mix {mix}"


def request_class(method: str, query: str) -> str:
    """``watch``, ``write`` or ``read`` (what a fault can do to it depends on it)."""
    if method in MUTATING:
        return "write"
    params = urllib.parse.parse_qs(query)
    if method == "GET" and (params.get("watch") or [""])[0] in ("1", "true"):
        return "watch"
    return "read"


#: what each class of request can suffer (a watch's body is a stream: no cut JSON)
ALLOWED = {
    "read": frozenset(KINDS) - {"reset-watch"},
    "write": frozenset(KINDS) - {"reset-watch"},
    "watch": frozenset(KINDS) - {"cut-body", "bad-json"},
}


def draw(rng: random.Random, profile: Profile, cls: str) -> str | None:
    """The fault for one request of class ``cls`` (None: forward it untouched)."""
    if rng.random() >= profile.rate:
        return None
    usable = [(k, w) for k, w in profile.weights if k in ALLOWED[cls]]
    kinds, weights = zip(*usable, strict=True)
    kind: str = rng.choices(kinds, weights)[0]
    return kind


STATUS_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


def status_body(code: int, retry_after: int) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"injected by the fault proxy (retry after {retry_after}s)",
            "reason": STATUS_REASONS[code],
            "details": {"retryAfterSeconds": retry_after},
            "code": code,
        }
    ).encode()


@dataclass(frozen=True)
class Refusal:
    """Reads of ``path`` with every ``query`` pair are answered ``code`` (``refuse``)."""

    code: int
    path: str
    query: tuple[tuple[str, str], ...] = ()

    def matches(self, cls: str, path: str, query: Mapping[str, str]) -> bool:
        return cls == "read" and path == self.path and all(query.get(k) == v for k, v in self.query)


@dataclass
class Hold:
    """Requests ``method path`` wait until ``released`` (``hold``)."""

    method: str
    path: str
    released: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0  # requests held so far (released ones included)

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and path == self.path


@dataclass
class Listener:
    name: str
    port: int = 0
    rng: random.Random = field(default_factory=random.Random)
    partition: str | None = None
    healed: asyncio.Event = field(default_factory=asyncio.Event)
    refusals: list[Refusal] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    open: set[asyncio.Transport] = field(default_factory=set)
    runner: web.AppRunner | None = None


@dataclass(frozen=True)
class Forwarded:
    """One mutating request the proxy forwarded (``status`` 0: no answer came)."""

    at: float
    listener: str
    method: str
    path: str
    status: int


class _Reset(Exception):
    """The handler reset its client's connection."""


class FaultProxy:
    """See the module docstring."""

    def __init__(self, server: str, pki: certs.Pki, seed: int, profile: Profile | None = None):
        self.server = server.rstrip("/")
        self.pki = pki
        self.seed = seed
        self.profile = profile or Profile.from_seed(seed)
        self.faults_on = False
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self.log: list[Forwarded] = []
        self.listeners: dict[str, Listener] = {}
        self._serving = certs.issue_serving(pki, "bootc-faultproxy")
        self._front = certs.issue_client(pki, "front-proxy-client")
        self._sessions: dict[bool, aiohttp.ClientSession] = {}

    # ------------------------------------------------------------ lifecycle

    def _server_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.pki.ca.cert))
        ctx.load_cert_chain(str(self._serving.cert), str(self._serving.key))
        ctx.verify_mode = ssl.CERT_OPTIONAL  # bearer-token callers present none
        return ctx

    def _session(self, front_proxy: bool) -> aiohttp.ClientSession:
        session = self._sessions.get(front_proxy)
        if session is None:
            ctx = ssl.create_default_context(cafile=str(self.pki.ca.cert))
            if front_proxy:
                ctx.load_cert_chain(str(self._front.cert), str(self._front.key))
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
            self._sessions[front_proxy] = session
        return session

    async def listen(self, name: str, port: int = 0) -> Listener:
        """A new listener named ``name`` on 127.0.0.1 (``port`` 0: any free one)."""
        if name in self.listeners:
            raise ValueError(f"listener {name} exists")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app[_LISTENER] = name
        app.router.add_route("*", "/{path:.*}", self._handle)
        # close() aborts the callers' connections: the handlers still relaying a watch
        # are cancelled after a second rather than waited for (aiohttp's default: 60 s)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=self._server_ssl())
        await site.start()
        bound = int(runner.addresses[-1][1])
        lst = Listener(name, bound, random.Random(f"{self.seed}/{name}"), runner=runner)
        self.listeners[name] = lst
        return lst

    def url(self, name: str) -> str:
        return f"https://127.0.0.1:{self.listeners[name].port}"

    def kubeconfig(self, name: str, path: Path, user: str = "admin") -> Path:
        """Write a kubeconfig that reaches the apiserver through listener ``name`` with
        ``user``'s harness client certificate (``certs.CLIENT_USERS``)."""
        write_kubeconfig(path, self.url(name), self.pki.ca.cert, client=self.pki.client(user))
        return path

    async def close(self) -> None:
        for lst in self.listeners.values():
            lst.healed.set()
            for hold in lst.holds:
                hold.released.set()
            for transport in list(lst.open):
                transport.abort()
            if lst.runner is not None:
                await lst.runner.cleanup()
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()

    # ------------------------------------------------------------ control

    def reseed(self, seed: int, profile: Profile | None = None) -> None:
        """Start over from ``seed``: its profile, fresh streams, no faults on, no partition,
        counts and log cleared (one proxy serves many seeds of a soak)."""
        self.seed = seed
        self.profile = profile or Profile.from_seed(seed)
        self.faults_on = False
        self.counts.clear()
        self.requests = 0
        self.log.clear()
        for lst in self.listeners.values():
            lst.rng = random.Random(f"{seed}/{lst.name}")
            lst.partition = None
            lst.healed.set()

    def start_faults(self) -> None:
        self.faults_on = True

    def stop_faults(self) -> None:
        self.faults_on = False

    def partition(self, name: str, mode: str = "reset") -> None:
        """Cut listener ``name`` off (see the module docstring for ``mode``)."""
        if mode not in PARTITION_MODES:
            raise ValueError(f"partition mode {mode!r}: expected one of {PARTITION_MODES}")
        lst = self.listeners[name]
        lst.partition = mode
        lst.healed.clear()
        self.counts[f"partition-{mode}"] += 1
        if mode == "reset":
            for transport in list(lst.open):
                transport.abort()

    def heal(self, name: str) -> None:
        self.listeners[name].partition = None
        self.listeners[name].healed.set()

    def refuse(
        self, name: str, code: int, path: str, query: Mapping[str, str] | None = None
    ) -> None:
        """Listener ``name`` answers ``code`` to reads of ``path`` with ``query`` (see
        the module docstring) until ``unrefuse(name)``."""
        if code not in STATUS_REASONS:
            raise ValueError(f"refuse with {code}: expected one of {sorted(STATUS_REASONS)}")
        rule = Refusal(code, path, tuple(sorted((query or {}).items())))
        self.listeners[name].refusals.append(rule)

    def unrefuse(self, name: str) -> None:
        self.listeners[name].refusals.clear()

    def hold(self, name: str, method: str, path: str) -> Hold:
        """Listener ``name`` holds its requests ``method path`` until ``release(name)``."""
        rule = Hold(method, path)
        self.listeners[name].holds.append(rule)
        return rule

    def release(self, name: str) -> None:
        """Forward the requests held on listener ``name``; hold no more."""
        for rule in self.listeners[name].holds:
            rule.released.set()
        self.listeners[name].holds.clear()

    def faults(self) -> dict[str, int]:
        """Faults injected so far by kind (partitions: episodes and refused requests)."""
        return dict(sorted(self.counts.items()))

    # ------------------------------------------------------------ requests

    @staticmethod
    def _reset(request: web.Request) -> _Reset:
        if request.transport is not None:
            request.transport.abort()
        return _Reset()

    def _status(self, code: int) -> web.Response:
        """The proxy's own answer ``code`` (a ``Status`` body, ``Retry-After``)."""
        return web.Response(
            status=code,
            body=status_body(code, self.profile.retry_after),
            content_type="application/json",
            headers={"Retry-After": str(self.profile.retry_after)},
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        lst = self.listeners[request.app[_LISTENER]]
        transport = request.transport
        if transport is not None:
            lst.open.add(transport)
        try:
            return await self._serve(lst, request)
        except _Reset:
            # aiohttp needs a response object; the connection is already gone
            return web.Response(status=499)
        finally:
            if transport is not None:
                lst.open.discard(transport)

    def _upstream_headers(
        self, request: web.Request, listener: str
    ) -> tuple[CIMultiDict[str], bool]:
        headers: CIMultiDict[str] = CIMultiDict(
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _DROP_REQUEST and not k.lower().startswith("x-remote-")
        )
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if not peer:
            return headers, False
        headers.popall("Authorization", None)
        names = [dict(rdn) for rdn in peer.get("subject", ())]
        headers["X-Remote-User"] = next((n["commonName"] for n in names if "commonName" in n), "")
        for n in names:
            if "organizationName" in n:
                headers.add("X-Remote-Group", n["organizationName"])
        headers[VIA_EXTRA] = listener
        return headers, True

    async def _serve(self, lst: Listener, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        method = request.method
        cls = request_class(method, request.query_string)
        if lst.partition == "hang":
            self.counts["partitioned"] += 1
            await lst.healed.wait()
            raise self._reset(request)
        if lst.partition == "reset" or (lst.partition == "lease" and "/leases" in request.path):
            self.counts["partitioned"] += 1
            raise self._reset(request)
        for rule in lst.refusals:
            if rule.matches(cls, request.path, request.query):
                self.counts[f"refused-{rule.code}"] += 1
                return self._status(rule.code)
        fault = draw(lst.rng, self.profile, cls) if self.faults_on else None
        if fault in ("cut-body", "bad-json", "reset-watch"):
            pass  # counted where it is applied: the answer decides whether it can be
        elif fault is not None:
            self.counts[fault] += 1
        if fault == "reset-request":
            raise self._reset(request)
        if fault is not None and fault.startswith("status-"):
            return self._status(int(fault.removeprefix("status-")))
        body = await request.read()
        for hold in list(lst.holds):
            if hold.matches(method, request.path):
                hold.waiting += 1
                await hold.released.wait()
        if fault == "delay":
            await asyncio.sleep(lst.rng.uniform(0.05, self.profile.max_delay))
            if request.transport is None or request.transport.is_closing():
                raise _Reset()  # the caller gave up: the request must not land later
        headers, front = self._upstream_headers(request, lst.name)
        url = f"{self.server}{request.rel_url}"
        try:
            upstream = await self._session(front).request(
                method, url, headers=headers, data=body or None, allow_redirects=False
            )
        except (aiohttp.ClientError, OSError, TimeoutError):
            raise self._reset(request) from None
        async with upstream:
            if method in MUTATING:
                self.log.append(
                    Forwarded(time.monotonic(), lst.name, method, request.path, upstream.status)
                )
            if fault == "reset-response":
                raise self._reset(request)
            out_headers = {
                k: v for k, v in upstream.headers.items() if k.lower() not in _DROP_RESPONSE
            }
            if cls == "watch":
                return await self._stream(lst, request, upstream, out_headers, fault)
            payload = await upstream.read()
            if fault == "bad-json" and not 200 <= upstream.status < 300:
                fault = "cut-body"  # only a 2xx answer is read as the object it announces
            if fault in ("cut-body", "bad-json") and len(payload) > 1:
                self.counts[fault] += 1
                cut = lst.rng.randint(1, len(payload) - 1)
                resp = web.StreamResponse(status=upstream.status, headers=out_headers)
                resp.content_length = len(payload) if fault == "cut-body" else cut
                await resp.prepare(request)
                await resp.write(payload[:cut])
                if fault == "cut-body":
                    raise self._reset(request)
                await resp.write_eof()
                return resp
            return web.Response(status=upstream.status, body=payload, headers=out_headers)

    async def _stream(
        self,
        lst: Listener,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        headers: dict[str, str],
        fault: str | None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(status=upstream.status, headers=headers)
        await resp.prepare(request)
        budget = lst.rng.randint(0, 50_000) if fault == "reset-watch" else None
        deadline = time.monotonic() + lst.rng.uniform(0.5, 10.0) if budget is not None else None
        sent = 0
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    chunk = await upstream.content.readany()
            except TimeoutError:
                self.counts["reset-watch"] += 1
                raise self._reset(request) from None
            except (aiohttp.ClientError, OSError):
                raise self._reset(request) from None
            if not chunk:
                break
            if budget is not None and sent + len(chunk) > budget:
                self.counts["reset-watch"] += 1
                await resp.write(chunk[: budget - sent])
                raise self._reset(request)
            sent += len(chunk)
            await resp.write(chunk)
        await resp.write_eof()
        return resp


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    client: certs.CertPair | None = None,
    token: str | None = None,
) -> Path:
    """A kubeconfig for ``server`` trusting ``ca``, with a client certificate or a token."""
    import base64  # noqa: PLC0415

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    user: dict[str, str] = {}
    if client is not None:
        user = {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}
    elif token is not None:
        user = {"token": token}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


class ProxyThread:
    """A ``FaultProxy`` on an event loop of its own, in a daemon thread.

    ``call(coro_fn, *args)`` runs a coroutine function there and returns its result;
    ``do(fn, *args)`` runs a plain method there (thread-safe control).
    """

    def __init__(self, server: str, pki: certs.Pki, seed: int, profile: Profile | None = None):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="proxy")
        self._thread.start()
        self.proxy: FaultProxy = self.call(self._make, server, pki, seed, profile)

    @staticmethod
    async def _make(server: str, pki: certs.Pki, seed: int, profile: Profile | None) -> FaultProxy:
        return FaultProxy(server, pki, seed, profile)

    def call(self, fn: Any, *args: Any) -> Any:
        coro: Coroutine[Any, Any, Any] = fn(*args)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def do(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)

        return self.call(run)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.proxy.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
