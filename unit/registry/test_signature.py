"""Cosign signature verification (bootc_operator/registry/signature.py), pure.

Signatures are made here with keys generated per test, in cosign's wire format
(``sign``), and the verdicts checked for every outcome and every malformation a
registry could hand back. ``unit/fixtures/cosign/`` holds real signatures made by
real signers (see its README), checked at the end.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, padding, rsa, x25519

from bootc_operator.registry.signature import (
    FIRST_RECHECK,
    MAX_SIGNATURES,
    PAYLOAD_TYPE,
    RECHECK_JITTER,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_MEDIA_TYPE,
    InvalidPublicKey,
    InvalidSignatureManifest,
    Outcome,
    TrustedKey,
    Verdict,
    VerdictCache,
    keys_fingerprint,
    keyset_id,
    load_public_keys,
    parse_signature_manifest,
    recheck_delay,
    signature_tag,
    verify_signatures,
)

IMAGE = "quay.io/example/os"
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
FIXTURES = Path(__file__).parents[1] / "fixtures" / "cosign"

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def payload_for(digest: str, reference: str = IMAGE, **critical: Any) -> bytes:
    doc = {
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
            **critical,
        },
        "optional": None,
    }
    return json.dumps(doc).encode()


def raw_sign(
    key: PrivateKey, payload: bytes, algorithm: hashes.HashAlgorithm | None = None
) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(payload)
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(payload, padding.PKCS1v15(), hashes.SHA256())
    return key.sign(payload, ec.ECDSA(algorithm or hashes.SHA256()))


def layer(payload: bytes, signature: bytes | str | None) -> dict[str, Any]:
    annotations = {}
    if signature is not None:
        text = signature if isinstance(signature, str) else base64.b64encode(signature).decode()
        annotations[SIGNATURE_ANNOTATION] = text
    return {
        "mediaType": SIMPLE_SIGNING_MEDIA_TYPE,
        "size": len(payload),
        "digest": sha256(payload),
        "annotations": annotations,
    }


def manifest_of(layers: list[dict[str, Any]]) -> bytes:
    config = b"{}"
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "size": len(config),
                "digest": sha256(config),
            },
            "layers": layers,
        }
    ).encode()


def sign(key: PrivateKey, digest: str = DIGEST, **kw: Any) -> tuple[bytes, dict[str, bytes]]:
    """A signature manifest with one signature by ``key`` over a payload naming ``digest``."""
    payload = payload_for(digest, **kw)
    return manifest_of([layer(payload, raw_sign(key, payload))]), {sha256(payload): payload}


def public(key: PrivateKey, name: str = "cosign.pub") -> TrustedKey:
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (trusted,) = load_public_keys(pem, name)
    return trusted


@pytest.fixture(scope="module")
def p256() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def other_p256() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


# ---------------------------------------------------------------- the wire names


def test_signature_tag() -> None:
    assert signature_tag(DIGEST) == "sha256-" + "a" * 64 + ".sig"
    with pytest.raises(ValueError, match="not an image digest"):
        signature_tag("latest")


# ---------------------------------------------------------------- verified


KEYS: dict[str, Callable[[], PrivateKey]] = {
    "p256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "p384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "p521": lambda: ec.generate_private_key(ec.SECP521R1()),
    "ed25519": ed25519.Ed25519PrivateKey.generate,
    "rsa2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
}


@pytest.mark.parametrize("kind", list(KEYS))
def test_every_cosign_key_type_verifies(kind: str) -> None:
    key = KEYS[kind]()
    manifest, blobs = sign(key)
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, [public(key)])
    assert verdict.outcome is Outcome.VERIFIED and verdict.verified
    assert verdict.key == "cosign.pub"
    assert verdict.identity == IMAGE
    assert verdict.message == f"{IMAGE}@{DIGEST} is signed by cosign.pub"


@pytest.mark.parametrize("curve", [ec.SECP384R1(), ec.SECP521R1()])
def test_ecdsa_with_the_curves_own_hash_verifies(curve: ec.EllipticCurve) -> None:
    key = ec.generate_private_key(curve)
    payload = payload_for(DIGEST)
    algorithm = hashes.SHA384() if isinstance(curve, ec.SECP384R1) else hashes.SHA512()
    manifest = manifest_of([layer(payload, raw_sign(key, payload, algorithm))])
    verdict = verify_signatures(IMAGE, DIGEST, manifest, {sha256(payload): payload}, [public(key)])
    assert verdict.verified


def test_any_trusted_key_and_any_signature_verifies(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    stranger = ec.generate_private_key(ec.SECP256R1())
    mine = payload_for(DIGEST)
    theirs = payload_for(DIGEST, reference="mirror.example/os")
    manifest = manifest_of(
        [layer(theirs, raw_sign(stranger, theirs)), layer(mine, raw_sign(other_p256, mine))]
    )
    blobs = {sha256(mine): mine, sha256(theirs): theirs}
    keys = [public(p256, "team-a"), public(other_p256, "team-b")]
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, keys)
    assert (verdict.outcome, verdict.key) == (Outcome.VERIFIED, "team-b")


def test_a_valid_signature_wins_over_broken_ones(p256: ec.EllipticCurvePrivateKey) -> None:
    good = payload_for(DIGEST)
    junk = b"not json"
    manifest = manifest_of(
        [layer(junk, b"sig"), layer(good, None), {"digest": 3}, layer(good, raw_sign(p256, good))]
    )
    verdict = verify_signatures(
        IMAGE, DIGEST, manifest, {sha256(good): good, sha256(junk): junk}, [public(p256)]
    )
    assert verdict.verified


def test_the_docker_reference_is_reported_not_enforced(p256: ec.EllipticCurvePrivateKey) -> None:
    manifest, blobs = sign(p256, reference="registry.internal:5000/mirror/os:v1")
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, [public(p256)])
    assert verdict.verified and verdict.identity == "registry.internal:5000/mirror/os:v1"


# ---------------------------------------------------------------- not verified


def test_no_signature_manifest_is_not_signed(p256: ec.EllipticCurvePrivateKey) -> None:
    verdict = verify_signatures(IMAGE, DIGEST, None, {}, [public(p256)])
    assert verdict.outcome is Outcome.NOT_SIGNED and not verdict.verified
    assert (
        verdict.message
        == f"{IMAGE}@{DIGEST} is not signed (no sha256-{'a' * 64}.sig in the repository)"
    )


@pytest.mark.parametrize("layers", [[], None], ids=["empty", "absent"])
def test_a_manifest_without_layers_is_not_signed(
    p256: ec.EllipticCurvePrivateKey, layers: Any
) -> None:
    doc = json.loads(manifest_of([]))
    if layers is None:
        del doc["layers"]
    verdict = verify_signatures(IMAGE, DIGEST, json.dumps(doc).encode(), {}, [public(p256)])
    assert verdict.outcome is Outcome.NOT_SIGNED
    assert "holds no signatures" in verdict.message


def test_wrong_key(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    manifest, blobs = sign(other_p256)
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, [public(p256, "prod-key")])
    assert verdict.outcome is Outcome.WRONG_KEY and verdict.key is None
    assert (
        verdict.message
        == f"{IMAGE}@{DIGEST} has 1 signature, none made by a trusted key (prod-key)"
    )


def test_a_tampered_payload_is_not_verified(p256: ec.EllipticCurvePrivateKey) -> None:
    """The payload is swapped for another (with a matching layer digest): the signature
    no longer covers it, so it counts as made by no trusted key."""
    signed = payload_for(OTHER)
    forged = payload_for(DIGEST)
    bad = layer(forged, raw_sign(p256, signed))
    verdict = verify_signatures(
        IMAGE, DIGEST, manifest_of([bad]), {sha256(forged): forged}, [public(p256)]
    )
    assert verdict.outcome is Outcome.WRONG_KEY


def test_a_signature_for_another_digest(p256: ec.EllipticCurvePrivateKey) -> None:
    manifest, blobs = sign(p256, digest=OTHER)
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, [public(p256)])
    assert verdict.outcome is Outcome.PAYLOAD_DIGEST_MISMATCH
    assert verdict.message == (
        f"the signature of {IMAGE}@{DIGEST} by cosign.pub is for another image: its payload "
        f"names {OTHER}, not {DIGEST}"
    )


def test_mismatch_outranks_wrong_key(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    copied, wrong = payload_for(OTHER), payload_for(DIGEST)
    manifest = manifest_of(
        [layer(wrong, raw_sign(other_p256, wrong)), layer(copied, raw_sign(p256, copied))]
    )
    blobs = {sha256(copied): copied, sha256(wrong): wrong}
    verdict = verify_signatures(IMAGE, DIGEST, manifest, blobs, [public(p256)])
    assert verdict.outcome is Outcome.PAYLOAD_DIGEST_MISMATCH


def _case_no_annotation(key: PrivateKey) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    payload = payload_for(DIGEST)
    return [layer(payload, None)], {sha256(payload): payload}


MALFORMED: dict[
    str, tuple[Callable[[PrivateKey], tuple[list[dict[str, Any]], dict[str, bytes]]], str]
] = {
    "no annotation": (_case_no_annotation, f"the layer has no {SIGNATURE_ANNOTATION} annotation"),
    "not base64": (
        lambda k: (
            [layer(payload_for(DIGEST), "***")],
            {sha256(payload_for(DIGEST)): payload_for(DIGEST)},
        ),
        "the signature annotation is not base64",
    ),
    "empty signature": (
        lambda k: (
            [layer(payload_for(DIGEST), "")],
            {sha256(payload_for(DIGEST)): payload_for(DIGEST)},
        ),
        "the signature annotation is empty",
    ),
    "blob missing": (
        lambda k: ([layer(payload_for(DIGEST), raw_sign(k, payload_for(DIGEST)))], {}),
        "could not be fetched",
    ),
    "blob digest mismatch": (
        lambda k: (
            [layer(payload_for(DIGEST), raw_sign(k, payload_for(DIGEST)))],
            {sha256(payload_for(DIGEST)): payload_for(OTHER)},
        ),
        "its payload does not match the layer digest",
    ),
    "layer not an object": (lambda k: ([["x"]], {}), "the layer has no valid digest"),  # type: ignore[list-item]
    "bad layer digest": (
        lambda k: ([{**layer(b"{}", b"s"), "digest": "md5:00"}], {}),
        "the layer has no valid digest",
    ),
    "huge payload": (
        lambda k: ([{**layer(b"{}", b"s"), "size": 10**9}], {}),
        "more than 65536",
    ),
    "payload not json": (
        lambda k: ([layer(b"\xff{", raw_sign(k, b"\xff{"))], {sha256(b"\xff{"): b"\xff{"}),
        "the payload is not JSON",
    ),
    "payload without critical": (
        lambda k: ([layer(b"[]", raw_sign(k, b"[]"))], {sha256(b"[]"): b"[]"}),
        'the payload has no "critical" object',
    ),
}


def _payload_case(
    payload: bytes,
) -> Callable[[PrivateKey], tuple[list[dict[str, Any]], dict[str, bytes]]]:
    return lambda k: ([layer(payload, raw_sign(k, payload))], {sha256(payload): payload})


MALFORMED["wrong type"] = (
    _payload_case(payload_for(DIGEST, type="atomic container signature")),
    "critical.type is 'atomic container signature', not 'cosign container image signature'",
)
MALFORMED["no digest claim"] = (
    _payload_case(json.dumps({"critical": {"type": PAYLOAD_TYPE, "image": {}}}).encode()),
    "no valid critical.image.docker-manifest-digest",
)
MALFORMED["bad digest claim"] = (
    _payload_case(payload_for("sha256:xyz")),
    "no valid critical.image.docker-manifest-digest",
)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_signatures(p256: ec.EllipticCurvePrivateKey, case: str) -> None:
    make, detail = MALFORMED[case]
    layers, blobs = make(p256)
    verdict = verify_signatures(IMAGE, DIGEST, manifest_of(layers), blobs, [public(p256)])
    assert verdict.outcome is Outcome.MALFORMED, verdict
    assert verdict.message.startswith(
        f"{IMAGE}@{DIGEST} has 1 signature, none usable: signature 1: "
    )
    assert detail in verdict.message


def test_wrong_key_outranks_malformed(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    payload = payload_for(DIGEST)
    manifest = manifest_of([layer(payload, None), layer(payload, raw_sign(other_p256, payload))])
    verdict = verify_signatures(IMAGE, DIGEST, manifest, {sha256(payload): payload}, [public(p256)])
    assert verdict.outcome is Outcome.WRONG_KEY
    assert "has 2 signatures, none made by a trusted key" in verdict.message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>", "is not JSON"),
        (b"[]", "is not a JSON object"),
        (b'{"layers": {}}', '"layers" is not a list'),
        (b"[" * 100 + b"]" * 100, "is not JSON"),
        (b" " * (256 * 1024 + 1), "more than 262144"),
    ],
)
def test_unreadable_signature_manifests(
    p256: ec.EllipticCurvePrivateKey, body: bytes, reason: str
) -> None:
    verdict = verify_signatures(IMAGE, DIGEST, body, {}, [public(p256)])
    assert verdict.outcome is Outcome.MALFORMED
    assert verdict.message.startswith(f"the signature of {IMAGE}@{DIGEST} cannot be read: ")
    assert reason in verdict.message
    with pytest.raises(InvalidSignatureManifest):
        parse_signature_manifest(body)


def test_only_the_first_signatures_are_checked(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    wrong, good = payload_for(DIGEST), payload_for(DIGEST, reference="late")
    layers = [layer(wrong, raw_sign(other_p256, wrong)) for _ in range(MAX_SIGNATURES)]
    layers.append(layer(good, raw_sign(p256, good)))
    parsed = parse_signature_manifest(manifest_of(layers))
    assert (len(parsed.layers), parsed.total) == (MAX_SIGNATURES, MAX_SIGNATURES + 1)
    assert sha256(good) not in {item.digest for item in parsed.wanted_blobs()}
    blobs = {sha256(wrong): wrong, sha256(good): good}
    verdict = verify_signatures(IMAGE, DIGEST, manifest_of(layers), blobs, [public(p256)])
    assert verdict.outcome is Outcome.WRONG_KEY
    assert verdict.message.endswith(
        f"(only the first {MAX_SIGNATURES} of {MAX_SIGNATURES + 1} checked)"
    )


def test_wanted_blobs_skips_what_cannot_be_fetched(p256: ec.EllipticCurvePrivateKey) -> None:
    good = payload_for(DIGEST)
    layers = [layer(good, b"s"), {**layer(b"{}", b"s"), "size": 10**9}, {"digest": "nope"}, "junk"]
    parsed = parse_signature_manifest(manifest_of(layers))  # type: ignore[arg-type]
    assert [item.digest for item in parsed.wanted_blobs()] == [sha256(good)]


def test_at_least_one_key_is_required() -> None:
    with pytest.raises(ValueError, match="at least one trusted key"):
        verify_signatures(IMAGE, DIGEST, None, {}, [])


# ---------------------------------------------------------------- public keys


def test_a_pem_bundle_gives_every_key(p256: ec.EllipticCurvePrivateKey) -> None:
    ed = ed25519.Ed25519PrivateKey.generate()
    pems = b"".join(
        k.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        for k in (p256, ed)
    )
    keys = load_public_keys(b"# our keys\n" + pems, "Secret ops/keys")
    assert [k.name for k in keys] == ["Secret ops/keys (key 1)", "Secret ops/keys (key 2)"]
    assert [k.algorithm for k in keys] == ["ecdsa-secp256r1", "ed25519"]
    manifest, blobs = sign(ed)
    assert verify_signatures(IMAGE, DIGEST, manifest, blobs, keys).key == "Secret ops/keys (key 2)"


def test_bad_public_keys_say_what_is_wrong(p256: ec.EllipticCurvePrivateKey) -> None:
    private = p256.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(InvalidPublicKey) as info:
        load_public_keys(private, "publicKeys[0]")
    assert str(info.value) == (
        "publicKeys[0] is a private key (PRIVATE KEY); give the public key (cosign.pub) instead"
    )
    assert b"PRIVATE" not in str(info.value).encode().replace(b"(PRIVATE KEY)", b"")
    with pytest.raises(
        InvalidPublicKey, match=r"^k: no PEM block \(expected -----BEGIN PUBLIC KEY-----\)$"
    ):
        load_public_keys("ssh-ed25519 AAAA", "k")
    with pytest.raises(InvalidPublicKey, match=r"^k is a CERTIFICATE, not a PUBLIC KEY$"):
        load_public_keys("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "k")
    with pytest.raises(InvalidPublicKey, match=r"^k does not parse as a public key"):
        load_public_keys("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "k")
    with pytest.raises(InvalidPublicKey, match=r"^k: 70000 bytes of PEM, more than 65536$"):
        load_public_keys("x" * 70000, "k")


def test_a_key_type_cosign_never_signs_with_is_refused() -> None:
    for key in (
        dsa.generate_private_key(2048).public_key(),
        x25519.X25519PrivateKey.generate().public_key(),
    ):
        pem = key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        with pytest.raises(
            InvalidPublicKey, match=r"^k is a .*; cosign keys are ECDSA, Ed25519 or RSA$"
        ):
            load_public_keys(pem, "k")


def rsa_pem(bits: int) -> bytes:
    """An RSA public key of a ``bits``-bit modulus (made from numbers: no key generation)."""
    modulus = (1 << (bits - 1)) | 0xF1  # odd, exactly ``bits`` bits
    key = rsa.RSAPublicNumbers(65537, modulus).public_key()
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def ec_pem(curve: ec.EllipticCurve) -> bytes:
    return (
        ec.generate_private_key(curve)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


@pytest.mark.parametrize("bits", [1024, 1536, 2047, 2049, 8192])
def test_an_rsa_key_of_a_size_sigstore_refuses_is_refused(bits: int) -> None:
    """Issue 37 §11: as sigstore, RSA keys of 2048, 3072 or 4096 bits only."""
    with pytest.raises(InvalidPublicKey) as info:
        load_public_keys(rsa_pem(bits), "k")
    assert str(info.value) == (
        f"k is an RSA key of {bits} bits; sigstore accepts 2048, 3072 or 4096 bits only"
    )


@pytest.mark.parametrize("bits", [2048, 3072, 4096])
def test_an_rsa_key_of_a_size_sigstore_accepts_is_loaded(bits: int) -> None:
    (key,) = load_public_keys(rsa_pem(bits), "k")
    assert key.algorithm == f"rsa-{bits}"


@pytest.mark.parametrize(
    "curve", [ec.SECP256K1(), ec.BrainpoolP256R1(), ec.SECP192R1(), ec.SECP224R1()]
)
def test_an_ecdsa_key_on_a_curve_sigstore_refuses_is_refused(curve: ec.EllipticCurve) -> None:
    """Issue 37 §11: as sigstore, ECDSA on NIST P-256, P-384 and P-521 only."""
    with pytest.raises(InvalidPublicKey) as info:
        load_public_keys(ec_pem(curve), "k")
    assert str(info.value) == (
        f"k is an ECDSA key on curve {curve.name}; sigstore accepts P-256, P-384 or P-521 only"
    )


# ---------------------------------------------------------------- real cosign output


def fixture() -> tuple[str, str, bytes, dict[str, bytes]]:
    meta = json.loads((FIXTURES / "image.json").read_text())
    blobs = {sha256(p.read_bytes()): p.read_bytes() for p in FIXTURES.glob("payload-*.json")}
    return meta["image"], meta["digest"], (FIXTURES / "signature-manifest.json").read_bytes(), blobs


def fixture_key(name: str) -> tuple[TrustedKey, ...]:
    return load_public_keys((FIXTURES / name).read_text(), name)


def test_real_cosign_signatures_verify_with_either_key() -> None:
    image, digest, manifest, blobs = fixture()
    parsed = parse_signature_manifest(manifest)
    assert parsed.total == 2 and {layer.digest for layer in parsed.layers} == set(blobs)
    for name in ("release.pub", "other.pub"):
        verdict = verify_signatures(image, digest, manifest, blobs, fixture_key(name))
        assert (verdict.outcome, verdict.key, verdict.identity) == (Outcome.VERIFIED, name, image)
    both = fixture_key("release.pub") + fixture_key("other.pub")
    assert verify_signatures(image, digest, manifest, blobs, both).key == "release.pub"


def test_real_cosign_signatures_and_a_stranger_key(p256: ec.EllipticCurvePrivateKey) -> None:
    image, digest, manifest, blobs = fixture()
    verdict = verify_signatures(image, digest, manifest, blobs, [public(p256, "ours")])
    assert verdict.outcome is Outcome.WRONG_KEY
    assert (
        verdict.message == f"{image}@{digest} has 2 signatures, none made by a trusted key (ours)"
    )


def test_real_cosign_signatures_for_another_digest() -> None:
    image, digest, manifest, blobs = fixture()
    verdict = verify_signatures(image, OTHER, manifest, blobs, fixture_key("release.pub"))
    assert verdict.outcome is Outcome.PAYLOAD_DIGEST_MISMATCH
    assert f"its payload names {digest}, not {OTHER}" in verdict.message


def test_real_cosign_payload_tampered() -> None:
    image, digest, manifest, blobs = fixture()
    ((layer_digest, payload),) = blobs.items()
    edited = payload.replace(b'"optional":null', b'"optional":{"a":"b"}')
    assert edited != payload
    verdict = verify_signatures(
        image, digest, manifest, {layer_digest: edited}, fixture_key("release.pub")
    )
    assert verdict.outcome is Outcome.MALFORMED
    assert "its payload does not match the layer digest" in verdict.message
    # the same edit with the layer digests rewritten to match: no signature covers it
    doc = json.loads(manifest)
    for item in doc["layers"]:
        item["digest"], item["size"] = sha256(edited), len(edited)
    rewritten = json.dumps(doc).encode()
    verdict = verify_signatures(
        image, digest, rewritten, {sha256(edited): edited}, fixture_key("release.pub")
    )
    assert verdict.outcome is Outcome.WRONG_KEY


# ---------------------------------------------------------------- the verdict cache


def test_keyset_id_is_the_keys_and_their_names(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    a, b = public(p256, "a"), public(other_p256, "b")
    assert keyset_id([a, b]) == keyset_id([b, a]) == keyset_id([public(p256, "a"), b])
    assert (
        len({keyset_id([a]), keyset_id([b]), keyset_id([a, b]), keyset_id([public(p256, "c")])})
        == 4
    )


def test_keys_fingerprint_is_the_keys_themselves(
    p256: ec.EllipticCurvePrivateKey, other_p256: ec.EllipticCurvePrivateKey
) -> None:
    """What a held verification is bound to: the set of keys, not where they came from."""
    a, b = public(p256, "a"), public(other_p256, "b")
    spki = p256.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert a.fingerprint == hashlib.sha256(spki).hexdigest()
    assert keys_fingerprint([a, b]) == keys_fingerprint([public(other_p256, "x"), a, a])
    assert len({keys_fingerprint([a]), keys_fingerprint([b]), keys_fingerprint([a, b])}) == 3


def test_verified_is_kept_other_verdicts_are_rechecked() -> None:
    cache = VerdictCache(spread=lambda: 0.0)
    good = Verdict(Outcome.VERIFIED, "ok", key="k")
    unsigned = Verdict(Outcome.NOT_SIGNED, "not signed")
    cache.put(IMAGE, DIGEST, "ks", good, now=0.0)
    cache.put(IMAGE, OTHER, "ks", unsigned, now=0.0)
    assert cache.get(IMAGE, DIGEST, "ks", now=10**6) is good
    assert cache.next_check(IMAGE, DIGEST, "ks") is None
    # issue 37 §16: a refusal is checked again after 2 s, not a minute
    assert cache.next_check(IMAGE, OTHER, "ks") == FIRST_RECHECK == 2.0
    assert cache.get(IMAGE, OTHER, "ks", now=1.9) is unsigned
    assert cache.get(IMAGE, OTHER, "ks", now=2.0) is None
    # another key set, another image: nothing cached for them
    assert cache.get(IMAGE, DIGEST, "other", now=0.0) is None
    assert cache.get("quay.io/example/other", DIGEST, "ks", now=0.0) is None


def test_refusals_in_a_row_back_off_doubling_to_a_minute() -> None:
    """Issue 37 §16: 2, 4, 8 ... 60 s between the checks of a digest refused again and
    again; verified resets it; every wait at most the cap, jitter only shortens."""
    cache = VerdictCache(spread=lambda: 0.0)
    unsigned = Verdict(Outcome.NOT_SIGNED, "not signed")
    now, waits = 0.0, []
    for _ in range(8):
        cache.put(IMAGE, OTHER, "ks", unsigned, now=now)
        due = cache.next_check(IMAGE, OTHER, "ks")
        assert due is not None and cache.get(IMAGE, OTHER, "ks", now=due) is None
        waits.append(due - now)
        now = due
    assert waits == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    cache.put(IMAGE, OTHER, "ks", Verdict(Outcome.VERIFIED, "ok"), now=now)
    cache.put(IMAGE, OTHER, "ks", unsigned, now=now)
    assert cache.next_check(IMAGE, OTHER, "ks") == now + 2.0
    assert [recheck_delay(n, 0.0) for n in (1, 2, 6, 50)] == [2.0, 4.0, 60.0, 60.0]
    assert recheck_delay(1, 0.5) == pytest.approx(2.0 * (1 - RECHECK_JITTER / 2))
    assert all(0.8 * 60.0 <= recheck_delay(n, u / 10) <= 60.0 for n in (6, 9) for u in range(10))
    jittered = VerdictCache(spread=iter([0.0, 0.99]).__next__)
    jittered.put(IMAGE, DIGEST, "ks", unsigned, now=0.0)
    jittered.put(IMAGE, OTHER, "ks", unsigned, now=0.0)
    assert jittered.next_check(IMAGE, DIGEST, "ks") != jittered.next_check(IMAGE, OTHER, "ks")


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = VerdictCache(max_entries=2)
    verdict = Verdict(Outcome.VERIFIED, "ok")
    digests = ["sha256:" + c * 64 for c in "123"]
    cache.put(IMAGE, digests[0], "ks", verdict, now=0.0)
    cache.put(IMAGE, digests[1], "ks", verdict, now=0.0)
    assert cache.get(IMAGE, digests[0], "ks", now=0.0) is verdict  # now the most recent
    cache.put(IMAGE, digests[2], "ks", verdict, now=0.0)
    assert len(cache) == 2
    assert cache.get(IMAGE, digests[1], "ks", now=0.0) is None
    assert cache.get(IMAGE, digests[0], "ks", now=0.0) is verdict
