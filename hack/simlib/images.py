"""OS images of the simulation: push a new, distinct image and learn its digest.

With a registry (the normal case) ``push_image`` builds a tiny real bootc image
(``hack.realbootc.images``: one layer, a deployable tree whose marker file names
the image and a nonce, so every push is distinct, and the tag as its version
label) and uploads it to the simulation's registry; the hosts then pull it from
there: the simulated ones like bootc does (``hack.fakebootc.resolve``: a loopback
registry is the authority), the real-bootc ones (``hack/sim up --real-bootc``) with
the real bootc, which deploys it.

Without one (``SimInfo.registry`` empty) the image is recorded in a catalog file
the hosts share, under a made-up registry host that is never contacted.

A ``NAME[:TAG]`` without a registry host goes to the simulation's registry
(``os:v2`` → ``127.0.0.1:PORT/os:v2``); the result is ``NAME:TAG@sha256:...``.

``labels`` go on the image's config. The one the simulated hosts act on is
``fakebootc.boot-assessment`` (``hack.fakebootc.boot``): ``failing_boot()`` makes an
image whose every boot fails its boot assessment (systemd never reaches
``boot-complete.target``), the "bad image" of ``hack/demo --scenario bad-image``. In
a catalog that label becomes the entry's ``bootAssessment`` (other labels are not
recorded there).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import uuid
from collections.abc import Mapping
from pathlib import Path

from bootc_operator.api.imageref import InvalidImageRef, parse_image_ref
from bootc_operator.registry import RegistryClient, RegistryOptions
from hack.fakebootc import FakeHostError, add_catalog_image
from hack.fakebootc.boot import LABEL as BOOT_ASSESSMENT_LABEL
from hack.realbootc.images import bootc_image
from hack.simlib.common import SimInfo
from hack.testenv.push import push_image as push_to_registry

CATALOG_REGISTRY = "registry.sim.invalid"


class ImageError(RuntimeError):
    """An image could not be pushed."""


def failing_boot(unit: str | None = None) -> dict[str, str]:
    """The labels of an image whose boots fail their assessment (``unit``: the failing
    check, default greenboot's)."""
    return {BOOT_ASSESSMENT_LABEL: f"fail:{unit}" if unit else "fail"}


def parse_label(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` → (KEY, VALUE) (the ``--label`` of ``hack/sim image push``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ImageError(f"label {text!r}: expected KEY=VALUE")
    return key.strip(), value


def qualify(name: str, registry: str) -> tuple[str, str]:
    """(``registry/name``, tag) for ``name[:tag]`` (kept as is when it names a registry)."""
    if "@" in name:
        raise ImageError(f"{name}: give NAME:TAG, not a digest (the push makes the digest)")
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        full = name
    else:
        full = f"{registry}/{name}"
    try:
        ref = parse_image_ref(full)
    except InvalidImageRef as exc:
        raise ImageError(str(exc)) from exc
    return ref.name, ref.tag or "latest"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _push_registry(
    registry: str, ref: str, version: str, labels: Mapping[str, str] | None
) -> str:
    image = bootc_image(
        f"{ref} nonce {uuid.uuid4().hex}", version=version, created=_now(), labels=labels
    )
    options = RegistryOptions(
        insecure_registries=frozenset({registry}), timeout=30.0, connect_timeout=5.0
    )
    async with RegistryClient(options) as client:
        return await push_to_registry(client, ref, image)


def push_image(info: SimInfo, name: str, labels: Mapping[str, str] | None = None) -> str:
    """Push a new image as ``name`` (``NAME[:TAG]``) with ``labels``; returns
    ``REPO:TAG@sha256:...``.

    Synchronous (runs its own event loop): from async code call it through
    ``asyncio.to_thread``.
    """
    if info.registry:
        repo, tag = qualify(name, info.registry)
        try:
            digest = asyncio.run(_push_registry(info.registry, f"{repo}:{tag}", tag, labels))
        except Exception as exc:
            raise ImageError(f"pushing {repo}:{tag}: {exc}") from exc
        return f"{repo}:{tag}@{digest}"
    if not info.catalog:
        raise ImageError("this simulation has neither a registry nor a catalog")
    repo, tag = qualify(name, CATALOG_REGISTRY)
    digest = "sha256:" + hashlib.sha256(f"{repo}:{tag} {uuid.uuid4()}".encode()).hexdigest()
    try:
        add_catalog_image(
            Path(info.catalog),
            f"{repo}:{tag}",
            digest,
            version=tag,
            timestamp=_now(),
            boot_assessment=(labels or {}).get(BOOT_ASSESSMENT_LABEL),
        )
    except FakeHostError as exc:  # a bad boot-assessment value
        raise ImageError(f"{repo}:{tag}: {exc}") from exc
    return f"{repo}:{tag}@{digest}"


def tag_of(ref: str) -> str | None:
    """The tag of ``repo:tag[@digest]`` (None without one)."""
    try:
        return parse_image_ref(ref).tag
    except InvalidImageRef:
        return None


def digest_ref(ref: str) -> str:
    """``repo@digest`` for ``repo[:tag]@digest`` (the form BootcNode.spec.desiredImage has)."""
    parsed = parse_image_ref(ref)
    if parsed.digest is None:
        raise ImageError(f"{ref} has no digest")
    return parsed.with_digest(parsed.digest)
