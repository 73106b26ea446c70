"""Deciding what image a ``bootc switch IMAGE`` gets: registry first, then the catalog.

Rules, in order:

1. **A registry that answers is the authority.** The registry of IMAGE is contacted
   when it is a loopback host (``localhost``, ``127.*``, ``[::1]``, ``*.localhost``)
   or listed in the host config's ``registries`` / ``$FAKEBOOTC_REGISTRIES``
   (comma-separated). Other registries (quay.io, ...) are never contacted, so tests
   stay hermetic whatever the network. ``insecure_registries`` /
   ``$FAKEBOOTC_INSECURE_REGISTRIES`` hosts are spoken to over plain http, and so
   are loopback ones unless the host trusts a CA for them: like containers/image,
   the ``*.crt`` files in ``ROOT/etc/containers/certs.d/<host:port>/`` (or
   ``ROOT/etc/docker/certs.d/...``; ``Host.trust_registry_ca``) are trusted for
   that registry besides the system CAs, and it is spoken to over https. If the
   registry answers, its answer stands, errors included (unknown manifest,
   unauthorized with the host's auth.json, no manifest for this architecture):
   that is what real bootc would do, and what pull-secret tests rely on.
2. **Otherwise the catalog decides.** Catalog files, first match wins:
   ``ROOT/.fakebootc/catalog.json``, the host config's ``catalogs``, then
   ``$FAKEBOOTC_CATALOG`` (``os.pathsep``-separated; one shared file suits many hosts).
   Format::

       {"images": {
          "quay.io/org/os:v1": {"digest": "sha256:...", "version": "v1",
                                "timestamp": "2024-05-01T10:00:00Z", "architecture": "amd64",
                                "kernel": "6.13.1-sim"},
          "quay.io/org/multi:v2": {"digest": "sha256:<index digest>",
                                   "manifests": {"amd64": {"digest": "sha256:...", "version": "v2"},
                                                 "arm64": {"digest": "sha256:..."}}},
          "quay.io/org/broken:v3": {"error": "reading manifest v3 in quay.io/org/broken: ..."},
          "quay.io/org/bad:v4": {"digest": "sha256:...", "bootAssessment": "fail"}}}

   ``bootAssessment`` (``complete``, ``fail[:UNIT]``, ``hang[:UNIT]``) is how every boot
   of that image is assessed (``boot.py``), like the image label
   ``fakebootc.boot-assessment`` an image in a real registry can carry; ``kernel`` is
   the kernel the image ships, like the label ``fakebootc.kernel`` (absent: the
   default kernel, which every such image shares, so updates between them can be
   soft-rebooted into).

   A tag ref matches its key (``name`` means ``name:latest``). A digest ref matches
   its own key, or any entry of the same repository whose ``digest`` (or one of
   whose per-arch ``manifests`` digests) it names. An entry with ``manifests`` is a
   multi-arch index: the host's architecture is picked and *that* digest reported,
   like real bootc's per-architecture ``imageDigest``.
3. **A digest ref nobody knows** is accepted as is (version/timestamp null, the
   host's architecture) while the host config's ``accept_any_digest`` is true (the
   default, so simple tests need no catalog). Switch it off to make the catalog the
   only authority; then, like real bootc pulling a non-existent image, the switch
   fails with ``manifest unknown`` (or the registry's connection error).
   Tag refs are never guessed: they need a registry or a catalog entry.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hack.fakebootc.imageref import BadReference, Ref, is_loopback, parse_ref
from hack.fakebootc.policy import Signatures
from hack.fakebootc.registry import (
    ImageMeta,
    PullError,
    RegistryUnreachable,
    fetch_image,
    fetch_signatures,
)
from hack.fakebootc.state import Config, Paths

CATALOG_ENV = "FAKEBOOTC_CATALOG"
REGISTRIES_ENV = "FAKEBOOTC_REGISTRIES"
INSECURE_ENV = "FAKEBOOTC_INSECURE_REGISTRIES"


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def catalog_files(paths: Paths, config: Config) -> list[Path]:
    files = [paths.catalog, *(Path(c) for c in config.catalogs)]
    files += [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p]
    return files


def load_catalog(files: list[Path]) -> dict[str, dict[str, Any]]:
    """Merge the ``images`` of ``files``; the first file naming a ref wins."""
    merged: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except ValueError as exc:
            raise PullError(f"simulated host: catalog {path} is not valid JSON: {exc}") from exc
        images = doc.get("images", {}) if isinstance(doc, dict) else {}
        for key, entry in images.items():
            if isinstance(entry, dict):
                merged.setdefault(key, entry)
    return merged


def _meta(entry: dict[str, Any], architecture: str) -> ImageMeta:
    return ImageMeta(
        digest=str(entry["digest"]),
        architecture=str(entry.get("architecture") or architecture),
        version=entry.get("version"),
        timestamp=entry.get("timestamp"),
        kernel=str(entry["kernel"]) if entry.get("kernel") else None,
        boot_assessment=str(entry["bootAssessment"]) if entry.get("bootAssessment") else None,
        source="catalog",
    )


def _from_entry(entry: dict[str, Any], ref: Ref, architecture: str) -> ImageMeta:
    if entry.get("error"):
        raise PullError(str(entry["error"]))
    manifests = entry.get("manifests")
    if isinstance(manifests, dict):
        for arch, sub in manifests.items():
            if ref.digest and sub.get("digest") == ref.digest:
                return _meta({**entry, "architecture": arch, **sub}, architecture)
        sub = manifests.get(architecture)
        if not isinstance(sub, dict):
            raise PullError(
                f"choosing image instance: no image found in image index for architecture "
                f'{architecture}, variant "", OS linux ({ref.canonical})'
            )
        base = {k: v for k, v in entry.items() if k != "manifests"}
        return _meta({**base, "architecture": architecture, **sub}, architecture)
    if "digest" not in entry:
        raise PullError(f"simulated host: catalog entry for {ref.canonical} has no digest")
    return _meta(entry, architecture)


def lookup_catalog(
    catalog: dict[str, dict[str, Any]], ref: Ref, architecture: str
) -> ImageMeta | None:
    keys = [ref.canonical]
    if not ref.tag and not ref.digest:
        keys.append(f"{ref.name}:latest")
    for key in keys:
        if key in catalog:
            return _from_entry(catalog[key], ref, architecture)
    if ref.digest:
        for key, entry in catalog.items():
            try:
                other = parse_ref(key)
            except BadReference:
                continue
            if (other.registry, other.repository) != (ref.registry, ref.repository):
                continue
            manifests = entry.get("manifests")
            sub_digests = (
                {m.get("digest") for m in manifests.values() if isinstance(m, dict)}
                if isinstance(manifests, dict)
                else set()
            )
            if entry.get("digest") == ref.digest or ref.digest in sub_digests:
                return _from_entry(entry, ref, architecture)
    return None


def registry_contacted(ref: Ref, config: Config) -> bool:
    allowed = set(config.registries) | set(_env_list(REGISTRIES_ENV))
    return is_loopback(ref.registry) or ref.registry in allowed or ref.host in allowed


def registry_ca_files(paths: Paths, ref: Ref) -> list[Path]:
    """The ``*.crt`` files of ``ROOT/etc/{containers,docker}/certs.d/<host:port>/``."""
    found: list[Path] = []
    for directory in paths.certs_dirs(ref.registry):
        if directory.is_dir():
            found.extend(sorted(directory.glob("*.crt")))
    return found


def registry_insecure(ref: Ref, config: Config, paths: Paths | None = None) -> bool:
    insecure = set(config.insecure_registries) | set(_env_list(INSECURE_ENV))
    if ref.registry in insecure or ref.host in insecure:
        return True
    # loopback registries are plain http unless the host has a CA for them
    return is_loopback(ref.registry) and not (paths is not None and registry_ca_files(paths, ref))


def _registry_options(paths: Paths, config: Config, ref: Ref) -> dict[str, Any]:
    return {
        "auth_files": paths.auth_files,
        "insecure": registry_insecure(ref, config, paths),
        "timeout": config.registry_timeout,
        "ca_files": registry_ca_files(paths, ref),
    }


def image_signatures(paths: Paths, config: Config, ref: Ref, meta: ImageMeta) -> Signatures | None:
    """The cosign signatures of the image ``meta`` was resolved to (None: it came from the
    catalog, which holds none); a registry gone meanwhile is a pull error."""
    if meta.source != "registry" or meta.manifest_digest is None:
        return None
    try:
        return fetch_signatures(ref, meta.manifest_digest, **_registry_options(paths, config, ref))
    except RegistryUnreachable as exc:
        raise PullError(str(exc)) from exc


def resolve_image(paths: Paths, config: Config, image: str) -> ImageMeta:
    """What staging ``image`` on this host deploys; raises ``PullError`` as bootc would fail."""
    try:
        ref = parse_ref(image)
    except BadReference as exc:
        raise PullError(f"parsing image reference: {exc}") from exc
    unreachable: RegistryUnreachable | None = None
    if registry_contacted(ref, config):
        try:
            return fetch_image(
                ref, architecture=config.architecture, **_registry_options(paths, config, ref)
            )
        except RegistryUnreachable as exc:
            unreachable = exc
    meta = lookup_catalog(load_catalog(catalog_files(paths, config)), ref, config.architecture)
    if meta is not None:
        return meta
    if ref.digest and config.accept_any_digest:
        return ImageMeta(digest=ref.digest, architecture=config.architecture, source="digest")
    if unreachable is not None:
        raise PullError(str(unreachable))
    raise PullError(
        f"reading manifest {ref.reference} in {ref.registry}/{ref.repository}: manifest unknown"
    )
