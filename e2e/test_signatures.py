"""Cosign signatures made by the real cosign, fetched from a real registry and verified.

The signer is cosign itself (``hack.testenv.cosign``: built from its Go module and
cached); the registry Debian's docker-registry (``registry``: open, plain HTTP;
``private_registry``: htpasswd over TLS). ``RegistryClient.signature`` fetches what
cosign pushed and ``signature.py`` gives the verdict: each outcome is produced here
by what a user or an attacker could really do to a registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bootc_operator.registry import NoCredentials, RegistryClient, make_target
from bootc_operator.registry.signature import (
    Outcome,
    TrustedKey,
    load_public_keys,
    signature_tag,
)
from e2e.helpers import push, unique_name
from hack.testenv.cosign import Cosign, KeyPair, resolve_cosign
from hack.testenv.push import Blob, make_image, make_index, push_index, push_manifest
from hack.testenv.registry import Registry


@pytest.fixture(scope="module")
def cosign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cosign]:
    yield Cosign(resolve_cosign(), tmp_path_factory.mktemp("cosign"))


@pytest.fixture(scope="module")
def release_key(cosign: Cosign) -> KeyPair:
    return cosign.generate_key_pair("release")


@pytest.fixture(scope="module")
def other_key(cosign: Cosign) -> KeyPair:
    return cosign.generate_key_pair("other")


def trusted(key: KeyPair) -> tuple[TrustedKey, ...]:
    return load_public_keys(key.public, f"{key.name}.pub")


async def pushed(registry: Registry, content: str) -> tuple[str, str, str]:
    """Push a new image; ``(name, digest, pinned ref)``."""
    name = unique_name("signed")
    digest = await push(registry, registry.ref(name, "v1"), content)
    return registry.ref(name), digest, registry.ref(name, digest=digest)


async def test_a_cosign_signature_verifies(
    registry: Registry, cosign: Cosign, release_key: KeyPair, other_key: KeyPair
) -> None:
    image, digest, pinned = await pushed(registry, "signed once")
    cosign.sign(registry, pinned, release_key)
    async with RegistryClient(registry.options()) as client:
        docs = await client.signature(pinned)
    assert docs.manifest is not None and len(docs.payloads) == 1
    verdict = docs.verify(image, digest, trusted(release_key))
    assert (verdict.outcome, verdict.key) == (Outcome.VERIFIED, "release.pub")
    assert verdict.identity == image  # cosign names the repository
    # the same signature, judged with a key that did not make it
    wrong = docs.verify(image, digest, trusted(other_key))
    assert wrong.outcome is Outcome.WRONG_KEY
    assert wrong.message == f"{pinned} has 1 signature, none made by a trusted key (other.pub)"


async def test_an_unsigned_image_is_not_signed(registry: Registry, release_key: KeyPair) -> None:
    image, digest, pinned = await pushed(registry, "never signed")
    async with RegistryClient(registry.options()) as client:
        docs = await client.signature(pinned)
    assert docs.manifest is None
    verdict = docs.verify(image, digest, trusted(release_key))
    assert verdict.outcome is Outcome.NOT_SIGNED
    assert (
        verdict.message == f"{pinned} is not signed (no {signature_tag(digest)} in the repository)"
    )


async def test_two_signers_each_verify(
    registry: Registry, cosign: Cosign, release_key: KeyPair, other_key: KeyPair
) -> None:
    """cosign appends a second signature to the same ``.sig`` manifest."""
    image, digest, pinned = await pushed(registry, "signed twice")
    cosign.sign(registry, pinned, other_key)
    cosign.sign(registry, pinned, release_key)
    async with RegistryClient(registry.options()) as client:
        docs = await client.signature(pinned)
    assert len(docs.payloads) == 1  # both signed the same payload bytes
    for key in (release_key, other_key):
        assert docs.verify(image, digest, trusted(key)).key == f"{key.name}.pub"


async def test_a_signature_copied_to_another_digest_is_a_mismatch(
    registry: Registry, cosign: Cosign, release_key: KeyPair
) -> None:
    """An attacker who can push copies a valid signature of one image onto another."""
    name = unique_name("copied")
    signed = await push(registry, registry.ref(name, "good"), "the signed one")
    evil = await push(registry, registry.ref(name, "evil"), "the other one")
    cosign.sign(registry, registry.ref(name, digest=signed), release_key)
    async with RegistryClient(registry.options()) as client:
        original = await client.signature(registry.ref(name, digest=signed))
        assert original.manifest is not None
        sig = Blob("application/vnd.oci.image.manifest.v1+json", original.manifest)
        await push_manifest(client, make_target(registry.ref(name)), signature_tag(evil), sig)
        docs = await client.signature(registry.ref(name, digest=evil))
    verdict = docs.verify(registry.ref(name), evil, trusted(release_key))
    assert verdict.outcome is Outcome.PAYLOAD_DIGEST_MISMATCH
    assert f"by release.pub is for another image: its payload names {signed}, not {evil}" in (
        verdict.message
    )


async def test_a_payload_blob_gone_from_the_registry_is_malformed(
    registry: Registry, cosign: Cosign, release_key: KeyPair
) -> None:
    image, digest, pinned = await pushed(registry, "payload deleted")
    cosign.sign(registry, pinned, release_key)
    async with RegistryClient(registry.options()) as client:
        (payload,) = (await client.signature(pinned)).payloads
        target = make_target(image)
        gone = await client.request(
            target,
            "DELETE",
            f"blobs/{payload}",
            what="deleting",
            actions=("pull", "push", "delete"),
        )
        assert gone.status == 202, gone
        docs = await client.signature(pinned)
    assert docs.manifest is not None and docs.payloads == {}
    verdict = docs.verify(image, digest, trusted(release_key))
    assert verdict.outcome is Outcome.MALFORMED
    assert verdict.message.endswith(f"signature 1: its payload {payload} could not be fetched")


async def test_an_index_digest_is_signed_and_verified(
    registry: Registry, cosign: Cosign, release_key: KeyPair
) -> None:
    name = unique_name("signed-index")
    index = make_index(
        [make_image("amd", architecture="amd64"), make_image("arm", architecture="arm64")]
    )
    async with RegistryClient(registry.options()) as client:
        digest = await push_index(client, registry.ref(name, "v1"), index)
        cosign.sign(registry, registry.ref(name, digest=digest), release_key)
        docs = await client.signature(registry.ref(name, digest=digest))
        per_arch = await client.signature(registry.ref(name, digest=index.images[0].digest))
    assert docs.verify(registry.ref(name), digest, trusted(release_key)).verified
    # cosign signs what it is given: the index, not its entries
    assert per_arch.manifest is None


async def test_a_private_registry_uses_the_pull_secret(
    private_registry: Registry, cosign: Cosign, release_key: KeyPair
) -> None:
    image, digest, pinned = await pushed(private_registry, "signed behind auth")
    cosign.sign(private_registry, pinned, release_key)
    async with RegistryClient(private_registry.options()) as client:
        docs = await client.signature(pinned, dockerconfigjson=private_registry.dockerconfigjson())
        with pytest.raises(NoCredentials):
            await client.signature(pinned)
    assert docs.verify(image, digest, trusted(release_key)).verified


async def test_a_tag_is_refused(registry: Registry) -> None:
    with pytest.raises(ValueError, match="a signature is looked up by digest, not by tag"):
        async with RegistryClient(registry.options()) as client:
            await client.signature(registry.ref("os", "v1"))


def test_the_public_key_file_is_a_pem_public_key(release_key: KeyPair) -> None:
    assert Path(release_key.public_key).read_text().startswith("-----BEGIN PUBLIC KEY-----")
    (key,) = trusted(release_key)
    assert key.algorithm == "ecdsa-secp256r1"
