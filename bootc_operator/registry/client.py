"""The registry client: OCI distribution / Docker Registry HTTP API v2 over aiohttp.

Owns talking to registries: transport (TLS, insecure registries, timeouts),
authentication (anonymous, Basic, Bearer tokens), resolving a reference to a
manifest digest, and fetching a digest's cosign signature documents
(``signature(ref)``: the ``sha256-<hex>.sig`` manifest and its payload blobs,
bounded in size; ``signature.py`` verifies them).

``RegistryClient(options).resolve(ref, dockerconfigjson=...)`` (or the one-shot
``resolve_digest``) does, for ``host/repo:tag``:

1. ``HEAD /v2/<repo>/manifests/<tag>`` accepting OCI index, OCI manifest, Docker
   manifest list and Docker v2 manifest; the digest is ``Docker-Content-Digest``,
   the media type the ``Content-Type``.
2. When HEAD gives no usable digest or media type (or any status but 200 or 404,
   e.g. 405), ``GET`` the same URL instead; then the digest is checked against the
   body (``Docker-Content-Digest`` must equal the body's digest; without the
   header the body's sha256 is the digest).
3. For an index (multi-arch), its per-platform entries are read too (from the GET
   body, else one ``GET`` by digest, cached per client since digests are
   immutable, the cache bounded by bytes), so callers can map the index digest to
   per-architecture digests. ``digest(ref)`` (the controller's tag resolution,
   which needs the digest only) skips this step.

A digest reference is checked the same way and must come back with that digest.

Authentication (``auth.py``) answers the registry's ``401`` challenge once per
request, Bearer preferred over Basic; the answer is cached per (registry,
repository, actions, credentials) so later requests go out pre-authorised.
Credentials come from a dockerconfigjson matched to the registry
(``credentials.py``); Docker Hub names are talked to at ``registry-1.docker.io``
and single-component repositories get ``library/``.

Transport: HTTPS verified against the system CAs plus ``RegistryOptions.ca_file``;
registries in ``RegistryOptions.insecure_registries`` (``host`` or ``host:port``)
are tried over HTTPS without verification and, when TLS fails, over plain HTTP
(per request: never remembered, so one TLS failure does not downgrade the rest).
Every request has a connect timeout and a total timeout. Failures raise the
classes of ``errors.py``.

Nothing here blocks the event loop: the SSL context (which reads CA files) is
built in a worker thread once per client; DNS goes through aiohttp's threaded
resolver.
"""

from __future__ import annotations

import asyncio
import errno
import os
import ssl
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from bootc_operator import __version__
from bootc_operator.api.imageref import ImageRef, InvalidImageRef, parse_image_ref
from bootc_operator.registry.auth import Authenticator, parse_www_authenticate
from bootc_operator.registry.credentials import (
    Credentials,
    DockerConfig,
    api_repository,
    parse_docker_config,
)
from bootc_operator.registry.errors import (
    InvalidReference,
    MalformedResponse,
    ManifestNotFound,
    RegistryError,
    RegistryHTTPError,
    RegistryTimeout,
    RegistryTLSError,
    RegistryUnreachable,
    one_line,
    scrub,
)
from bootc_operator.registry.manifest import (
    INDEX_MEDIA_TYPES,
    MANIFEST_ACCEPT,
    MANIFEST_MEDIA_TYPES,
    MAX_MANIFEST_BYTES,
    PlatformManifest,
    Resolved,
    body_media_type,
    compute_digest,
    digest_matches,
    index_entries,
    is_digest,
    media_type_of,
    parse_manifest,
)
from bootc_operator.registry.signature import (
    MAX_PAYLOAD_BYTES,
    MAX_SIGNATURE_MANIFEST_BYTES,
    SIGNATURE_MANIFEST_TYPES,
    InvalidSignatureManifest,
    SignatureDocuments,
    parse_signature_manifest,
    signature_tag,
)
from bootc_operator.registry.types import Reply, Target
from bootc_operator.safejson import JSONInputError

DEFAULT_USER_AGENT: Final = f"bootc-operator/{__version__}"
ERROR_BODY_LIMIT: Final = 64 * 1024
#: Index entries cached, counted in the indexes' JSON bytes: a parsed index keeps
#: about 2.6 times its JSON (a 4 MiB one: 10.5 MiB), so this is about 21 MiB. It was
#: 128 indexes whatever their size: 1.3 GiB of 4 MiB ones against a 512 MiB limit.
INDEX_CACHE_BYTES: Final = 8 * 1024 * 1024

DockerConfigInput = bytes | str | Mapping[str, Any] | DockerConfig | None


@dataclass(frozen=True)
class RegistryOptions:
    """How the client talks to registries (one instance per controller, from its flags).

    ``timeout``: seconds for one HTTP exchange, connecting included;
    ``connect_timeout``: seconds to establish a connection (TCP + TLS);
    ``ca_file``: a PEM bundle trusted in addition to the system CAs;
    ``insecure_registries``: ``host`` or ``host:port`` entries spoken to without
    certificate verification, over plain HTTP when they do not speak TLS (a bare
    ``host`` covers every port); ``trust_env``: honour ``HTTPS_PROXY``/``NO_PROXY``
    (off by default: aiohttp then also reads ``~/.netrc``, whose credentials would be
    sent to registries and clash with the client's own ``Authorization``);
    ``index_cache_bytes``: the bound of the index-entry cache (``INDEX_CACHE_BYTES``).
    """

    timeout: float = 30.0
    connect_timeout: float = 10.0
    ca_file: str | os.PathLike[str] | None = None
    insecure_registries: Collection[str] = frozenset()
    user_agent: str = DEFAULT_USER_AGENT
    trust_env: bool = False
    index_cache_bytes: int = INDEX_CACHE_BYTES

    def __post_init__(self) -> None:
        normal = frozenset(_normalize_host(h) for h in self.insecure_registries if h.strip())
        object.__setattr__(self, "insecure_registries", normal)

    def is_insecure(self, registry: str) -> bool:
        """True when ``registry`` (``host[:port]``) is listed, by itself or by host."""
        reg = _normalize_host(registry)
        return reg in self.insecure_registries or _strip_port(reg) in self.insecure_registries


def _normalize_host(text: str) -> str:
    text = text.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    return text.split("/", 1)[0]


def _strip_port(hostport: str) -> str:
    if hostport.startswith("["):
        return hostport[: hostport.index("]") + 1] if "]" in hostport else hostport
    return hostport.rsplit(":", 1)[0] if ":" in hostport else hostport


def make_target(
    name: str,
    *,
    dockerconfigjson: DockerConfigInput = None,
    credentials: Credentials | None = None,
) -> Target:
    """The ``Target`` for ``registry/repository`` (tag/digest ignored), with the credentials
    given, else those of ``dockerconfigjson`` matching the registry."""
    ref = _parse_ref(name)
    config = parse_docker_config(dockerconfigjson)
    creds = credentials or config.credentials_for(ref.registry, ref.repository)
    return Target(ref.registry, api_repository(ref.registry, ref.repository), creds)


def _parse_ref(text: str) -> ImageRef:
    try:
        return parse_image_ref(text)
    except InvalidImageRef as exc:
        raise InvalidReference(str(exc)) from None


def _os_reason(exc: BaseException) -> str:
    os_error = getattr(exc, "os_error", None)
    err = os_error if isinstance(os_error, OSError) else exc
    if isinstance(err, OSError) and err.errno:
        if err.errno in (errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH):
            return os.strerror(err.errno).lower()
        if err.strerror:
            return err.strerror
    return str(err) or type(err).__name__


def _ssl_reason(exc: BaseException) -> str:
    cert_error = getattr(exc, "certificate_error", None)
    verify_message = getattr(cert_error, "verify_message", None)
    if verify_message:
        return str(verify_message)
    inner = getattr(exc, "os_error", None) or exc
    reason = getattr(inner, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.lower().replace("_", " ")
    return str(inner) or type(inner).__name__


def _build_ssl_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_file is not None:
        context.load_verify_locations(cafile=os.fspath(ca_file))
    return context


class RegistryClient:
    """A connection pool, SSL context and token cache for talking to registries.

    Use as ``async with RegistryClient(options) as client: await client.resolve(...)``
    or keep one for the process and ``await client.close()`` at shutdown. Safe for
    concurrent use from one event loop.
    """

    def __init__(
        self,
        options: RegistryOptions | None = None,
        *,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.options = options or RegistryOptions()
        self._session = session
        self._own_session = session is None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_lock = asyncio.Lock()
        self.auth = Authenticator(self._http, self.options.is_insecure)
        #: (repository, digest) -> (entries, charge); LRU order, bounded by bytes
        self._indexes: OrderedDict[tuple[str, str], tuple[tuple[PlatformManifest, ...], int]]
        self._indexes = OrderedDict()
        self._index_bytes = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    # ------------------------------------------------------------------ transport

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(
                    total=self.options.timeout,
                    connect=self.options.connect_timeout,
                ),
                trust_env=self.options.trust_env,
                headers={"User-Agent": self.options.user_agent},
            )
            self._own_session = True
        return self._session

    async def _ssl_context(self, registry: str) -> ssl.SSLContext:
        if self._ssl is None:
            async with self._ssl_lock:
                if self._ssl is None:
                    try:
                        self._ssl = await asyncio.to_thread(
                            _build_ssl_context, self.options.ca_file
                        )
                    except (OSError, ssl.SSLError) as exc:
                        raise RegistryTLSError(
                            f"cannot load the CA bundle {self.options.ca_file}: "
                            f"{getattr(exc, 'strerror', None) or exc}",
                            registry=registry,
                        ) from None
        return self._ssl

    async def _http(
        self,
        method: str,
        url: str,
        *,
        registry: str,
        what: str,
        headers: Mapping[str, str],
        data: bytes | None = None,
        max_body: int = MAX_MANIFEST_BYTES,
        verify: bool = True,
    ) -> Reply:
        """One HTTP exchange; connection-level failures become ``RegistryError`` classes."""
        ssl_arg: ssl.SSLContext | bool = False
        if url.startswith("https://") and verify:
            ssl_arg = await self._ssl_context(registry)
        host = urllib.parse.urlsplit(url).netloc or registry
        try:
            async with self._get_session().request(
                method, url, headers=dict(headers), data=data, ssl=ssl_arg
            ) as resp:
                limit = max_body if 200 <= resp.status < 300 else ERROR_BODY_LIMIT
                body = b"" if method == "HEAD" else await _read_limited(resp, limit)
                if body is None:
                    raise MalformedResponse(
                        f"registry {registry} sent more than {limit} bytes for {what}",
                        registry=registry,
                    )
                return Reply(
                    status=resp.status,
                    reason=resp.reason or "",
                    headers=CIMultiDictProxy(CIMultiDict(resp.headers)),
                    body=body,
                    url=str(resp.url),
                )
        except (aiohttp.ClientError, ssl.SSLError, TimeoutError) as exc:
            raise self._connection_failure(exc, host, registry, what) from None

    def _connection_failure(
        self, exc: BaseException, host: str, registry: str, what: str
    ) -> RegistryError:
        """The ``RegistryError`` a connection-level failure of ``_http`` reads as."""
        if isinstance(exc, aiohttp.ClientConnectorDNSError):
            return RegistryUnreachable(
                f"cannot resolve registry host {_strip_port(host)}: {_os_reason(exc)}",
                registry=registry,
            )
        if isinstance(exc, aiohttp.ClientSSLError):
            if isinstance(exc, aiohttp.ClientConnectorCertificateError):
                message = (
                    f"TLS certificate of registry {host} is not trusted ({_ssl_reason(exc)}); "
                    "give its CA bundle or list the registry as insecure"
                )
            else:
                message = f"TLS handshake with registry {host} failed: {_ssl_reason(exc)}"
            return RegistryTLSError(message, registry=registry)
        if isinstance(exc, ssl.SSLError):
            return RegistryTLSError(
                f"TLS error talking to registry {host}: {_ssl_reason(exc)}", registry=registry
            )
        if isinstance(exc, aiohttp.ClientConnectorError):
            return RegistryUnreachable(
                f"cannot connect to registry {host}: {_os_reason(exc)}", registry=registry
            )
        if isinstance(exc, TimeoutError):
            return RegistryTimeout(
                f"registry {host} did not answer within {self.options.timeout:g}s ({what})",
                registry=registry,
            )
        detail = scrub(one_line(str(exc) or type(exc).__name__), self.auth.secrets(None))
        return RegistryUnreachable(
            f"connection to registry {host} failed ({what}): {detail}", registry=registry
        )

    async def _exchange(
        self,
        target: Target,
        method: str,
        path: str,
        *,
        what: str,
        headers: Mapping[str, str],
        data: bytes | None,
        max_body: int,
    ) -> Reply:
        """One request to ``target``'s registry: https, and for an insecure one plain http
        when TLS fails on this very attempt.

        Never remembered: one TLS failure (a proxy hiccup, a forged reset) must not
        turn every later request of the process, credentials included, to cleartext.
        """
        insecure = self.options.is_insecure(target.registry) or self.options.is_insecure(
            target.endpoint
        )
        absolute = path.startswith(("http://", "https://"))

        def url_for(scheme: str) -> str:
            if absolute:
                return path
            return f"{scheme}://{target.endpoint}/v2/{target.repository}/{path}"

        def attempt(scheme: str) -> Awaitable[Reply]:
            return self._http(
                method,
                url_for(scheme),
                registry=target.registry,
                what=what,
                headers=headers,
                data=data,
                max_body=max_body,
                verify=not insecure,
            )

        try:
            return await attempt("https")
        except RegistryTLSError:
            if not insecure or absolute:
                raise
        # Listed as insecure and TLS failed: a plain-HTTP registry, for this attempt.
        return await attempt("http")

    # ------------------------------------------------------------------ requests

    async def request(
        self,
        target: Target,
        method: str,
        path: str,
        *,
        what: str,
        actions: tuple[str, ...] = ("pull",),
        headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
        max_body: int = MAX_MANIFEST_BYTES,
    ) -> Reply:
        """An authenticated request to ``/v2/<repository>/<path>`` (or an absolute URL the
        registry gave, e.g. an upload ``Location``).

        Handles the 401 challenge (once) and raises ``NoCredentials`` /
        ``CredentialsRejected`` for a final 401 or 403; every other status is returned.
        ``what`` names the operation in messages (``"pulling host/repo:tag"``).
        """
        key = self.auth.key(target, actions)
        base_headers = dict(headers or {})
        authorization = self.auth.cached(key)
        send_headers = dict(base_headers)
        if authorization:
            send_headers["Authorization"] = authorization
        reply = await self._exchange(
            target,
            method,
            path,
            what=what,
            headers=send_headers,
            data=data,
            max_body=max_body,
        )
        if reply.status == 401:
            self.auth.forget(key)
            challenges = parse_www_authenticate(reply.headers.getall("WWW-Authenticate", []))
            if not challenges:
                raise self.auth.failure(target, what, _status_detail(reply), status=401)
            value = await self.auth.answer(key, target, challenges, actions, what)
            reply = await self._exchange(
                target,
                method,
                path,
                what=what,
                headers={**base_headers, "Authorization": value},
                data=data,
                max_body=max_body,
            )
        if reply.status in (401, 403):
            error = self.auth.failure(target, what, _status_detail(reply), status=reply.status)
            if reply.status == 401:
                self.auth.forget(key)  # (after the message was scrubbed of it)
            raise error
        return reply

    def unexpected(self, target: Target, reply: Reply, what: str) -> RegistryError:
        """The exception for a status the caller cannot use."""
        detail = one_line(scrub(_status_detail(reply), self.auth.secrets(target)))
        if reply.status == 429:
            message = f"registry {target.registry} is rate limiting requests ({what}): {detail}"
        else:
            message = (
                f"registry {target.registry} answered HTTP {reply.status} for {what}: {detail}"
            )
        return RegistryHTTPError(message, registry=target.registry, status=reply.status)

    def _not_found(self, target: Target, shown: str, reply: Reply) -> ManifestNotFound:
        """The exception for a 404, the registry's own words scrubbed of every secret."""
        code, message = reply.registry_error()
        if code == "NAME_UNKNOWN":
            detail = "repository name not known to registry"
        else:
            detail = "manifest unknown"
        if message and message.lower() not in detail:
            message = scrub(message, self.auth.secrets(target))
            detail = f"{detail}: {one_line(message, 120)}"
        return ManifestNotFound(f"{shown} not found ({detail})", registry=target.registry)

    # ------------------------------------------------------------------ resolve

    async def digest(self, ref: str, dockerconfigjson: DockerConfigInput = None) -> str:
        """The manifest digest ``ref`` points at, and nothing else (the controller's tag
        resolution): one HEAD when it gives the digest, never an index's entries, so
        nothing is fetched or cached beyond the digest."""
        resolved = await self.resolve(ref, dockerconfigjson=dockerconfigjson, fetch_index=False)
        return resolved.digest

    async def resolve(
        self,
        ref: str,
        *,
        dockerconfigjson: DockerConfigInput = None,
        credentials: Credentials | None = None,
        fetch_index: bool = True,
    ) -> Resolved:
        """Resolve ``ref`` (``host/repo:tag`` or ``host/repo@sha256:…``) to its manifest digest.

        Credentials: ``credentials`` if given, else the ``dockerconfigjson`` entry
        matching the registry (see ``credentials.py``), else anonymous. With
        ``fetch_index`` (default) an index's per-platform entries are included.
        """
        image = _parse_ref(ref)
        target = make_target(image.name, dockerconfigjson=dockerconfigjson, credentials=credentials)
        reference = image.reference
        shown = f"{image.name}@{reference}" if image.digest else f"{image.name}:{reference}"
        what = f"pulling {shown}"
        found = await self._find_manifest(target, image, shown, what, keep_body=fetch_index)
        digest, media_type, doc, body_size = found
        if image.digest and digest != image.digest:
            raise MalformedResponse(
                f"registry {target.registry} returned manifest {digest} for {shown}",
                registry=target.registry,
            )
        manifests: tuple[PlatformManifest, ...] = ()
        if fetch_index and media_type in INDEX_MEDIA_TYPES:
            if doc is not None:
                manifests = _entries(target, doc, what)
                self._remember_index(target, digest, manifests, body_size)
            else:
                manifests = await self._index(target, digest, what)
        return Resolved(
            name=image.name,
            reference=reference,
            digest=digest,
            media_type=media_type,
            manifests=manifests,
        )

    async def _find_manifest(
        self, target: Target, image: ImageRef, shown: str, what: str, *, keep_body: bool
    ) -> tuple[str, str, dict[str, Any] | None, int]:
        """(digest, media type, the manifest when read and ``keep_body``, its size):
        a HEAD when its headers say it all, else a GET, checked against its digest."""
        accept = {"Accept": MANIFEST_ACCEPT}
        path = f"manifests/{image.reference}"
        head = await self.request(target, "HEAD", path, what=what, headers=accept)
        if head.status == 404:
            raise self._not_found(target, shown, head)
        if head.status == 200:
            header_digest = head.headers.get("Docker-Content-Digest", "")
            header_type = media_type_of(head.headers.get("Content-Type"))
            if is_digest(header_digest) and header_type in MANIFEST_MEDIA_TYPES:
                return header_digest, header_type, None, 0
        get = await self.request(target, "GET", path, what=what, headers=accept)
        if get.status == 404:
            raise self._not_found(target, shown, get)
        if get.status != 200:
            raise self.unexpected(target, get, what)
        digest, media_type, doc = _check_manifest(
            target, get, what, algorithm=(image.digest or "sha256").split(":", 1)[0]
        )
        # only the digest is wanted: keep nothing of the body
        return digest, media_type, doc if keep_body else None, len(get.body)

    def _remember_index(
        self, target: Target, digest: str, manifests: tuple[PlatformManifest, ...], size: int
    ) -> None:
        """Cache an index's entries, charged ``size`` (its JSON bytes), least recently
        used first out once the charges pass ``RegistryOptions.index_cache_bytes``."""
        key = (target.display, digest)
        old = self._indexes.pop(key, None)
        if old is not None:
            self._index_bytes -= old[1]
        if size > self.options.index_cache_bytes:
            return  # bigger than the whole cache: not kept
        self._indexes[key] = (manifests, size)
        self._index_bytes += size
        while self._index_bytes > self.options.index_cache_bytes:
            _, (_, dropped) = self._indexes.popitem(last=False)
            self._index_bytes -= dropped

    @property
    def index_cache_bytes(self) -> int:
        """What the cached indexes are charged (their JSON bytes), for tests and metrics."""
        return self._index_bytes

    async def _index(self, target: Target, digest: str, what: str) -> tuple[PlatformManifest, ...]:
        cached = self._indexes.get((target.display, digest))
        if cached is not None:
            self._indexes.move_to_end((target.display, digest))
            return cached[0]
        reply = await self.request(
            target, "GET", f"manifests/{digest}", what=what, headers={"Accept": MANIFEST_ACCEPT}
        )
        if reply.status == 404:
            raise self._not_found(target, f"{target.display}@{digest}", reply)
        if reply.status != 200:
            raise self.unexpected(target, reply, what)
        got, media_type, doc = _check_manifest(
            target, reply, what, algorithm=digest.split(":", 1)[0]
        )
        if got != digest or media_type not in INDEX_MEDIA_TYPES:
            raise MalformedResponse(
                f"registry {target.registry} returned {media_type} {got} when asked for "
                f"index {digest} ({what})",
                registry=target.registry,
            )
        manifests = _entries(target, doc, what)
        self._remember_index(target, digest, manifests, len(reply.body))
        return manifests

    # ------------------------------------------------------------------ signatures

    async def signature(
        self,
        ref: str,
        *,
        dockerconfigjson: DockerConfigInput = None,
        credentials: Credentials | None = None,
    ) -> SignatureDocuments:
        """The cosign signature documents of a digest reference (``host/repo@sha256:…``):
        the manifest tagged ``sha256-<hex>.sig`` in the same repository and the payload
        blobs its layers name (``signature.py`` decides what they prove).

        Same credentials, TLS and insecure-registry rules as ``resolve``. No signature
        manifest (404) gives ``manifest=None``; a payload blob the registry does not have
        is left out (the verdict calls that signature malformed). Sizes are bounded:
        ``MAX_SIGNATURE_MANIFEST_BYTES`` for the manifest, ``MAX_PAYLOAD_BYTES`` per
        payload, the first ``MAX_SIGNATURES`` layers; more raises ``MalformedResponse``.
        """
        image = _parse_ref(ref)
        if not image.digest:
            raise InvalidReference(f"{ref}: a signature is looked up by digest, not by tag")
        target = make_target(image.name, dockerconfigjson=dockerconfigjson, credentials=credentials)
        tag = signature_tag(image.digest)
        what = f"pulling the signature {image.name}:{tag}"
        reply = await self.request(
            target,
            "GET",
            f"manifests/{tag}",
            what=what,
            headers={"Accept": ", ".join(SIGNATURE_MANIFEST_TYPES)},
            max_body=MAX_SIGNATURE_MANIFEST_BYTES,
        )
        if reply.status == 404:
            return SignatureDocuments(manifest=None, payloads={})
        if reply.status != 200:
            raise self.unexpected(target, reply, what)
        try:
            layers = parse_signature_manifest(reply.body).wanted_blobs()
        except InvalidSignatureManifest:
            return SignatureDocuments(manifest=reply.body, payloads={})
        payloads: dict[str, bytes] = {}
        for layer in layers:
            if layer.digest in payloads:
                continue
            blob = await self.request(
                target,
                "GET",
                f"blobs/{layer.digest}",
                what=f"{what} (payload {layer.digest})",
                max_body=MAX_PAYLOAD_BYTES,
            )
            if blob.status == 404:
                continue
            if blob.status != 200:
                raise self.unexpected(target, blob, what)
            payloads[layer.digest] = blob.body
        return SignatureDocuments(manifest=reply.body, payloads=payloads)


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, or None when it is longer than ``limit`` bytes."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _status_detail(reply: Reply) -> str:
    """The registry's words for a status, whole: callers scrub them, then cut them short
    (cut first, a secret across the cut would be shown in part)."""
    code, message = reply.registry_error()
    if code and message:
        return f"{code.lower()}: {message}"
    return message or code or reply.reason or f"HTTP {reply.status}"


def _check_manifest(
    target: Target, reply: Reply, what: str, *, algorithm: str
) -> tuple[str, str, dict[str, Any]]:
    """Digest, media type and JSON of a GET manifest reply; ``MalformedResponse`` if unusable."""

    def malformed(detail: str) -> MalformedResponse:
        return MalformedResponse(
            f"registry {target.registry} sent a malformed reply for {what}: {detail}",
            registry=target.registry,
        )

    header_digest = reply.headers.get("Docker-Content-Digest", "").strip()
    if header_digest:
        if not is_digest(header_digest):
            raise malformed(f"invalid Docker-Content-Digest {one_line(header_digest, 80)!r}")
        if not digest_matches(reply.body, header_digest):
            algo = header_digest.split(":", 1)[0]
            raise malformed(
                f"Docker-Content-Digest {header_digest} does not match the content "
                f"({compute_digest(reply.body, algo)})"
            )
        digest = header_digest
    else:
        try:
            digest = compute_digest(reply.body, algorithm)
        except ValueError:
            digest = compute_digest(reply.body)
    try:
        doc = parse_manifest(reply.body)
    except JSONInputError as exc:
        raise malformed(f"the manifest is not usable JSON ({exc})") from None
    except ValueError:
        raise malformed("the manifest is not a JSON object") from None
    header_type = media_type_of(reply.headers.get("Content-Type"))
    declared = doc.get("mediaType")
    if header_type in MANIFEST_MEDIA_TYPES:
        if declared in MANIFEST_MEDIA_TYPES and declared != header_type:
            raise malformed(f"Content-Type {header_type} but the manifest says {declared}")
        media_type = header_type
    else:
        # a generic Content-Type (application/json): what the manifest says or looks like
        media_type = body_media_type(doc) or header_type
    if media_type not in MANIFEST_MEDIA_TYPES:
        raise malformed(f"unsupported manifest type {one_line(media_type or 'none', 100)!r}")
    return digest, media_type, doc


def _entries(target: Target, doc: dict[str, Any], what: str) -> tuple[PlatformManifest, ...]:
    try:
        return index_entries(doc)
    except ValueError as exc:
        raise MalformedResponse(
            f"registry {target.registry} sent a malformed index for {what}: {exc}",
            registry=target.registry,
        ) from None


async def resolve_digest(
    ref: str,
    *,
    dockerconfigjson: DockerConfigInput = None,
    options: RegistryOptions | None = None,
    credentials: Credentials | None = None,
    fetch_index: bool = True,
) -> Resolved:
    """One-shot ``RegistryClient(options).resolve(ref, ...)`` (a fresh connection pool)."""
    async with RegistryClient(options) as client:
        return await client.resolve(
            ref,
            dockerconfigjson=dockerconfigjson,
            credentials=credentials,
            fetch_index=fetch_index,
        )
