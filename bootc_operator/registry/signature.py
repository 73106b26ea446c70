"""Cosign signatures of an image digest: what they are on the wire, and whether one verifies.

Owns the decision "is this exact digest signed by a key we trust?", without any I/O
(the registry client fetches the documents, ``RegistryClient.signature``; the
controller decides what a verdict means for a rollout).

Cosign (and podman/skopeo with ``use-sigstore-attachments``) store the signatures of
``repo@sha256:<hex>`` as an OCI image manifest tagged ``sha256-<hex>.sig`` in the
same repository (``signature_tag``). Each of its layers is one signature:

- the layer blob is a *simple-signing payload*, JSON like
  ``{"critical": {"identity": {"docker-reference": "quay.io/org/os"},
  "image": {"docker-manifest-digest": "sha256:…"},
  "type": "cosign container image signature"}, "optional": {…}}``;
- the layer's annotation ``dev.cosignproject.cosign/signature`` is the base64
  signature of the payload's exact bytes: ECDSA (ASN.1 DER; SHA-256, or the
  curve's own hash for P-384/P-521), Ed25519, or RSA PKCS#1 v1.5 with SHA-256,
  as sigstore's verifiers accept for a public key.

``verify_signatures`` gives one ``Verdict`` for a digest, checking every layer:

- ``Verified``: a layer's signature verifies with one of the keys and its payload
  names this digest (``key`` names that key);
- ``NotSigned``: there is no signature manifest (404), or it holds no layers;
- ``PayloadDigestMismatch``: a trusted key signed a payload, but for another digest
  (a signature copied from another image);
- ``WrongKey``: well-formed signatures, none made by a trusted key;
- ``Malformed``: nothing usable (a layer without its signature annotation, a
  payload that is not a cosign payload or does not match its layer digest, a
  missing payload blob).

The strongest finding wins, in that order (one valid signature among broken ones
verifies). The payload's ``docker-reference`` is reported, not enforced: cosign
verifies the digest claim only, and a mirrored image keeps its signature.

``VerdictCache`` keeps verdicts per (image, digest, keys): ``Verified`` for good
(a digest never changes), a refusal until its re-check (2 s, doubling with each
refusal in a row up to a minute, with jitter: ``recheck_delay``).

``cryptography`` is imported only when keys are parsed or a signature is checked:
its compiled library costs a process about 10 MiB of RSS, and the daemon imports
``bootc_operator.registry`` (for the host auth file) without ever verifying.

Keyless signatures (a Fulcio certificate in ``dev.sigstore.cosign/certificate``
and a Rekor bundle in ``dev.sigstore.cosign/bundle``) would be checked here too:
the certificate chain against a Fulcio root and the identity/issuer the pool names
replace the trusted key, and the bundle's signed entry timestamp (Rekor's key)
proves the signature was logged while the certificate was valid. Both roots are
offline data (TUF), so the decision stays pure; only the roots' refresh is I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from bootc_operator import safejson
from bootc_operator.registry.manifest import OCI_MANIFEST, digest_matches, is_digest

#: The layer annotation holding the base64 signature of the payload.
SIGNATURE_ANNOTATION: Final = "dev.cosignproject.cosign/signature"
#: The media type of a simple-signing payload layer.
SIMPLE_SIGNING_MEDIA_TYPE: Final = "application/vnd.dev.cosign.simplesigning.v1+json"
#: ``critical.type`` of a cosign image signature payload.
PAYLOAD_TYPE: Final = "cosign container image signature"
#: The media types the signature manifest is asked for / accepted as.
SIGNATURE_MANIFEST_TYPES: Final = (
    OCI_MANIFEST,
    "application/vnd.docker.distribution.manifest.v2+json",
)
#: A signature manifest is a few hundred bytes per signature.
MAX_SIGNATURE_MANIFEST_BYTES: Final = 256 * 1024
#: A payload is a few hundred bytes; ``optional`` annotations may add some.
MAX_PAYLOAD_BYTES: Final = 64 * 1024
#: Signatures looked at per digest: each is a blob fetch and a signature check.
MAX_SIGNATURES: Final = 32
#: A public key PEM block is well under 1 KiB (RSA-4096: 800 bytes).
MAX_KEYS_BYTES: Final = 64 * 1024
MAX_KEYS: Final = 16


class Outcome(StrEnum):
    """What verifying a digest found (strongest first, in the order they win)."""

    VERIFIED = "Verified"
    PAYLOAD_DIGEST_MISMATCH = "PayloadDigestMismatch"
    WRONG_KEY = "WrongKey"
    MALFORMED = "Malformed"
    NOT_SIGNED = "NotSigned"


@dataclass(frozen=True)
class Verdict:
    """One digest's verification result; ``message`` is one line for a condition or Event."""

    outcome: Outcome
    message: str
    #: the name of the key that verified (``Verified`` only)
    key: str | None = None
    #: the payload's ``docker-reference`` of the signature that decided, if any
    identity: str | None = None

    @property
    def verified(self) -> bool:
        return self.outcome is Outcome.VERIFIED


class InvalidSignatureManifest(ValueError):
    """The ``sha256-<hex>.sig`` document is not a signature manifest that can be read."""


class InvalidPublicKey(ValueError):
    """A trusted key that cannot be used; the message says which and why, never the key."""


@dataclass(frozen=True)
class SignatureLayer:
    """One layer of a signature manifest: the payload blob it names and its signature."""

    index: int
    digest: str
    size: int
    media_type: str
    signature: str | None
    annotations: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SignatureManifest:
    """The readable part of a signature manifest: its layers (at most ``MAX_SIGNATURES``)
    and how many it had in all."""

    layers: tuple[SignatureLayer, ...]
    total: int

    def wanted_blobs(self) -> tuple[SignatureLayer, ...]:
        """The layers whose payload blob must be fetched (well-formed descriptor, small)."""
        return tuple(
            layer
            for layer in self.layers
            if is_digest(layer.digest) and 0 <= layer.size <= MAX_PAYLOAD_BYTES
        )


@dataclass(frozen=True, eq=False)
class TrustedKey:
    """A public key signatures may verify with; ``name`` says where it came from
    (``verification.publicKeys[0]``, ``Secret ns/name key cosign.pub``)."""

    name: str
    #: the parsed ``cryptography`` public key (typed loosely: the module is imported lazily)
    key: Any = field(repr=False)

    @property
    def algorithm(self) -> str:
        return _algorithm(self.key)

    @property
    def fingerprint(self) -> str:
        """sha256 of the key's SubjectPublicKeyInfo (DER): the key itself, whatever
        its PEM's layout or where it came from."""
        return hashlib.sha256(_spki(self.key)).hexdigest()


@dataclass(frozen=True)
class SignatureDocuments:
    """What the registry holds for one digest's signatures (``RegistryClient.signature``):
    the signature manifest's body (None: there is none) and the payload blobs fetched,
    by digest."""

    manifest: bytes | None
    payloads: Mapping[str, bytes] = field(default_factory=dict)

    def verify(self, image: str, digest: str, keys: Sequence[TrustedKey]) -> Verdict:
        """``verify_signatures`` of these documents."""
        return verify_signatures(image, digest, self.manifest, self.payloads, keys)


def signature_tag(digest: str) -> str:
    """The tag of ``digest``'s signature manifest: ``sha256:<hex>`` → ``sha256-<hex>.sig``."""
    if not is_digest(digest):
        raise ValueError(f"not an image digest: {digest[:80]!r}")
    return digest.replace(":", "-", 1) + ".sig"


def parse_signature_manifest(body: bytes) -> SignatureManifest:
    """The layers of a signature manifest; ``InvalidSignatureManifest`` when it has none
    that can be read at all (not JSON, no ``layers`` list)."""
    if len(body) > MAX_SIGNATURE_MANIFEST_BYTES:
        raise InvalidSignatureManifest(
            f"the signature manifest is {len(body)} bytes, more than {MAX_SIGNATURE_MANIFEST_BYTES}"
        )
    try:
        doc = safejson.loads(body)
    except safejson.JSONInputError as exc:
        raise InvalidSignatureManifest(
            f"the signature manifest is not JSON ({exc.reason})"
        ) from None
    if not isinstance(doc, dict):
        raise InvalidSignatureManifest("the signature manifest is not a JSON object")
    raw = doc.get("layers")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise InvalidSignatureManifest('the signature manifest\'s "layers" is not a list')
    layers: list[SignatureLayer] = []
    for index, item in enumerate(raw[:MAX_SIGNATURES]):
        if not isinstance(item, dict):
            layers.append(SignatureLayer(index, "", -1, "", None))
            continue
        annotations = item.get("annotations")
        if not isinstance(annotations, dict):
            annotations = {}
        clean = {str(k): v for k, v in annotations.items() if isinstance(v, str)}
        digest = item.get("digest")
        size = item.get("size")
        media_type = item.get("mediaType")
        layers.append(
            SignatureLayer(
                index=index,
                digest=digest if isinstance(digest, str) else "",
                size=size if isinstance(size, int) and not isinstance(size, bool) else -1,
                media_type=media_type if isinstance(media_type, str) else "",
                signature=clean.get(SIGNATURE_ANNOTATION),
                annotations=clean,
            )
        )
    return SignatureManifest(layers=tuple(layers), total=len(raw))


def load_public_keys(pem: str | bytes, source: str) -> tuple[TrustedKey, ...]:
    """Every ``PUBLIC KEY`` block of ``pem`` (one or more), named after ``source``.

    ``InvalidPublicKey`` names ``source`` and says what is wrong: no PEM block, a
    private key where a public key belongs, a block that does not parse, a key type
    cosign cannot sign with, a key sigstore refuses (``_unsupported``: RSA other than
    2048/3072/4096 bits, ECDSA on a curve other than P-256/P-384/P-521).
    """
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415 - lazily: ~10 MiB RSS
        load_pem_public_key,
    )

    raw = pem.encode() if isinstance(pem, str) else pem
    if len(raw) > MAX_KEYS_BYTES:
        raise InvalidPublicKey(f"{source}: {len(raw)} bytes of PEM, more than {MAX_KEYS_BYTES}")
    blocks = _pem_blocks(raw)
    if not blocks:
        raise InvalidPublicKey(f"{source}: no PEM block (expected -----BEGIN PUBLIC KEY-----)")
    keys: list[TrustedKey] = []
    for n, (label, block) in enumerate(blocks):
        name = source if len(blocks) == 1 else f"{source} (key {n + 1})"
        if "PRIVATE KEY" in label:
            raise InvalidPublicKey(
                f"{name} is a private key ({label}); give the public key (cosign.pub) instead"
            )
        if label != "PUBLIC KEY":
            raise InvalidPublicKey(f"{name} is a {label}, not a PUBLIC KEY")
        try:
            key = load_pem_public_key(block)
        except (ValueError, TypeError) as exc:
            raise InvalidPublicKey(
                f"{name} does not parse as a public key ({_short(exc)})"
            ) from None
        algorithm = _algorithm(key)
        if not algorithm:
            raise InvalidPublicKey(
                f"{name} is a {type(key).__name__}; cosign keys are ECDSA, Ed25519 or RSA"
            )
        weak = _unsupported(algorithm)
        if weak:
            raise InvalidPublicKey(f"{name} is {weak}")
        keys.append(TrustedKey(name=name, key=key))
    if len(keys) > MAX_KEYS:
        raise InvalidPublicKey(f"{source}: {len(keys)} keys, more than {MAX_KEYS}")
    return tuple(keys)


def verify_signatures(
    image: str,
    digest: str,
    manifest: bytes | None,
    payloads: Mapping[str, bytes],
    keys: Sequence[TrustedKey],
) -> Verdict:
    """The verdict for ``image@digest`` (see the module docstring).

    ``manifest`` is the body of ``signature_tag(digest)`` (None: the registry has none),
    ``payloads`` the blobs fetched for its layers by digest (a missing one counts as
    malformed), ``keys`` the trusted keys (at least one).
    """
    shown = f"{image}@{digest}"
    if not keys:
        raise ValueError("verify_signatures needs at least one trusted key")
    if manifest is None:
        return Verdict(
            Outcome.NOT_SIGNED,
            f"{shown} is not signed (no {signature_tag(digest)} in the repository)",
        )
    try:
        parsed = parse_signature_manifest(manifest)
    except InvalidSignatureManifest as exc:
        return Verdict(Outcome.MALFORMED, f"the signature of {shown} cannot be read: {exc}")
    if not parsed.layers:
        return Verdict(
            Outcome.NOT_SIGNED,
            f"{shown} is not signed ({signature_tag(digest)} holds no signatures)",
        )

    findings = [_check_layer(layer, digest, payloads, keys) for layer in parsed.layers]
    best = min(findings, key=lambda f: _RANK[f.outcome])
    return _verdict_of(best, shown, digest, parsed.total, keys)


def _verdict_of(
    best: _Finding, shown: str, digest: str, count: int, keys: Sequence[TrustedKey]
) -> Verdict:
    """The verdict said by the best of the ``count`` signatures' findings."""
    checked = (
        f" (only the first {MAX_SIGNATURES} of {count} checked)" if count > MAX_SIGNATURES else ""
    )
    plural = "signature" if count == 1 else "signatures"
    if best.outcome is Outcome.VERIFIED:
        return Verdict(
            Outcome.VERIFIED,
            f"{shown} is signed by {best.key}",
            key=best.key,
            identity=best.identity,
        )
    if best.outcome is Outcome.PAYLOAD_DIGEST_MISMATCH:
        return Verdict(
            best.outcome,
            f"the signature of {shown} by {best.key} is for another image: its payload names "
            f"{best.detail}, not {digest}{checked}",
            identity=best.identity,
        )
    if best.outcome is Outcome.WRONG_KEY:
        names = ", ".join(k.name for k in keys)
        return Verdict(
            best.outcome,
            f"{shown} has {count} {plural}, none made by a trusted key ({names}){checked}",
            identity=best.identity,
        )
    return Verdict(
        Outcome.MALFORMED,
        f"{shown} has {count} {plural}, none usable: "
        f"signature {best.index + 1}: {best.detail}{checked}",
    )


def _spki(key: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        Encoding,
        PublicFormat,
    )

    return bytes(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def keyset_id(keys: Sequence[TrustedKey]) -> str:
    """A short id of a set of trusted keys (their names and SubjectPublicKeyInfo), so a
    verdict (whose message names the key) is reused only for the very keys it was made
    with."""
    digest = hashlib.sha256()
    for key in sorted(keys, key=lambda k: k.name):
        digest.update(key.name.encode() + b"\0")
        digest.update(_spki(key.key))
    return digest.hexdigest()[:32]


def keys_fingerprint(keys: Sequence[TrustedKey]) -> str:
    """The set of keys themselves (``TrustedKey.fingerprint`` of each, names left
    out): a verification holds only while the pool trusts exactly this set."""
    digest = hashlib.sha256()
    for fingerprint in sorted({key.fingerprint for key in keys}):
        digest.update(fingerprint.encode() + b"\0")
    return digest.hexdigest()


#: a refused digest is checked again after this many seconds, then twice as long each
#: time it is refused again, at most ``RECHECK_CAP`` (each wait shortened by up to
#: ``RECHECK_JITTER`` of itself, at random)
FIRST_RECHECK: Final = 2.0
RECHECK_CAP: Final = 60.0
RECHECK_JITTER: Final = 0.2


def recheck_delay(
    refusals: int,
    spread: float,
    *,
    first: float = FIRST_RECHECK,
    cap: float = RECHECK_CAP,
    jitter: float = RECHECK_JITTER,
) -> float:
    """Seconds until a digest refused ``refusals`` times in a row (1: just now) is
    checked again: ``first``, doubling, at most ``cap``; shortened by ``jitter`` x
    ``spread`` of itself (``spread`` in [0, 1), a random draw), so digests refused
    together are not all asked for again at the same moment. Never more than ``cap``."""
    base = min(cap, first * 2.0 ** max(0, refusals - 1))
    return base * (1.0 - jitter * min(max(spread, 0.0), 1.0))


@dataclass(slots=True)
class _Entry:
    verdict: Verdict
    until: float = 0.0  # a refusal: when it is checked again (monotonic)
    refusals: int = 0  # refusals in a row of this (image, digest, keys)


class VerdictCache:
    """Verdicts per (image, digest, ``keyset_id``), so a digest is verified once.

    A digest and its keys never change, so a ``Verified`` verdict is kept until
    evicted (least recently used first, beyond ``max_entries``). Any other verdict (a
    refusal) is kept only until its re-check (``recheck_delay``: 2 s after the first
    refusal, doubling with each refusal in a row, at most ``recheck_after``, with
    jitter): the signature may be pushed (or fixed) after the image, and a rollout
    blocked by it must notice soon, without asking the registry every few seconds
    for a digest nobody signs. Registry failures are not verdicts and are never
    cached. ``now`` is a monotonic clock reading, given by the caller (tests pass
    their own); ``spread`` draws the jitter (default: ``random.random``).
    """

    def __init__(
        self,
        *,
        max_entries: int = 1024,
        first_recheck: float = FIRST_RECHECK,
        recheck_after: float = RECHECK_CAP,
        jitter: float = RECHECK_JITTER,
        spread: Callable[[], float] = random.random,
    ) -> None:
        self.max_entries = max_entries
        self.first_recheck = first_recheck
        self.recheck_after = recheck_after  # the longest wait between two checks
        self.jitter = jitter
        self._spread = spread
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, image: str, digest: str, keyset: str, *, now: float) -> Verdict | None:
        """The cached verdict, or None when there is none or a refusal is due for its
        re-check (its count of refusals is kept for the next one)."""
        key = (image, digest, keyset)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not entry.verdict.verified and now >= entry.until:
            return None
        self._entries.move_to_end(key)
        return entry.verdict

    def put(self, image: str, digest: str, keyset: str, verdict: Verdict, *, now: float) -> None:
        key = (image, digest, keyset)
        entry = _Entry(verdict)
        if not verdict.verified:
            before = self._entries.get(key)
            refused = before is not None and not before.verdict.verified
            entry.refusals = (before.refusals if before is not None and refused else 0) + 1
            entry.until = now + recheck_delay(
                entry.refusals,
                self._spread(),
                first=self.first_recheck,
                cap=self.recheck_after,
                jitter=self.jitter,
            )
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def next_check(self, image: str, digest: str, keyset: str) -> float | None:
        """When a refused digest is checked again (monotonic); None: not refused."""
        entry = self._entries.get((image, digest, keyset))
        if entry is None or entry.verdict.verified:
            return None
        return entry.until


# ---------------------------------------------------------------------- internals

_RANK: Final = {outcome: rank for rank, outcome in enumerate(Outcome)}


@dataclass(frozen=True)
class _Finding:
    outcome: Outcome
    index: int
    detail: str = ""
    key: str | None = None
    identity: str | None = None


def _check_layer(
    layer: SignatureLayer, digest: str, payloads: Mapping[str, bytes], keys: Sequence[TrustedKey]
) -> _Finding:
    def malformed(detail: str) -> _Finding:
        return _Finding(Outcome.MALFORMED, layer.index, detail)

    if not is_digest(layer.digest):
        return malformed("the layer has no valid digest")
    if layer.signature is None:
        return malformed(f"the layer has no {SIGNATURE_ANNOTATION} annotation")
    if layer.size > MAX_PAYLOAD_BYTES:
        return malformed(f"the payload is {layer.size} bytes, more than {MAX_PAYLOAD_BYTES}")
    payload = payloads.get(layer.digest)
    if payload is None:
        return malformed(f"its payload {layer.digest} could not be fetched")
    if not digest_matches(payload, layer.digest):
        return malformed(f"its payload does not match the layer digest {layer.digest}")
    try:
        signature = base64.b64decode(layer.signature, validate=True)
    except (binascii.Error, ValueError):
        return malformed("the signature annotation is not base64")
    if not signature:
        return malformed("the signature annotation is empty")
    try:
        claimed, identity = _read_payload(payload)
    except ValueError as exc:
        return malformed(str(exc))
    signer = next((k for k in keys if _verifies(k.key, signature, payload)), None)
    if signer is None:
        return _Finding(Outcome.WRONG_KEY, layer.index, identity=identity)
    if claimed != digest:
        return _Finding(
            Outcome.PAYLOAD_DIGEST_MISMATCH, layer.index, claimed, signer.name, identity
        )
    return _Finding(Outcome.VERIFIED, layer.index, key=signer.name, identity=identity)


def _read_payload(payload: bytes) -> tuple[str, str | None]:
    """``(docker-manifest-digest, docker-reference)`` of a simple-signing payload."""
    try:
        doc = safejson.loads(payload)
    except safejson.JSONInputError as exc:
        raise ValueError(f"the payload is not JSON ({exc.reason})") from None
    critical = doc.get("critical") if isinstance(doc, dict) else None
    if not isinstance(critical, dict):
        raise ValueError('the payload has no "critical" object')
    kind = critical.get("type")
    if kind != PAYLOAD_TYPE:
        shown = kind[:80] if isinstance(kind, str) else kind
        raise ValueError(f"the payload's critical.type is {shown!r}, not {PAYLOAD_TYPE!r}")
    image = critical.get("image")
    claimed = image.get("docker-manifest-digest") if isinstance(image, dict) else None
    if not isinstance(claimed, str) or not is_digest(claimed):
        raise ValueError("the payload has no valid critical.image.docker-manifest-digest")
    identity_doc = critical.get("identity")
    reference = identity_doc.get("docker-reference") if isinstance(identity_doc, dict) else None
    return claimed, reference if isinstance(reference, str) else None


def _algorithm(key: Any) -> str:
    """``ecdsa-p256`` / ``ed25519`` / ``rsa-2048`` …, or "" for a key type cosign never uses."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415

    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"ecdsa-{key.curve.name}"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ed25519"
    if isinstance(key, rsa.RSAPublicKey):
        return f"rsa-{key.key_size}"
    return ""


#: the RSA moduli sigstore accepts (cryptoutils.ValidatePubKey), in bits
RSA_SIZES: Final = (2048, 3072, 4096)
#: the ECDSA curves sigstore accepts: NIST P-256, P-384, P-521 (cryptography's names)
ECDSA_CURVES: Final = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def _unsupported(algorithm: str) -> str:
    """What is wrong with a key of ``algorithm`` (``_algorithm``) for sigstore, or "":
    an RSA modulus other than 2048, 3072 or 4096 bits (a short one can be factored; a
    huge one makes every check slow), an ECDSA curve other than P-256, P-384 and
    P-521 (secp256k1, Brainpool, P-192 ...), as sigstore's verifiers refuse them."""
    kind, _, param = algorithm.partition("-")
    if kind == "rsa" and int(param) not in RSA_SIZES:
        sizes = ", ".join(map(str, RSA_SIZES[:-1])) + f" or {RSA_SIZES[-1]}"
        return f"an RSA key of {param} bits; sigstore accepts {sizes} bits only"
    if kind == "ecdsa" and param not in ECDSA_CURVES:
        return f"an ECDSA key on curve {param}; sigstore accepts P-256, P-384 or P-521 only"
    return ""


def _verifies(key: Any, signature: bytes, payload: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa  # noqa: PLC0415

    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, payload)
            return True
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, payload, padding.PKCS1v15(), hashes.SHA256())
            return True
        if isinstance(key, ec.EllipticCurvePublicKey):
            # cosign hashes with SHA-256 whatever the curve; sigstore's default
            # verifiers use the curve's own hash for P-384 and P-521: accept both.
            curve_hash: dict[str, hashes.HashAlgorithm] = {
                "secp384r1": hashes.SHA384(),
                "secp521r1": hashes.SHA512(),
            }
            candidates: list[hashes.HashAlgorithm] = [hashes.SHA256()]
            if key.curve.name in curve_hash:
                candidates.append(curve_hash[key.curve.name])
            for algorithm in candidates:
                try:
                    key.verify(signature, payload, ec.ECDSA(algorithm))
                    return True
                except InvalidSignature:
                    continue
            return False
    except (InvalidSignature, ValueError):
        return False
    return False


def _pem_blocks(raw: bytes) -> list[tuple[str, bytes]]:
    """``(label, whole block)`` for each ``-----BEGIN X----- … -----END X-----``."""
    blocks: list[tuple[str, bytes]] = []
    text = raw.decode("ascii", errors="replace")
    pos = 0
    while True:
        start = text.find("-----BEGIN ", pos)
        if start < 0:
            return blocks
        label_end = text.find("-----", start + 11)
        if label_end < 0:
            return blocks
        label = text[start + 11 : label_end]
        end_marker = f"-----END {label}-----"
        end = text.find(end_marker, label_end)
        if end < 0:
            blocks.append((label, text[start:].encode()))
            return blocks
        blocks.append((label, text[start : end + len(end_marker)].encode()))
        pos = end + len(end_marker)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:120]
