"""The registry client and the simulated host against a real registry (Debian's docker-registry).

Two session registries (e2e/conftest.py): ``registry`` (open, plain HTTP) and
``private_registry`` (htpasswd over TLS with a generated CA); tests that stop a
registry get their own from ``make_registry``. Images are pushed with the
project's own client (``hack.testenv.push``), each test under its own
repository.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bootc_operator.daemon.authfile import write_auth_file
from bootc_operator.registry import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
    CredentialsRejected,
    ManifestNotFound,
    NoCredentials,
    RegistryClient,
    RegistryOptions,
    RegistryTLSError,
    RegistryUnreachable,
    resolve_digest,
)
from e2e.helpers import push, unique_name
from hack.fakebootc import Host, make_host
from hack.testenv.push import make_image, make_index, push_image, push_index
from hack.testenv.registry import Registry, dockerconfigjson

BOOTED = "quay.io/example/os@sha256:" + "0" * 64


def repo() -> str:
    return unique_name("os")


# ---------------------------------------------------------------- open registry


async def test_tags_resolve_anonymously(registry: Registry) -> None:
    name = repo()
    one, two = make_image("one", version="1.0"), make_image("two", version="2.0")
    docker = make_image("three", docker=True)
    assert len({one.digest, two.digest, docker.digest}) == 3
    assert await push(registry, registry.ref(name, "v1"), one) == one.digest
    assert await push(registry, registry.ref(name, "v2"), two) == two.digest
    assert await push(registry, registry.ref(name, "docker"), docker) == docker.digest

    async with RegistryClient(registry.options()) as client:
        v1 = await client.resolve(registry.ref(name, "v1"))
        v2 = await client.resolve(registry.ref(name, "v2"))
        dv2 = await client.resolve(registry.ref(name, "docker"))
        by_digest = await client.resolve(registry.ref(name, digest=two.digest))
    assert (v1.digest, v1.media_type, v1.manifests) == (one.digest, OCI_MANIFEST, ())
    assert v2.digest == two.digest and v2.pinned == registry.ref(name, digest=two.digest)
    assert (dv2.digest, dv2.media_type) == (docker.digest, DOCKER_MANIFEST)
    assert by_digest.digest == two.digest


async def test_a_moved_tag_resolves_to_the_new_digest(registry: Registry) -> None:
    ref = registry.ref(repo(), "stable")
    old, new = make_image("old"), make_image("new")
    async with RegistryClient(registry.options()) as client:
        await push_image(client, ref, old)
        assert (await client.resolve(ref)).digest == old.digest
        await push_image(client, ref, new)
        assert (await client.resolve(ref)).digest == new.digest
    # and a fresh client agrees
    assert (await resolve_digest(ref, options=registry.options())).digest == new.digest


async def test_unknown_tag_and_repository(registry: Registry) -> None:
    name = repo()
    await push(registry, registry.ref(name, "v1"), make_image(name))
    async with RegistryClient(registry.options()) as client:
        with pytest.raises(ManifestNotFound) as info:
            await client.resolve(registry.ref(name, "nope"))
        assert str(info.value) == f"{registry.ref(name, 'nope')} not found (manifest unknown)"
        with pytest.raises(ManifestNotFound, match="not found"):
            await client.resolve(registry.ref(unique_name("missing"), "v1"))
        missing = "sha256:" + "1" * 64
        with pytest.raises(ManifestNotFound, match=f"@{missing} not found"):
            await client.resolve(registry.ref(name, digest=missing))


async def test_plain_http_needs_the_insecure_list(registry: Registry) -> None:
    ref = registry.ref(repo(), "v1")
    image = make_image("insecure")
    await push(registry, ref, image)
    with pytest.raises(RegistryTLSError) as info:
        await resolve_digest(ref, options=RegistryOptions(timeout=10))
    assert f"TLS handshake with registry {registry.host} failed" in str(info.value)
    # listed by host:port or by host alone
    for entry in (registry.host, "127.0.0.1"):
        options = RegistryOptions(timeout=10, insecure_registries=[entry])
        assert (await resolve_digest(ref, options=options)).digest == image.digest


@pytest.mark.parametrize("docker", [False, True], ids=["oci-index", "docker-manifest-list"])
async def test_index_resolves_to_the_index_digest_with_per_arch_digests(
    registry: Registry, docker: bool
) -> None:
    name = repo()
    index = make_index(
        [
            make_image("multi amd64", architecture="amd64", docker=docker),
            make_image("multi arm64", architecture="arm64", variant="v8", docker=docker),
        ],
        docker=docker,
    )
    async with RegistryClient(registry.options()) as client:
        assert await push_index(client, registry.ref(name, "multi"), index) == index.digest
        resolved = await client.resolve(registry.ref(name, "multi"))
        pinned = await client.resolve(resolved.pinned)
        amd64_only = await client.resolve(registry.ref(name, digest=index.digest_for("amd64")))
    assert resolved.digest == index.digest
    assert resolved.media_type == (DOCKER_MANIFEST_LIST if docker else OCI_INDEX)
    assert resolved.is_index
    by_arch = {m.platform.architecture: m.digest for m in resolved.manifests if m.platform}
    assert by_arch == {"amd64": index.digest_for("amd64"), "arm64": index.digest_for("arm64")}
    arm = resolved.manifest_for("arm64", variant="v8")
    assert arm is not None and arm.digest == index.digest_for("arm64")
    assert resolved.contains(index.digest_for("amd64"))
    assert pinned == resolved.__class__(
        name=resolved.name,
        reference=index.digest,
        digest=index.digest,
        media_type=resolved.media_type,
        manifests=resolved.manifests,
    )
    assert not amd64_only.is_index and amd64_only.digest == index.digest_for("amd64")


async def test_stopped_registry_is_a_connect_error(
    make_registry: Callable[..., Registry],
) -> None:
    reg = make_registry()
    ref = reg.ref("os", "v1")
    image = make_image("outage")
    await push(reg, ref, image)
    async with RegistryClient(reg.options()) as client:
        assert (await client.resolve(ref)).digest == image.digest
        reg.stop()
        with pytest.raises(RegistryUnreachable) as info:
            await client.resolve(ref)
        assert str(info.value) == f"cannot connect to registry {reg.host}: connection refused"
        reg.start()
        assert (await client.resolve(ref)).digest == image.digest


# ---------------------------------------------------------------- private registry


async def test_private_registry_basic_auth_over_tls(private_registry: Registry) -> None:
    reg = private_registry
    ref = reg.ref(repo(), "v1")
    image = make_image("private", version="p1")
    await push(reg, ref, image)
    options = reg.options()

    secret = reg.dockerconfigjson()
    resolved = await resolve_digest(ref, dockerconfigjson=secret, options=options)
    assert resolved.digest == image.digest

    with pytest.raises(NoCredentials) as no_creds:
        await resolve_digest(ref, options=options)
    assert str(no_creds.value).startswith(f"no credentials for host {reg.host}:")
    # credentials for another host do not count
    other = dockerconfigjson("quay.io", "someone", "whatever")
    with pytest.raises(NoCredentials):
        await resolve_digest(ref, dockerconfigjson=other, options=options)

    wrong = reg.dockerconfigjson(password="definitely-wrong-password")
    with pytest.raises(CredentialsRejected) as rejected:
        await resolve_digest(ref, dockerconfigjson=wrong, options=options)
    message = str(rejected.value)
    assert message.startswith(
        f"credentials rejected: registry {reg.host} refused the credentials for "
    )
    assert "definitely-wrong-password" not in message
    assert base64.b64encode(b"definitely-wrong-password").decode() not in message


async def test_private_registry_tls_trust(private_registry: Registry) -> None:
    reg = private_registry
    ref = reg.ref(repo(), "v1")
    image = make_image("tls")
    await push(reg, ref, image)
    secret = reg.dockerconfigjson()
    with pytest.raises(RegistryTLSError) as info:
        await resolve_digest(ref, dockerconfigjson=secret, options=RegistryOptions(timeout=10))
    assert f"TLS certificate of registry {reg.host} is not trusted" in str(info.value)
    # listed as insecure: TLS without verification
    insecure = RegistryOptions(timeout=10, insecure_registries=[reg.host])
    resolved = await resolve_digest(ref, dockerconfigjson=secret, options=insecure)
    assert resolved.digest == image.digest


# ---------------------------------------------------------------- the simulated host


def new_host(tmp_path: Path, architecture: str = "amd64") -> Host:
    return make_host(tmp_path / f"host-{architecture}", booted=BOOTED, architecture=architecture)


def staged(host: Host) -> dict[str, object]:
    entry = host.status()["status"]["staged"]
    assert entry is not None, host.status()
    image = entry["image"]
    assert isinstance(image, dict)
    return {
        "image": image["image"]["image"],
        "imageDigest": image["imageDigest"],
        "architecture": image["architecture"],
        "version": image["version"],
    }


async def test_fake_host_pulls_from_the_open_registry(registry: Registry, tmp_path: Path) -> None:
    ref = registry.ref(repo(), "v1")
    image = make_image("host pull", version="41.20240101")
    await push(registry, ref, image)
    host = new_host(tmp_path)
    result = await asyncio.to_thread(host.switch, ref)
    assert result.returncode == 0, result.stderr
    assert staged(host) == {
        "image": ref,
        "imageDigest": image.digest,
        "architecture": "amd64",
        "version": "41.20240101",
    }


async def test_fake_host_pulls_from_the_private_registry_only_with_credentials(
    private_registry: Registry, tmp_path: Path
) -> None:
    reg = private_registry
    ref = reg.ref(repo(), "v1")
    image = make_image("host private pull", version="7")
    await push(reg, ref, image)
    host = new_host(tmp_path)
    assert reg.ca_file is not None
    host.trust_registry_ca(reg.host, reg.ca_file)

    result = await asyncio.to_thread(host.switch, ref)
    assert result.returncode == 1
    assert "unauthorized" in result.stderr
    assert host.status()["status"]["staged"] is None

    write_auth_file(host.root, reg.dockerconfigjson(password="wrong-password"))
    result = await asyncio.to_thread(host.switch, ref)
    assert result.returncode == 1 and "unauthorized" in result.stderr

    write_auth_file(host.root, reg.dockerconfigjson())
    result = await asyncio.to_thread(host.switch, ref)
    assert result.returncode == 0, result.stderr
    assert staged(host)["imageDigest"] == image.digest


async def test_fake_host_reports_the_per_arch_digest_of_an_index(
    private_registry: Registry, tmp_path: Path
) -> None:
    reg = private_registry
    name = repo()
    index = make_index(
        [
            make_image("idx amd64", architecture="amd64", version="3"),
            make_image("idx arm64", architecture="arm64", version="3"),
        ]
    )
    tag_ref = reg.ref(name, "multi")
    async with RegistryClient(reg.options()) as client:
        await push_index(client, tag_ref, index, dockerconfigjson=reg.dockerconfigjson())
        resolved = await client.resolve(tag_ref, dockerconfigjson=reg.dockerconfigjson())
    assert resolved.digest == index.digest
    pinned = resolved.pinned  # what the controller would roll out
    ca_file = reg.ca_file
    assert ca_file is not None

    for arch in ("amd64", "arm64"):
        host = new_host(tmp_path, arch)
        host.trust_registry_ca(reg.host, ca_file)
        write_auth_file(host.root, reg.dockerconfigjson())
        result = await asyncio.to_thread(host.switch, pinned)
        assert result.returncode == 0, result.stderr
        entry = staged(host)
        # bootc records the index reference but reports the per-arch manifest digest
        assert entry["image"] == pinned
        assert entry["imageDigest"] == index.digest_for(arch) != index.digest
        assert entry["architecture"] == arch
        assert resolved.contains(str(entry["imageDigest"]))
        digest = resolved.manifest_for(arch)
        assert digest is not None and digest.digest == entry["imageDigest"]

    host = new_host(tmp_path / "tag")
    host.trust_registry_ca(reg.host, ca_file)
    write_auth_file(host.root, reg.dockerconfigjson())
    result = await asyncio.to_thread(host.switch, tag_ref)
    assert result.returncode == 0, result.stderr
    assert staged(host)["image"] == tag_ref
    assert staged(host)["imageDigest"] == index.digest_for("amd64")


def test_dockerconfigjson_helper_shape() -> None:
    doc = json.loads(dockerconfigjson("127.0.0.1:5000", "u", "p"))
    assert doc == {"auths": {"127.0.0.1:5000": {"auth": base64.b64encode(b"u:p").decode()}}}
