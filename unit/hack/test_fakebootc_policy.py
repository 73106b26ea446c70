"""The simulated host's containers policy (hack.fakebootc.policy) and how ``bootc switch`` /
``upgrade`` honour it, with and without ``--enforce-container-sigpolicy``: scopes, reject,
insecureAcceptAnything, and sigstoreSigned checked against cosign-format signatures
served by a registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hack.fakebootc import Host, make_host
from hack.fakebootc.imageref import parse_ref
from hack.fakebootc.policy import (
    INSECURE_DEFAULT,
    NO_POLICY,
    NOT_SIGNED,
    POLICY_FILES,
    PolicyRejected,
    check,
    default_is_insecure,
    docker_scopes,
    requirements_for,
)
from unit.hack.test_fakebootc import CONFIGS, FakeRegistry, registry_factory  # noqa: F401 - fixture
from unit.registry.test_signature import sign

D1 = "sha256:" + "1" * 64
REJECT = [{"type": "reject"}]
ACCEPT = [{"type": "insecureAcceptAnything"}]
FETCH = "Preparing import: Fetching manifest"
OPEN = f"{FETCH}: failed to invoke method OpenImage"
KEY_PATH = "/etc/pki/containers/release.pub"


def no_signatures() -> None:
    return None


def test_docker_scopes_most_specific_first() -> None:
    ref = parse_ref("registry.example.com:5000/org/os:v2")
    assert docker_scopes(ref) == [
        "registry.example.com:5000/org/os:v2",
        "registry.example.com:5000/org/os",
        "registry.example.com:5000/org",
        "registry.example.com:5000",
        "*.example.com",
        "*.com",
        "",
    ]
    pinned = parse_ref(f"quay.io/os@{D1}")
    assert docker_scopes(pinned)[:2] == [f"quay.io/os@{D1}", "quay.io/os"]


def test_the_first_scope_present_decides_else_the_default() -> None:
    policy = {
        "default": REJECT,
        "transports": {"docker": {"quay.io/org": ACCEPT, "quay.io/org/os:v1": REJECT}},
    }
    assert requirements_for(policy, parse_ref("quay.io/org/os:v2")) == ACCEPT
    assert requirements_for(policy, parse_ref("quay.io/org/os:v1")) == REJECT
    assert requirements_for(policy, parse_ref("quay.io/other/os:v1")) == REJECT


def test_reject_and_accept(tmp_path: Path) -> None:
    ref = parse_ref(f"quay.io/org/os@{D1}")
    check({"default": ACCEPT}, ref, no_signatures, root=tmp_path)
    check(None, ref, no_signatures, root=tmp_path)  # no policy file: nothing to refuse
    with pytest.raises(PolicyRejected) as info:
        check({"default": [*ACCEPT, *REJECT]}, ref, no_signatures, root=tmp_path)
    assert str(info.value) == f"Running image docker://quay.io/org/os@{D1} is rejected by policy."
    with pytest.raises(PolicyRejected, match="must not be empty"):
        check({"default": []}, ref, no_signatures, root=tmp_path)
    with pytest.raises(PolicyRejected, match="'signedBy' is not simulated"):
        check({"default": [{"type": "signedBy"}]}, ref, no_signatures, root=tmp_path)


@pytest.mark.parametrize(
    ("default", "insecure"),
    [(ACCEPT, True), (REJECT, False), ([*ACCEPT, *ACCEPT], False), (None, False)],
)
def test_only_a_lone_insecure_default_counts_as_insecure(
    default: list[dict[str, str]] | None, insecure: bool
) -> None:
    assert default_is_insecure({"default": default}) is insecure


# ---------------------------------------------------------------- through bootc


def fail_text(done: Any) -> str:
    assert done.returncode == 1, done.stdout
    return str(done.stderr.strip())


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return make_host(tmp_path / "node", booted=f"quay.io/org/os@{D1}")


def spec_signature(host: Host) -> Any:
    return host.status()["spec"]["image"].get("signature")


def test_without_the_flag_the_policy_still_decides(host: Host) -> None:
    target = "quay.io/org/os@sha256:" + "2" * 64
    host.set_policy({"default": REJECT})
    assert fail_text(host.switch(target)) == (
        f"error: Switching: Pulling: {OPEN}: Running image docker://{target} is rejected by policy."
    )
    assert host.pulls() == []
    host.set_policy({"default": ACCEPT})
    assert host.switch(target).returncode == 0
    assert spec_signature(host) is None


def test_the_flag_refuses_a_policy_that_accepts_anything(host: Host) -> None:
    target = "quay.io/org/os@sha256:" + "2" * 64
    flag = "--enforce-container-sigpolicy"
    assert fail_text(host.bootc("switch", flag, target)) == (
        f"error: Switching: Pulling: {FETCH}: {NO_POLICY}"
    )
    host.set_policy({"default": ACCEPT})
    assert fail_text(host.bootc("switch", flag, target)) == (
        f"error: Switching: Pulling: {FETCH}: {INSECURE_DEFAULT}"
    )
    host.set_policy({"default": REJECT, "transports": {"docker": {"quay.io/org": ACCEPT}}})
    assert host.bootc("switch", flag, target).returncode == 0
    assert spec_signature(host) == "containerPolicy"
    # the same image with the flag is unchanged; without it, the spec differs (bootc
    # compares the whole image reference, signature included)
    assert host.bootc("switch", flag, target).stdout.strip() == "Image specification is unchanged."
    assert "Queued for next boot" in host.switch(target).stdout
    assert spec_signature(host) is None


def test_upgrade_enforces_what_the_switch_asked_for(host: Host) -> None:
    host.set_policy({"default": REJECT, "transports": {"docker": {"quay.io/org": ACCEPT}}})
    target = "quay.io/org/os@sha256:" + "2" * 64
    assert host.bootc("switch", "--enforce-container-sigpolicy", target).returncode == 0
    host.set_policy({"default": ACCEPT})
    assert fail_text(host.bootc("upgrade", "--check")) == (
        f"error: Upgrading: {FETCH}: {INSECURE_DEFAULT}"
    )


# ---------------------------------------------------------------- sigstoreSigned


@pytest.fixture(scope="module")
def release() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def attach(
    reg: FakeRegistry, repo: str, at: str, manifest: bytes, payloads: dict[str, bytes]
) -> None:
    """Store a cosign signature manifest for digest ``at`` as cosign does: ``sha256-<hex>.sig``."""
    reg.manifests[(repo, at.replace(":", "-") + ".sig")] = (
        "application/vnd.oci.image.manifest.v1+json",
        manifest,
    )
    for data in payloads.values():
        reg.add_blob(data)


SignedSetup = Callable[..., tuple[Host, str]]


@pytest.fixture
def signed_setup(
    tmp_path: Path,
    registry_factory: Callable[..., FakeRegistry],  # noqa: F811
    release: ec.EllipticCurvePrivateKey,
) -> SignedSetup:
    def setup(
        signer: ec.EllipticCurvePrivateKey | None,
        *,
        for_digest: str | None = None,
        unattached: bool = False,
    ) -> tuple[Host, str]:
        reg = registry_factory()
        index, _ = reg.add_image("org/os", "v2", {"amd64": CONFIGS["amd64"]})
        image = f"{reg.host}/org/os"
        if signer is not None:
            # for_digest: a signature made for another image, copied next to this one
            manifest, payloads = sign(signer, for_digest or index, reference=image)
            attach(reg, "org/os", index, manifest, payloads)
        host = make_host(tmp_path / "node", booted=f"{image}@{D1}")
        host.set_policy(
            {
                "default": REJECT,
                "transports": {
                    "docker": {
                        image: [
                            {
                                "type": "sigstoreSigned",
                                "keyPath": KEY_PATH,
                                "signedIdentity": {"type": "matchRepository"},
                            }
                        ]
                    }
                },
            },
            {KEY_PATH: pem(release)},
            attachments=[] if unattached else [image],
        )
        return host, f"{image}@{index}"

    return setup


def test_an_image_signed_by_the_policys_key_switches(
    signed_setup: SignedSetup, release: ec.EllipticCurvePrivateKey
) -> None:
    host, target = signed_setup(release)
    done = host.bootc("switch", "--enforce-container-sigpolicy", target)
    assert done.returncode == 0, done.stderr
    assert host.status()["status"]["staged"]["image"]["image"]["image"] == target


def test_an_unsigned_image_is_refused(signed_setup: SignedSetup) -> None:
    host, target = signed_setup(None)
    assert fail_text(host.bootc("switch", "--enforce-container-sigpolicy", target)) == (
        f"error: Switching: Pulling: {OPEN}: {NOT_SIGNED}"
    )
    assert host.status()["status"]["staged"] is None


def test_signatures_are_looked_for_only_where_registries_d_says_so(
    signed_setup: SignedSetup, release: ec.EllipticCurvePrivateKey
) -> None:
    """containers/image reads cosign's ``sha256-<hex>.sig`` only for scopes with
    ``use-sigstore-attachments`` (as the real host's skopeo does): a signed image is
    unsigned elsewhere."""
    host, target = signed_setup(release, unattached=True)
    assert fail_text(host.switch(target)) == f"error: Switching: Pulling: {OPEN}: {NOT_SIGNED}"
    policy = json.loads((host.root / POLICY_FILES[0]).read_text())
    host.set_policy(policy, {}, attachments=[target.split("/")[0]])
    assert host.switch(target).returncode == 0


def test_a_signature_by_another_key_is_refused(signed_setup: SignedSetup) -> None:
    host, target = signed_setup(ec.generate_private_key(ec.SECP256R1()))
    text = fail_text(host.switch(target))
    assert text.startswith(f"error: Switching: Pulling: {OPEN}: cryptographic signature ")
    assert f"none made by a trusted key ({KEY_PATH})" in text


def test_a_signature_for_another_digest_is_refused(
    signed_setup: SignedSetup, release: ec.EllipticCurvePrivateKey
) -> None:
    host, target = signed_setup(release, for_digest="sha256:" + "9" * 64)
    text = fail_text(host.switch(target))
    assert text.startswith(f"error: Switching: Pulling: {OPEN}: Signature for digest does not")


def test_fake_host_policy_command(host: Host, tmp_path: Path, capsys: Any) -> None:
    """``hack/fake-host policy ROOT FILE [--key HOSTPATH=FILE]`` and ``--clear``, as
    docs/simulation.md shows them."""
    from hack.fakebootc.cli import main  # noqa: PLC0415

    policy_file = tmp_path / "policy.json"
    policy_file.write_text('{"default": [{"type": "reject"}]}')
    key = tmp_path / "cosign.pub"
    key.write_text("PEM")
    root = str(host.root)
    assert main(["policy", root, str(policy_file), "--key", f"{KEY_PATH}={key}"]) == 0
    assert (host.root / "etc/containers/policy.json").read_text().count('"reject"') == 1
    assert (host.root / KEY_PATH.lstrip("/")).read_text() == "PEM"
    assert "rejected by policy" in fail_text(host.switch("quay.io/org/os@sha256:" + "2" * 64))
    assert main(["policy", root, "--clear"]) == 0
    assert not (host.root / "etc/containers/policy.json").exists()
    assert main(["policy", root]) == 1
    assert "give a policy FILE or --clear" in capsys.readouterr().err
    assert main(["policy", root, str(policy_file), "--key", "relative=x"]) == 1
