"""The signature gate's pure parts: which digest a pool may target, its trusted keys,
and what UpToDate says while a signature fails (``policy.poolspec.check_pool``,
``reconcilers.loops.signatures.collect_keys``, ``policy.poolstatus.rollout_condition``)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bootc_operator.api import constants as c
from bootc_operator.policy.poolspec import check_pool, verification_fingerprint
from bootc_operator.policy.poolstatus import Counts, RolloutFacts, rollout_condition
from bootc_operator.reconcilers.loops.signatures import collect_keys, key_secret_refs
from bootc_operator.reconcilers.watchers.pullsecrets import WatchedSecret

REPO = "quay.io/example/os"
A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64


def pem_of(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.fixture(scope="module")
def pem() -> str:
    return pem_of(ec.generate_private_key(ec.SECP256R1()))


def pool(ref: str, verification: dict[str, Any] | None) -> dict[str, Any]:
    image: dict[str, Any] = {"ref": ref}
    if verification is not None:
        image["verification"] = verification
    return {"metadata": {"name": "p"}, "spec": {"nodeSelector": {}, "image": image}}


def test_without_verification_the_digest_is_the_target() -> None:
    policy = check_pool(pool(f"{REPO}@{A}", None))
    assert (policy.target_digest, policy.unverified_digest, policy.verification) == (A, None, None)
    assert policy.desired_image == f"{REPO}@{A}"


def test_an_unverified_digest_is_no_target(pem: str) -> None:
    p = pool(f"{REPO}@{A}", {"publicKeys": [pem]})
    policy = check_pool(p)
    assert policy.target_digest is None and policy.desired_image is None
    assert policy.unverified_digest == A == policy.candidate_digest
    assert policy.targets == frozenset()


def test_a_digest_verified_with_these_keys_is_the_target(pem: str) -> None:
    p = pool(f"{REPO}@{A}", {"publicKeys": [pem]})
    assert verification_fingerprint(p["spec"]) is not None
    policy = check_pool(p, verified=f"{REPO}@{A}")
    assert (policy.desired_image, policy.unverified_digest) == (f"{REPO}@{A}", None)
    # no verification that holds for the keys the pool trusts now: no target
    other = check_pool(p, verified=None)
    assert (other.desired_image, other.unverified_digest) == (None, A)


def test_the_last_verified_digest_stays_the_target_while_a_new_one_is_checked(pem: str) -> None:
    p = pool(f"{REPO}@{B}", {"publicKeys": [pem]})
    policy = check_pool(p, verified=f"{REPO}@{A}")
    assert (policy.target_digest, policy.unverified_digest, policy.candidate_digest) == (A, B, B)
    assert policy.desired_image == f"{REPO}@{A}"
    # of another repository: nothing to keep
    moved = check_pool(p, verified=f"quay.io/example/other@{A}")
    assert (moved.target_digest, moved.unverified_digest) == (None, B)


def test_a_tag_is_verified_once_resolved(pem: str) -> None:
    p = pool(f"{REPO}:stable", {"publicKeys": [pem]})
    assert check_pool(p).candidate_digest is None  # not resolved yet: nothing to verify
    resolved = check_pool(p, {f"{REPO}:stable": A})
    assert (resolved.target_digest, resolved.unverified_digest) == (None, A)


def secret(data: dict[str, bytes]) -> WatchedSecret:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return WatchedSecret(pending=False, secret={"metadata": {"name": "keys"}, "data": encoded})


REF = {"name": "keys", "namespace": "bootc-operator"}


def test_keys_inline_and_from_a_secret(pem: str) -> None:
    other = pem_of(ec.generate_private_key(ec.SECP256R1()))
    spec = {"publicKeys": [pem], "publicKeySecretRefs": [REF, {**REF, "key": "old.pub"}]}
    got = collect_keys(
        spec, lambda ref: secret({"cosign.pub": other.encode(), "old.pub": pem.encode()})
    )
    assert got.problem == "" and not got.pending
    assert [k.name for k in got.keys] == [
        "verification.publicKeys[0]",
        "Secret bootc-operator/keys key cosign.pub",
        "Secret bootc-operator/keys key old.pub",
    ]
    assert key_secret_refs(pool("x", spec)) == {("bootc-operator", "keys")}


@pytest.mark.parametrize(
    ("watched", "problem"),
    [
        (
            WatchedSecret(pending=False),
            "the key Secret bootc-operator/keys key cosign.pub: Secret bootc-operator/keys "
            "not found",
        ),
        (secret({}), "the key Secret bootc-operator/keys key cosign.pub: the Secret has no "),
        (
            WatchedSecret(pending=True, error="secrets is forbidden"),
            "cannot read the key Secret bootc-operator/keys key cosign.pub: secrets is forbidden",
        ),
        (
            secret({"cosign.pub": b"not a key"}),
            "trusted key unusable: Secret bootc-operator/keys key cosign.pub: no PEM block",
        ),
        (
            secret({"cosign.pub": pem_of(ec.generate_private_key(ec.SECP256K1())).encode()}),
            "trusted key unusable: Secret bootc-operator/keys key cosign.pub is an ECDSA key "
            "on curve secp256k1; sigstore accepts P-256, P-384 or P-521 only",
        ),
    ],
)
def test_a_key_secret_that_cannot_be_used_is_named(watched: WatchedSecret, problem: str) -> None:
    got = collect_keys({"publicKeySecretRefs": [REF]}, lambda ref: watched)
    assert got.problem.startswith(problem), got.problem
    assert got.keys == ()


def test_a_private_key_is_refused_without_quoting_it() -> None:
    private = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    got = collect_keys({"publicKeys": [private]}, lambda ref: WatchedSecret(pending=True))
    assert "verification.publicKeys[0] is a private key" in got.problem
    body = private.splitlines()[1]
    assert body not in got.problem


def test_a_key_secret_not_read_yet_is_pending(pem: str) -> None:
    got = collect_keys(
        {"publicKeys": [pem], "publicKeySecretRefs": [REF]}, lambda ref: WatchedSecret(True)
    )
    assert got.pending and got.keys == () and got.problem == ""


def test_up_to_date_names_the_signature_failure() -> None:
    counts = Counts(total=2, updated=2)
    failed = RolloutFacts(
        counts,
        signature_error=(c.REASON_SIGNATURE_VERIFICATION_FAILED, f"{REPO}@{B} is not signed"),
        unverified=B,
    )
    assert rollout_condition(failed) == (
        False,
        "SignatureVerificationFailed",
        f"{REPO}@{B} is not signed; nodes stay on what they run; 2/2 updated",
    )
    checking = rollout_condition(RolloutFacts(counts, unverified=B))
    assert checking[:2] == (False, "Pending") and f"verifying the signature of {B}" in checking[2]


def test_up_to_date_says_slots_are_given_back_when_no_verification_holds() -> None:
    """Issue 37 follow-up: a key revoked, no digest verified with the keys trusted now
    (no target at all): the message says the draining nodes give their slots back
    (``slots.plan_withdrawn``); with an older verified digest still the target, not."""
    counts = Counts(total=3, updated=0, staged=2, rebooting=1)
    why = f"the key Secret {REF['namespace']}/{REF['name']} key cosign.pub: not found"
    withdrawn = RolloutFacts(
        counts,
        target_known=False,
        signature_error=(c.REASON_SIGNATURE_VERIFICATION_FAILED, why),
        unverified=B,
    )
    status, reason, message = rollout_condition(withdrawn)
    assert (status, reason) == (False, "SignatureVerificationFailed")
    assert message == (
        f"{why}; no digest's verification holds: nodes stay on what they run, none is told "
        "to reboot, and nodes draining for a reboot slot are uncordoned and give it back; "
        "0/3 updated; 2 staged, 1 rebooting"
    )
    # the registry not answering withdraws nothing: nothing is said to be given back
    unreachable = RolloutFacts(
        counts,
        target_known=False,
        signature_error=(c.REASON_SIGNATURE_REGISTRY_ERROR, "cannot check the signature"),
    )
    assert "give it back" not in rollout_condition(unreachable)[2]
