"""The daemon's ``--enforce-container-sigpolicy`` opt-in end to end: daemons on hosts whose
``/etc/containers/policy.json`` decides what bootc may pull, against the real API server;
signatures made by the real cosign in the real registry. Each test runs on both hosts
(``e2e.hostkit``): the fake bootc's policy evaluation, and the real bootc's (containers/image's
policy engine in the host's ``skopeo``, ``hack/policygate``).

The host's policy decides with or without the opt-in (containers/image evaluates it for
every pull); the opt-in makes bootc also refuse a policy that accepts anything, and keeps
the policy enforced for later upgrades (``spec.image.signature: containerPolicy``). A
refusal is ``Degraded=True/ContainerPolicyRejected`` with bootc's text, nothing staged or
pulled, and is retried on the backoff: a fixed policy is picked up without a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from e2e.daemonenv import (
    Daemons,
    create_bootc_node,
    degraded_message,
    delete_bootc_node,
    get_bootc_node,
    idle_reason,
    is_degraded,
    set_spec,
    settled,
    slot_image,
)
from e2e.helpers import condition, unique_name, wait_for
from e2e.hostkit import AnyHost, Kit
from hack.testenv.cosign import Cosign, resolve_cosign
from hack.testenv.registry import Registry

WAIT = 60.0
FLAG = "--enforce-container-sigpolicy"
KEY_PATH = "/etc/pki/containers/release.pub"
REJECT = [{"type": "reject"}]
ACCEPT = [{"type": "insecureAcceptAnything"}]


async def new_host(kit: Kit, policy: dict[str, Any] | None) -> AnyHost:
    host = await kit.new_host()
    host.set_policy(policy)
    return host


async def wait_bn(api: ApiClient, name: str, predicate: Any, what: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await get_bootc_node(api, name)
        return obj if predicate(obj) else None

    result: dict[str, Any] | None = await wait_for(check, WAIT, what, interval=0.2)
    assert result is not None
    return result


def refused(obj: dict[str, Any]) -> bool:
    return (
        settled(obj)
        and is_degraded(obj)
        and condition(obj, c.COND_DEGRADED)["reason"] == c.REASON_CONTAINER_POLICY_REJECTED
    )


def staged_and_healthy(obj: dict[str, Any]) -> bool:
    return settled(obj) and idle_reason(obj) == c.REASON_STAGED and not is_degraded(obj)


def spec_signature(host: AnyHost) -> Any:
    return host.status()["spec"]["image"].get("signature")


async def test_the_opt_in_refuses_a_policy_that_accepts_anything_until_it_is_fixed(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """Default policy ``insecureAcceptAnything``: without the opt-in the node switches (as
    bootc does); with it, bootc refuses, the node says why and stages nothing; once the
    host's policy requires something the retry stages it, enforced from then on."""
    D2 = kit.image(2)
    plain_host = await new_host(kit, {"default": ACCEPT})
    plain = unique_name("node")
    try:
        await create_bootc_node(api, plain, D2)
        daemons.start(plain, plain_host)
        await wait_bn(api, plain, staged_and_healthy, "staged without the opt-in")
        assert spec_signature(plain_host) is None
    finally:
        await delete_bootc_node(api, plain)

    host = await new_host(kit, {"default": ACCEPT})
    await create_bootc_node(api, node, D2)
    daemons.start(node, host, extra=(FLAG,))
    obj = await wait_bn(api, node, refused, "ContainerPolicyRejected with the opt-in")
    message = degraded_message(obj)
    assert message.startswith(f"the host's containers policy refused {D2}: bootc switch")
    assert "containers-policy.json specifies a default of `insecureAcceptAnything`" in message
    assert idle_reason(obj) == c.REASON_IDLE
    assert slot_image(obj, "staged") is None and host.pulls() == []
    assert host.switch_calls()[0] == ["switch", FLAG, "--", D2]

    host.set_policy({"default": REJECT, "transports": {"docker": {kit.repo: ACCEPT}}})
    obj = await wait_bn(api, node, staged_and_healthy, "staged once the policy is fixed")
    assert slot_image(obj, "staged") == D2
    assert spec_signature(host) == "containerPolicy"


async def test_only_an_image_signed_by_the_policys_key_is_staged(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str, tmp_path: Path, registry: Registry
) -> None:
    """A ``sigstoreSigned`` policy for the registry's repository, with the opt-in: the
    unsigned image is refused ("A signature was required, but no signature exists"), the
    image cosign signed with the policy's key is staged. containers/image finds cosign's
    signatures only where ``registries.d`` says ``use-sigstore-attachments`` (the real
    host's skopeo is ``hack/policygate``: Debian's skopeo 1.9.3 behind the policy check
    that skopeo's image proxy has had since 1.13)."""
    cosign = Cosign(resolve_cosign(), tmp_path / "cosign")
    key = cosign.generate_key_pair("release")
    repo = unique_name("os")
    unsigned = await kit.push_image(repo, "unsigned", labels={})
    signed = await kit.push_image(repo, "signed", labels={})
    cosign.sign(registry, signed, key)

    policy = {
        "default": REJECT,
        "transports": {
            "docker": {
                registry.ref(repo): [
                    {
                        "type": "sigstoreSigned",
                        "keyPath": KEY_PATH,
                        "signedIdentity": {"type": "matchRepository"},
                    }
                ]
            }
        },
    }
    host = await new_host(kit, None)
    host.set_policy(policy, {KEY_PATH: key.public.encode()}, attachments=[registry.ref(repo)])
    await create_bootc_node(api, node, unsigned)
    daemons.start(node, host, extra=(FLAG,))
    obj = await wait_bn(api, node, refused, "the unsigned image refused")
    assert "A signature was required, but no signature exists" in degraded_message(obj)
    assert slot_image(obj, "staged") is None and host.pulls() == []

    await set_spec(api, node, desiredImage=signed)
    obj = await wait_bn(api, node, staged_and_healthy, "the signed image staged")
    assert slot_image(obj, "staged") == signed
    assert host.pulls() == [signed], "only the signed image was pulled"
