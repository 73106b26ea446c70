"""A small aiohttp client for the Kubernetes API: what :mod:`.rest` needs, no generated models.

The daemon runs on every node and only sends raw JSON requests (its BootcNode, one
Secret, the status patch), yet ``import kubernetes_asyncio.client`` loads ~770
generated model modules (~70 MiB, ~0.8 s). :class:`LiteClient` offers the one
method :mod:`.rest` calls, ``call_api(..., _preload_content=False)`` returning the
streaming ``aiohttp.ClientResponse`` (the :class:`~bootc_operator.kube.rest.Api`
protocol that ``kubernetes_asyncio``'s ``ApiClient`` also satisfies), so the
informer library and the verbs in :mod:`.rest` run unchanged on either. The
controller keeps ``kubernetes_asyncio`` (:mod:`.client`).

Owned here:

- where the API server and credentials come from (:func:`load_access`, pure parts
  :func:`parse_kubeconfig` and :func:`in_cluster_access`): a kubeconfig file when a
  path is given; else the in-cluster service account when ``KUBERNETES_SERVICE_HOST``
  / ``_PORT`` are set; else ``$KUBECONFIG`` / ``~/.kube/config``. Kubeconfig support
  is what a daemon and the tests need: ``server``, ``certificate-authority(-data)``,
  ``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url``;
  ``client-certificate(-data)`` / ``client-key(-data)``, ``token``, ``tokenFile``.
  Anything else that changes how we authenticate (``exec``, ``auth-provider``,
  ``username``/``password``, impersonation, a merged ``$KUBECONFIG`` list) is a
  :class:`ConfigError` naming it, never silently ignored;
- bearer tokens from a file (:class:`TokenSource`): kubelet rotates projected
  service-account tokens in place, so, like client-go's cached file token source,
  the file is re-read when the token in hand is older than a minute, and on a 401
  it is re-read at once and the request sent once more if the token changed (a
  revoked token whose replacement is already on disk costs one failed request);
- the HTTP session: one ``aiohttp.ClientSession`` opened on first use (it needs the
  running loop), TLS from the CA / client certificate, the proxy resolved once from
  the environment (:func:`env_proxy`) and no per-request environment or ``.netrc``
  look-ups (``trust_env=False``, see :mod:`.client` for why that matters).

Query strings are encoded the way ``kubernetes_asyncio`` does (``urlencode``, so a
``+`` in a continue token is sent as ``%2B``) and JSON bodies with :func:`json.dumps`.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import aiohttp
from yarl import URL

from bootc_operator import __version__

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# client-go's cachingTokenSource re-reads a token file after a minute.
TOKEN_RELOAD_PERIOD: Final = 60.0
# Watches hold a connection each for their whole life; leave room for requests.
DEFAULT_MAX_CONNECTIONS: Final = 100
USER_AGENT: Final = f"bootc-operator/{__version__}"

_CLUSTER_KEYS: Final = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
        "extensions",  # informational only
    }
)
_USER_KEYS: Final = frozenset(
    {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
        "extensions",
    }
)


class ConfigError(Exception):
    """API access cannot be configured; the message is one line naming the cause."""


@dataclass(frozen=True)
class Access:
    """Where the API server is and how to authenticate; file paths are absolute."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    client_cert_data: bytes | None = None  # PEM
    client_key_data: bytes | None = None  # PEM
    token: str | None = None
    token_file: str | None = None


# ---------------------------------------------------------------- configuration


def _named(doc: Mapping[str, Any], section: str, name: str, where: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(section.removesuffix("s"))
            return body if isinstance(body, Mapping) else {}
    raise ConfigError(f"{where}: no {section.removesuffix('s')} named {name!r}")


def _path(base_dir: Path, value: Any) -> str:
    # client-go resolves relative paths against the kubeconfig file's directory
    return str(base_dir / str(value))


def _b64(value: Any, key: str, where: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError as e:
        raise ConfigError(f"{where}: {key} is not base64 ({e})") from None


def parse_kubeconfig(
    doc: Any, *, base_dir: Path, context: str | None = None, where: str = "kubeconfig"
) -> Access:
    """The :class:`Access` of ``context`` (default: current-context) of a parsed kubeconfig."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: not a kubeconfig (expected a mapping)")
    name = context or doc.get("current-context")
    if not name:
        raise ConfigError(f"{where}: no context given and no current-context")
    ctx = _named(doc, "contexts", str(name), where)
    cluster = _named(doc, "clusters", str(ctx.get("cluster", "")), where)
    user = _named(doc, "users", str(ctx["user"]), where) if ctx.get("user") else {}
    for keys, body, what in ((_CLUSTER_KEYS, cluster, "cluster"), (_USER_KEYS, user, "user")):
        unsupported = sorted(set(body) - keys)
        if unsupported:
            raise ConfigError(
                f"{where}: {what} field {', '.join(unsupported)} is not supported by "
                f"bootc-operator's API client (supported: {', '.join(sorted(keys))})"
            )
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"{where}: cluster of context {name!r} has no server")
    access = Access(
        server=server.rstrip("/"),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        token=user.get("token") or None,
    )
    if cluster.get("certificate-authority-data"):
        ca = _b64(cluster["certificate-authority-data"], "certificate-authority-data", where)
        access = replace(access, ca_data=ca.decode("ascii", "replace"))
    elif cluster.get("certificate-authority"):
        access = replace(access, ca_file=_path(base_dir, cluster["certificate-authority"]))
    if user.get("client-certificate-data"):
        data = _b64(user["client-certificate-data"], "client-certificate-data", where)
        access = replace(access, client_cert_data=data)
    elif user.get("client-certificate"):
        access = replace(access, client_cert_file=_path(base_dir, user["client-certificate"]))
    if user.get("client-key-data"):
        access = replace(
            access, client_key_data=_b64(user["client-key-data"], "client-key-data", where)
        )
    elif user.get("client-key"):
        access = replace(access, client_key_file=_path(base_dir, user["client-key"]))
    if user.get("tokenFile") and not access.token:
        access = replace(access, token_file=_path(base_dir, user["tokenFile"]))
    has_cert = bool(access.client_cert_data or access.client_cert_file)
    has_key = bool(access.client_key_data or access.client_key_file)
    if has_cert != has_key:
        raise ConfigError(f"{where}: a client certificate needs both a certificate and a key")
    return access


def in_cluster_access(env: Mapping[str, str], sa_dir: Path = SERVICE_ACCOUNT_DIR) -> Access | None:
    """The Pod's service-account access, or None when not running in a cluster."""
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        return None
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return Access(
        server=f"https://{host}:{port}",
        ca_file=str(sa_dir / "ca.crt"),
        token_file=str(sa_dir / "token"),
    )


def default_kubeconfig(env: Mapping[str, str]) -> Path:
    """``$KUBECONFIG`` (a single file) or ``~/.kube/config``."""
    value = env.get("KUBECONFIG", "")
    paths = [p for p in value.split(os.pathsep) if p]
    if len(paths) > 1:
        raise ConfigError(
            f"KUBECONFIG lists {len(paths)} files; bootc-operator's API client reads one "
            "(pass --kubeconfig)"
        )
    return Path(paths[0]) if paths else Path(env.get("HOME", "~")).expanduser() / ".kube/config"


def load_access(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
) -> Access:
    """Access from ``kubeconfig``, else in-cluster, else the default kubeconfig."""
    env = os.environ if env is None else env
    if not kubeconfig:
        found = in_cluster_access(env, sa_dir)
        if found is not None:
            for required in (found.token_file, found.ca_file):
                if required and not Path(required).is_file():
                    raise ConfigError(f"in-cluster config: {required} is missing")
            return found
        kubeconfig = default_kubeconfig(env)
    # In a Pod there is no kubeconfig to parse: yaml (~1 MiB) only loads for one.
    import yaml  # noqa: PLC0415

    path = Path(kubeconfig)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"kubeconfig {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"kubeconfig {path}: not YAML ({str(e).splitlines()[0]})") from None
    return parse_kubeconfig(
        doc, base_dir=path.resolve().parent, context=context, where=f"kubeconfig {path}"
    )


def env_proxy(server: str | None) -> str | None:
    """The proxy ``$HTTPS_PROXY``/``$HTTP_PROXY`` name for ``server`` (honouring ``$NO_PROXY``)."""
    url = urllib.parse.urlsplit(server or "")
    proxy = urllib.request.getproxies_environment().get(url.scheme)
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(url.hostname or ""):
        return None
    return proxy


def ssl_context(access: Access) -> ssl.SSLContext | None:
    """TLS settings of ``access``; None for a plain-HTTP server."""
    if not access.server.startswith("https:"):
        return None
    try:
        ctx = ssl.create_default_context(cafile=access.ca_file, cadata=access.ca_data)
        if access.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if access.client_cert_file and access.client_key_file:
            ctx.load_cert_chain(access.client_cert_file, access.client_key_file)
        elif access.client_cert_data and access.client_key_data:
            # ssl loads a certificate chain from files only; they live as long as this call.
            with tempfile.TemporaryDirectory(prefix="bootc-operator-tls-") as tmp:
                cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
                cert.write_bytes(access.client_cert_data)
                key.touch(mode=0o600)
                key.write_bytes(access.client_key_data)
                ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS configuration for {access.server}: {e}") from None
    return ctx


# ---------------------------------------------------------------- tokens


class TokenSource:
    """A bearer token read from ``path``, re-read when older than ``period`` or on demand.

    A failed re-read keeps the token in hand (kubelet replaces the file atomically, so
    a failure is a transient one) and is logged; only the first read must succeed.
    """

    def __init__(
        self,
        path: str,
        *,
        period: float = TOKEN_RELOAD_PERIOD,
        clock: Callable[[], float] = time.monotonic,
        read: Callable[[str], str] | None = None,
    ) -> None:
        self.path = path
        self.period = period
        self.clock = clock
        self._read = read or (lambda p: Path(p).read_text())
        self._token = ""
        self._read_at = 0.0
        self.reads = 0
        try:
            self._token = self._load()
        except OSError as e:
            raise ConfigError(f"token file {path}: {e.strerror or e}") from None
        self._read_at = clock()

    def _load(self) -> str:
        self.reads += 1
        return self._read(self.path).strip()

    def token(self) -> str:
        """The current token, re-read first when the one in hand is ``period`` old."""
        if self.clock() - self._read_at >= self.period:
            self.reload()
        return self._token

    def reload(self) -> bool:
        """Re-read the file now; True when the token changed."""
        self._read_at = self.clock()
        try:
            token = self._load()
        except OSError as e:
            log.warning("cannot re-read token file %s: %s; keeping the token in hand", self.path, e)
            return False
        if not token or token == self._token:
            return False
        self._token = token
        return True


# ---------------------------------------------------------------- client


def _query_string(query_params: Sequence[tuple[str, str]] | Mapping[str, Any] | None) -> str:
    if not query_params:
        return ""
    return urllib.parse.urlencode(query_params)


def _payload(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


class LiteClient:
    """API access for :mod:`.rest` without ``kubernetes_asyncio`` (see the module docstring).

    ``host`` is the server's base URL; tests may point it elsewhere (e.g. a proxy).
    The caller owns the client and must ``await client.close()`` (or use
    ``async with``).
    """

    def __init__(
        self,
        access: Access,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.access = access
        self.host = access.server
        self.max_connections = max_connections
        self._ssl = ssl_context(access)
        self._proxy = access.proxy or env_proxy(access.server)
        self._static_token = access.token
        self.tokens = TokenSource(access.token_file, clock=clock) if access.token_file else None
        self._session: aiohttp.ClientSession | None = None

    def _authorization(self) -> str | None:
        token = self.tokens.token() if self.tokens else self._static_token
        return f"Bearer {token}" if token else None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections, ssl=self._ssl or True),
                headers={"User-Agent": USER_AGENT},
                trust_env=False,
            )
        return self._session

    async def _request(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        data: bytes | None,
        request_timeout: aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        auth = self._authorization()
        if auth:
            headers = {**headers, "Authorization": auth}
        return await self._open().request(
            method,
            url,
            headers=headers,
            data=data,
            proxy=self._proxy,
            server_hostname=self.access.tls_server_name,
            timeout=request_timeout or aiohttp.ClientTimeout(),
        )

    async def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: Sequence[tuple[str, str]] | Mapping[str, Any] | None = None,
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        auth_settings: Sequence[str] | None = None,
        _preload_content: bool = False,
        _request_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request; the response is unread (the caller reads and releases it).

        ``auth_settings`` is accepted for ``ApiClient`` compatibility: the bearer token
        or client certificate of the configuration is always used.
        """
        if _preload_content:
            raise TypeError("LiteClient returns unread responses only (_preload_content=False)")
        query = _query_string(query_params)
        url = URL(self.host + resource_path + (f"?{query}" if query else ""), encoded=True)
        headers = dict(header_params or {})
        data = _payload(body)
        resp = await self._request(method, url, headers, data, _request_timeout)
        if resp.status == 401 and self.tokens is not None and self.tokens.reload():
            # The token was revoked or expired and the file holds a new one already.
            resp.release()
            log.info(
                "401 Unauthorized: retrying %s %s with the re-read token", method, resource_path
            )
            resp = await self._request(method, url, headers, data, _request_timeout)
        return resp

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> LiteClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def load_lite_client(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> LiteClient:
    """A :class:`LiteClient` from :func:`load_access`; :class:`ConfigError` if it cannot be."""
    return LiteClient(load_access(kubeconfig, context=context), max_connections=max_connections)
