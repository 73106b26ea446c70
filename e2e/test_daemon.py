"""The node agent end to end: ``bootc-operator daemon`` processes on bootc hosts, against
the real API server (no controller: the tests write BootcNode.spec themselves).

Every test taking ``kit`` runs on both hosts (``e2e.hostkit``, ``--host=fake|real|both``):
the fake bootc and the real bootc 1.16.9 with libostree on a real ostree sysroot, with
the same assertions. The few that need what only the fake can simulate make a fake
host themselves and say why.

Each test creates its own BootcNodes and hosts; daemons are real subprocesses, always
stopped by the ``daemons`` fixture. Waits are deadlines on observable state; "never"
is asserted after a causal barrier (the daemon reported on a later spec generation).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODES, ApiError, create_object, patch_object
from bootc_operator.kube.resources import Resource
from bootc_operator.kube.rest import delete_object, request_json
from bootc_operator.sealing import seal
from e2e.daemonenv import (
    SWITCH_UNIT,
    Daemons,
    NodeLog,
    create_bootc_node,
    degraded_message,
    delete_bootc_node,
    get_bootc_node,
    idle_reason,
    is_degraded,
    reboot_node,
    set_spec,
    settled,
    slot_image,
)
from e2e.helpers import UNWRITTEN_STATUS, condition, image, unique_name, wait_for
from e2e.hostkit import AnyHost, Kit
from hack.fakebootc import make_host
from hack.testenv import ControlPlane
from hack.testenv.kube import token_kubeconfig

D1, D2, D3 = image(1), image(2), image(3)  # the fake-only tests' images
WAIT = 60.0
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", namespaced=True, kind="ServiceAccount")
RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = Resource(RBAC, "v1", "clusterroles", namespaced=False, kind="ClusterRole")
CLUSTER_ROLE_BINDINGS = Resource(
    RBAC, "v1", "clusterrolebindings", namespaced=False, kind="ClusterRoleBinding"
)


def running_switch(host: AnyHost) -> str | None:
    """The image of the switch unit running on ``host``, if any."""
    record = host.unit_record(SWITCH_UNIT)
    argv = (record or {}).get("argv") or []
    return str(argv[-1]) if argv[:2] == ["bootc", "switch"] else None


def fake_host(tmp_path: Path, **kwargs: Any) -> AnyHost:
    """A fake host booted into D1, for the tests of what only the fake can simulate."""
    return make_host(tmp_path / unique_name("host"), booted=D1, version="1.0", **kwargs)


def deployment_digest(host: AnyHost, slot: str) -> str | None:
    entry = host.status()["status"].get(slot) or {}
    return (entry.get("image") or {}).get("imageDigest")


async def reboot(host: AnyHost) -> None:
    """The host's reboot (the daemon stopped before, as a node's pods are)."""
    await asyncio.to_thread(host.reboot)


async def bn(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_bootc_node(api, name)


async def wait_bn(
    api: ApiClient, name: str, predicate: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """Poll the BootcNode until ``predicate`` holds; returns that version."""

    async def check() -> dict[str, Any] | None:
        obj = await bn(api, name)
        return obj if predicate(obj) else None

    result: dict[str, Any] | None = await wait_for(check, WAIT, what, interval=0.2)
    assert result is not None
    return result


def is_idle(obj: dict[str, Any]) -> bool:
    return settled(obj) and idle_reason(obj) == c.REASON_IDLE and not is_degraded(obj)


# ------------------------------------------------------------------ status at start


async def test_status_populated_at_start(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1 = kit.image(1)
    host = await kit.new_host()
    created = await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    obj = await wait_bn(api, node, is_idle, "status populated at start")

    status = obj["status"]
    assert status["observedGeneration"] == created["metadata"]["generation"]
    assert status["booted"]["image"] == D1
    assert status["booted"]["imageDigest"] == kit.digest(1)
    assert status["booted"]["version"] == "1.0"
    assert status["booted"]["architecture"] == "amd64"
    assert status.get("staged") is None and status.get("rollback") is None
    idle, deg = condition(obj, c.COND_IDLE), condition(obj, c.COND_DEGRADED)
    assert (idle["status"], idle["reason"]) == ("True", c.REASON_IDLE)
    assert (deg["status"], deg["reason"]) == ("False", c.REASON_HEALTHY)
    assert idle["observedGeneration"] == created["metadata"]["generation"]

    code, _ = await daemon.get("/healthz")
    assert code == 200
    code, text = await daemon.get("/metrics")
    assert code == 200
    refreshed = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("bootc_operator_daemon_last_status_refresh_timestamp_seconds ")
    ]
    assert refreshed and refreshed[0] > 0
    assert 'bootc_operator_daemon_bootc_command_duration_seconds_count{command="status"}' in text
    assert "bootc_operator_daemon_stage_attempts_total 0.0" in text


# ------------------------------------------------------------------ stage, reboot


async def test_stage_reboot_and_come_back_on_the_new_image(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    await wait_bn(api, node, is_idle, "Idle on the booted image")

    async with NodeLog(api, node) as history:
        await set_spec(api, node, desiredImage=D2, desiredImageState="Staged")
        obj = await wait_bn(
            api,
            node,
            lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED,
            "Staged after a desiredImage change",
        )
        assert slot_image(obj, "staged") == D2
        assert obj["status"]["staged"]["imageDigest"] == kit.digest(2)
        assert slot_image(obj, "booted") == D1
        assert not is_degraded(obj)
        await wait_for(
            lambda: history.idle_reasons()[-2:] == [c.REASON_STAGING, c.REASON_STAGED],
            WAIT,
            "Staging reported before Staged",
        )
        assert host.reboot_request is None, "staging must not reboot"

        await reboot_node(api, node)  # as the rollout does, once the node is drained
        await wait_bn(
            api,
            node,
            lambda o: settled(o) and idle_reason(o) == c.REASON_REBOOTING,
            "Rebooting",
        )
        request = await wait_for(lambda: host.reboot_request, WAIT, "a reboot request on the host")
        assert request is not None and request["kind"] == "reboot"
    assert host.switch_calls() == [["switch", "--", D2]]

    # the reboot: the node goes down (daemon and all), boots the staged image
    assert await daemon.stop() == 0
    await reboot(host)
    daemons.start(node, host)
    obj = await wait_bn(
        api, node, lambda o: is_idle(o) and slot_image(o, "booted") == D2, "Idle on the new image"
    )
    assert slot_image(obj, "rollback") == D1
    assert slot_image(obj, "staged") is None
    assert host.reboot_request is None


async def test_desired_change_while_staged_restages(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2, D3 = kit.image(1), kit.image(2), kit.image(3)
    host = await kit.new_host()
    await create_bootc_node(api, node, D2)
    daemons.start(node, host)
    await wait_bn(api, node, lambda o: settled(o) and slot_image(o, "staged") == D2, "D2 staged")
    await set_spec(api, node, desiredImage=D3)
    obj = await wait_bn(
        api,
        node,
        lambda o: (
            settled(o) and idle_reason(o) == c.REASON_STAGED and slot_image(o, "staged") == D3
        ),
        "D3 re-staged",
    )
    assert slot_image(obj, "booted") == D1
    assert host.switch_calls() == [["switch", "--", D2], ["switch", "--", D3]]


async def test_newer_desired_image_cancels_the_running_switch(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """A pull interrupted by stopping its unit leaves nothing staged."""
    D1, D2, D3 = kit.image(1), kit.image(2), kit.image(3)
    host = await kit.new_host(slow_pulls=True)  # every pull waits (5 min / forever)
    await create_bootc_node(api, node, D1)
    daemons.start(node, host)
    await wait_bn(api, node, is_idle, "Idle")

    await set_spec(api, node, desiredImage=D2)
    await wait_for(lambda: running_switch(host) == D2, WAIT, "the D2 switch running")
    await wait_bn(api, node, lambda o: idle_reason(o) == c.REASON_STAGING, "Staging D2")

    await set_spec(api, node, desiredImage=D3)
    await wait_for(
        lambda: running_switch(host) == D3 and len(host.switch_calls()) == 2,
        WAIT,
        "the D3 switch replacing D2's",
    )
    assert host.switch_calls() == [["switch", "--", D2], ["switch", "--", D3]]
    assert not host.has_staged(), "the cancelled D2 switch staged nothing"
    obj = await wait_bn(
        api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGING, "Staging D3"
    )
    assert condition(obj, c.COND_IDLE)["message"] == f"staging {D3}"

    # back to the booted image: nothing to stage, the D3 switch is stopped too
    await set_spec(api, node, desiredImage=D1)
    await wait_bn(api, node, is_idle, "Idle on the booted image")
    await wait_for(lambda: host.active_units() == [], WAIT, "no switch running")
    assert not host.has_staged()
    assert host.status()["status"]["staged"] is None


# ------------------------------------------------------------------ failures


async def test_switch_failure_is_degraded_then_recovers(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """bootc switch fails (the fake is told to fail authentication; the real host's
    registry is blocked in its registries.conf.d): Degraded with bootc's own error
    text, retried with backoff, Staged once the cause is gone."""
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    host.set_fault("switch-fail", message=f"Switching: Pulling: {kit.PULL_FAILURE}")
    await create_bootc_node(api, node, D1)
    daemons.start(node, host)
    await wait_bn(api, node, is_idle, "Idle")

    await set_spec(api, node, desiredImage=D2)
    obj = await wait_bn(
        api, node, lambda o: settled(o) and is_degraded(o), "Degraded after a failed switch"
    )
    message = degraded_message(obj)
    assert "error: Switching" in message and kit.PULL_FAILURE in message, message
    assert f"bootc switch {D2} failed (exit code 1)" in message
    assert condition(obj, c.COND_DEGRADED)["reason"] == c.REASON_ERROR
    obj = await wait_bn(
        api, node, lambda o: idle_reason(o) == c.REASON_IDLE and is_degraded(o), "Idle + Degraded"
    )

    host.clear_faults()
    obj = await wait_bn(
        api,
        node,
        lambda o: idle_reason(o) == c.REASON_STAGED and not is_degraded(o),
        "Staged and healthy once the fault is gone (retried with backoff)",
    )
    assert slot_image(obj, "staged") == D2
    assert len(host.switch_calls()) >= 2


async def test_hanging_switch_times_out(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """The pull never finishes (the fake hangs; the real host's registry has a mirror
    that never answers): the stage timeout stops the unit, the sysroot lock is free."""
    D2 = kit.image(2)
    host = await kit.new_host()
    host.set_fault("switch-hang")
    await create_bootc_node(api, node, D2)
    daemon = daemons.start(node, host, stage_timeout="2s", backoff_initial="1h", backoff_max="1h")
    obj = await wait_bn(api, node, is_degraded, "Degraded after the stage timeout")
    assert f"bootc switch {D2} did not finish within 2s" in degraded_message(obj)
    assert idle_reason(obj) == c.REASON_IDLE
    assert host.active_units() == [], "the hanging switch unit must have been stopped"
    assert daemon.alive()
    # the sysroot lock is free again: bootc status answers, nothing was staged
    host.clear_faults()
    assert host.bootc("status", "--format=json", timeout=10).returncode == 0
    assert host.status()["status"]["staged"] is None


async def test_garbage_status_is_degraded_without_a_crash(
    api: ApiClient, daemons: Daemons, node: str, tmp_path: Path
) -> None:
    """Fake only: the real bootc prints its JSON or fails; garbage with exit 0 is the
    fake's fault injection (a corrupted binary, a wrapper gone wrong)."""
    host = fake_host(tmp_path)
    host.set_fault("status-garbage")
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    obj = await wait_bn(api, node, is_degraded, "Degraded on garbage status")
    assert "bootc status output is not JSON" in degraded_message(obj)
    assert daemon.alive()
    code, _ = await daemon.get("/healthz")
    assert code == 200
    assert host.switch_calls() == []

    host.clear_faults()
    obj = await wait_bn(api, node, is_idle, "healthy again once status is readable")
    assert slot_image(obj, "booted") == D1


async def test_a_held_sysroot_lock_times_status_out(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """Another ostree/bootc process holds the sysroot lock: ``bootc status`` waits for
    it, the daemon's command timeout ends the wait, Degraded says why; healthy again
    once the lock is released."""
    host = await kit.new_host()
    await create_bootc_node(api, node, kit.image(1))
    with host.sysroot_locked():
        # 5 s: what the daemon allows each status read, also once the lock is free (the
        # real bootc reads status in about 0.3 s, more on a loaded machine)
        daemon = daemons.start(node, host, bootc_timeout="5s")
        obj = await wait_bn(api, node, is_degraded, "Degraded when bootc status blocks")
        assert "bootc status did not finish within 5s" in degraded_message(obj)
        assert "sysroot lock" in degraded_message(obj)
        assert daemon.alive()
    await wait_bn(api, node, is_idle, "healthy once status answers")


async def unmanageable(
    api: ApiClient, daemons: Daemons, node: str, host: AnyHost, fault: str, why: str
) -> None:
    host.set_fault(fault)
    await create_bootc_node(api, node, D2)
    daemons.start(node, host)
    obj = await wait_bn(api, node, lambda o: settled(o) and is_degraded(o), "Degraded")
    assert why in degraded_message(obj)
    # a later spec generation was decided too: still no switch, ever
    await set_spec(api, node, desiredImage=D3, desiredImageState="Booted")
    obj = await wait_bn(api, node, lambda o: settled(o) and is_degraded(o), "Degraded again")
    assert why in degraded_message(obj)
    assert host.switch_calls() == []
    assert host.reboot_request is None


async def test_a_host_not_booted_by_ostree_is_degraded_and_never_switched(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """No ``/run/ostree-booted`` (on the real host: the file is gone, so libostree sees
    no booted deployment): bootc reports ``booted: null``."""
    host = await kit.new_host()
    await unmanageable(api, daemons, node, host, "not-bootc", "status.booted is null")


async def test_an_incompatible_host_is_degraded_and_never_switched(
    api: ApiClient, daemons: Daemons, node: str, tmp_path: Path
) -> None:
    """Fake only: rpm-ostree local layering (``incompatible: true``) needs rpm-ostree,
    which cannot be had here; the fake reports it as bootc would."""
    host = fake_host(tmp_path)
    await unmanageable(api, daemons, node, host, "incompatible", "rpm-ostree")


# ------------------------------------------------------------------ host watch


async def test_out_of_band_switch_is_seen_through_inotify_reported_and_undone(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """Someone runs ``bootc switch D2`` on the host while the spec says D1 (booted):
    the daemon sees it through inotify on ``/ostree/bootc`` (the poll is 1 h away),
    reports D2 staged with an Idle message and a log line naming the out-of-band
    change, then stages the booted D1 again (rule 4b: no later reboot may boot an image
    the spec does not ask for)."""
    await out_of_band(api, daemons, node, await kit.new_host(), kit.image(1), kit.image(2))


async def test_out_of_band_switch_on_composefs_is_seen_through_inotify(
    api: ApiClient, daemons: Daemons, node: str, tmp_path: Path
) -> None:
    """Fake only: the composefs backend (``/sysroot/state/deploy``) needs a libostree
    and kernel with composefs, which the real host here is built without."""
    await out_of_band(api, daemons, node, fake_host(tmp_path, backend="composefs"), D1, D2)


async def out_of_band(
    api: ApiClient, daemons: Daemons, node: str, host: AnyHost, D1: str, D2: str
) -> None:
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host, poll_interval="1h")
    await wait_bn(api, node, is_idle, "Idle")
    named = f"{D2} was staged out of band (not by the bootc-operator daemon)"

    async with NodeLog(api, node) as history:
        done = await asyncio.to_thread(host.switch, D2)
        assert done.returncode == 0, done.stderr

        def reported() -> bool:
            return history.ever(
                lambda o: (
                    slot_image(o, "staged") == D2
                    and idle_reason(o) == c.REASON_STAGING
                    and named in condition(o, c.COND_IDLE).get("message", "")
                )
            )

        await wait_for(reported, WAIT, "the out-of-band switch reported, naming D2")
        obj = await wait_bn(
            api,
            node,
            lambda o: is_idle(o) and slot_image(o, "staged") == D1,
            "the booted D1 staged again in place of D2",
        )
    assert slot_image(obj, "booted") == D1
    assert host.switch_calls() == [["switch", "--", D2], ["switch", "--", D1]]
    assert not is_degraded(obj)
    assert f"{D2} was staged out of band" in daemon.log(100_000)


# ------------------------------------------------------------------ pull secret


def dockerconfig(user: str) -> bytes:
    token = base64.b64encode(f"{user}:secret-{user}".encode()).decode()
    # the form the daemon writes: only "auths", re-serialised compactly with sorted keys
    doc = {"auths": {"registry.example.com": {"auth": token}}}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


async def seal_to_daemon(
    api: ApiClient, node: str, content: bytes, secret_hash: str, *, not_key: str | None = None
) -> str:
    """What the controller does: wait for the daemon's ``status.sealingKey`` (another
    than ``not_key``), seal ``content`` to it and write the hash and the blob in one
    patch. Returns the key."""
    obj = await wait_bn(
        api,
        node,
        lambda o: (o.get("status") or {}).get("sealingKey") not in (None, not_key),
        "the daemon's sealing key published",
    )
    key = str(obj["status"]["sealingKey"])
    sealed = seal(content, key, node=node, secret_hash=secret_hash)
    await set_spec(api, node, pullSecretHash=secret_hash, sealedPullSecret=sealed.to_wire())
    return key


def auth_file(host: AnyHost) -> tuple[bytes, int] | None:
    try:
        return host.auth_file.read_bytes(), stat.S_IMODE(host.auth_file.stat().st_mode)
    except FileNotFoundError:
        return None


async def test_pull_secret_written_rewritten_and_removed(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """The daemon reads no Secret: the controller (here the test) seals the content to
    the key the daemon publishes."""
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    secret = unique_name("pull")
    first, second = dockerconfig("alice"), dockerconfig("bob")
    ref = {"name": secret, "namespace": "default"}
    await create_bootc_node(api, node, D1, pullSecretRef=ref, pullSecretHash="h1")
    daemon = daemons.start(node, host)
    key = await seal_to_daemon(api, node, first, "h1")
    await wait_for(lambda: auth_file(host) == (first, 0o600), WAIT, "auth.json written, 0600")

    assert await seal_to_daemon(api, node, second, "h2") == key, "one key per process"
    await wait_for(lambda: auth_file(host) == (second, 0o600), WAIT, "auth.json rewritten")
    assert not list(host.auth_file.parent.glob(".auth.json.*")), "no temporary files left"

    # a blob that does not open (bound to another secret version) on an up-to-date
    # node: noted, not Degraded (nothing to pull), and the last good file stays
    await set_spec(api, node, pullSecretHash="h3")
    problem = f"pull secret default/{secret}: the sealed pull secret does not open for node {node}"
    obj = await wait_bn(
        api,
        node,
        lambda o: settled(o) and problem in condition(o, c.COND_IDLE).get("message", ""),
        "the pull secret problem noted in Idle",
    )
    assert condition(obj, c.COND_IDLE)["status"] == "True"
    message = condition(obj, c.COND_IDLE)["message"]
    assert message.endswith("(keeping the previous file) (not needed now: nothing to pull)")
    assert not is_degraded(obj)
    assert auth_file(host) == (second, 0o600)
    # ... but Degraded as soon as the node has to pull with it
    host.set_fault("switch-fail", message=f"Switching: Pulling: {kit.PULL_FAILURE}")
    await set_spec(api, node, desiredImage=D2)
    obj = await wait_bn(api, node, lambda o: settled(o) and is_degraded(o), "Degraded")
    assert problem in degraded_message(obj)
    host.clear_faults()
    await set_spec(api, node, desiredImage=D1)

    await set_spec(api, node, pullSecretRef=None, pullSecretHash=None, sealedPullSecret=None)
    await wait_for(lambda: auth_file(host) is None, WAIT, "auth.json removed")
    await wait_bn(api, node, is_idle, "healthy without a pull secret")
    log_text = daemon.log(100_000)
    assert "secret-alice" not in log_text and "secret-bob" not in log_text
    assert base64.b64encode(first).decode() not in log_text


async def test_a_restarted_daemon_waits_for_the_secret_sealed_to_its_new_key(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """The private key lives in the daemon's memory: after a restart (here with a
    reboot, which empties /run) the daemon publishes a new key and stages nothing that
    needs a pull until the secret is sealed to it, saying so; then it writes the file
    and stages."""
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    content = dockerconfig("carol")
    ref = {"name": unique_name("pull"), "namespace": "default"}
    await create_bootc_node(api, node, D1, pullSecretRef=ref, pullSecretHash="h1")
    daemon = daemons.start(node, host)
    old = await seal_to_daemon(api, node, content, "h1")
    await wait_for(lambda: auth_file(host) == (content, 0o600), WAIT, "auth.json written")
    assert await daemon.stop() == 0
    await reboot(host)  # /run is a tmpfs
    assert auth_file(host) is None
    await set_spec(api, node, desiredImage=D2)  # a pull, with the old blob in the spec
    daemons.start(node, host)
    waiting = await wait_bn(
        api,
        node,
        lambda o: (
            (o.get("status") or {}).get("sealingKey") not in (None, old)
            and condition(o, c.COND_IDLE).get("message", "").startswith(f"waiting to stage {D2}")
        ),
        "the new key published, the switch waiting for the seal",
    )
    idle = condition(waiting, c.COND_IDLE)
    assert (idle["status"], idle["reason"]) == ("False", c.REASON_STAGING)
    assert "is not sealed to this daemon's key" in idle["message"]
    assert not is_degraded(waiting)
    assert running_switch(host) is None and auth_file(host) is None
    await seal_to_daemon(api, node, content, "h1", not_key=old)
    await wait_for(lambda: auth_file(host) == (content, 0o600), WAIT, "auth.json rewritten")
    await wait_bn(
        api, node, lambda o: condition(o, c.COND_IDLE).get("reason") == c.REASON_STAGED, "staged"
    )


async def test_an_auth_file_the_daemon_did_not_write_survives_its_start(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """No pull secret named: the admin's /run/ostree/auth.json is not the daemon's to
    delete (it removes only content it recorded writing)."""
    host = await kit.new_host()
    admin = b'{"auths": {"admin.example.com": {"auth": "YWRtaW46cHc="}}}'
    host.auth_file.parent.mkdir(parents=True, exist_ok=True)
    host.auth_file.write_bytes(admin)
    await create_bootc_node(api, node, kit.image(1))
    daemon = daemons.start(node, host)
    await wait_bn(api, node, is_idle, "the daemon reconciled")
    assert host.auth_file.exists(), "the admin's auth.json was deleted"
    assert host.auth_file.read_bytes() == admin
    await wait_for(lambda: "did not write it" in daemon.log(100_000), WAIT, "kept: logged")


# ------------------------------------------------------------------ isolation, shutdown


async def test_another_nodes_bootcnode_changes_nothing(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2, D3 = kit.image(1), kit.image(2), kit.image(3)
    host = await kit.new_host()
    other = unique_name("other")
    try:
        await create_bootc_node(api, node, D1)
        await create_bootc_node(api, other, D2)
        daemons.start(node, host)
        await wait_bn(api, node, is_idle, "own node Idle")
        await set_spec(api, other, desiredImage=D3, desiredImageState="Booted")

        # barrier: the daemon reports on a later generation of its own BootcNode
        await set_spec(api, node, desiredImage=D2)
        obj = await wait_bn(
            api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED, "own D2 staged"
        )
        assert slot_image(obj, "staged") == D2
        assert host.switch_calls() == [["switch", "--", D2]]
        assert host.reboot_request is None
        assert (await bn(api, other))["status"] == UNWRITTEN_STATUS, (
            "another node's status was written"
        )
    finally:
        await delete_bootc_node(api, other)


async def test_sigterm_stops_a_running_switch_and_exits_cleanly(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    host = await kit.new_host(slow_pulls=True)
    await create_bootc_node(api, node, kit.image(2))
    daemon = daemons.start(node, host)
    await wait_for(lambda: SWITCH_UNIT in host.active_units(), WAIT, "the switch running")
    await wait_bn(api, node, lambda o: idle_reason(o) == c.REASON_STAGING, "Staging")

    assert await daemon.stop(grace=30.0) == 0
    await wait_for(lambda: host.active_units() == [], WAIT, "the switch unit stopped")
    assert not host.has_staged(), "an interrupted switch stages nothing"
    # the host is consistent: bootc answers at once (no sysroot lock left held)
    assert host.bootc("status", "--format=json", timeout=10).returncode == 0
    assert host.status()["status"]["staged"] is None


async def test_deleted_bootcnode_cancels_the_switch(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    host = await kit.new_host(slow_pulls=True)
    await create_bootc_node(api, node, kit.image(2))
    daemon = daemons.start(node, host)
    await wait_for(lambda: SWITCH_UNIT in host.active_units(), WAIT, "the switch running")
    await delete_bootc_node(api, node)
    await wait_for(lambda: host.active_units() == [], WAIT, "the switch unit stopped")
    assert daemon.alive()


# ------------------------------------------------------------------ bootedShort (issue 13)


async def test_booted_short_is_the_digest_the_pool_targets(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """``status.bootedShort`` (the BOOTED column): for a multi-arch index the index
    digest the node was switched to, not the per-architecture ``imageDigest``; for a
    tag the ``imageDigest``."""
    host = await kit.new_host()
    pinned, index, amd64 = await kit.index(host, 2)
    done = await asyncio.to_thread(host.switch, pinned)
    assert done.returncode == 0, done.stderr
    await reboot(host)
    await create_bootc_node(api, node, pinned)
    daemon = daemons.start(node, host)
    obj = await wait_bn(api, node, is_idle, "Idle on the index")
    assert obj["status"]["booted"]["imageDigest"] == amd64
    assert obj["status"]["bootedShort"] == index.removeprefix("sha256:")[:12]

    # booted from a tag: the per-arch digest bootc reports
    tag = await kit.tag(host, "stable", 3)
    done = await asyncio.to_thread(host.switch, tag)
    assert done.returncode == 0, done.stderr
    assert await daemon.stop() == 0
    await reboot(host)
    await set_spec(api, node, desiredImage=f"{kit.repo}@{kit.digest(3)}")
    daemons.start(node, host)
    obj = await wait_bn(
        api, node, lambda o: is_idle(o) and slot_image(o, "booted") == tag, "Idle on the tag"
    )
    assert obj["status"]["bootedShort"] == kit.digest(3).removeprefix("sha256:")[:12]


# ------------------------------------------------------------------ reboot permit (issue 13)


async def test_booted_without_a_drained_slot_never_reboots(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """Defence in depth: a hand-written ``desiredImageState: Booted`` on a Staged node
    whose BootcNode does not show a reboot slot and a drain is refused, and said so."""
    D2 = kit.image(2)
    host = await kit.new_host()
    await create_bootc_node(api, node, D2)
    daemons.start(node, host)
    await wait_bn(
        api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED, "D2 staged"
    )

    await set_spec(api, node, desiredImageState="Booted")
    obj = await wait_bn(
        api,
        node,
        lambda o: settled(o) and condition(o, c.COND_DEGRADED).get("reason") == "RebootNotAllowed",
        "the refusal reported",
    )
    deg = condition(obj, c.COND_DEGRADED)
    assert deg["status"] == "True"
    assert f"not rebooting into {D2}" in deg["message"]
    assert "bootc.dev/in-reboot-slot and bootc.dev/reboot-requested" in deg["message"]
    assert "an undrained node is never rebooted" in deg["message"]
    assert idle_reason(obj) == c.REASON_STAGED
    assert host.reboot_request is None
    assert not [call for call in host.calls("systemctl") if call["argv"][:1] == ["reboot"]]

    # one annotation is not enough: the slot without the drain's reboot request (the
    # Go operator's drained holder) is no reboot either, but no fault of the node:
    # not Degraded, it waits for the controller to confirm the drain
    await api_patch_annotations(api, node, {c.IN_REBOOT_SLOT_ANNOTATION: ""})
    obj = await wait_bn(
        api,
        node,
        lambda o: (
            not is_degraded(o)
            and "its drain is not confirmed (bootc.dev/reboot-requested missing)"
            in condition(o, c.COND_IDLE).get("message", "")
        ),
        "still no reboot with only the slot annotation, waiting for the controller",
    )
    assert idle_reason(obj) == c.REASON_STAGED
    assert host.reboot_request is None

    # the rollout's way: slot and reboot-requested annotations with Booted → reboot
    await reboot_node(api, node)
    obj = await wait_bn(
        api,
        node,
        lambda o: idle_reason(o) == c.REASON_REBOOTING and not is_degraded(o),
        "Rebooting, the refusal cleared",
    )
    assert condition(obj, c.COND_DEGRADED)["reason"] == c.REASON_HEALTHY
    request = await wait_for(lambda: host.reboot_request, WAIT, "a reboot request on the host")
    assert request is not None and request["kind"] == "reboot"


async def test_a_soft_reboot_where_the_host_allows_one(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """``rebootPolicy: AllowSoftReboot`` and a staged image with the booted kernel, on a
    host whose systemd can soft-reboot: bootc reports it ``softRebootCapable`` on both
    hosts. The fake soft-reboots into it (same boot ID). The real bootc refuses here:
    libostree prepares ``/run/nextroot`` only with composefs, which this build lacks;
    the daemon says so and, after the backoff, reboots fully. Either way the node comes
    back on the new image and ``lastRebootKind`` tells which reboot it was."""
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host(soft_reboot=True)
    await create_bootc_node(api, node, D1, rebootPolicy="AllowSoftReboot")
    daemon = daemons.start(node, host)
    await wait_bn(api, node, is_idle, "Idle on D1")
    await set_spec(api, node, desiredImage=D2)
    obj = await wait_bn(
        api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED, "D2 staged"
    )
    assert obj["status"]["staged"]["softRebootCapable"] is True
    boot_id = host.boot_id

    await reboot_node(api, node)
    request = await wait_for(lambda: host.reboot_request, WAIT, "a reboot request")
    assert request is not None
    soft = host.next_reboot_kind() == "soft"
    assert soft == kit.SOFT_REBOOTS
    if not soft:
        assert "soft reboot not supported without composefs" in daemon.log(100_000)
        assert request["by"] == "systemctl reboot"
    obj = await wait_bn(api, node, lambda o: idle_reason(o) == c.REASON_REBOOTING, "Rebooting")
    assert obj["status"]["lastRebootKind"] == ("Soft" if soft else "Full")

    await daemons.reboot(daemon)
    obj = await wait_bn(
        api, node, lambda o: is_idle(o) and slot_image(o, "booted") == D2, "Idle on D2"
    )
    assert (host.boot_id == boot_id) == soft, "a soft reboot keeps the boot ID, a full one not"


async def api_patch_annotations(api: ApiClient, name: str, annotations: dict[str, str]) -> None:
    await patch_object(api, BOOTC_NODES, name, {"metadata": {"annotations": annotations}})


# ------------------------------------------------------------------ download-only (issue 13)


async def test_a_download_only_deployment_is_applied_before_the_reboot(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """An admin ran ``bootc upgrade --download-only`` (the host follows a tag that moved
    to D2): the staged deployment is D2 but bootc would not boot it. The daemon applies
    it with ``bootc upgrade --from-downloaded`` before rebooting, so the reboot lands on
    D2 instead of booting D1 again."""
    D2 = kit.image(2)
    host = await kit.new_host()
    tag = await kit.tag(host, "stable", 1)
    assert (await asyncio.to_thread(host.switch, tag)).returncode == 0
    await reboot(host)  # booted from the tag now (D1)
    await kit.tag(host, "stable", 2)  # the tag moves
    done = await asyncio.to_thread(host.upgrade, download_only=True)
    assert done.returncode == 0, done.stderr
    assert host.status()["status"]["staged"]["downloadOnly"] is True

    await create_bootc_node(api, node, D2)
    daemon = daemons.start(node, host)
    obj = await wait_bn(
        api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED, "D2 Staged"
    )
    assert "download-only" in condition(obj, c.COND_IDLE)["message"]
    assert host.switch_calls() == [["switch", "--", tag]], "the daemon did not re-stage anything"

    await reboot_node(api, node)
    request = await wait_for(lambda: host.reboot_request, WAIT, "a reboot request on the host")
    assert request is not None
    upgrades = [call["argv"] for call in host.calls("bootc") if call["argv"][:1] == ["upgrade"]]
    assert upgrades == [["upgrade", "--download-only"], ["upgrade", "--from-downloaded"]]

    assert await daemon.stop() == 0
    await reboot(host)
    daemons.start(node, host)
    await wait_bn(
        api,
        node,
        lambda o: (
            is_idle(o) and (o["status"].get("booted") or {}).get("imageDigest") == kit.digest(2)
        ),
        "Idle on D2 after the reboot",
    )


# ------------------------------------------------------------------ stale staged (issue 13)


async def test_a_stale_staged_image_is_replaced_when_the_target_returns_to_the_booted_one(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """D2 was staged, then the target went back to the booted D1: the next reboot, for
    whatever reason, must not boot D2."""
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    await create_bootc_node(api, node, D2)
    daemon = daemons.start(node, host)
    await wait_bn(api, node, lambda o: settled(o) and slot_image(o, "staged") == D2, "D2 staged")

    await set_spec(api, node, desiredImage=D1)
    obj = await wait_bn(
        api,
        node,
        lambda o: is_idle(o) and slot_image(o, "staged") != D2,
        "Idle with the stale D2 no longer staged",
    )
    assert slot_image(obj, "booted") == D1
    assert host.switch_calls() == [["switch", "--", D2], ["switch", "--", D1]]

    # an unrelated reboot (a power cut, an admin) boots D1, not the stale D2
    assert await daemon.stop() == 0
    await reboot(host)
    daemons.start(node, host)
    obj = await wait_bn(api, node, is_idle, "Idle after the reboot")
    assert slot_image(obj, "booted") == D1
    assert deployment_digest(host, "booted") == kit.digest(1)


# ------------------------------------------------------------------ API failures (issue 13)


async def test_a_daemon_denied_its_status_writes_logs_one_line_per_retry(
    kit: Kit,
    api: ApiClient,
    control_plane: ControlPlane,
    daemons: Daemons,
    node: str,
    tmp_path: Path,
) -> None:
    """Credentials that may read BootcNodes but not write this node's status (as a token
    bound to another node): one readable line per retry, with backoff, no traceback, and
    nothing done on the host (the status must be written before any action)."""
    host = await kit.new_host()
    await create_bootc_node(api, node, kit.image(2))
    other = unique_name("other")
    async with limited_credentials(
        api, control_plane.kubeconfig, tmp_path, may_write=other
    ) as kubeconfig:
        daemon = daemons.start(node, host, kubeconfig=kubeconfig)
        denied = f"not allowed to write BootcNode {node}: "
        await wait_for(
            lambda: daemon.log(10_000).count(denied) >= 3, WAIT, "three denied retries logged"
        )
        text = daemon.log(10_000)
        assert "Traceback" not in text
        lines = [line for line in text.splitlines() if denied in line]
        assert all("forbidden" in line and "bootcnodes/status" in line for line in lines), lines
        assert daemon.alive()
    assert host.switch_calls() == [] and host.reboot_request is None
    assert (await bn(api, node))["status"] == UNWRITTEN_STATUS


@contextlib.asynccontextmanager
async def limited_credentials(
    api: ApiClient, admin_kubeconfig: Path, tmp_path: Path, *, may_write: str
) -> AsyncIterator[Path]:
    """A kubeconfig for a new ServiceAccount that may read BootcNodes but patch only
    BootcNode ``may_write``'s status (RBAC ``resourceNames``)."""
    name = unique_name("daemon-sa")
    sa = await create_object(
        api,
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        "default",
    )
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {
                "apiGroups": [c.GROUP],
                "resources": [c.NODE_PLURAL],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": [c.GROUP],
                "resources": [f"{c.NODE_PLURAL}/status"],
                "verbs": ["patch"],
                "resourceNames": [may_write],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
    }
    await create_object(api, CLUSTER_ROLES, role)
    await create_object(api, CLUSTER_ROLE_BINDINGS, binding)
    try:
        review = await request_json(
            api,
            "POST",
            f"/api/v1/namespaces/default/serviceaccounts/{name}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        yield token_kubeconfig(
            admin_kubeconfig, review["status"]["token"], tmp_path / f"{name}.kubeconfig"
        )
    finally:
        for resource, obj_name, ns in (
            (CLUSTER_ROLE_BINDINGS, name, None),
            (CLUSTER_ROLES, name, None),
            (SERVICE_ACCOUNTS, sa["metadata"]["name"], "default"),
        ):
            with contextlib.suppress(ApiError):
                await delete_object(api, resource, obj_name, ns)
