"""Pull secrets sealed to one node's key: only that node's daemon can read them.

RBAC cannot say "the daemon on node N may read the pull secret of N's pool": every
daemon runs as the same ServiceAccount. So no daemon reads Secrets at all; the
controller (which does) encrypts each member's pull secret to a key only that
node's daemon holds, and writes the ciphertext into the node's BootcNode spec.

- The daemon makes a ``NodeKey`` (an X25519 key pair) when its BootcNode first names
  a pull secret. The private key lives in the process's memory only (a restart makes
  a new one); the public key goes to ``BootcNode.status.sealingKey`` (base64 of the
  raw 32 bytes), which the admission policy lets only that node's daemon write.
- ``seal(content, sealing_key, node=..., secret_hash=...)`` (controller) encrypts
  with HPKE (RFC 9180, base mode): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
  ChaCha20-Poly1305, as ``cryptography`` implements it. A standard construction
  rather than one assembled here from the same primitives: a fresh ephemeral key
  per seal, the key schedule and the nonce are the library's, not ours.
- The HPKE ``info`` binds the ciphertext to the node's name, the key's id and the
  pull secret's version hash (``spec.pullSecretHash``): a blob copied to another
  BootcNode, or left from an older key or secret version, does not open.
- ``NodeKey.unseal(sealed, node=..., secret_hash=...)`` (daemon) gives the content
  back, or raises a ``SealingError`` naming what is wrong; never the content.

The wire form is ``Sealed``: ``{"keyID": <key_id>, "data": base64(enc || ciphertext)}``
(``spec.sealedPullSecret``). ``key_id(sealing_key)`` is the first 16 bytes of the
SHA-256 of the raw public key, in hex: the controller re-seals when it differs from the
id of the key the node publishes now.

The daemon imports this module only when its BootcNode names a pull secret:
``cryptography``'s compiled library costs it about 10 MiB of RSS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

KEY_BYTES: Final = 32
KEY_ID_BYTES: Final = 16
#: HPKE's encapsulated key (X25519: 32 bytes) plus ChaCha20-Poly1305's tag
MIN_SEALED_BYTES: Final = 32 + 16
INFO_LABEL: Final = b"bootc-operator sealed pull secret v1"
SUITE: Final = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


class SealingError(Exception):
    """A sealing key or sealed secret cannot be used; the message holds no secret."""


class InvalidSealingKey(SealingError):
    """``status.sealingKey`` is not base64 of 32 bytes, or no usable X25519 key."""


class MalformedSealed(SealingError):
    """``spec.sealedPullSecret`` is not ``{keyID, data}`` with base64 data long enough."""


class SealedForAnotherKey(SealingError):
    """The blob was sealed to another key (e.g. the daemon's before it restarted)."""


class UnsealFailed(SealingError):
    """The blob does not open with this key for this node and secret version: it was
    sealed for another node or version, or changed since."""


@dataclass(frozen=True, slots=True)
class Sealed:
    key_id: str
    data: str  # base64

    def to_wire(self) -> dict[str, str]:
        return {"keyID": self.key_id, "data": self.data}

    @classmethod
    def from_wire(cls, doc: Any) -> Sealed:
        if not isinstance(doc, Mapping):
            raise MalformedSealed("sealedPullSecret is not an object")
        kid, data = doc.get("keyID"), doc.get("data")
        if not isinstance(kid, str) or not kid or not isinstance(data, str) or not data:
            raise MalformedSealed("sealedPullSecret needs keyID and data")
        return cls(kid, data)


def _public_bytes(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def decode_key(sealing_key: str) -> bytes:
    """The raw 32 bytes of a ``status.sealingKey``; ``InvalidSealingKey`` otherwise."""
    try:
        raw = base64.b64decode(sealing_key, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidSealingKey("sealingKey is not valid base64") from None
    if len(raw) != KEY_BYTES:
        raise InvalidSealingKey(f"sealingKey is {len(raw)} bytes, not {KEY_BYTES}")
    return raw


def key_id(sealing_key: str) -> str:
    """The id of a ``status.sealingKey`` (hex of the first 16 bytes of its SHA-256)."""
    return hashlib.sha256(decode_key(sealing_key)).hexdigest()[: 2 * KEY_ID_BYTES]


def _info(node: str, kid: str, secret_hash: str) -> bytes:
    # NUL-separated: none of a node name, a hex key id or a hex hash holds one.
    return b"\0".join((INFO_LABEL, node.encode(), kid.encode(), secret_hash.encode()))


def seal(content: bytes, sealing_key: str, *, node: str, secret_hash: str) -> Sealed:
    """Encrypt ``content`` to the node's published key, bound to ``node`` and the
    secret's version ``secret_hash``."""
    kid = key_id(sealing_key)
    public = X25519PublicKey.from_public_bytes(decode_key(sealing_key))
    try:
        blob = SUITE.encrypt(content, public, info=_info(node, kid, secret_hash))
    except ValueError:  # a low-order point: no shared secret
        raise InvalidSealingKey("sealingKey is not a usable X25519 public key") from None
    return Sealed(kid, base64.b64encode(blob).decode("ascii"))


class NodeKey:
    """A daemon's key pair; the private half never leaves this object."""

    __slots__ = ("_private", "key_id", "public")

    def __init__(self, private: X25519PrivateKey) -> None:
        self._private = private
        #: ``status.sealingKey``: base64 of the raw public key
        self.public = base64.b64encode(_public_bytes(private.public_key())).decode("ascii")
        self.key_id = key_id(self.public)

    @classmethod
    def generate(cls) -> NodeKey:
        return cls(X25519PrivateKey.generate())

    def __repr__(self) -> str:
        return f"NodeKey(key_id={self.key_id!r})"

    def unseal(self, sealed: Sealed, *, node: str, secret_hash: str) -> bytes:
        """The sealed content, if ``sealed`` was made for this key, node and version."""
        if sealed.key_id != self.key_id:
            raise SealedForAnotherKey(
                f"sealed to key {sealed.key_id[:12]}, not this daemon's {self.key_id[:12]}"
            )
        try:
            blob = base64.b64decode(sealed.data, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedSealed("sealedPullSecret.data is not valid base64") from None
        if len(blob) < MIN_SEALED_BYTES:
            raise MalformedSealed(f"sealedPullSecret.data is too short ({len(blob)} bytes)")
        try:
            return SUITE.decrypt(blob, self._private, info=_info(node, self.key_id, secret_hash))
        except (InvalidTag, ValueError):
            raise UnsealFailed(
                f"the sealed pull secret does not open for node {node}, key "
                f"{self.key_id[:12]} and pullSecretHash {secret_hash[:12]} (sealed for "
                "another node or secret version, or changed since)"
            ) from None
