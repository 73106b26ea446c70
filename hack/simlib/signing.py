"""Signed images in the simulation: one cosign key pair per simulation, made by cosign.

``hack/sim image push NAME:TAG --sign`` pushes the image, then signs its digest with
the simulation's key (``sign``): the real cosign (``hack.testenv.cosign``, built and
cached by ``hack/build-cosign.sh``) pushes ``sha256-<hex>.sig`` beside it in the
simulation's open registry, without a transparency log. The key pair is made on
first use under ``DIR/cosign`` (its password beside it, mode 0600: a throwaway
key of a throwaway cluster) and goes with the state directory on ``hack/sim down``.
``hack/sim image key`` prints the public key; ``hack/sim pool --verify`` puts it in
the pool's ``spec.image.verification.publicKeys`` (``verification``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hack.testenv.cosign import Cosign, KeyPair, resolve_cosign

KEY_NAME = "sim"


def _cosign(state_dir: Path) -> Cosign:
    return Cosign(resolve_cosign(), state_dir / "cosign")


def key_pair(state_dir: Path) -> tuple[Cosign, KeyPair]:
    """The simulation's cosign and key pair (made on first use)."""
    cosign = _cosign(state_dir)
    key = cosign.load_key_pair(KEY_NAME)
    if key is None:
        key = cosign.generate_key_pair(KEY_NAME, keep_password=True)
    return cosign, key


def sign(state_dir: Path, ref: str) -> None:
    """Sign ``ref`` (``host/repo@sha256:…`` in the simulation's open registry)."""
    cosign, key = key_pair(state_dir)
    cosign.sign(None, ref, key)


def public_key(state_dir: Path) -> str:
    """The simulation's public key (PEM), as a pool lists it."""
    return key_pair(state_dir)[1].public


def verification(state_dir: Path) -> dict[str, Any]:
    """``spec.image.verification`` trusting the simulation's key."""
    return {"publicKeys": [public_key(state_dir)]}
