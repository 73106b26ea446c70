"""Sealed pull secrets: only the node's own key, for its own name and secret version, opens one."""

from __future__ import annotations

import base64
import json

import pytest

from bootc_operator import sealing
from bootc_operator.sealing import (
    InvalidSealingKey,
    MalformedSealed,
    NodeKey,
    Sealed,
    SealedForAnotherKey,
    UnsealFailed,
    key_id,
    seal,
)

CONTENT = json.dumps({"auths": {"r.example.com": {"auth": "YWxpY2U6czNjcmV0"}}}).encode()
NODE, HASH = "worker-1", "0123456789abcdef0123456789abcdef"


def test_round_trip() -> None:
    key = NodeKey.generate()
    sealed = seal(CONTENT, key.public, node=NODE, secret_hash=HASH)
    assert sealed.key_id == key.key_id == key_id(key.public)
    assert len(key.key_id) == 32
    assert len(base64.b64decode(key.public)) == 32
    assert key.unseal(sealed, node=NODE, secret_hash=HASH) == CONTENT
    # the wire form survives a trip through the API server's JSON
    again = Sealed.from_wire(json.loads(json.dumps(sealed.to_wire())))
    assert key.unseal(again, node=NODE, secret_hash=HASH) == CONTENT
    # never the same ciphertext twice (a fresh ephemeral key per seal), and no plaintext
    assert seal(CONTENT, key.public, node=NODE, secret_hash=HASH).data != sealed.data
    assert b"YWxpY2U6czNjcmV0" not in base64.b64decode(sealed.data)


def test_another_key_cannot_open_it() -> None:
    mine, theirs = NodeKey.generate(), NodeKey.generate()
    sealed = seal(CONTENT, mine.public, node=NODE, secret_hash=HASH)
    with pytest.raises(SealedForAnotherKey, match="sealed to key"):
        theirs.unseal(sealed, node=NODE, secret_hash=HASH)
    # a blob relabelled with the other key's id still does not open
    forged = Sealed(theirs.key_id, sealed.data)
    with pytest.raises(UnsealFailed):
        theirs.unseal(forged, node=NODE, secret_hash=HASH)


def test_tampered_data_does_not_open() -> None:
    key = NodeKey.generate()
    sealed = seal(CONTENT, key.public, node=NODE, secret_hash=HASH)
    blob = bytearray(base64.b64decode(sealed.data))
    for at in (0, 40, len(blob) - 1):  # the encapsulated key, the ciphertext, the tag
        changed = bytearray(blob)
        changed[at] ^= 1
        tampered = Sealed(sealed.key_id, base64.b64encode(bytes(changed)).decode())
        with pytest.raises(UnsealFailed):
            key.unseal(tampered, node=NODE, secret_hash=HASH)


def test_bound_to_the_node_and_the_secret_version() -> None:
    key = NodeKey.generate()
    sealed = seal(CONTENT, key.public, node=NODE, secret_hash=HASH)
    with pytest.raises(UnsealFailed, match="does not open for node worker-2"):
        key.unseal(sealed, node="worker-2", secret_hash=HASH)
    with pytest.raises(UnsealFailed):
        key.unseal(sealed, node=NODE, secret_hash="f" * 32)


def test_malformed_blobs_are_named() -> None:
    key = NodeKey.generate()
    with pytest.raises(MalformedSealed, match="not valid base64"):
        key.unseal(Sealed(key.key_id, "%%%"), node=NODE, secret_hash=HASH)
    with pytest.raises(MalformedSealed, match="too short"):
        key.unseal(Sealed(key.key_id, "AAAA"), node=NODE, secret_hash=HASH)
    for doc in (None, "x", {}, {"keyID": "a"}, {"keyID": 1, "data": "x"}):
        with pytest.raises(MalformedSealed):
            Sealed.from_wire(doc)


@pytest.mark.parametrize(
    ("published", "why"),
    [
        ("not base64!", "not valid base64"),
        (base64.b64encode(b"x" * 31).decode(), "31 bytes, not 32"),
        (base64.b64encode(bytes(32)).decode(), "not a usable X25519 public key"),
    ],
)
def test_an_unusable_published_key_is_named(published: str, why: str) -> None:
    with pytest.raises(InvalidSealingKey, match=why):
        seal(CONTENT, published, node=NODE, secret_hash=HASH)


def test_errors_and_repr_never_show_secrets() -> None:
    key = NodeKey.generate()
    sealed = seal(CONTENT, key.public, node=NODE, secret_hash=HASH)
    assert repr(key) == f"NodeKey(key_id={key.key_id!r})"
    with pytest.raises(UnsealFailed) as failed:
        key.unseal(sealed, node="other", secret_hash=HASH)
    assert "YWxpY2U6" not in str(failed.value)
    assert sealed.data not in str(failed.value)
    assert issubclass(UnsealFailed, sealing.SealingError)
