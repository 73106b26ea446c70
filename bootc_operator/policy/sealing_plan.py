"""When a member's pull secret is (re)sealed to its node's key.

The controller writes three pull-secret fields into a member's BootcNode spec:
``pullSecretRef`` and ``pullSecretHash`` (copied from the pool while its Secret is
usable) and ``sealedPullSecret`` (the Secret's content sealed to the key the node's
daemon publishes in ``status.sealingKey``; ``bootc_operator.sealing``). The daemon
reads no Secret: it opens the blob, which is bound to the node, the key and the hash.

``seal_action(spec, ref, secret_hash, node_key_id)`` decides the blob, given the
(ref, hash) the controller is about to publish and the id of the key the node
publishes now (None: none yet, or unusable):

- the pool names no pull secret → ``CLEAR`` a blob that is there;
- the node has no key → ``CLEAR`` a blob of another secret version (it cannot open
  with the new hash anyway), else ``KEEP`` (nothing to seal to yet: the daemon waits);
- a blob of this secret version (the spec already holds this ref and hash) sealed to
  the node's current key → ``KEEP``;
- anything else (a new secret version, a new key after a daemon restart, no blob
  yet) → ``SEAL``.

Ciphertexts differ on every seal, so "already sealed" is known from the spec's ref,
hash and ``keyID`` alone, never by comparing blobs; the blob is always written in
the same patch as the hash it is bound to.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class SealAction(StrEnum):
    KEEP = "keep"
    SEAL = "seal"
    CLEAR = "clear"


def seal_action(
    spec: Mapping[str, Any],
    ref: Mapping[str, Any] | None,
    secret_hash: str | None,
    node_key_id: str | None,
) -> SealAction:
    """What to do with ``spec.sealedPullSecret`` (see the module docstring)."""
    sealed = spec.get("sealedPullSecret")
    have = sealed.get("keyID") if isinstance(sealed, Mapping) else None
    if not ref or not secret_hash:
        return SealAction.CLEAR if sealed is not None else SealAction.KEEP
    same_version = (spec.get("pullSecretRef"), spec.get("pullSecretHash")) == (
        dict(ref),
        secret_hash,
    )
    if node_key_id is None:
        return SealAction.CLEAR if sealed is not None and not same_version else SealAction.KEEP
    if same_version and have == node_key_id:
        return SealAction.KEEP
    return SealAction.SEAL
