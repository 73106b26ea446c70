"""The daemon's side of the health gate (issue 16) end to end: real ``bootc-operator daemon``
processes on bootc hosts against the real API server, no controller (the tests write
BootcNode.spec and the rollout's annotations themselves). Each test runs on both hosts
(``e2e.hostkit``, ``--host=fake|real|both``): the fake bootc and the real one, whose
boot assessment (no systemd there either) is decided per boot as on the fake host.

- ``status.bootAssessment`` of the current boot: Pending while the simulated boot's
  checks run, then Complete; Failed naming the failed unit (a host fault scoped to the
  image's digest, and an image labelled bad in a real registry: the fleet-wide "this
  image fails its boot assessment"); Pending for good when a check never finishes. A
  status never pairs a new boot's ``booted`` with the previous boot's assessment.
- Rollback the way the controller asks for it: ``desiredImage`` = the node's rollback
  deployment (a digest ref) with ``desiredImageState: Booted``. The daemon runs ``bootc
  rollback`` (no pull), reports Staged ("a rollback ... is queued"), reboots only with
  the reboot permit, and comes back on the old image with the bad one as rollback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from e2e.daemonenv import (
    Daemon,
    Daemons,
    NodeLog,
    boot_assessment,
    create_bootc_node,
    get_bootc_node,
    idle_reason,
    is_degraded,
    reboot_node,
    set_spec,
    settled,
    slot_image,
)
from e2e.helpers import condition, unique_name, wait_for
from e2e.hostkit import AnyHost, Kit
from hack.fakebootc.boot import LABEL

WAIT = 60.0
GREENBOOT = "greenboot-healthcheck.service"


async def wait_bn(
    api: ApiClient, name: str, predicate: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await get_bootc_node(api, name)
        return obj if predicate(obj) else None

    result: dict[str, Any] | None = await wait_for(check, WAIT, what, interval=0.2)
    assert result is not None
    return result


def is_idle(obj: dict[str, Any]) -> bool:
    return settled(obj) and idle_reason(obj) == c.REASON_IDLE and not is_degraded(obj)


def state_of(obj: dict[str, Any]) -> str | None:
    return boot_assessment(obj)[0]


async def stage_and_reboot(
    api: ApiClient, daemons: Daemons, daemon: Daemon, desired: str
) -> Daemon:
    """What the rollout does for one node: stage ``desired``, grant the drained slot, let
    the daemon ask for the reboot; then the simulated reboot. Returns the new daemon."""
    await set_spec(api, daemon.node, desiredImage=desired, desiredImageState="Staged")
    await wait_bn(
        api,
        daemon.node,
        lambda o: settled(o) and slot_image(o, "staged") == desired,
        f"{desired} staged",
    )
    await reboot_node(api, daemon.node)
    await wait_for(lambda: daemon.host.reboot_request, WAIT, "the daemon's reboot request")
    return await daemons.reboot(daemon)


# ------------------------------------------------------------------ boot assessment


async def test_after_a_reboot_pending_then_complete_never_the_old_boots(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    obj = await wait_bn(api, node, lambda o: is_idle(o) and state_of(o) == "Complete", "Complete")
    assert boot_assessment(obj) == ("Complete", "boot-complete.target reached")

    # the next boot's checks take 8 s (a daemon starts well within that, even on a
    # busy machine: about 2 s)
    host.configure(boot_complete_delay=8.0)
    async with NodeLog(api, node) as history:
        await stage_and_reboot(api, daemons, daemon, D2)
        await wait_bn(
            api,
            node,
            lambda o: slot_image(o, "booted") == D2 and state_of(o) == "Complete",
            "Complete on the new boot",
        )
        await wait_for(
            lambda: any(
                slot_image(o, "booted") == D2 and state_of(o) == "Complete"
                for o in history.versions
            ),
            WAIT,
            "the watch to see it",
        )
    on_d2 = [boot_assessment(o) for o in history.versions if slot_image(o, "booted") == D2]
    # the new boot's first status already says Pending: never D2 with D1's Complete
    assert on_d2[0] == (
        "Pending",
        "boot-complete.target not reached yet (the system is starting)",
    )
    assert on_d2[-1] == ("Complete", "boot-complete.target reached")
    states = [s for s, _ in on_d2]
    done = states.index("Complete")
    assert set(states[:done]) == {"Pending"} and set(states[done:]) == {"Complete"}


async def test_a_failed_check_is_reported_failed_naming_the_unit(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    host.set_fault("boot-fail", digest=kit.digest(2))  # "image D2 is bad" on this host
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    await wait_bn(api, node, lambda o: is_idle(o) and state_of(o) == "Complete", "D1 Complete")
    await stage_and_reboot(api, daemons, daemon, D2)
    obj = await wait_bn(
        api,
        node,
        lambda o: slot_image(o, "booted") == D2 and state_of(o) == "Failed",
        "Failed on D2",
    )
    assert boot_assessment(obj)[1] == (
        f"the boot finished without reaching boot-complete.target: failed units: {GREENBOOT}"
    )
    # the daemon itself is fine: it reports, the controller decides
    assert is_idle(obj)


async def test_an_image_labelled_bad_in_the_registry_fails_every_boot_of_it(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    bad = await kit.push_image(unique_name("os"), "bad", labels={LABEL: "fail:app-ready.service"})
    host = await kit.new_host()  # no fault on the host: the image carries it
    await create_bootc_node(api, node, kit.image(1))
    daemon = daemons.start(node, host)
    await wait_bn(api, node, lambda o: is_idle(o) and state_of(o) == "Complete", "D1 Complete")
    await stage_and_reboot(api, daemons, daemon, bad)
    obj = await wait_bn(
        api,
        node,
        lambda o: slot_image(o, "booted") == bad and state_of(o) == "Failed",
        "Failed on the labelled image",
    )
    assert "failed units: app-ready.service" in boot_assessment(obj)[1]
    assert host.pulls() == [bad], "pulled from the real registry"


async def test_a_check_that_never_finishes_stays_pending(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    host = await kit.new_host()
    host.set_fault("boot-hang")
    await asyncio.to_thread(host.reboot)  # this boot's check never returns
    await create_bootc_node(api, node, kit.image(1))
    daemons.start(node, host)
    obj = await wait_bn(api, node, lambda o: is_idle(o) and state_of(o) == "Pending", "Pending")
    assert boot_assessment(obj)[1] == (
        "boot-complete.target not reached yet (the system is starting)"
    )

    # barrier: the daemon has read it again and again (1 s, 2 s backoff) and still says so
    def reads() -> int:
        return sum(
            c["argv"] == ["is-active", "boot-complete.target"] for c in host.calls("systemctl")
        )

    await wait_for(lambda: reads() >= 3, WAIT, "three reads of the target")
    obj = await get_bootc_node(api, node)
    assert state_of(obj) == "Pending"
    assert not is_degraded(obj)
    assert condition(obj, c.COND_IDLE)["status"] == "True"


# ------------------------------------------------------------------ rollback


def idle_message(obj: dict[str, Any]) -> str:
    return str(condition(obj, c.COND_IDLE).get("message", ""))


async def on_bad_image(kit: Kit, api: ApiClient, node: str) -> AnyHost:
    """A host that booted D2 (whose boots fail their checks) with D1 as the rollback
    deployment, as after a rollout's reboot; its BootcNode desires D2."""
    host = await kit.new_host()
    host.set_fault("boot-fail", digest=kit.digest(2))
    done = await asyncio.to_thread(host.switch, kit.image(2))
    assert done.returncode == 0, done.stderr
    await asyncio.to_thread(host.reboot)
    await create_bootc_node(api, node, kit.image(2))
    return host


async def test_rollback_with_the_permit_runs_bootc_rollback_and_reboots_into_the_old_image(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2 = kit.image(1), kit.image(2)
    host = await kit.new_host()
    host.set_fault("boot-fail", digest=kit.digest(2))
    await create_bootc_node(api, node, D1)
    daemon = daemons.start(node, host)
    await wait_bn(api, node, is_idle, "Idle on D1")
    daemon = await stage_and_reboot(api, daemons, daemon, D2)
    await wait_bn(
        api,
        node,
        lambda o: slot_image(o, "booted") == D2 and state_of(o) == "Failed",
        "D2 booted, its boot assessment Failed",
    )
    switches, pulls = host.switch_calls(), host.pulls()
    assert pulls == [D2]

    # the controller's rollback: desiredImage = the rollback deployment, Booted, the
    # node still holds its drained slot (a fresh reboot-requested), all in one write
    async with NodeLog(api, node) as history:
        await reboot_node(api, node, desired=D1)
        request = await wait_for(lambda: host.reboot_request, WAIT, "the reboot request")
        assert request is not None and request["by"] == "systemctl reboot"
        obj = await wait_bn(api, node, lambda o: idle_reason(o) == c.REASON_REBOOTING, "Rebooting")
        assert idle_message(obj) == f"rebooting into {D1} (the rollback deployment)"
        assert c.REASON_STAGING in history.idle_reasons()
    assert any(idle_message(o).startswith(f"rolling back to {D1}") for o in history.versions)
    assert host.bootc_calls("rollback") == [["rollback"]]
    assert host.switch_calls() == switches, "no bootc switch"
    assert host.pulls() == pulls, "no pull"
    assert host.status()["status"]["rollbackQueued"] is True

    await daemons.reboot(daemon)
    obj = await wait_bn(
        api,
        node,
        lambda o: is_idle(o) and slot_image(o, "booted") == D1 and state_of(o) == "Complete",
        "back on D1, Idle, its boot Complete",
    )
    assert slot_image(obj, "rollback") == D2
    assert slot_image(obj, "staged") is None
    assert host.pulls() == pulls and host.switch_calls() == switches
    assert host.status()["status"]["rollbackQueued"] is False


async def test_rollback_without_the_permit_is_queued_not_rebooted_then_reverted(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    D1, D2 = kit.image(1), kit.image(2)
    host = await on_bad_image(kit, api, node)
    daemons.start(node, host)
    await wait_bn(api, node, lambda o: is_idle(o) and state_of(o) == "Failed", "Idle on D2")

    await reboot_node(api, node, drained=False, desired=D1)
    obj = await wait_bn(
        api,
        node,
        lambda o: settled(o) and condition(o, c.COND_DEGRADED).get("reason") == "RebootNotAllowed",
        "queued, the reboot refused",
    )
    assert idle_reason(obj) == c.REASON_STAGED
    assert idle_message(obj) == (
        f"a rollback to {D1} is queued (bootc rollback): the rollback deployment boots next"
    )
    assert host.status()["status"]["rollbackQueued"] is True
    assert host.reboot_request is None, "never a reboot without the drained slot"

    # the target goes back to the booted image: the queued rollback is reverted
    await set_spec(api, node, desiredImage=D2, desiredImageState="Staged")
    obj = await wait_bn(api, node, is_idle, "Idle on D2 again")
    assert host.status()["status"]["rollbackQueued"] is False
    assert host.bootc_calls("rollback") == [["rollback"], ["rollback"]]
    assert host.reboot_request is None
    assert host.pulls() == [D2], "only the first switch pulled"


async def test_a_third_image_while_a_rollback_is_queued_is_switched_to(
    kit: Kit, api: ApiClient, daemons: Daemons, node: str
) -> None:
    """A switch after ``bootc rollback``: the staged image boots next. bootc (the real
    1.16, and the fake since) still says ``rollbackQueued`` until the reboot; the
    daemon reports D3 staged, and the reboot boots D3 with D2 as the rollback."""
    D1, D3 = kit.image(1), kit.image(3)
    host = await on_bad_image(kit, api, node)
    daemon = daemons.start(node, host)
    await set_spec(api, node, desiredImage=D1)  # Staged: queue the rollback only
    await wait_bn(
        api, node, lambda o: settled(o) and idle_reason(o) == c.REASON_STAGED, "rollback queued"
    )
    assert host.status()["status"]["rollbackQueued"] is True

    await set_spec(api, node, desiredImage=D3)
    obj = await wait_bn(
        api,
        node,
        lambda o: (
            settled(o) and idle_reason(o) == c.REASON_STAGED and slot_image(o, "staged") == D3
        ),
        "D3 staged",
    )
    assert idle_message(obj) == f"{D3} is staged"
    assert host.status()["status"]["rollbackQueued"] is True, "bootc says so until the reboot"
    assert host.switch_calls()[-1] == ["switch", "--", D3]
    assert host.bootc_calls("rollback") == [["rollback"]]
    assert await daemon.stop() == 0
    await asyncio.to_thread(host.reboot)
    doc = host.status()["status"]
    assert doc["booted"]["image"]["imageDigest"] == kit.digest(3)
    assert doc["rollback"]["image"]["imageDigest"] == kit.digest(2)
    assert doc["rollbackQueued"] is False
