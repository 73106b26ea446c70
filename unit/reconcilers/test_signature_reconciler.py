"""The signature reconciler's shell: one registry fetch per digest and key set, what it
tells the other reconcilers, its Events, its rechecks and backoff.

The real :class:`bootc_operator.controller.Controller` without a server (as
``unit/controller/test_tag_backoff.py``): the pool reaches its informer through
``Informer.replace``/``apply``; the registry is a fake ``fetch`` counting its calls
and answering with signature documents made here; the verdict cache and backoff run
on clocks the test moves. Real registry, cosign and API server:
``e2e/test_controller_signatures.py``.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any, cast

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes_asyncio.client import ApiClient

from bootc_operator.controller import Controller
from bootc_operator.reconcilers.loops.signatures import RECHECK_MARGIN
from bootc_operator.reconcilers.watchers.pullsecrets import Ref, WatchedSecret
from bootc_operator.registry import RegistryError
from bootc_operator.registry.signature import FIRST_RECHECK, SignatureDocuments, VerdictCache
from unit.registry.test_signature import sign

NO_API = cast(ApiClient, None)
SECRET_REF = ("bootc-operator", "os-keys")
FROM_SECRET = {"publicKeySecretRefs": [{"namespace": SECRET_REF[0], "name": SECRET_REF[1]}]}
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REPO = "registry.example.com/os"
A, B, C = ("sha256:" + ch * 64 for ch in "abc")


class Harness:
    def __init__(self) -> None:
        self.ctl = Controller(NO_API, identity="unit")
        self.now = 0.0
        self.ctl.ctx.now = lambda: EPOCH + dt.timedelta(seconds=self.now)
        self.sig = self.ctl.signatures
        self.sig._monotonic = lambda: self.now
        self.sig._fetch = self._fetch
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.signed: set[str] = set()
        # digest -> the keys that signed it (``signed``: by ``self.key``)
        self.signed_by: dict[str, list[ec.EllipticCurvePrivateKey]] = {}
        # the key Secret as its watch holds it (None: deleted); its resourceVersion
        self.secret: ec.EllipticCurvePrivateKey | None = None
        self._secret_rv = 0
        self.sig.keys._read_secret = self._read_secret
        self.down = False
        self.fetches: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.ctl.recorder.emit = lambda ref, type_, reason, action, note: self.events.append(  # type: ignore[method-assign]
            (type_, reason)
        )
        self.changes: list[str] = []
        self.sig._on_change = self.changes.append
        self._rv = 1
        self.sig.cache = VerdictCache(spread=lambda: 0.0)  # no jitter: exact re-check times
        # the pool's status as the reconciler writes it (nextSignatureCheckTime)
        self.status_writes: list[dict[str, Any]] = []
        self.ctl.ctx.patch_pool = self._patch_pool  # type: ignore[method-assign]

    async def _patch_pool(
        self, pool: dict[str, Any], patch: dict[str, Any], *, status: bool = False
    ) -> dict[str, Any]:
        assert status, patch
        self.status_writes.append(copy.deepcopy(patch["status"]))
        current = self.pool()
        merged = {**(current.get("status") or {}), **patch["status"]}
        current["status"] = {k: v for k, v in merged.items() if v is not None}
        self._rv += 1
        current["metadata"]["resourceVersion"] = str(self._rv)
        self.ctl.pools.apply("MODIFIED", current)
        return current

    def next_check(self) -> str | None:
        return cast(str | None, (self.pool().get("status") or {}).get("nextSignatureCheckTime"))

    async def _fetch(self, ref: str, creds: bytes | None) -> SignatureDocuments:
        self.fetches.append(ref)
        if self.down:
            raise RegistryError("cannot connect to registry registry.example.com")
        digest = ref.rpartition("@")[2]
        keys = [self.key] if digest in self.signed else self.signed_by.get(digest, [])
        if not keys:
            return SignatureDocuments(manifest=None)
        manifest, payloads = sign(keys[0], digest, reference=REPO)
        return SignatureDocuments(manifest=manifest, payloads=payloads)

    def _read_secret(self, ref: Ref) -> WatchedSecret:
        if ref != SECRET_REF or self.secret is None:
            return WatchedSecret(pending=False)
        data = {"cosign.pub": base64.b64encode(self.pem(self.secret).encode()).decode()}
        meta = {
            "name": ref[1],
            "namespace": ref[0],
            "uid": "s",
            "resourceVersion": str(self._secret_rv),
        }
        return WatchedSecret(pending=False, secret={"metadata": meta, "data": data})

    def put_secret(self, key: ec.EllipticCurvePrivateKey | None) -> None:
        """Create, rotate (another key) or delete (None) the key Secret."""
        self.secret = key
        self._secret_rv += 1

    def pem(self, key: ec.EllipticCurvePrivateKey | None = None) -> str:
        return (
            (key or self.key)
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def pool(self) -> dict[str, Any]:
        pool = self.ctl.pools.get("p")
        assert pool is not None
        return copy.deepcopy(pool)

    def create(self, digest: str, verification: dict[str, Any] | None = None) -> None:
        self.ctl.bootc_nodes.replace([])
        self.ctl.nodes.replace([])
        self.ctl.pools.replace(
            [
                {
                    "apiVersion": "node.bootc.dev/v1alpha1",
                    "kind": "BootcNodePool",
                    "metadata": {"name": "p", "uid": "u", "generation": 1, "resourceVersion": "1"},
                    "spec": {
                        "nodeSelector": {"matchLabels": {"g": "p"}},
                        "image": {
                            "ref": f"{REPO}@{digest}",
                            "verification": verification or {"publicKeys": [self.pem()]},
                        },
                    },
                }
            ]
        )

    def point_at(self, digest: str, verification: dict[str, Any] | None = None) -> None:
        pool = self.pool()
        pool["spec"]["image"]["ref"] = f"{REPO}@{digest}"
        if verification is not None:
            pool["spec"]["image"]["verification"] = verification
        self._rv += 1
        pool["metadata"]["resourceVersion"] = str(self._rv)
        self.ctl.pools.apply("MODIFIED", pool)

    def desired(self) -> str | None:
        return self.ctl.ctx.policy(self.pool()).desired_image

    def problems(self) -> dict[str, str]:
        return self.sig.problems(self.pool())


async def test_verified_once_per_digest_then_cached() -> None:
    h = Harness()
    h.signed.add(A)
    h.create(A)
    assert h.desired() is None  # nothing verified yet: no target
    assert await h.sig.reconcile("p") is None
    assert h.desired() == f"{REPO}@{A}"
    assert h.events == [("Normal", "SignatureVerified")] and h.changes == ["p"]
    for _ in range(3):
        await h.sig.reconcile("p")
    assert h.fetches == [f"{REPO}@{A}"]  # the verdict is cached
    assert h.changes == ["p"] and len(h.events) == 1  # no news, no Event


async def test_an_unsigned_digest_is_refused_and_the_verified_one_kept() -> None:
    h = Harness()
    h.signed.add(A)
    h.create(A)
    await h.sig.reconcile("p")
    h.point_at(B)
    assert h.desired() == f"{REPO}@{A}"  # the digest verified with these keys stays
    recheck = await h.sig.reconcile("p")
    # issue 37 §16: looked at again in 2 s (not a minute), and the pool says when
    assert recheck == FIRST_RECHECK + RECHECK_MARGIN
    assert h.next_check() == "2026-01-01T00:00:02Z"
    assert h.problems() == {
        "SignatureVerificationFailed": f"{REPO}@{B} is not signed "
        f"(no sha256-{'b' * 64}.sig in the repository)"
    }
    assert h.events[-1] == ("Warning", "SignatureVerificationFailed")
    assert h.desired() == f"{REPO}@{A}"
    h.now += 1.0
    # within the recheck interval: from the cache, no Event; the time left
    assert await h.sig.reconcile("p") == FIRST_RECHECK - 1.0 + RECHECK_MARGIN
    assert len(h.fetches) == 2 and len(h.events) == 2
    # refused again: twice as long (4 s), then 8 s
    h.now = 2.0
    assert await h.sig.reconcile("p") == 4.0 + RECHECK_MARGIN
    assert h.next_check() == "2026-01-01T00:00:06Z" and len(h.fetches) == 3
    h.now = 6.0
    assert await h.sig.reconcile("p") == 8.0 + RECHECK_MARGIN
    # signed later: seen at the next check, and the pool no longer names one
    h.signed.add(B)
    h.now = 14.0
    assert await h.sig.reconcile("p") is None
    assert len(h.fetches) == 5 and h.problems() == {}
    assert h.desired() == f"{REPO}@{B}" and h.next_check() is None
    writes = [w["nextSignatureCheckTime"] for w in h.status_writes]
    assert writes == [
        "2026-01-01T00:00:02Z",
        "2026-01-01T00:00:06Z",
        "2026-01-01T00:00:14Z",
        None,
    ]  # written on change only


async def test_a_registry_outage_fails_closed_with_backoff() -> None:
    h = Harness()
    h.signed.update({A, C})
    h.create(A)
    await h.sig.reconcile("p")
    h.point_at(C)
    h.down = True
    delays = [await h.sig.reconcile("p")]
    assert delays == [5.0]
    assert h.next_check() == "2026-01-01T00:00:05Z"  # the retry, for kubectl bootc why
    reason, message = next(iter(h.problems().items()))
    assert reason == "SignatureRegistryError"
    assert message.startswith(f"cannot check the signature of {REPO}@{C}: cannot connect")
    assert h.desired() == f"{REPO}@{A}"
    await h.sig.reconcile("p")  # still backing off: no request
    assert len(h.fetches) == 2
    h.now += 5.0
    delays.append(await h.sig.reconcile("p"))
    assert delays == [5.0, 10.0] and len(h.fetches) == 3
    h.down = False
    h.now += 10.0
    await h.sig.reconcile("p")
    assert h.problems() == {} and h.desired() == f"{REPO}@{C}"


async def test_removing_the_verification_forgets_it() -> None:
    h = Harness()
    h.signed.add(A)
    h.create(A)
    await h.sig.reconcile("p")
    pool = h.pool()
    del pool["spec"]["image"]["verification"]
    pool["metadata"]["resourceVersion"] = "9"
    h.ctl.pools.apply("MODIFIED", pool)
    await h.sig.reconcile("p")
    assert h.sig.verified(h.pool()) is None and h.changes == ["p", "p"]
    assert h.desired() == f"{REPO}@{A}"  # no verification: the digest as is


# A verification holds only for the key set that made it (issue 37 item 1): the
# spec naming a key Secret does not change when the Secret's key does.


async def test_deleting_the_key_secret_withdraws_the_verified_digest() -> None:
    h = Harness()
    h.signed.add(A)
    h.put_secret(h.key)
    h.create(A, FROM_SECRET)
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"
    h.put_secret(None)
    # withdrawn at once, before the signature reconciler even looked: no other
    # reconciler can hand the digest to a node meanwhile
    assert h.desired() is None
    await h.sig.reconcile("p")
    assert h.problems() == {
        "SignatureVerificationFailed": "the key Secret bootc-operator/os-keys key cosign.pub: "
        "Secret bootc-operator/os-keys not found"
    }
    assert h.desired() is None and h.sig.verified(h.pool()) is None
    # the same key back: the digest verifies again (from the verdict cache) and is the target
    h.put_secret(h.key)
    await h.sig.reconcile("p")
    assert h.problems() == {} and h.desired() == f"{REPO}@{A}"


async def test_a_rotated_key_secret_does_not_keep_the_old_keys_digest() -> None:
    h = Harness()
    h.signed.add(A)
    h.put_secret(h.key)
    h.create(A, FROM_SECRET)
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"
    # the Secret now holds a new key; the pool moves to a digest that fails with it
    new = ec.generate_private_key(ec.SECP256R1())
    h.put_secret(new)
    assert h.desired() is None  # A was verified with the old key only
    h.point_at(B)
    await h.sig.reconcile("p")
    assert "SignatureVerificationFailed" in h.problems()
    assert h.desired() is None and h.sig.verified(h.pool()) is None
    # B signed with the new key: it verifies and is the target
    h.signed_by[B] = [new]
    h.now += h.sig.cache.recheck_after
    await h.sig.reconcile("p")
    assert h.problems() == {} and h.desired() == f"{REPO}@{B}"


async def test_a_rotated_key_secret_reverifies_the_same_digest() -> None:
    h = Harness()
    new = ec.generate_private_key(ec.SECP256R1())
    h.signed_by[A] = [h.key]
    h.put_secret(h.key)
    h.create(A, FROM_SECRET)
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"
    h.put_secret(new)  # A is not signed by the new key: withdrawn, refused
    assert h.desired() is None
    await h.sig.reconcile("p")
    assert "none made by a trusted key" in h.problems()["SignatureVerificationFailed"]
    assert h.desired() is None
    h.signed_by[A] = [new]  # re-signed with the new key: seen after the recheck interval
    h.now += h.sig.cache.recheck_after
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"


async def test_changing_an_inline_key_withdraws_the_verified_digest() -> None:
    h = Harness()
    h.signed.add(A)
    h.create(A)
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"
    other = ec.generate_private_key(ec.SECP256R1())
    h.point_at(A, {"publicKeys": [h.pem(other)]})
    assert h.desired() is None
    await h.sig.reconcile("p")
    assert "SignatureVerificationFailed" in h.problems() and h.desired() is None
    # the key back, then the same key from a Secret: the same key set (names do not
    # count), the verification holds
    h.point_at(A, {"publicKeys": [h.pem()]})
    await h.sig.reconcile("p")
    assert h.desired() == f"{REPO}@{A}"
    h.put_secret(h.key)
    h.point_at(A, FROM_SECRET)
    assert h.desired() == f"{REPO}@{A}"
