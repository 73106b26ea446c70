"""Building and pushing small images: what tests and the simulation use instead of a
container tool.

Owns making tiny, deterministic OCI images in memory and uploading them with the
registry client (``RegistryClient.request``, so TLS, insecure registries and
authentication work exactly as for resolving):

- ``make_image("v1", architecture="amd64", version="1.0")``: one layer (a gzipped
  tar holding ``/etc/os-release-test`` with the given content, or the ``tree`` of
  ``TreeEntry`` files, directories and symlinks given), an image config
  whose labels carry ``org.opencontainers.image.version`` / ``.created`` (what
  bootc reports as version and timestamp), and the manifest. The same arguments
  give the same digest; different content gives a different one.
- ``make_index([image_amd64, image_arm64])``: a multi-arch OCI index (or Docker
  manifest list with ``docker=True``).
- ``push_image(client, "host/repo:tag", image)`` / ``push_index(...)``: blobs by
  monolithic upload (``POST /v2/<repo>/blobs/uploads/`` then ``PUT <location>?digest=``,
  skipped when ``HEAD`` finds the blob), then ``PUT /v2/<repo>/manifests/<tag>``;
  each returns the manifest digest.

Not used by the operator itself (so not shipped in its package): it drives the
registry client, so pushing exercises the same transport and authentication code.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bootc_operator.api.imageref import parse_image_ref
from bootc_operator.registry.client import (
    DockerConfigInput,
    RegistryClient,
    make_target,
)
from bootc_operator.registry.credentials import Credentials
from bootc_operator.registry.errors import MalformedResponse
from bootc_operator.registry.manifest import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
    Platform,
    compute_digest,
)
from bootc_operator.registry.types import Target

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
_EPOCH = "2024-01-01T00:00:00Z"
_PUSH = ("pull", "push")


@dataclass(frozen=True)
class Blob:
    """Content plus its media type; the digest is computed."""

    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return compute_digest(self.data)

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        return {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": len(self.data),
            **extra,
        }


@dataclass(frozen=True)
class Image:
    """A single-platform image: config, layers and the manifest that names them."""

    manifest: Blob
    config: Blob
    layers: tuple[Blob, ...]
    platform: Platform

    @property
    def digest(self) -> str:
        return self.manifest.digest


@dataclass(frozen=True)
class Index:
    """A multi-arch index and the images it lists."""

    manifest: Blob
    images: tuple[Image, ...]

    @property
    def digest(self) -> str:
        return self.manifest.digest

    def digest_for(self, architecture: str) -> str:
        for image in self.images:
            if image.platform.architecture == architecture:
                return image.digest
        raise KeyError(architecture)


def _canonical(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class TreeEntry:
    """One entry of an image layer: a file (``data``), a symlink (``link``) or, with
    neither, a directory."""

    path: str
    data: bytes | None = None
    link: str | None = None
    mode: int | None = None


def _layer(entries: Sequence[TreeEntry]) -> tuple[bytes, str]:
    """A gzipped tar of ``entries``; returns (compressed, diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.mtime = 0
            if entry.link is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
                tar.addfile(info)
            elif entry.data is None:
                info.type, info.mode = tarfile.DIRTYPE, entry.mode or 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(entry.data), entry.mode or 0o644
                tar.addfile(info, io.BytesIO(entry.data))
    uncompressed = raw.getvalue()
    compressed = gzip.compress(uncompressed, mtime=0)
    return compressed, compute_digest(uncompressed)


def make_image(
    content: str | bytes,
    *,
    architecture: str = "amd64",
    os: str = "linux",
    variant: str | None = None,
    version: str | None = None,
    created: str = _EPOCH,
    labels: Mapping[str, str] | None = None,
    docker: bool = False,
    tree: Sequence[TreeEntry] | None = None,
) -> Image:
    """A tiny image whose single layer holds ``content`` (see the module docstring), or,
    with ``tree``, those entries instead (``content`` is then not used)."""
    data = content.encode() if isinstance(content, str) else content
    entries = tree if tree is not None else [TreeEntry("etc/os-release-test", data)]
    layer_bytes, diff_id = _layer(entries)
    all_labels = {"org.opencontainers.image.created": created, "containers.bootc": "1"}
    if version is not None:
        all_labels["org.opencontainers.image.version"] = version
    all_labels.update(labels or {})
    config_doc: dict[str, Any] = {
        "architecture": architecture,
        "os": os,
        "created": created,
        "config": {"Labels": all_labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "hack.testenv.push"}],
    }
    if variant:
        config_doc["variant"] = variant
    config = Blob(DOCKER_CONFIG if docker else OCI_CONFIG, _canonical(config_doc))
    layer = Blob(DOCKER_LAYER_GZIP if docker else OCI_LAYER_GZIP, layer_bytes)
    manifest_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": manifest_type,
        "config": config.descriptor(),
        "layers": [layer.descriptor()],
    }
    return Image(
        manifest=Blob(manifest_type, _canonical(manifest_doc)),
        config=config,
        layers=(layer,),
        platform=Platform(os=os, architecture=architecture, variant=variant),
    )


def make_index(images: Sequence[Image], *, docker: bool = False) -> Index:
    """An OCI index (Docker manifest list with ``docker=True``) listing ``images``."""
    entries = []
    for image in images:
        platform: dict[str, str] = {
            "architecture": image.platform.architecture,
            "os": image.platform.os,
        }
        if image.platform.variant:
            platform["variant"] = image.platform.variant
        entries.append(image.manifest.descriptor(platform=platform))
    media_type = DOCKER_MANIFEST_LIST if docker else OCI_INDEX
    doc = {"schemaVersion": 2, "mediaType": media_type, "manifests": entries}
    return Index(manifest=Blob(media_type, _canonical(doc)), images=tuple(images))


def _push_target(
    ref: str, dockerconfigjson: DockerConfigInput, credentials: Credentials | None
) -> tuple[Target, str]:
    """The target of ``host/repo[:tag]`` and the tag (``latest`` when none is written)."""
    target = make_target(ref, dockerconfigjson=dockerconfigjson, credentials=credentials)
    image = parse_image_ref(ref)
    return target, image.tag or "latest"


async def push_blob(client: RegistryClient, target: Target, blob: Blob) -> None:
    """Upload ``blob`` unless the repository already has it."""
    what = f"pushing blob {blob.digest} to {target.display}"
    head = await client.request(target, "HEAD", f"blobs/{blob.digest}", what=what, actions=_PUSH)
    if head.status == 200:
        return
    start = await client.request(
        target,
        "POST",
        "blobs/uploads/",
        what=what,
        actions=_PUSH,
        headers={"Content-Length": "0"},
        data=b"",
    )
    if start.status != 202:
        raise client.unexpected(target, start, what)
    location = start.headers.get("Location")
    if not location:
        raise MalformedResponse(
            f"registry {target.registry} gave no upload Location ({what})",
            registry=target.registry,
        )
    if location.startswith("/"):
        scheme = start.url.split("://", 1)[0]
        host = start.url.split("://", 1)[1].split("/", 1)[0]
        location = f"{scheme}://{host}{location}"
    sep = "&" if "?" in location else "?"
    done = await client.request(
        target,
        "PUT",
        f"{location}{sep}digest={blob.digest}",
        what=what,
        actions=_PUSH,
        headers={"Content-Type": "application/octet-stream"},
        data=blob.data,
    )
    if done.status != 201:
        raise client.unexpected(target, done, what)


async def push_manifest(
    client: RegistryClient, target: Target, reference: str, manifest: Blob
) -> str:
    """``PUT`` a manifest under ``reference`` (a tag or its digest); returns its digest."""
    what = f"pushing manifest {reference} to {target.display}"
    reply = await client.request(
        target,
        "PUT",
        f"manifests/{reference}",
        what=what,
        actions=_PUSH,
        headers={"Content-Type": manifest.media_type},
        data=manifest.data,
    )
    if reply.status != 201:
        raise client.unexpected(target, reply, what)
    digest = reply.headers.get("Docker-Content-Digest", manifest.digest)
    if digest != manifest.digest:
        raise MalformedResponse(
            f"registry {target.registry} stored {reference} as {digest}, expected "
            f"{manifest.digest}",
            registry=target.registry,
        )
    return digest


async def _push_image_to(client: RegistryClient, target: Target, image: Image, ref: str) -> str:
    for blob in (image.config, *image.layers):
        await push_blob(client, target, blob)
    return await push_manifest(client, target, ref, image.manifest)


async def push_image(
    client: RegistryClient,
    ref: str,
    image: Image,
    *,
    dockerconfigjson: DockerConfigInput = None,
    credentials: Credentials | None = None,
) -> str:
    """Push ``image`` as ``host/repo:tag``; returns the manifest digest."""
    target, tag = _push_target(ref, dockerconfigjson, credentials)
    return await _push_image_to(client, target, image, tag)


async def push_index(
    client: RegistryClient,
    ref: str,
    index: Index,
    *,
    dockerconfigjson: DockerConfigInput = None,
    credentials: Credentials | None = None,
) -> str:
    """Push every image of ``index`` (by digest), then the index as ``host/repo:tag``."""
    target, tag = _push_target(ref, dockerconfigjson, credentials)
    for image in index.images:
        await _push_image_to(client, target, image, image.digest)
    return await push_manifest(client, target, tag, index.manifest)
