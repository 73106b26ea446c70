"""A small OCI distribution client: resolve an image ref to what bootc would report.

``fetch_image(ref, ...)`` does what bootc's pull does up to knowing the image:
``GET /v2/<repo>/manifests/<tag|digest>`` accepting OCI index/manifest and Docker
manifest list/v2; for an index (multi-arch) it picks the ``linux`` manifest of the
host's architecture and fetches that one, so the digest it returns is the
*per-architecture* manifest digest (bootc's ``imageDigest``); then it reads the config
blob for ``architecture``, the version label (``org.opencontainers.image.version``,
else ``version``), the build time (``org.opencontainers.image.created`` label,
else ``created``) and the simulation's labels: ``fakebootc.boot-assessment`` (see
``boot.py``) and ``fakebootc.kernel`` (the image's kernel, see ``state.Deployment``).

An ``insecure`` registry is spoken to over plain http; any other over https,
verified against the system CAs plus ``ca_files`` (the ``*.crt`` files of the
host's ``/etc/containers/certs.d/<host:port>/``, see ``resolve``).

Authentication follows the registry's ``WWW-Authenticate`` challenge: anonymous
first, then Basic, or a Bearer token from the challenge's realm (Basic credentials
sent to the token endpoint when there are any). Credentials come from the host's
auth file, a dockerconfigjson (``{"auths": {"host:port": {"auth": base64(user:pass)}}}``,
``username``/``password`` also accepted), the most specific matching key winning
(``host/repo`` over ``host``), as containers/image does.

Two failure kinds matter to the caller: ``RegistryUnreachable`` (nothing answered:
refused, DNS, timeout, TLS) lets the simulation fall back to its catalog, while
``PullError`` (the registry answered: unknown manifest, unauthorized, no manifest
for this architecture, digest mismatch) is what bootc would fail with. Messages
mimic containers/image's (``reading manifest v1 in host/repo: manifest unknown``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hack.fakebootc.boot import LABEL
from hack.fakebootc.imageref import Ref, is_loopback
from hack.fakebootc.policy import Signatures
from hack.fakebootc.state import KERNEL_LABEL

if TYPE_CHECKING:
    import urllib.request

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = {OCI_INDEX, DOCKER_LIST}
MANIFEST_ACCEPT = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST])
USER_AGENT = "bootc/fakebootc"
#: signatures fetched per image (each is a blob): as many as the verifier looks at
MAX_SIGNATURE_LAYERS = 32

_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class RegistryUnreachable(Exception):
    """The registry did not answer at all; the caller may fall back to a catalog."""


class PullError(Exception):
    """The registry answered and the pull cannot succeed (what bootc would fail with)."""


@dataclass(frozen=True)
class ImageMeta:
    """What bootc reports about a pulled image."""

    digest: str
    architecture: str
    version: str | None = None
    timestamp: str | None = None
    #: the kernel it ships (label ``state.KERNEL_LABEL``); None: ``state.DEFAULT_KERNEL``
    kernel: str | None = None
    #: the simulated boot assessment of its boots (label ``boot.LABEL``; ``boot.py``)
    boot_assessment: str | None = None
    #: the digest of the manifest the reference names (an index for a multi-arch image):
    #: what a cosign signature signs; None when no registry was asked
    manifest_digest: str | None = None
    #: where it came from: "registry", "catalog" or "digest" (an accepted digest ref).
    source: str = "registry"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str


def load_auth(candidates: list[Path]) -> tuple[dict[str, Credentials], Path | None]:
    """Read the first existing auth file of ``candidates``; raises ``PullError`` if unusable."""
    for path in candidates:
        try:
            raw = path.read_text()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise PullError(f"reading auth file {path}: {exc.strerror}") from exc
        try:
            doc = json.loads(raw)
            auths = doc.get("auths", {}) if isinstance(doc, dict) else None
            if not isinstance(auths, dict):
                raise ValueError('"auths" is not an object')
            return {_normalize_auth_key(k): _credentials(v) for k, v in auths.items()}, path
        except (ValueError, TypeError, KeyError) as exc:
            raise PullError(f"parsing auth file {path}: {exc}") from exc
    return {}, None


def _normalize_auth_key(key: str) -> str:
    key = key.strip()
    for prefix in ("https://", "http://"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    key = key.rstrip("/")
    if key in ("index.docker.io/v1", "index.docker.io", "registry-1.docker.io"):
        return "docker.io"
    return key


def _credentials(entry: Any) -> Credentials:
    if not isinstance(entry, dict):
        raise ValueError("an auths entry is not an object")
    if entry.get("auth"):
        decoded = base64.b64decode(str(entry["auth"]), validate=False).decode()
        user, sep, password = decoded.partition(":")
        if not sep:
            raise ValueError('an "auth" value is not base64("user:password")')
        return Credentials(user, password)
    if "username" in entry:
        return Credentials(str(entry["username"]), str(entry.get("password", "")))
    raise ValueError('an auths entry has neither "auth" nor "username"')


def credentials_for(auths: dict[str, Credentials], ref: Ref) -> Credentials | None:
    """The most specific entry: ``registry/repo/...`` prefixes first, then ``registry``."""
    parts = ref.repository.split("/")
    for n in range(len(parts), 0, -1):
        key = f"{ref.registry}/{'/'.join(parts[:n])}"
        if key in auths:
            return auths[key]
    return auths.get(ref.registry)


def normalize_timestamp(value: Any) -> str | None:
    """An RFC 3339 time as bootc prints it (UTC, ``Z``, fraction only when non-zero)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    parsed = parsed.astimezone(dt.UTC)
    if parsed.microsecond == 0:
        return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")
    if parsed.microsecond % 1000 == 0:
        return parsed.strftime("%Y-%m-%dT%H:%M:%S.") + f"{parsed.microsecond // 1000:03d}Z"
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Client:
    def __init__(
        self,
        ref: Ref,
        creds: Credentials | None,
        insecure: bool,
        timeout: float,
        ca_files: list[Path] | None = None,
    ) -> None:
        self.ref = ref
        self.creds = creds
        self.timeout = timeout
        scheme = "http" if insecure else "https"
        self.base = f"{scheme}://{ref.registry}"
        self.authorization: str | None = None
        import urllib.request  # noqa: PLC0415 - slow import; `bootc status` never needs it

        handlers: list[urllib.request.BaseHandler] = []
        if is_loopback(ref.registry):
            handlers.append(urllib.request.ProxyHandler({}))
        if ca_files and not insecure:
            import ssl  # noqa: PLC0415

            context = ssl.create_default_context()
            for ca_file in ca_files:
                try:
                    context.load_verify_locations(cafile=str(ca_file))
                except (OSError, ssl.SSLError) as exc:
                    raise PullError(f"loading CA certificate {ca_file}: {exc}") from exc
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self.opener = urllib.request.build_opener(*handlers)

    def _send(self, url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
        try:
            with self.opener.open(req, timeout=self.timeout) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read() if exc.fp is not None else b""
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, body
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryUnreachable(
                f"pinging container registry {self.ref.registry}: {reason}"
            ) from exc

    def get(self, path: str, accept: str, what: str) -> tuple[dict[str, str], bytes]:
        url = f"{self.base}/v2/{self.ref.repository}/{path}"
        headers = {"Accept": accept}
        if self.authorization:
            headers["Authorization"] = self.authorization
        status, resp_headers, body = self._send(url, headers)
        if status == 401 and "www-authenticate" in resp_headers:
            self._authorize(resp_headers["www-authenticate"], what)
            assert self.authorization is not None
            headers["Authorization"] = self.authorization
            status, resp_headers, body = self._send(url, headers)
        if status != 200:
            raise PullError(f"{what}: {_registry_error(status, body)}")
        return resp_headers, body

    def _authorize(self, challenge: str, what: str) -> None:
        scheme, _, rest = challenge.strip().partition(" ")
        params = {
            m[1].lower(): (m[2] if m[2] is not None else m[3])
            for m in _CHALLENGE_PARAM.finditer(rest)
        }
        if scheme.lower() == "basic":
            if self.creds is None:
                raise PullError(f"{what}: unauthorized: authentication required")
            self.authorization = "Basic " + _b64(f"{self.creds.username}:{self.creds.password}")
            return
        if scheme.lower() != "bearer" or "realm" not in params:
            raise PullError(f"{what}: unsupported authentication challenge {challenge!r}")
        query = {"scope": f"repository:{self.ref.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        url = (
            params["realm"]
            + ("&" if "?" in params["realm"] else "?")
            + urllib.parse.urlencode(query)
        )
        headers: dict[str, str] = {}
        if self.creds is not None:
            headers["Authorization"] = "Basic " + _b64(
                f"{self.creds.username}:{self.creds.password}"
            )
        status, _, body = self._send(url, headers)
        if status != 200:
            raise PullError(f"{what}: requesting bearer token: {_registry_error(status, body)}")
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not token:
            raise PullError(f"{what}: requesting bearer token: no token in the response")
        self.authorization = f"Bearer {token}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _registry_error(status: int, body: bytes) -> str:
    try:
        errors = json.loads(body).get("errors") or []
        first = errors[0]
        message = str(first.get("message") or first.get("code") or "").strip()
    except (ValueError, AttributeError, IndexError, TypeError):
        message = ""
    if status == 401:
        return "unauthorized: " + (message or "authentication required")
    if status == 403:
        return "requested access to the resource is denied"
    if status == 404 and not message:
        return "manifest unknown"
    if message:
        return message
    return f"received unexpected HTTP status: {status}"


def _sha256(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _pick_platform(index: dict[str, Any], architecture: str, ref: Ref) -> str:
    candidates = []
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") or {}
        if platform.get("os", "linux") == "linux" and platform.get("architecture") == architecture:
            candidates.append(entry)
    if not candidates:
        raise PullError(
            f"choosing image instance: no image found in image index for architecture "
            f'{architecture}, variant "", OS linux ({ref.canonical})'
        )
    # arm64 images may carry a "v8" variant; prefer it or no variant, as containers/image does.
    candidates.sort(key=lambda e: (e.get("platform") or {}).get("variant") not in (None, "", "v8"))
    return str(candidates[0]["digest"])


def fetch_image(
    ref: Ref,
    *,
    architecture: str,
    auth_files: list[Path],
    insecure: bool = False,
    timeout: float = 10.0,
    ca_files: list[Path] | None = None,
) -> ImageMeta:
    """Resolve ``ref`` against its registry; see the module docstring for the rules."""
    auths, _ = load_auth(auth_files)
    client = _Client(ref, credentials_for(auths, ref), insecure, timeout, ca_files)
    what = f"reading manifest {ref.reference} in {ref.registry}/{ref.repository}"
    headers, body = client.get(f"manifests/{ref.reference}", MANIFEST_ACCEPT, what)
    digest = top_digest = _sha256(body)
    if ref.digest and ref.digest.startswith("sha256:") and digest != ref.digest:
        raise PullError(f"{what}: manifest digest {digest} does not match {ref.digest}")
    try:
        manifest = json.loads(body)
    except ValueError as exc:
        raise PullError(f"{what}: invalid manifest JSON: {exc}") from exc
    media_type = manifest.get("mediaType") or headers.get("content-type", "").split(";")[0]
    if media_type in INDEX_TYPES or ("manifests" in manifest and "config" not in manifest):
        digest = _pick_platform(manifest, architecture, ref)
        what = f"reading manifest {digest} in {ref.registry}/{ref.repository}"
        _, body = client.get(f"manifests/{digest}", MANIFEST_ACCEPT, what)
        if _sha256(body) != digest and digest.startswith("sha256:"):
            raise PullError(f"{what}: manifest digest {_sha256(body)} does not match {digest}")
        try:
            manifest = json.loads(body)
        except ValueError as exc:
            raise PullError(f"{what}: invalid manifest JSON: {exc}") from exc
    config_desc = manifest.get("config") or {}
    if "digest" not in config_desc:
        raise PullError(f"{what}: the manifest has no config descriptor")
    config_what = f"reading blob {config_desc['digest']} in {ref.registry}/{ref.repository}"
    _, config_body = client.get(f"blobs/{config_desc['digest']}", "*/*", config_what)
    try:
        config = json.loads(config_body)
    except ValueError as exc:
        raise PullError(f"{config_what}: invalid image config JSON: {exc}") from exc
    labels = (config.get("config") or {}).get("Labels") or {}
    version = labels.get("org.opencontainers.image.version") or labels.get("version")
    timestamp = normalize_timestamp(labels.get("org.opencontainers.image.created")) or (
        normalize_timestamp(config.get("created"))
    )
    return ImageMeta(
        digest=digest,
        architecture=str(config.get("architecture") or architecture),
        version=str(version) if version else None,
        timestamp=timestamp,
        boot_assessment=str(labels[LABEL]) if labels.get(LABEL) else None,
        kernel=str(labels[KERNEL_LABEL]) if labels.get(KERNEL_LABEL) else None,
        source="registry",
        manifest_digest=top_digest,
    )


def fetch_signatures(
    ref: Ref,
    digest: str,
    *,
    auth_files: list[Path],
    insecure: bool = False,
    timeout: float = 10.0,
    ca_files: list[Path] | None = None,
) -> Signatures:
    """The cosign signature manifest of ``ref``'s repository at ``digest``
    (``sha256-<hex>.sig``; None when the registry has none) and its layers' payloads."""
    auths, _ = load_auth(auth_files)
    client = _Client(ref, credentials_for(auths, ref), insecure, timeout, ca_files)
    tag = digest.replace(":", "-", 1) + ".sig"
    what = f"reading manifest {tag} in {ref.registry}/{ref.repository}"
    try:
        _, body = client.get(f"manifests/{tag}", MANIFEST_ACCEPT, what)
    except PullError as exc:
        if str(exc).endswith("manifest unknown"):
            return Signatures(digest, None)
        raise
    payloads: dict[str, bytes] = {}
    try:
        layers = json.loads(body).get("layers") or []
    except (ValueError, AttributeError):
        layers = []
    for layer in layers[:MAX_SIGNATURE_LAYERS]:
        blob = layer.get("digest") if isinstance(layer, dict) else None
        if isinstance(blob, str) and blob.startswith("sha256:"):
            blob_what = f"reading blob {blob} in {ref.registry}/{ref.repository}"
            with contextlib.suppress(PullError):
                payloads[blob] = client.get(f"blobs/{blob}", "*/*", blob_what)[1]
    return Signatures(digest, body, payloads)
