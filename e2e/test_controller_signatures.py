"""``spec.image.verification`` end to end: the controller rolls out cosign-signed digests only.

Real parts: the session's kube-apiserver, Debian's docker-registry on loopback, images
signed by the real cosign (``hack.testenv.cosign``), the in-process controller; the
nodes are the simulated fleet (the controller's side is what is tested: which
``desiredImage`` each BootcNode is given).

One pool goes through: a signed digest rolls out; an unsigned one, one carrying a
copy of another image's signature and one signed by an untrusted key are refused
(Degraded/SignatureVerificationFailed, a Warning Event, every node left on the
signed digest); a key Secret that is missing is reported, and once it holds the
other key, that image verifies and rolls out; with the registry
down, a new digest is refused (SignatureRegistryError: fail closed) until it is back.
A verification holds only for the keys that made it: once its key Secret is deleted,
or rotated to another key while the tag moves to a digest that key did not sign, the
digest verified before is no target any more (a node joining meanwhile is given
nothing) until a digest verifies with the keys trusted now; and no node stays cordoned
for it: a holder still draining gives its slot back at once (a TargetWithdrawn Warning,
as kubectl shows it), one already rebooting once it is back.
A key sigstore would refuse (RSA of 1024 bits) is named on the pool, as kubectl
shows it. A digest refused while unsigned is checked again within seconds, and
``kubectl bootc why`` says when; signed later, it verifies. The simulation's key
(``hack/sim image push --sign``) is checked against the same verifier.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import parse_time
from bootc_operator.controller import Controller
from bootc_operator.informers import unwrap
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    EVENTS,
    NODES,
    SECRETS,
    ApiError,
    list_objects,
)
from bootc_operator.kube.rest import (
    create_object,
    delete_object,
    get_object,
    patch_object,
    request_json,
)
from bootc_operator.registry import RegistryClient, make_target
from bootc_operator.registry.signature import load_public_keys, signature_tag
from e2e.controllerenv import (
    create_blocking_pdb,
    create_pod,
    create_pool,
    delete_quietly,
    get_pool,
)
from e2e.helpers import condition, ensure_namespace, push, unique_name, wait_for
from e2e.test_kubectl_bootc import kubectl_bootc
from hack.simlib import signing
from hack.testenv import ControlPlane
from hack.testenv.controller import running_controller
from hack.testenv.cosign import Cosign, KeyPair, resolve_cosign
from hack.testenv.fleet import Fleet, watch_bootc_nodes
from hack.testenv.monitor import SafetyMonitor
from hack.testenv.pools import pool_body
from hack.testenv.push import Blob, push_manifest
from hack.testenv.registry import Registry

NS = "bootc-operator"


@pytest.fixture(scope="module")
def cosign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cosign]:
    yield Cosign(resolve_cosign(), tmp_path_factory.mktemp("cosign"))


def get_cached_pool(ctl: Controller, name: str) -> dict[str, Any]:
    pool = ctl.ctx.pool(name)
    assert pool is not None, name
    return pool


async def desired_images(api: ApiClient, nodes: list[str]) -> set[str]:
    return {(await get_object(api, BOOTC_NODES, n))["spec"]["desiredImage"] for n in nodes}


async def warning_reasons(api: ApiClient, pool: str) -> dict[str, list[str]]:
    """The pool's Warning Events: reason -> notes."""
    items, _ = await list_objects(api, EVENTS, "default", field_selector=f"regarding.name={pool}")
    out: dict[str, list[str]] = {}
    for event in items:
        if event.get("type") == "Warning":
            out.setdefault(event["reason"], []).append(event.get("note", ""))
    return out


def degraded(api: ApiClient, pool: str, reason: str, fragment: str) -> Callable[[], Any]:
    async def check() -> bool:
        p = await get_pool(api, pool)
        deg = condition(p, "Degraded")
        return deg.get("reason") == reason and fragment in deg.get("message", "")

    return check


def rolled_out(api: ApiClient, pool: str, digest: str, count: int) -> Callable[[], Any]:
    async def check() -> bool:
        p = await get_pool(api, pool)
        s = p.get("status") or {}
        return (
            condition(p, "UpToDate").get("status") == "True"
            and s.get("deployedDigest") == digest
            and s.get("updatedCount") == count
        )

    return check


async def test_only_signed_digests_roll_out(
    api: ApiClient, fleet: Fleet, make_registry: Callable[..., Registry], cosign: Cosign
) -> None:
    registry = make_registry()
    release: KeyPair = cosign.generate_key_pair("release")
    other: KeyPair = cosign.generate_key_pair("other")
    repo = unique_name("os")

    async def pushed(content: str, key: KeyPair | None) -> str:
        digest = await push(registry, registry.ref(repo, content), content)
        if key is not None:
            cosign.sign(registry, registry.ref(repo, digest=digest), key)
        return digest

    base = await pushed("base", None)
    signed = await pushed("signed", release)
    unsigned = await pushed("unsigned", None)
    by_other = await pushed("other", other)

    group = unique_name("sig")
    nodes = [f"{group}-n{i}" for i in range(2)]
    for n in nodes:
        await fleet.add_node(n, registry.ref(repo, digest=base), {"group": group})
    await ensure_namespace(api, NS)
    key_secret = f"{group}-keys"
    pool = pool_body(group, {"group": group}, registry.ref(repo, digest=signed), 2)
    pool["spec"]["image"]["verification"] = {"publicKeys": [release.public]}

    async def set_ref(digest: str, tag: str | None = None) -> None:
        """Point the pool at ``digest``, or at ``tag`` (which names it)."""
        ref = registry.ref(repo, tag) if tag else registry.ref(repo, digest=digest)
        await patch_object(api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": ref}}})

    async def refused(
        fragment: str, what: str, reason: str = "SignatureVerificationFailed", *, kept: bool = True
    ) -> None:
        """The pool says why with ``reason``; every node is still given ``keep``; ``kept``:
        and counts as updated (``keep``, verified with these keys, stays the target)."""
        await wait_for(degraded(api, group, reason, fragment), 30, what)
        assert await desired_images(api, nodes) == {registry.ref(repo, digest=keep)}
        if kept:
            assert (await get_pool(api, group))["status"]["updatedCount"] == 2

    async with running_controller(api, registry=registry.options()):
        await create_pool(api, pool)
        # signed with the trusted key: rolls out
        await wait_for(rolled_out(api, group, signed, 2), 60, "the signed digest rolled out")
        assert await desired_images(api, nodes) == {registry.ref(repo, digest=signed)}

        # unsigned: refused, named, a Warning Event; every node stays on the signed one
        keep = signed
        await set_ref(unsigned, tag="unsigned")  # by its tag: verified once resolved
        await refused("is not signed", "the unsigned digest refused")
        up = condition(await get_pool(api, group), "UpToDate")
        assert (up["status"], up["reason"]) == ("False", "SignatureVerificationFailed"), up
        assert (await get_pool(api, group))["status"]["targetDigest"] == unsigned

        async def refusal_notes() -> list[str]:
            return (await warning_reasons(api, group)).get("SignatureVerificationFailed", [])

        notes = await wait_for(refusal_notes, 30, "a SignatureVerificationFailed Warning Event")
        assert any(f"@{unsigned} is not signed" in n for n in notes), notes
        assert await desired_images(api, nodes) == {registry.ref(repo, digest=signed)}

        # a valid signature of the signed image copied onto another: refused too
        copied = await pushed("copied", None)
        async with RegistryClient(registry.options()) as client:
            original = await client.signature(registry.ref(repo, digest=signed))
            assert original.manifest is not None
            sig = Blob("application/vnd.oci.image.manifest.v1+json", original.manifest)
            target = make_target(registry.ref(repo))
            await push_manifest(client, target, signature_tag(copied), sig)
        await set_ref(copied)
        await refused(f"is for another image: its payload names {signed}", "the copy refused")

        # signed, but not by a trusted key: refused too
        await set_ref(by_other)
        await refused("none made by a trusted key", "the untrusted signer refused")

        # the key from a Secret that does not exist yet: named
        verification = {"publicKeySecretRefs": [{"name": key_secret, "namespace": NS}]}
        await patch_object(
            api,
            BOOTC_NODE_POOLS,
            group,
            {"spec": {"image": {"verification": verification}}},
        )
        # (other keys: nothing is verified with them yet, no target)
        await refused(
            f"Secret {NS}/{key_secret} not found", "the missing key Secret reported", kept=False
        )
        # the Secret appears holding the other key: that image now verifies, rolls out
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": key_secret, "namespace": NS},
            "data": {"cosign.pub": base64.b64encode(other.public.encode()).decode()},
        }
        await create_object(api, SECRETS, secret, NS)
        await wait_for(rolled_out(api, group, by_other, 2), 60, "the key Secret's image rolled out")
        assert condition(await get_pool(api, group), "Degraded").get("reason") == "Healthy"

        # the registry down while a new digest waits: fail closed, then it proceeds
        later = await pushed("later", other)
        registry.stop()
        try:
            keep = by_other
            await set_ref(later)
            await refused(
                "cannot check the signature", "the outage reported", "SignatureRegistryError"
            )
        finally:
            registry.start()
        await wait_for(rolled_out(api, group, later, 2), 90, "verified once the registry is back")

    # A new controller (a failover: its verdict cache is empty) verifies the deployed
    # digest again; meanwhile the conditions do not move (no Pending, no flap).
    settled = await get_pool(api, group)
    async with running_controller(api, registry=registry.options()) as ctl:
        status = ctl.queues["status"]

        def reverified_and_settled() -> bool:
            return (
                ctl.signatures.verified(get_cached_pool(ctl, group)) is not None
                and not status.is_dirty(group)
                and not status.is_processing(group)
            )

        await wait_for(reverified_and_settled, 30, "the new controller verified it again")
        now = await get_pool(api, group)
        for ctype in ("UpToDate", "Degraded"):
            assert condition(now, ctype) == condition(settled, ctype), ctype
    await delete_quietly(api, BOOTC_NODE_POOLS, group)
    with contextlib.suppress(ApiError):
        await delete_object(api, SECRETS, key_secret, NS)


async def test_a_revoked_or_rotated_key_withdraws_the_digest_it_verified(
    api: ApiClient, fleet: Fleet, make_registry: Callable[..., Registry], cosign: Cosign
) -> None:
    """Issue 37 item 1: ``publicKeySecretRefs`` names the Secret, not its key; the
    verification of a digest must end with the key that made it."""
    registry = make_registry()
    release: KeyPair = cosign.generate_key_pair("revoked")
    rotated: KeyPair = cosign.generate_key_pair("rotated")
    repo = unique_name("os")

    async def pushed(tag: str, key: KeyPair | None) -> str:
        digest = await push(registry, registry.ref(repo, tag), tag)
        if key is not None:
            cosign.sign(registry, registry.ref(repo, digest=digest), key)
        return digest

    base = await pushed("base", None)
    first = await pushed("v1", release)
    old_only = await pushed("v2", release)  # signed by the old key only
    fixed = await pushed("v3", rotated)

    group = unique_name("revoke")
    nodes = [f"{group}-n{i}" for i in range(2)]
    for n in nodes:
        await fleet.add_node(n, registry.ref(repo, digest=base), {"group": group})
    await ensure_namespace(api, NS)
    key_secret = f"{group}-keys"

    async def put_key(key: KeyPair) -> None:
        data = {"cosign.pub": base64.b64encode(key.public.encode()).decode()}
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": key_secret, "namespace": NS},
            "data": data,
        }
        await create_object(api, SECRETS, body, NS)

    # every desiredImage each member's BootcNode ever carried, as a watch saw them
    given: dict[str, set[str]] = {}

    def record(obj: Any) -> None:
        bn = unwrap(obj)
        name = (bn.get("metadata") or {}).get("name", "")
        if name.startswith(f"{group}-"):
            given.setdefault(name, set()).add((bn.get("spec") or {}).get("desiredImage", ""))

    recorder = watch_bootc_nodes(api, record)
    recorder.start()
    await recorder.wait_for_sync()
    pool = pool_body(group, {"group": group}, registry.ref(repo, "v1"), 3)
    pool["spec"]["image"]["verification"] = {
        "publicKeySecretRefs": [{"name": key_secret, "namespace": NS}]
    }
    try:
        await put_key(release)
        async with running_controller(api, registry=registry.options()):
            await create_pool(api, pool)
            await wait_for(rolled_out(api, group, first, 2), 60, "v1 rolled out")

            # the key Secret deleted: v1's verification no longer holds
            await delete_object(api, SECRETS, key_secret, NS)
            await wait_for(
                degraded(api, group, "SignatureVerificationFailed", "not found"),
                30,
                "the deleted key Secret reported",
            )
            joined_revoked = f"{group}-n2"
            await fleet.add_node(joined_revoked, registry.ref(repo, digest=base), {"group": group})

            # a new key in the Secret, the tag moved to a digest only the old key signed
            await put_key(rotated)
            await patch_object(
                api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": registry.ref(repo, "v2")}}}
            )
            await wait_for(
                degraded(
                    api,
                    group,
                    "SignatureVerificationFailed",
                    f"@{old_only} has 1 signature, none made by a trusted key",
                ),
                30,
                "the old key's digest refused with the new key",
            )
            joined_rotated = f"{group}-n3"
            await fleet.add_node(joined_rotated, registry.ref(repo, digest=base), {"group": group})

            # a digest signed with the new key: verifies, rolls out to all four
            await patch_object(
                api, BOOTC_NODE_POOLS, group, {"spec": {"image": {"ref": registry.ref(repo, "v3")}}}
            )
            await wait_for(rolled_out(api, group, fixed, 4), 90, "v3 rolled out to all four")
        at = registry.ref(repo, digest=first)
        for n in nodes:
            assert given[n] == {at, registry.ref(repo, digest=fixed)}, (n, given[n])
        # neither node that joined while v1's key was gone was ever given v1
        for n in (joined_revoked, joined_rotated):
            assert given[n] == {registry.ref(repo, digest=fixed)}, (n, given[n])
    finally:
        await recorder.stop()
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        with contextlib.suppress(ApiError):
            await delete_object(api, SECRETS, key_secret, NS)


async def test_a_withdrawn_target_gives_back_the_slots_not_yet_used_for_a_reboot(
    api: ApiClient,
    fleet: Fleet,
    make_registry: Callable[..., Registry],
    cosign: Cosign,
    control_plane: ControlPlane,
) -> None:
    """Issue 37 follow-up: once its key Secret is deleted, the pool's target is withdrawn
    and no node is told to reboot; no node may stay cordoned for that reboot. A holder
    still draining gives its slot back at once (uncordoned, a TargetWithdrawn Warning on
    the node, the pool's UpToDate says so, as kubectl shows them); one already rebooting
    keeps its slot until it is back, then gives it back too. The key back, the same
    digest verifies again and the rollout completes."""
    registry = make_registry()
    key: KeyPair = cosign.generate_key_pair("withdrawn")
    repo = unique_name("os")
    base = await push(registry, registry.ref(repo, "base"), "base")
    signed = await push(registry, registry.ref(repo, "v1"), "v1")
    cosign.sign(registry, registry.ref(repo, digest=signed), key)
    group = unique_name("withdraw")
    nodes = draining, rebooting, waiting = [f"{group}-n{i}" for i in range(3)]
    for n in nodes:
        await fleet.add_node(n, registry.ref(repo, digest=base), {"group": group})
    fleet.never_ready.add(rebooting)  # its reboot does not end until the test says so
    await create_pod(api, f"{group}-pod", draining, {"app": group})
    await create_blocking_pdb(api, group, {"app": group})  # its drain does not end
    await ensure_namespace(api, NS)
    key_secret = f"{group}-keys"
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": key_secret, "namespace": NS},
        "data": {"cosign.pub": base64.b64encode(key.public.encode()).decode()},
    }
    await create_object(api, SECRETS, secret, NS)
    # paused until all three are staged, then the two slots go by name: n0 and n1
    pool = pool_body(
        group,
        {"group": group},
        registry.ref(repo, digest=signed),
        2,
        paused=True,
        order={"by": "Name"},
    )
    pool["spec"]["image"]["verification"] = {
        "publicKeySecretRefs": [{"name": key_secret, "namespace": NS}]
    }
    told: set[str] = set()  # members ever given desiredImageState Booted

    def record(obj: Any) -> None:
        bn = unwrap(obj)
        if (bn.get("spec") or {}).get("desiredImageState") == "Booted":
            told.add(bn["metadata"]["name"])

    recorder = watch_bootc_nodes(api, record)
    recorder.start()
    await recorder.wait_for_sync()

    def kubectl(*args: str) -> str:
        env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
        res = subprocess.run(
            [str(control_plane.bin_dir / "kubectl"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        return res.stdout

    async def marks(name: str) -> dict[str, str]:
        bn = await get_object(api, BOOTC_NODES, name)
        return dict(bn["metadata"].get("annotations") or {})

    async def cordoned(name: str) -> bool:
        return bool((await get_object(api, NODES, name))["spec"].get("unschedulable"))

    async def holds(name: str) -> bool:
        return c.IN_REBOOT_SLOT_ANNOTATION in await marks(name)

    try:
        async with (
            SafetyMonitor(api, group, 2) as monitor,
            running_controller(api, registry=registry.options()),
        ):
            await create_pool(api, pool)

            async def all_staged() -> bool:
                p = await get_pool(api, group)
                return "3 staged" in condition(p, "UpToDate").get("message", "")

            await wait_for(all_staged, 90, "all three staged while paused")
            await patch_object(
                api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"paused": False}}}
            )

            async def both_busy() -> bool:
                slot = await holds(draining) and await cordoned(draining)
                return slot and c.REBOOT_REQUESTED_ANNOTATION in await marks(rebooting)

            await wait_for(both_busy, 90, f"{draining} draining, {rebooting} rebooting")

            await delete_object(api, SECRETS, key_secret, NS)

            async def given_back() -> bool:
                return not await holds(draining) and not await cordoned(draining)

            await wait_for(given_back, 60, f"{draining} uncordoned, its slot given back")
            assert await holds(rebooting), "a node rebooting keeps its slot until it is back"
            assert not await holds(waiting) and not await cordoned(waiting)
            bn = await get_object(api, BOOTC_NODES, draining)
            assert bn["spec"]["desiredImageState"] == "Staged"
            event = await asyncio.to_thread(
                kubectl,
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                f"involvedObject.name={draining},reason=TargetWithdrawn",
                "-o",
                "jsonpath={.items[0].type}|{.items[0].message}",
            )
            assert event.startswith("Warning|"), event
            assert f"{draining}: the pool's target {signed} was withdrawn before" in event, event
            assert f"Secret {NS}/{key_secret} not found" in event, event
            assert "drain cancelled, uncordoned, reboot slot released" in event, event
            said = await asyncio.to_thread(
                kubectl,
                "get",
                "bnp",
                group,
                "-o",
                'jsonpath={.status.conditions[?(@.type=="UpToDate")].message}',
            )
            assert "nodes draining for a reboot slot are uncordoned and give it back" in said

            # the node that was rebooting comes back, on the digest it was told: released
            fleet.never_ready.discard(rebooting)
            fleet.poke(rebooting)

            async def back() -> bool:
                return not await holds(rebooting) and not await cordoned(rebooting)

            await wait_for(back, 60, f"{rebooting} back and its slot given back")
            assert told == {rebooting}, told
            assert {n for n, _ in fleet.reboots} == {rebooting}

            # the key back and the PDB gone: the digest verifies again, the rollout completes
            await request_json(
                api, "DELETE", f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{group}"
            )
            await create_object(api, SECRETS, secret, NS)
            await wait_for(rolled_out(api, group, signed, 3), 120, "v1 rolled out to all three")
        assert not monitor.summary.violations, monitor.summary.violations
    finally:
        await recorder.stop()
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        with contextlib.suppress(ApiError):
            await delete_object(api, SECRETS, key_secret, NS)


async def test_the_simulations_key_signs_what_it_pushes(registry: Registry, tmp_path: Path) -> None:
    """``hack/sim image push --sign`` and ``hack/sim pool --verify`` (``hack.simlib.signing``):
    one key per state directory, made once, whose signatures the pool's key verifies."""
    name = unique_name("sim-signed")
    digest = await push(registry, registry.ref(name, "v1"), "signed by the sim")
    pinned = registry.ref(name, digest=digest)
    signing.sign(tmp_path, pinned)
    (pem,) = signing.verification(tmp_path)["publicKeys"]
    assert signing.public_key(tmp_path) == pem  # the same key pair, found again
    async with RegistryClient(registry.options()) as client:
        docs = await client.signature(pinned)
    keys = load_public_keys(pem, "verification.publicKeys[0]")
    assert docs.verify(registry.ref(name), digest, keys).verified


async def test_a_key_sigstore_refuses_is_named_on_the_pool(
    api: ApiClient, control_plane: ControlPlane
) -> None:
    """Issue 37 §11: a trusted key sigstore would refuse (RSA of 1024 bits) is not
    trusted: the pool is Degraded/SignatureVerificationFailed naming the key and why,
    as ``kubectl wait`` and ``kubectl get`` show it."""
    group = unique_name("weak-key")
    numbers = rsa.RSAPublicNumbers(65537, (1 << 1023) | 0xF1)
    weak = (
        numbers.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    ref = f"registry.example.com/os@sha256:{'1' * 64}"
    body = pool_body(group, {"group": group}, ref, 1)
    body["spec"]["image"]["verification"] = {"publicKeys": [weak]}
    kubectl = str(control_plane.bin_dir / "kubectl")
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    try:
        async with running_controller(api):
            await create_pool(api, body)
            waited = await asyncio.to_thread(
                run, "wait", "--for=condition=Degraded", f"bnp/{group}", "--timeout=90s"
            )
            assert waited.returncode == 0, waited.stderr
            shown = await asyncio.to_thread(
                run,
                "get",
                "bnp",
                group,
                "-o",
                'jsonpath={.status.conditions[?(@.type=="Degraded")].reason}: '
                '{.status.conditions[?(@.type=="Degraded")].message}',
            )
            assert shown.returncode == 0, shown.stderr
            assert shown.stdout == (
                "SignatureVerificationFailed: trusted key unusable: verification.publicKeys[0] "
                "is an RSA key of 1024 bits; sigstore accepts 2048, 3072 or 4096 bits only"
            ), shown.stdout
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_signature_pushed_after_its_refusal_is_seen_and_why_says_when(
    api: ApiClient,
    make_registry: Callable[..., Registry],
    cosign: Cosign,
    control_plane: ControlPlane,
) -> None:
    """Issue 37 §16: a refused digest is checked again within seconds (backoff from
    2 s), and ``kubectl bootc why POOL`` says when, as the pool's
    ``status.nextSignatureCheckTime`` does; signed later, it verifies."""
    registry = make_registry()
    late: KeyPair = cosign.generate_key_pair("late")
    repo = unique_name("os")
    digest = await push(registry, registry.ref(repo, "v1"), "signed late")
    group = unique_name("late-sig")
    pool = pool_body(group, {"group": group}, registry.ref(repo, digest=digest), 1)
    pool["spec"]["image"]["verification"] = {"publicKeys": [late.public]}
    try:
        async with running_controller(api, registry=registry.options()):
            await create_pool(api, pool)
            refusal = "is not signed"
            await wait_for(
                degraded(api, group, "SignatureVerificationFailed", refusal), 60, "refused"
            )

            async def why_says_when() -> str | None:
                status = (await get_pool(api, group)).get("status") or {}
                due = parse_time(status.get("nextSignatureCheckTime"))
                if due is None:
                    return None
                res = await asyncio.to_thread(kubectl_bootc, control_plane, "why", group)
                assert res.returncode == 0, res.stderr
                when = f"checked again at {due:%H:%M:%S} UTC"
                return res.stdout if when in res.stdout else None

            text = await wait_for(why_says_when, 30, "kubectl bootc why naming the next check")
            assert text is not None
            assert f"It waits for a signature that verifies: {registry.ref(repo)}@" in text, text
            assert refusal in text, text
            cosign.sign(registry, registry.ref(repo, digest=digest), late)

            async def verified() -> bool:
                p = await get_pool(api, group)
                return condition(p, "Degraded").get("reason") == "Healthy" and (
                    "nextSignatureCheckTime" not in (p.get("status") or {})
                )

            await wait_for(verified, 90, "the digest signed later verified")
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
