"""The daemon tier's two hosts behind one interface: the fake bootc and the real one.

The daemon's e2e tests (``test_daemon*.py``) take the ``kit`` fixture (``conftest.py``),
parametrized by ``--host=fake|real|both`` (default both), and run the same assertions
on either host:

- ``FakeKit``: ``hack.fakebootc`` hosts; the images are catalog entries of made-up
  digests (``e2e.helpers.image(n)``), resolved without a registry.
- ``RealKit``: ``hack.realbootc`` hosts (the real bootc and libostree on a real ostree
  sysroot, built by ``hack/build-bootc.sh`` on first use); the images are real bootc
  images (``hack.realbootc.images``) pushed to the session's loopback registry. Needs
  root (mount and PID namespaces): without it the real cases skip, saying so; when the
  build cannot be had they fail with the build script's one-line reason.

``kit.image(n)`` / ``kit.digest(n)`` are the n-th test image (``repo@sha256:...``) and
its digest; ``await kit.new_host(...)`` makes a host booted into ``kit.image(1)`` (or
``booted``), closed at the end of the test; ``await kit.tag(host, "stable", n)`` points
a tag at image ``n`` as the host will see it.

Faults, where a test needs bootc to fail or wait, use ``host.set_fault(...)`` on both
hosts: the fake simulates them, the real host makes them for real
(``hack.realbootc.host``: a blocked or unanswering registry, the sysroot lock held, no
``/run/ostree-booted``). What only the fake can simulate (rpm-ostree layering, garbage
output) stays fake-only, and the test says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from bootc_operator.registry.client import RegistryClient
from e2e.helpers import REPO, digest, image, push, unique_name
from hack.fakebootc import Host as FakeHost
from hack.fakebootc import make_host as make_fake_host
from hack.realbootc.build import Build, BuildUnavailable, resolve_build
from hack.realbootc.host import Host as RealHost
from hack.realbootc.host import make_host as make_real_host
from hack.realbootc.images import bootc_image, push_bootc_image
from hack.testenv.push import make_index, push_index
from hack.testenv.registry import Registry

AnyHost = FakeHost | RealHost
HOST_KINDS: Final = ("fake", "real")
REAL_REPO: Final = "realbootc-os"


class FakeKit:
    kind = "fake"
    #: what a failing pull says (the fake is told: an authentication failure)
    PULL_FAILURE = "unauthorized: authentication required"
    #: bootc can soft-reboot into a capable staged deployment
    SOFT_REBOOTS = True

    def __init__(self, tmp_path: Path, registry: Callable[[], Registry]) -> None:
        self.tmp_path = tmp_path
        self.repo = REPO
        self._registry = registry

    def image(self, n: int) -> str:
        return image(n)

    def digest(self, n: int) -> str:
        return digest(n)

    async def new_host(
        self,
        booted: str | None = None,
        *,
        slow_pulls: bool = False,
        **options: Any,
    ) -> AnyHost:
        """A fake host booted into ``booted`` (default image 1, version 1.0); with
        ``slow_pulls`` every pull takes five minutes."""
        return make_fake_host(
            self.tmp_path / unique_name("host"),
            booted=booted or self.image(1),
            version="1.0",
            stage_delay=300.0 if slow_pulls else 0.0,
            **options,
        )

    async def tag(self, host: AnyHost, tag: str, n: int) -> str:
        ref = f"{self.repo}:{tag}"
        assert isinstance(host, FakeHost)
        host.add_image(ref, self.digest(n))
        return ref

    async def push_image(self, repository: str, tag: str, labels: dict[str, str]) -> str:
        """A small image with ``labels`` pushed to the session registry as
        ``repository:tag`` (the fake pulls from real registries too); its digest ref."""
        registry = self._registry()
        ref = registry.ref(repository, tag)
        digest = await push(registry, ref, tag, labels=labels)
        return registry.ref(repository, digest=digest)

    async def index(self, host: AnyHost, n: int) -> tuple[str, str, str]:
        """A multi-arch index whose amd64 image is image ``n``: (``repo@index``, the
        index digest, the amd64 manifest digest)."""
        index = "sha256:" + "ab12cd34ef56" + "0" * 52
        pinned = f"{self.repo}@{index}"
        assert isinstance(host, FakeHost)
        host.add_image(pinned, index, manifests={"amd64": {"digest": self.digest(n)}})
        return pinned, index, self.digest(n)

    async def close(self) -> None:
        pass


class RealKit:
    kind = "real"
    #: what a failing pull says (the registries are blocked in registries.conf.d)
    PULL_FAILURE = "is blocked in /etc/containers/registries.conf"
    #: libostree prepares a soft reboot only with composefs, which this build lacks
    SOFT_REBOOTS = False
    #: the registries' image digests pushed this session (pushing again costs HEADs only)
    _pushed: dict[tuple[str, int], str] = {}

    def __init__(self, tmp_path: Path, registry: Registry, build: Build) -> None:
        self.tmp_path = tmp_path
        self.registry = registry
        self.build = build
        self.repo = registry.ref(REAL_REPO)
        self.hosts: list[RealHost] = []

    @staticmethod
    def image_of(n: int) -> Any:
        return bootc_image(f"image-{n}", version=f"{n}.0")

    def digest(self, n: int) -> str:
        return str(self.image_of(n).digest)

    def image(self, n: int) -> str:
        return self.registry.ref(REAL_REPO, digest=self.digest(n))

    async def push(self, n: int, tag: str | None = None) -> str:
        key = (self.registry.host, n)
        if tag is not None or key not in self._pushed:
            ref = self.registry.ref(REAL_REPO, tag or f"image-{n}")
            self._pushed[key] = await push_bootc_image(self.registry, ref, self.image_of(n))
        return self._pushed[key]

    async def new_host(
        self,
        booted: str | None = None,
        *,
        slow_pulls: bool = False,
        **options: Any,
    ) -> AnyHost:
        """A real host booted into ``booted`` (default image 1, version 1.0); with
        ``slow_pulls`` pulls hang (an unanswering registry mirror) until the fault is
        cleared."""
        for n in (1, 2, 3):
            await self.push(n)
        host = await asyncio.to_thread(
            make_real_host,
            self.tmp_path / unique_name("host"),
            booted=booted or self.image(1),
            insecure_registries=[self.registry.host],
            build=self.build,
            **options,
        )
        self.hosts.append(host)
        if slow_pulls:
            host.set_fault("switch-hang")
        return host

    async def tag(self, host: AnyHost, tag: str, n: int) -> str:
        await self.push(n, tag)
        return self.registry.ref(REAL_REPO, tag)

    async def push_image(self, repository: str, tag: str, labels: dict[str, str]) -> str:
        """A real bootc image with ``labels`` pushed as ``repository:tag``; its digest ref."""
        image = bootc_image(f"{repository}-{tag}", labels=labels)
        digest = await push_bootc_image(self.registry, self.registry.ref(repository, tag), image)
        return self.registry.ref(repository, digest=digest)

    async def index(self, host: AnyHost, n: int) -> tuple[str, str, str]:
        """A multi-arch index (amd64: image ``n``; arm64: another image) pushed to the
        registry: (``repo@index``, the index digest, the amd64 manifest digest)."""
        arm64 = bootc_image(f"image-{n}", version=f"{n}.0", architecture="arm64")
        index = make_index([self.image_of(n), arm64])
        ref = self.registry.ref(REAL_REPO, f"index-{n}")
        async with RegistryClient(self.registry.options()) as client:
            digest = await push_index(client, ref, index)
        return self.registry.ref(REAL_REPO, digest=digest), digest, self.digest(n)

    async def close(self) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(host.close)


Kit = FakeKit | RealKit


def real_build() -> Build:
    """The real bootc build, or the reason the test cannot have it (skip when not root,
    a one-line failure when the build is unavailable)."""
    if os.geteuid() != 0:
        pytest.skip("the real-bootc host needs root (mount and PID namespaces)")
    try:
        return resolve_build()
    except BuildUnavailable as exc:
        pytest.fail(f"real bootc unavailable: {exc}", pytrace=False)
