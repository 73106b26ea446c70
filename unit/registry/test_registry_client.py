"""The registry client's protocol logic over a scripted transport (no network).

The real registry (e2e/test_registry.py) covers what Debian's docker-registry does;
these cover what it cannot be made to do: Bearer tokens, HEAD without a digest,
405, digest mismatches, malformed replies, DNS and TLS failures, secrets echoed
back.
"""

from __future__ import annotations

import errno
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, cast

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from kubernetes_asyncio.client import ApiClient
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from bootc_operator.controller import Controller
from bootc_operator.registry import (
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Credentials,
    CredentialsRejected,
    MalformedResponse,
    ManifestNotFound,
    NoCredentials,
    RegistryAuthError,
    RegistryClient,
    RegistryHTTPError,
    RegistryOptions,
    RegistryTimeout,
    RegistryTLSError,
    RegistryUnreachable,
    make_target,
)
from bootc_operator.registry.auth import (
    DEFAULT_TOKEN_LIFETIME,
    MAX_TOKEN_LIFETIME,
    TOKEN_EXPIRY_MARGIN,
    token_lifetime,
)
from bootc_operator.registry.errors import InvalidReference, one_line, scrub
from bootc_operator.registry.manifest import (
    MANIFEST_ACCEPT,
    compute_digest,
    digest_matches,
    is_digest,
)

REG = "reg.example.com"
PASSWORD = "correct-horse-battery"
CREDS = Credentials("alice", PASSWORD)

MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "x", "digest": "sha256:" + "1" * 64, "size": 1},
        "layers": [],
    }
).encode()
MANIFEST_DIGEST = compute_digest(MANIFEST)
AMD64 = "sha256:" + "a" * 64
ARM64 = "sha256:" + "b" * 64
INDEX = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": AMD64,
                "size": 10,
                "platform": {"os": "linux", "architecture": "amd64"},
            },
            {
                "mediaType": OCI_MANIFEST,
                "digest": ARM64,
                "size": 10,
                "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
            },
        ],
    }
).encode()
INDEX_DIGEST = compute_digest(INDEX)


# ---------------------------------------------------------------- scripted transport


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    ssl: Any


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    reason: str = "OK"


class _Content:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        for i in range(0, len(self.body), n):
            yield self.body[i : i + n]


class _Response:
    def __init__(self, url: str, answer: Answer) -> None:
        self.status = answer.status
        self.reason = answer.reason
        self.headers = CIMultiDictProxy(CIMultiDict(answer.headers))
        self.url = URL(url)
        self.content_length = len(answer.body)
        self.content = _Content(answer.body)

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


Handler = Callable[[Sent], Answer | BaseException]


class FakeSession:
    """Stands in for ``aiohttp.ClientSession``: ``handler`` answers every request."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sent: list[Sent] = []
        self.closed = False

    def request(
        self, method: str, url: str, *, headers: dict[str, str], data: Any, ssl: Any
    ) -> _Response:
        sent = Sent(method, url, headers, ssl)
        self.sent.append(sent)
        answer = self.handler(sent)
        if isinstance(answer, BaseException):
            raise answer
        return _Response(url, answer)

    async def close(self) -> None:
        self.closed = True


def client_for(handler: Handler, **options: Any) -> tuple[RegistryClient, FakeSession]:
    session = FakeSession(handler)
    return RegistryClient(
        RegistryOptions(**options), session=cast(aiohttp.ClientSession, session)
    ), session


def manifest_answer(
    body: bytes = MANIFEST, media_type: str = OCI_MANIFEST, digest: str | None = None
) -> Answer:
    headers = {"Content-Type": media_type}
    if digest != "":
        headers["Docker-Content-Digest"] = digest or compute_digest(body)
    return Answer(200, headers, body)


def registry_error(status: int, code: str, message: str, **headers: str) -> Answer:
    body = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
    reason = HTTPStatus(status).phrase
    return Answer(status, {"Content-Type": "application/json", **headers}, body, reason)


KEY = ConnectionKey(REG, 443, True, True, None, None, None)


# ---------------------------------------------------------------- digests


def test_digest_helpers() -> None:
    assert compute_digest(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert compute_digest(b"x", "sha512").startswith("sha512:")
    assert digest_matches(b"", compute_digest(b""))
    assert digest_matches(b"x", compute_digest(b"x", "sha512"))
    assert not digest_matches(b"y", compute_digest(b"x"))
    assert not digest_matches(b"x", "md5:" + "0" * 32)
    assert is_digest("sha256:" + "0" * 64)
    assert not is_digest("sha256:" + "0" * 63)
    assert not is_digest("sha256:" + "A" * 64)
    with pytest.raises(ValueError, match="unsupported"):
        compute_digest(b"", "md5")


# ---------------------------------------------------------------- HEAD / GET


async def test_head_with_digest_is_enough() -> None:
    client, session = client_for(lambda s: manifest_answer(b"", digest=MANIFEST_DIGEST))
    resolved = await client.resolve(f"{REG}/org/os:stable")
    assert (resolved.digest, resolved.media_type) == (MANIFEST_DIGEST, OCI_MANIFEST)
    assert resolved.pinned == f"{REG}/org/os@{MANIFEST_DIGEST}"
    assert not resolved.is_index and resolved.manifests == ()
    [sent] = session.sent
    assert (sent.method, sent.url) == ("HEAD", f"https://{REG}/v2/org/os/manifests/stable")
    assert sent.headers["Accept"] == MANIFEST_ACCEPT
    assert isinstance(sent.ssl, ssl.SSLContext)


@pytest.mark.parametrize(
    "head",
    [
        Answer(405, {}, b"", "Method Not Allowed"),
        Answer(200, {"Content-Type": OCI_MANIFEST}),  # no digest
        Answer(200, {"Docker-Content-Digest": MANIFEST_DIGEST}),  # no media type
        Answer(500, {}, b"", "Internal Server Error"),
    ],
)
async def test_falls_back_to_get_and_verifies(head: Answer) -> None:
    def handler(sent: Sent) -> Answer:
        return head if sent.method == "HEAD" else manifest_answer()

    client, session = client_for(handler)
    resolved = await client.resolve(f"{REG}/os:v1")
    assert resolved.digest == MANIFEST_DIGEST
    assert [s.method for s in session.sent] == ["HEAD", "GET"]


async def test_get_without_digest_header_uses_the_body_digest() -> None:
    def handler(sent: Sent) -> Answer:
        if sent.method == "HEAD":
            return Answer(405)
        return manifest_answer(MANIFEST, "application/json", digest="")

    client, _ = client_for(handler)
    resolved = await client.resolve(f"{REG}/os:v1")
    assert resolved.digest == MANIFEST_DIGEST
    # a generic Content-Type: the manifest's own mediaType tells
    assert resolved.media_type == OCI_MANIFEST


async def test_manifest_without_media_type_is_recognised_by_shape() -> None:
    body = json.dumps({"schemaVersion": 2, "config": {"digest": MANIFEST_DIGEST}}).encode()
    client, _ = client_for(
        lambda s: Answer(405) if s.method == "HEAD" else manifest_answer(body, DOCKER_MANIFEST)
    )
    resolved = await client.resolve(f"{REG}/os:v1")
    assert (resolved.digest, resolved.media_type) == (compute_digest(body), DOCKER_MANIFEST)


async def test_get_digest_mismatch_is_malformed() -> None:
    wrong = "sha256:" + "0" * 64

    def handler(sent: Sent) -> Answer:
        return Answer(405) if sent.method == "HEAD" else manifest_answer(digest=wrong)

    client, _ = client_for(handler)
    with pytest.raises(MalformedResponse, match="does not match the content") as info:
        await client.resolve(f"{REG}/os:v1")
    assert wrong in str(info.value) and MANIFEST_DIGEST in str(info.value)


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (
            Answer(200, {"Content-Type": "text/html"}, b"<html>login</html>"),
            "the manifest is not usable JSON (Expecting value at line 1 column 1)",
        ),
        (Answer(200, {"Content-Type": OCI_INDEX}, b"[]"), "the manifest is not a JSON object"),
        # issue 27: json's RecursionError / int-digits ValueError escaped resolve()
        (
            Answer(200, {"Content-Type": OCI_INDEX}, b'{"manifests": ' + b"[" * 100_000),
            "the manifest is not usable JSON (nested more than 64 levels deep)",
        ),
        (
            Answer(200, {"Content-Type": OCI_INDEX}, b'{"size": ' + b"1" * 5000 + b"}"),
            "the manifest is not usable JSON (a number has too many digits)",
        ),
        (
            Answer(
                200,
                {"Content-Type": "application/vnd.docker.distribution.manifest.v1+prettyjws"},
                b'{"schemaVersion": 1, "fsLayers": []}',
            ),
            "unsupported manifest type",
        ),
        (
            Answer(200, {"Content-Type": OCI_INDEX}, MANIFEST),
            f"Content-Type {OCI_INDEX} but the manifest says {OCI_MANIFEST}",
        ),
        (
            Answer(200, {"Docker-Content-Digest": "sha256:short"}, MANIFEST),
            "invalid Docker-Content-Digest",
        ),
    ],
)
async def test_malformed_replies(answer: Answer, fragment: str) -> None:
    client, _ = client_for(lambda s: Answer(405) if s.method == "HEAD" else answer)
    with pytest.raises(MalformedResponse, match="malformed reply") as info:
        await client.resolve(f"{REG}/os:v1")
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


async def test_digest_reference_must_come_back_with_that_digest() -> None:
    other = "sha256:" + "c" * 64
    client, session = client_for(lambda s: manifest_answer(b"", digest=other))
    with pytest.raises(MalformedResponse, match=f"returned manifest {other}"):
        await client.resolve(f"{REG}/os@{MANIFEST_DIGEST}")
    assert session.sent[0].url.endswith(f"/manifests/{MANIFEST_DIGEST}")
    client, _ = client_for(lambda s: manifest_answer(b"", digest=MANIFEST_DIGEST))
    assert (await client.resolve(f"{REG}/os:v1@{MANIFEST_DIGEST}")).digest == MANIFEST_DIGEST


async def test_index_entries_fetched_by_digest_once() -> None:
    def handler(sent: Sent) -> Answer:
        if sent.method == "HEAD":
            return manifest_answer(b"", OCI_INDEX, digest=INDEX_DIGEST)
        assert sent.url.endswith(f"/manifests/{INDEX_DIGEST}")
        return manifest_answer(INDEX, OCI_INDEX)

    client, session = client_for(handler)
    resolved = await client.resolve(f"{REG}/multi:latest")
    assert resolved.is_index and resolved.digest == INDEX_DIGEST
    assert [m.digest for m in resolved.manifests] == [AMD64, ARM64]
    arm = resolved.manifest_for("arm64")
    assert arm is not None and arm.platform is not None and str(arm.platform) == "linux/arm64/v8"
    assert resolved.manifest_for("s390x") is None
    assert resolved.contains(AMD64) and resolved.contains(INDEX_DIGEST)
    assert not resolved.contains(MANIFEST_DIGEST)
    again = await client.resolve(f"{REG}/multi:latest")
    assert again == resolved
    assert [s.method for s in session.sent] == ["HEAD", "GET", "HEAD"]
    no_index = await client.resolve(f"{REG}/multi:latest", fetch_index=False)
    assert no_index.manifests == ()


def index_body(n: int) -> bytes:
    """A distinct index (its annotation differs) with the two platform entries of INDEX."""
    doc = json.loads(INDEX)
    doc["annotations"] = {"n": str(n)}
    return json.dumps(doc).encode()


class IndexRegistry:
    """Tags ``i0``, ``i1``, ... point at distinct indexes; the HEAD gives the digest."""

    def __init__(self, count: int) -> None:
        self.bodies = [index_body(n) for n in range(count)]
        self.by_digest = {compute_digest(b): b for b in self.bodies}

    def __call__(self, sent: Sent) -> Answer:
        reference = sent.url.rsplit("/", 1)[1]
        body = self.by_digest.get(reference) or self.bodies[int(reference[1:])]
        if sent.method == "HEAD":
            return manifest_answer(b"", OCI_INDEX, digest=compute_digest(body))
        return manifest_answer(body, OCI_INDEX)


async def test_the_controller_resolves_a_multi_arch_tag_with_one_head() -> None:
    """Tag resolution uses only the digest: the index is neither fetched nor cached."""
    controller = Controller(cast(ApiClient, None), identity="unit")
    session = FakeSession(IndexRegistry(1))
    controller.registry._session = cast(aiohttp.ClientSession, session)
    controller.registry._own_session = False
    digest = await controller.tags._resolve(f"{REG}/multi:i0", None)
    assert digest == compute_digest(index_body(0))
    assert [s.method for s in session.sent] == ["HEAD"]
    assert controller.registry.index_cache_bytes == 0


async def test_digest_without_a_head_digest_keeps_nothing() -> None:
    def handler(sent: Sent) -> Answer:
        return Answer(405) if sent.method == "HEAD" else manifest_answer(INDEX, OCI_INDEX, "")

    client, session = client_for(handler)
    assert await client.digest(f"{REG}/multi:latest") == INDEX_DIGEST
    assert [s.method for s in session.sent] == ["HEAD", "GET"]
    assert client.index_cache_bytes == 0


async def test_the_index_cache_is_bounded_by_bytes() -> None:
    server = IndexRegistry(4)
    size = len(server.bodies[0])
    client, session = client_for(server, index_cache_bytes=2 * size + size // 2)
    for n in range(3):
        resolved = await client.resolve(f"{REG}/multi:i{n}")
        assert [m.digest for m in resolved.manifests] == [AMD64, ARM64]
    assert client.index_cache_bytes == 2 * size  # i0 was dropped for i2
    sent = len(session.sent)
    await client.resolve(f"{REG}/multi:i2")  # cached: the HEAD only
    assert [s.method for s in session.sent[sent:]] == ["HEAD"]
    sent = len(session.sent)
    await client.resolve(f"{REG}/multi:i0")  # dropped: fetched again
    assert [s.method for s in session.sent[sent:]] == ["HEAD", "GET"]
    assert client.index_cache_bytes == 2 * size
    # an index bigger than the whole cache is used, not kept
    client, _ = client_for(server, index_cache_bytes=size - 1)
    assert len((await client.resolve(f"{REG}/multi:i3")).manifests) == 2
    assert client.index_cache_bytes == 0


async def test_malformed_index_entries() -> None:
    bad = json.dumps({"mediaType": OCI_INDEX, "manifests": [{"digest": "nope"}]}).encode()
    client, _ = client_for(
        lambda s: Answer(405) if s.method == "HEAD" else manifest_answer(bad, OCI_INDEX)
    )
    with pytest.raises(MalformedResponse, match=r"malformed index .*manifests\[0\]"):
        await client.resolve(f"{REG}/multi:latest")


# ---------------------------------------------------------------- not found / statuses


async def test_not_found() -> None:
    client, _ = client_for(lambda s: Answer(404, reason="Not Found"))
    with pytest.raises(ManifestNotFound) as info:
        await client.resolve(f"{REG}/os:nope")
    assert str(info.value) == f"{REG}/os:nope not found (manifest unknown)"

    def name_unknown(sent: Sent) -> Answer:
        if sent.method == "HEAD":
            return Answer(405)
        return registry_error(404, "NAME_UNKNOWN", "repository name not known to registry")

    client, _ = client_for(name_unknown)
    with pytest.raises(ManifestNotFound, match="repository name not known to registry"):
        await client.resolve(f"{REG}/missing:v1")


async def test_a_not_found_message_is_scrubbed() -> None:
    """A 404 whose text quotes what it was sent: the message reaches pool conditions."""
    token = "ghp_" + "T" * 36  # a registry that takes a token as the user name

    def handler(sent: Sent) -> Answer:
        if "Authorization" not in sent.headers:
            return registry_error(401, "UNAUTHORIZED", "no", **{"WWW-Authenticate": "Basic"})
        if sent.method == "HEAD":
            return Answer(405)
        echo = f"no os:nope for {sent.headers['Authorization']} ({token}/{PASSWORD})"
        return registry_error(404, "MANIFEST_UNKNOWN", echo)

    client, _ = client_for(handler)
    with pytest.raises(ManifestNotFound) as info:
        await client.resolve(f"{REG}/os:nope", credentials=Credentials(token, PASSWORD))
    assert str(info.value) == (
        f"{REG}/os:nope not found (manifest unknown: no os:nope for Basic <redacted> "
        "(<redacted>/<redacted>))"
    )


async def test_a_rejected_token_user_name_is_never_shown() -> None:
    token = "ghp_" + "U" * 36
    wrong = Credentials(token, "x-oauth-basic")
    client, _ = client_for(
        lambda s: registry_error(
            401, "UNAUTHORIZED", f"bad user {token}", **{"WWW-Authenticate": "Basic"}
        )
    )
    with pytest.raises(CredentialsRejected) as info:
        await client.resolve(f"{REG}/os:v1", credentials=wrong)
    assert str(info.value) == (
        f"credentials rejected: registry {REG} refused the credentials for pulling "
        f"{REG}/os:v1 (HTTP 401: Unauthorized)"
    )
    target = make_target(f"{REG}/os", credentials=wrong)
    with pytest.raises(CredentialsRejected) as info:
        await client.request(target, "GET", "manifests/v1", what="pulling")
    assert str(info.value).endswith("(HTTP 401: unauthorized: bad user <redacted>)")


async def test_a_secret_across_the_detail_cut_is_not_shown_in_part() -> None:
    client, _ = client_for(lambda s: registry_error(503, "UNAVAILABLE", "x" * 180 + PASSWORD))
    target = make_target(f"{REG}/os", credentials=CREDS)
    reply = await client.request(target, "GET", "manifests/v1", what="pulling")
    message = str(client.unexpected(target, reply, "pulling"))
    assert PASSWORD[:5] not in message and message.endswith("…")


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (Answer(503, {}, b"", "Service Unavailable"), "answered HTTP 503"),
        (registry_error(429, "TOOMANYREQUESTS", "slow down"), "rate limiting requests"),
        (registry_error(400, "MANIFEST_INVALID", "bad"), "HTTP 400"),
    ],
)
async def test_unexpected_status(answer: Answer, fragment: str) -> None:
    client, _ = client_for(lambda s: Answer(405) if s.method == "HEAD" else answer)
    with pytest.raises(RegistryHTTPError) as info:
        await client.resolve(f"{REG}/os:v1")
    assert fragment in str(info.value) and info.value.status == answer.status


# ---------------------------------------------------------------- authentication


class BearerRegistry:
    """A registry that wants a Bearer token from its token service."""

    TOKEN = "tok-0123456789abcdef"

    def __init__(self, *, accept: Credentials | None = None, token_status: int = 200) -> None:
        self.accept = accept
        self.token_status = token_status
        self.token_requests: list[Sent] = []

    def __call__(self, sent: Sent) -> Answer:
        if sent.url.startswith("https://auth.example.com/token"):
            self.token_requests.append(sent)
            if self.token_status != 200:
                return registry_error(self.token_status, "UNAUTHORIZED", "authentication required")
            if self.accept is not None and sent.headers.get("Authorization") != (
                self.accept.basic_authorization()
            ):
                return registry_error(401, "UNAUTHORIZED", "authentication required")
            return Answer(200, {}, json.dumps({"token": self.TOKEN, "expires_in": 300}).encode())
        if sent.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            return registry_error(
                401,
                "UNAUTHORIZED",
                "authentication required",
                **{
                    "WWW-Authenticate": 'Bearer realm="https://auth.example.com/token?x=1",'
                    'service="reg.example.com",scope="repository:org/os:pull"'
                },
            )
        return manifest_answer(b"", digest=MANIFEST_DIGEST)


async def test_bearer_token_flow_and_cache() -> None:
    server = BearerRegistry(accept=CREDS)
    client, session = client_for(server)
    config = {"auths": {REG: {"username": CREDS.username, "password": PASSWORD}}}
    resolved = await client.resolve(f"{REG}/org/os:v1", dockerconfigjson=config)
    assert resolved.digest == MANIFEST_DIGEST
    [token_request] = server.token_requests
    assert token_request.url == (
        "https://auth.example.com/token?x=1&service=reg.example.com"
        "&scope=repository%3Aorg%2Fos%3Apull"
    )
    assert token_request.headers["Authorization"] == CREDS.basic_authorization()
    # the token is reused: one HEAD, no second token request
    await client.resolve(f"{REG}/org/os:v2", dockerconfigjson=config)
    assert len(server.token_requests) == 1
    assert session.sent[-1].headers["Authorization"] == f"Bearer {BearerRegistry.TOKEN}"
    # other credentials do not reuse it
    with pytest.raises(CredentialsRejected):
        await client.resolve(f"{REG}/org/os:v2", credentials=Credentials("bob", "x"))
    assert len(server.token_requests) == 2


async def test_anonymous_bearer_token() -> None:
    server = BearerRegistry()
    client, _ = client_for(server)
    await client.resolve(f"{REG}/org/os:v1")
    assert "Authorization" not in server.token_requests[0].headers


async def test_token_service_rejects_credentials() -> None:
    client, _ = client_for(BearerRegistry(accept=CREDS))
    with pytest.raises(CredentialsRejected) as info:
        await client.resolve(f"{REG}/org/os:v1", credentials=Credentials("alice", "wrong-pw-xyz"))
    message = str(info.value)
    assert message.startswith("credentials rejected:")
    assert "alice" not in message and "auth.example.com" in message
    assert "wrong-pw-xyz" not in message


async def test_token_service_wants_credentials() -> None:
    client, _ = client_for(BearerRegistry(token_status=401))
    with pytest.raises(NoCredentials) as info:
        await client.resolve(f"{REG}/org/os:v1", dockerconfigjson={"auths": {"other.io": {}}})
    assert str(info.value).startswith(f"no credentials for host {REG}:")


class TokenAnswer(BearerRegistry):
    """A token service whose answer is ``body`` (raw JSON text)."""

    def __init__(self, body: str) -> None:
        super().__init__()
        self.body = body

    def __call__(self, sent: Sent) -> Answer:
        if sent.url.startswith("https://auth.example.com/token"):
            self.token_requests.append(sent)
            return Answer(200, {"Content-Type": "application/json"}, self.body.encode())
        return super().__call__(sent)


@pytest.mark.parametrize(
    ("expires_in", "lifetime"),
    [
        ("1e308", MAX_TOKEN_LIFETIME),  # cached for the life of the process
        ("1" + "0" * 400, MAX_TOKEN_LIFETIME),  # OverflowError: int too large to convert
        ("Infinity", DEFAULT_TOKEN_LIFETIME),  # cached forever
        ("NaN", DEFAULT_TOKEN_LIFETIME),
        ("-Infinity", DEFAULT_TOKEN_LIFETIME),
        ("300", 300.0),
    ],
)
async def test_a_token_lifetime_is_bounded(expires_in: str, lifetime: float) -> None:
    server = TokenAnswer(f'{{"token": "{BearerRegistry.TOKEN}", "expires_in": {expires_in}}}')
    client, _ = client_for(server)
    before = time.monotonic()
    await client.resolve(f"{REG}/org/os:v1")
    [(value, expires)] = client.auth._cache.values()
    assert value == f"Bearer {BearerRegistry.TOKEN}"
    assert before + lifetime - TOKEN_EXPIRY_MARGIN <= expires <= time.monotonic() + lifetime


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, DEFAULT_TOKEN_LIFETIME),
        ("300", DEFAULT_TOKEN_LIFETIME),
        (True, DEFAULT_TOKEN_LIFETIME),
        (0, DEFAULT_TOKEN_LIFETIME),
        (-5, DEFAULT_TOKEN_LIFETIME),
        (float("inf"), DEFAULT_TOKEN_LIFETIME),
        (float("nan"), DEFAULT_TOKEN_LIFETIME),
        (10**400, MAX_TOKEN_LIFETIME),
        (1e308, MAX_TOKEN_LIFETIME),
        (120, 120.0),
        (2.5, 2.5),
    ],
)
def test_token_lifetime(value: object, seconds: float) -> None:
    assert token_lifetime(value) == seconds


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('{"token": ' + "[" * 100_000, "nested more than 64 levels deep"),  # RecursionError
        ('{"token": "t", "n": ' + "1" * 5000 + "}", "a number has too many digits"),
        ("<html>", "Expecting value at line 1 column 1"),
    ],
    ids=["deep-nesting", "huge-integer", "not-json"],
)
async def test_an_unusable_token_answer_is_one_readable_error(body: str, fragment: str) -> None:
    client, _ = client_for(TokenAnswer(body))
    with pytest.raises(MalformedResponse) as info:
        await client.resolve(f"{REG}/org/os:v1")
    assert str(info.value) == (
        f"token service auth.example.com of registry {REG} sent an unusable answer for "
        f"pulling {REG}/org/os:v1: {fragment}"
    )


class PlainRealmRegistry:
    """A registry whose 401 names a plain-HTTP token service ``realm``."""

    def __init__(self, registry: str, realm: str) -> None:
        self.registry, self.realm = registry, realm
        self.token_requests: list[Sent] = []

    def __call__(self, sent: Sent) -> Answer:
        if sent.url.startswith(self.realm):
            self.token_requests.append(sent)
            return Answer(200, {}, json.dumps({"token": BearerRegistry.TOKEN}).encode())
        if sent.headers.get("Authorization") != f"Bearer {BearerRegistry.TOKEN}":
            challenge = f'Bearer realm="{self.realm}",service="{self.registry}"'
            return registry_error(401, "UNAUTHORIZED", "no", **{"WWW-Authenticate": challenge})
        return manifest_answer(b"", digest=MANIFEST_DIGEST)


async def test_credentials_never_go_to_a_plain_http_realm_on_another_host() -> None:
    server = PlainRealmRegistry(REG, "http://token-collector.attacker.net/t")
    client, session = client_for(server)
    with pytest.raises(RegistryAuthError) as info:
        await client.resolve(f"{REG}/org/os:v1", credentials=CREDS)
    assert str(info.value) == (
        f"registry {REG} sends pulling {REG}/org/os:v1 to the plain-HTTP token service "
        "token-collector.attacker.net; the pull secret's credentials are not sent there in "
        "cleartext (list the registry as insecure if that is intended)"
    )
    assert server.token_requests == []
    assert all("Authorization" not in s.headers for s in session.sent)
    # without credentials there is nothing to leak: the anonymous token is fetched
    client, _ = client_for(server)
    assert (await client.resolve(f"{REG}/org/os:v1")).digest == MANIFEST_DIGEST
    assert "Authorization" not in server.token_requests[0].headers


@pytest.mark.parametrize(
    ("registry", "realm", "insecure"),
    [
        ("127.0.0.1:5000", "http://127.0.0.1:5001/token", []),
        (f"{REG}:5000", "http://auth.example.com/token", [f"{REG}:5000"]),
    ],
    ids=["loopback", "listed-insecure"],
)
async def test_credentials_go_to_a_plain_http_realm_where_allowed(
    registry: str, realm: str, insecure: list[str]
) -> None:
    server = PlainRealmRegistry(registry, realm)
    client, _ = client_for(server, insecure_registries=insecure)
    await client.resolve(f"{registry}/org/os:v1", credentials=CREDS)
    [token_request] = server.token_requests
    assert token_request.headers["Authorization"] == CREDS.basic_authorization()


def basic_registry(sent: Sent) -> Answer:
    if sent.headers.get("Authorization") == CREDS.basic_authorization():
        return manifest_answer(b"", digest=MANIFEST_DIGEST)
    return registry_error(
        401,
        "UNAUTHORIZED",
        f"authentication required (you sent {sent.headers.get('Authorization', 'nothing')})",
        **{"WWW-Authenticate": 'Basic realm="Registry Realm"'},
    )


async def test_basic_auth() -> None:
    client, session = client_for(basic_registry)
    resolved = await client.resolve(f"{REG}/os:v1", credentials=CREDS)
    assert resolved.digest == MANIFEST_DIGEST
    assert [s.headers.get("Authorization") for s in session.sent] == [
        None,
        CREDS.basic_authorization(),
    ]
    await client.resolve(f"{REG}/os:v1", credentials=CREDS)  # pre-authorised now
    assert len(session.sent) == 3


async def test_basic_auth_without_credentials() -> None:
    client, _ = client_for(basic_registry)
    with pytest.raises(NoCredentials) as info:
        await client.resolve(f"{REG}/os:v1")
    assert str(info.value) == (
        f"no credentials for host {REG}: the registry requires authentication for pulling "
        f"{REG}/os:v1 (HTTP 401: authentication required)"
    )


async def test_basic_auth_rejected_message_has_no_secret() -> None:
    wrong = Credentials("alice", "not-the-password")
    client, _ = client_for(basic_registry)
    with pytest.raises(CredentialsRejected) as info:
        await client.resolve(f"{REG}/os:v1", credentials=wrong)
    assert str(info.value) == (
        f"credentials rejected: registry {REG} refused the credentials for pulling {REG}/os:v1 "
        "(HTTP 401: Unauthorized)"
    )
    # a GET's error body echoing the credentials back is redacted
    target = make_target(f"{REG}/os", credentials=wrong)
    with pytest.raises(CredentialsRejected) as info:
        await client.request(target, "GET", "manifests/v1", what="pulling")
    message = str(info.value)
    assert "not-the-password" not in message
    assert wrong.basic_authorization().split()[1] not in message
    assert "<redacted>" in message and "alice" not in message


async def test_forbidden() -> None:
    client, _ = client_for(lambda s: registry_error(403, "DENIED", "requested access denied"))
    with pytest.raises(CredentialsRejected, match=r"HTTP 403: Forbidden\)$"):
        await client.resolve(f"{REG}/os:v1", credentials=CREDS)
    with pytest.raises(NoCredentials, match="HTTP 403"):
        await client.resolve(f"{REG}/os:v1")
    target = make_target(f"{REG}/os", credentials=CREDS)
    with pytest.raises(CredentialsRejected, match="HTTP 403: denied: requested access denied"):
        await client.request(target, "GET", "manifests/v1", what="pulling")


async def test_docker_hub_names() -> None:
    client, session = client_for(lambda s: manifest_answer(b"", digest=MANIFEST_DIGEST))
    resolved = await client.resolve("docker.io/fedora:41")
    assert session.sent[0].url == "https://registry-1.docker.io/v2/library/fedora/manifests/41"
    assert resolved.pinned == f"docker.io/fedora@{MANIFEST_DIGEST}"


async def test_invalid_reference() -> None:
    client, session = client_for(lambda s: Answer())
    with pytest.raises(InvalidReference, match="short name"):
        await client.resolve("fedora:41")
    assert session.sent == []


# ---------------------------------------------------------------- transport failures


@pytest.mark.parametrize(
    ("error", "cls", "fragment"),
    [
        (
            aiohttp.ClientConnectorDNSError(KEY, OSError(-2, "Name or service not known")),
            RegistryUnreachable,
            f"cannot resolve registry host {REG}: Name or service not known",
        ),
        (
            aiohttp.ClientConnectorError(
                KEY, ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
            ),
            RegistryUnreachable,
            f"cannot connect to registry {REG}: connection refused",
        ),
        (
            aiohttp.ClientConnectorCertificateError(
                KEY,
                ssl.SSLCertVerificationError(
                    1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
                ),
            ),
            RegistryTLSError,
            f"TLS certificate of registry {REG} is not trusted",
        ),
        (
            aiohttp.ClientConnectorSSLError(
                KEY, ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
            ),
            RegistryTLSError,
            f"TLS handshake with registry {REG} failed",
        ),
        (TimeoutError(), RegistryTimeout, f"registry {REG} did not answer within 7s"),
        (
            aiohttp.ServerDisconnectedError(),
            RegistryUnreachable,
            f"connection to registry {REG} failed",
        ),
    ],
)
async def test_transport_failures(
    error: BaseException, cls: type[Exception], fragment: str
) -> None:
    client, _ = client_for(lambda s: error, timeout=7)
    with pytest.raises(cls) as info:
        await client.resolve(f"{REG}/os:v1")
    assert type(info.value) is cls
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


async def test_insecure_registry_falls_back_to_http() -> None:
    def handler(sent: Sent) -> Answer | BaseException:
        if sent.url.startswith("https://"):
            return aiohttp.ClientConnectorSSLError(KEY, ssl.SSLError(1, "wrong version number"))
        return manifest_answer(b"", digest=MANIFEST_DIGEST)

    client, session = client_for(handler, insecure_registries=[f"{REG}:5000"])
    await client.resolve(f"{REG}:5000/os:v1")
    await client.resolve(f"{REG}:5000/os:v2")
    # per attempt: https first every time (issue 27: it used to stick to http)
    assert [s.url.split(":", 1)[0] for s in session.sent] == ["https", "http", "https", "http"]
    assert session.sent[0].ssl is False  # tried without verification
    # not listed: TLS errors stay errors
    client, _ = client_for(handler)
    with pytest.raises(RegistryTLSError):
        await client.resolve(f"{REG}:5000/os:v1")


async def test_one_tls_failure_does_not_downgrade_later_requests() -> None:
    """An insecure-listed registry that speaks TLS, once interrupted (a reset, a proxy):
    the next requests, credentials included, go over https again."""
    failures = [aiohttp.ClientConnectorSSLError(KEY, ssl.SSLError(1, "record layer failure"))]

    def handler(sent: Sent) -> Answer | BaseException:
        if sent.url.startswith("https://") and failures:
            return failures.pop()
        return basic_registry(sent)

    client, session = client_for(handler, insecure_registries=[REG])
    await client.resolve(f"{REG}/os:v1", credentials=CREDS)
    first = len(session.sent)
    await client.resolve(f"{REG}/os:v2", credentials=CREDS)
    await client.resolve(f"{REG}/os:v3", credentials=CREDS)
    later = session.sent[first:]
    assert later and all(s.url.startswith("https://") for s in later)
    assert all(s.headers.get("Authorization") == CREDS.basic_authorization() for s in later)


async def test_insecure_registry_speaking_tls_skips_verification() -> None:
    client, session = client_for(
        lambda s: manifest_answer(b"", digest=MANIFEST_DIGEST), insecure_registries=[REG]
    )
    await client.resolve(f"{REG}:8443/os:v1")  # a bare host covers every port
    assert session.sent[0].url.startswith("https://") and session.sent[0].ssl is False


def test_options_insecure_matching() -> None:
    options = RegistryOptions(
        insecure_registries=["Reg.Example.com:5000", "http://lab.local/", " "]
    )
    assert options.insecure_registries == frozenset({"reg.example.com:5000", "lab.local"})
    assert options.is_insecure("reg.example.com:5000")
    assert not options.is_insecure("reg.example.com")
    assert not options.is_insecure("reg.example.com:5001")
    assert options.is_insecure("lab.local:1234") and options.is_insecure("lab.local")


async def test_bad_ca_file_is_a_tls_error(tmp_path: Any) -> None:
    client, _ = client_for(lambda s: Answer(), ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(RegistryTLSError, match="cannot load the CA bundle"):
        await client.resolve(f"{REG}/os:v1")


def test_message_helpers() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    assert len(one_line("x" * 500)) == 200
    assert scrub("token abc123 and pw", ["abc123", "", "pw"]) == "token <redacted> and pw"


async def test_closing_an_injected_session_is_left_to_its_owner() -> None:
    client, session = client_for(lambda s: Answer())
    async with client:
        pass
    assert not session.closed


async def test_a_bearer_token_echoed_back_is_redacted() -> None:
    server = BearerRegistry()

    def handler(sent: Sent) -> Answer:
        if sent.method == "GET" and sent.url.startswith(f"https://{REG}/"):
            # accepts nothing, and quotes what it got
            return registry_error(
                401,
                "UNAUTHORIZED",
                f"bad {sent.headers.get('Authorization', '')}",
                **{"WWW-Authenticate": 'Bearer realm="https://auth.example.com/token"'},
            )
        return server(sent)

    client, _ = client_for(handler)
    target = make_target(f"{REG}/org/os")
    with pytest.raises(NoCredentials) as info:
        await client.request(target, "GET", "manifests/v1", what="pulling")
    assert BearerRegistry.TOKEN not in str(info.value)
    assert "bad Bearer <redacted>" in str(info.value)
