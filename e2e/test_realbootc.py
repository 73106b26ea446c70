"""The real-bootc host kit itself (``hack.realbootc``): a real ostree sysroot booted in a
mount + PID namespace, the real bootc 1.16.9 on it, its systemd stand-ins, its reboots,
and a teardown that leaves nothing behind. No cluster: the daemon tier
(``test_daemon*.py --host=real``) runs the node agent on these hosts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import wait_for
from e2e.hostkit import RealKit, real_build
from hack.realbootc.host import Host, RealHostError
from hack.testenv.machine import RebootRequests
from hack.testenv.machine import reboot as machine_reboot
from hack.testenv.registry import Registry

WAIT = 30.0
pytestmark = pytest.mark.realbootc


@pytest.fixture
async def real(tmp_path: Path, registry: Registry) -> AsyncIterator[RealKit]:
    kit = RealKit(tmp_path, registry, real_build())
    try:
        yield kit
    finally:
        await kit.close()


async def new_host(kit: RealKit, **options: Any) -> Host:
    host = await kit.new_host(**options)
    assert isinstance(host, Host)
    return host


def version(doc: dict[str, object], slot: str) -> str | None:
    entry = doc["status"][slot]  # type: ignore[index]
    return None if entry is None else str(entry["image"]["version"])


async def test_switch_reboot_and_rollback_on_a_real_sysroot(real: RealKit) -> None:
    host = await new_host(real)
    first = host.status()
    assert first["status"]["booted"]["image"]["image"]["image"] == real.image(1)
    assert first["status"]["booted"]["image"]["imageDigest"] == real.digest(1)
    assert first["status"]["type"] == "bootcHost"
    boot_id = host.boot_id

    done = await asyncio.to_thread(host.switch, real.image(2))
    assert done.returncode == 0, done.stderr
    assert f"Queued for next boot: {real.image(2)}" in done.stdout
    assert version(host.status(), "staged") == "2.0"
    assert host.reboot_required == f"bootc: Reboot required for image: {real.digest(2)}"
    assert (host.sysroot / "ostree" / "bootc").is_dir(), "bootc made its directory"

    booted = await asyncio.to_thread(host.reboot)
    assert (booted.boot_kind, booted.image) == ("full", real.image(2))
    doc = host.status()
    assert (version(doc, "booted"), version(doc, "rollback"), version(doc, "staged")) == (
        "2.0",
        "1.0",
        None,
    )
    assert host.boot_id != boot_id, "a full reboot is a new boot"
    assert not (host.run_dir / "reboot-required").exists(), "/run is emptied"

    done = await asyncio.to_thread(host.rollback)
    assert done.returncode == 0 and "Next boot: rollback deployment" in done.stdout
    assert host.status()["status"]["rollbackQueued"] is True
    await asyncio.to_thread(host.reboot)
    doc = host.status()
    assert (version(doc, "booted"), version(doc, "rollback")) == ("1.0", "2.0")
    assert host.pulls() == [real.image(2)]
    assert host.switch_calls() == [["switch", "--", real.image(2)]]


def start_client(host: Host, argv: list[str]) -> subprocess.Popen[bytes]:
    nsenter = ["nsenter", "--target", str(host.pid), "--mount", "--pid", "--"]
    return subprocess.Popen([*nsenter, *argv], start_new_session=True)


async def test_transient_units_as_systemd_runs_them(real: RealKit) -> None:
    host = await new_host(real)
    run = ["systemd-run", "--wait", "--collect", "--pipe", "--quiet"]
    done = host.run(
        *run[:1], *run[1:], "--unit", "t1", "sh", "-c", "echo out; echo err >&2; exit 3"
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert host.active_units() == []

    # the unit is the host's PID 1's child: killing its systemd-run client leaves it running
    client = start_client(host, [*run, "--unit", "t2", "sleep", "600"])
    await wait_for(lambda: host.active_units() == ["t2.service"], WAIT, "t2 running")
    client.send_signal(signal.SIGKILL)
    client.wait()
    assert host.run("systemctl", "is-active", "t2").stdout == "active\n"
    again = host.run("systemd-run", "--unit", "t2", "true")
    assert again.returncode == 1 and "already loaded" in again.stderr
    assert host.run("systemctl", "stop", "t2").returncode == 0
    assert host.active_units() == []
    missing = host.run("systemctl", "stop", "t2")
    assert missing.returncode == 5 and "not loaded" in missing.stderr

    # failed without --collect: loaded (and failed) until reset-failed
    assert host.run("systemd-run", "--wait", "--quiet", "--unit", "t3", "false").returncode == 1
    assert host.run("systemctl", "is-active", "t3").stdout == "failed\n"
    failed = host.run("systemctl", "list-units", "--failed", "--plain", "--no-legend")
    assert failed.stdout.startswith("t3.service loaded failed failed")
    host.run("systemctl", "reset-failed", "t3")
    assert host.run("systemctl", "is-active", "t3").stdout == "inactive\n"
    assert host.run("systemctl", "is-active", "boot-complete.target").stdout == "active\n"
    assert [c["argv"][:1] for c in host.calls("systemd-run")][:1] == [["--wait"]]


async def test_reboot_requests_and_a_soft_reboot(real: RealKit) -> None:
    host = await new_host(real)
    refused = host.run("systemctl", "soft-reboot")
    assert refused.returncode == 5 and "soft-reboot.target not found" in refused.stderr
    assert host.run("systemctl", "reboot").returncode == 0
    request = host.reboot_request
    assert request is not None and (request["kind"], request["by"]) == (
        "reboot",
        "systemctl reboot",
    )
    assert host.next_reboot_kind() == "full"
    await asyncio.to_thread(host.reboot)
    assert host.reboot_request is None

    host.configure(soft_reboot=True)
    await asyncio.to_thread(host.reboot)  # systemd with soft-reboot.target from this boot on
    boot_id = host.boot_id
    (host.run_dir / "kept").write_text("x")
    assert host.run("systemctl", "soft-reboot").returncode == 0
    assert host.next_reboot_kind() == "soft"
    booted = await asyncio.to_thread(host.reboot)
    assert booted.boot_kind == "soft"
    assert host.boot_id == boot_id, "a soft reboot keeps the kernel and its boot ID"
    assert (host.run_dir / "kept").exists(), "/run stays mounted and populated"
    assert host.run("systemctl", "show", "-P", "SoftRebootsCount").stdout == "1\n"


async def test_bootc_cannot_soft_reboot_without_composefs(real: RealKit) -> None:
    """With systemd's soft-reboot.target a staged image with the booted kernel is
    ``softRebootCapable``, but libostree prepares ``/run/nextroot`` only with composefs,
    which this build (like Debian 12's libraries) lacks: bootc refuses, saying so."""
    host = await new_host(real, soft_reboot=True)
    assert (await asyncio.to_thread(host.switch, real.image(2))).returncode == 0
    assert host.status()["status"]["staged"]["softRebootCapable"] is True
    done = host.bootc("upgrade", "--from-downloaded", "--apply", "--soft-reboot=required")
    assert done.returncode == 1
    assert "soft reboot not supported without composefs" in done.stderr
    assert host.reboot_request is None


def daemon_line_status(host: Host) -> subprocess.CompletedProcess[str]:
    """``bootc status`` through the daemon's own nsenter line (cgroup namespace and ids
    included; without ``--env``, which util-linux 2.38 lacks: PATH given here)."""
    line = host.host_exec()
    return subprocess.run(
        [*line[: line.index("--env")], "--", "bootc", "status", "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
    )


def pid_namespace(pid: int) -> Path:
    return Path(f"/proc/{pid}/ns/pid").readlink()


def mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def in_namespace(namespace: Path) -> list[int]:
    """The processes in PID namespace ``namespace`` (its ``/proc/PID/ns/pid`` link)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "ns" / "pid").readlink() == namespace:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


async def test_close_leaves_no_process_and_no_mount(real: RealKit, tmp_path: Path) -> None:
    host = await new_host(real)
    pid = host.pid
    status = daemon_line_status(host)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"]["booted"] is not None
    namespace = pid_namespace(pid)
    inside = host.run("sh", "-c", "sleep 600 >/dev/null 2>&1 &")  # an orphan of the host
    assert inside.returncode == 0
    assert len(in_namespace(namespace)) >= 2, "PID 1 and the orphan"
    host.close()
    assert in_namespace(namespace) == []
    assert not host.running()
    assert str(host.root) not in mounts()
    with pytest.raises(RealHostError, match="is not running"):
        _ = host.pid
    shutil.rmtree(host.root)  # the immutable deployment roots were made deletable


async def test_the_machine_simulation_reboots_a_real_host(real: RealKit) -> None:
    """``hack.testenv.machine`` (what the e2e hosts, the sim and the benchmark use to
    notice and perform a daemon's reboot) drives a real host as it does a fake one."""
    host = await new_host(real)
    assert (await asyncio.to_thread(host.switch, real.image(2))).returncode == 0
    requests = RebootRequests()
    assert not requests.asked(host)
    assert host.run("systemctl", "reboot").returncode == 0
    assert requests.asked(host)
    boot_id = host.boot_id
    steps: list[str] = []

    async def step(name: str) -> None:
        steps.append(name)

    record = await machine_reboot(
        "n1",
        host,
        stop_daemon=lambda: step("stop"),
        set_ready=lambda ready: step(f"ready={ready}"),
        start_daemon=lambda: step("start"),
    )
    assert steps == ["stop", "ready=False", "ready=True", "start"]
    assert (record.kind, record.booted, record.by) == ("full", real.image(2), "systemctl reboot")
    assert record.boot_id == host.boot_id != boot_id
    requests.forget(host)
    assert not requests.asked(host)
