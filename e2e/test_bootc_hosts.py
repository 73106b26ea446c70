"""bootc's own commands on both hosts (``e2e.hostkit``): what the fake answers, the real
bootc 1.16.9 answers too, for the commands an admin or the daemon runs beside the
daemon's own tests (``test_daemon*.py``). No cluster.
"""

from __future__ import annotations

import asyncio

from e2e.hostkit import AnyHost, Kit


def staged_digest(host: AnyHost) -> str | None:
    staged = host.status()["status"]["staged"]
    return None if staged is None else str(staged["image"]["imageDigest"])


async def test_upgrade_check_names_a_moved_tag_and_stages_nothing(kit: Kit) -> None:
    host = await kit.new_host()
    tag = await kit.tag(host, "stable", 1)
    assert (await asyncio.to_thread(host.switch, tag)).returncode == 0
    await asyncio.to_thread(host.reboot)
    same = await asyncio.to_thread(host.upgrade, check=True)
    assert same.returncode == 0 and "No changes in: " in same.stdout, same.stdout

    await kit.tag(host, "stable", 2)  # the tag moves
    moved = await asyncio.to_thread(host.upgrade, check=True)
    assert moved.returncode == 0, moved.stderr
    assert "Update available for: " in moved.stdout
    assert f"Digest: {kit.digest(2)}" in moved.stdout
    assert staged_digest(host) is None, "--check stages nothing"

    staged = await asyncio.to_thread(host.upgrade)
    assert staged.returncode == 0, staged.stderr
    assert staged_digest(host) == kit.digest(2)


async def test_switching_to_the_spec_again_is_unchanged_and_exits_zero(kit: Kit) -> None:
    host = await kit.new_host()
    assert (await asyncio.to_thread(host.switch, kit.image(2))).returncode == 0
    again = await asyncio.to_thread(host.switch, kit.image(2))
    assert (again.returncode, again.stdout.strip()) == (0, "Image specification is unchanged.")
    assert staged_digest(host) == kit.digest(2)


async def test_rollback_queues_reverts_and_refuses_without_a_rollback(kit: Kit) -> None:
    host = await kit.new_host()
    none = await asyncio.to_thread(host.rollback)
    assert none.returncode == 1 and "No rollback available" in none.stderr
    assert (await asyncio.to_thread(host.switch, kit.image(2))).returncode == 0
    await asyncio.to_thread(host.reboot)
    queued = await asyncio.to_thread(host.rollback)
    assert queued.stdout.strip() == "Next boot: rollback deployment"
    doc = host.status()
    assert doc["status"]["rollbackQueued"] is True and doc["spec"]["bootOrder"] == "rollback"
    reverted = await asyncio.to_thread(host.rollback)
    assert "Next boot: current deployment" in reverted.stdout
    assert host.status()["status"]["rollbackQueued"] is False


async def test_the_hosts_policy_decides_every_pull_without_the_opt_in(kit: Kit) -> None:
    """containers/image evaluates ``/etc/containers/policy.json`` for every pull, with or
    without ``--enforce-container-sigpolicy`` (on the real host: the policy check of the
    host's ``skopeo``, ``hack/policygate``, in front of Debian's skopeo 1.9.3)."""
    host = await kit.new_host()
    host.set_policy({"default": [{"type": "reject"}]})
    refused = await asyncio.to_thread(host.switch, kit.image(2))
    assert refused.returncode == 1
    assert f"Running image docker://{kit.image(2)} is rejected by policy." in refused.stderr
    assert staged_digest(host) is None
    accept = [{"type": "insecureAcceptAnything"}]
    host.set_policy({"default": [{"type": "reject"}], "transports": {"docker": {kit.repo: accept}}})
    assert (await asyncio.to_thread(host.switch, kit.image(2))).returncode == 0
    assert staged_digest(host) == kit.digest(2)
