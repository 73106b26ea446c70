"""The daemon's host side on a simulated host (``hack.fakebootc``): host commands with
timeouts, kills and error texts (``daemon.hostcmd``) and the pyinotify watch on the event
loop (``daemon.hostwatch``). Local processes and files only; no API server."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pyinotify
import pytest
from prometheus_client import REGISTRY

from bootc_operator.api.v1alpha1 import BootAssessmentState
from bootc_operator.cli import DEFAULT_HOST_EXEC
from bootc_operator.daemon import (
    hostcmd,
    metrics,  # noqa: F401 - registers the collectors
)
from bootc_operator.daemon.assessment import BootProbe, assess
from bootc_operator.daemon.hostcmd import (
    SWITCH_UNIT,
    CommandTimeout,
    HostCommandError,
    HostCommands,
    error_text,
)
from bootc_operator.daemon.hostwatch import HostWatch, creation_target, watch_target
from hack.fakebootc import Host, add_catalog_image, make_host
from hack.fakebootc.state import flocked, lock_is_held, lock_waiters
from hack.testenv.waiting import wait_for

REPO = "quay.io/example/os"
D1, D2 = (f"{REPO}@sha256:{c * 64}" for c in "12")
DEADLINE = 30.0


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    h = make_host(tmp_path / "node", booted=D1, version="1.0")
    monkeypatch.setenv("PATH", h.env()["PATH"])  # the daemon's default nsenter line: the shim
    try:
        yield h
    finally:
        h.clear_faults()
        for unit in h.active_units():
            h.run("systemctl", "stop", unit)


def commands(stage_timeout: float = 60.0, command_timeout: float = 30.0) -> HostCommands:
    return HostCommands(
        DEFAULT_HOST_EXEC.split(), command_timeout=command_timeout, stage_timeout=stage_timeout
    )


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return float(value or 0.0)


def failures(command: str) -> float:
    return sample("bootc_operator_daemon_bootc_command_failures_total", command=command)


async def test_status_is_read_and_parsed(host: Host) -> None:
    status = await commands().status()
    assert status.booted is not None and status.booted.image_digest == "sha256:" + "1" * 64
    assert sample("bootc_operator_daemon_last_status_refresh_timestamp_seconds") > 0


async def test_garbage_status_is_a_clear_error(host: Host) -> None:
    host.set_fault("status-garbage")
    before = failures("status")
    with pytest.raises(HostCommandError, match="bootc status output is not JSON"):
        await commands().status()
    assert failures("status") == before + 1


class _TimedOnceBlocked:
    """``hostcmd``'s ``asyncio``, whose ``timeout`` starts only once a process provably
    sleeps on the sysroot lock (``lock_waiters``): a slow start of the fake bootc (a
    loaded machine) can then never be what the timeout cuts short."""

    def __init__(self, lock: Path) -> None:
        self.lock = lock
        self.blocked: set[int] = set()  # the pids seen waiting on the lock

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @contextlib.asynccontextmanager
    async def timeout(self, delay: float | None) -> AsyncIterator[None]:
        def waiting() -> bool:
            self.blocked = lock_waiters(self.lock)
            return bool(self.blocked)

        await wait_for(waiting, DEADLINE, "bootc status to wait on the sysroot lock")
        async with asyncio.timeout(delay):
            yield


async def test_blocked_status_times_out_and_is_killed(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bootc status`` waiting on the sysroot lock (a switch holds it) is killed at the
    command timeout, counted from when it provably waits (not from its start: whether
    the fake bootc got to the lock in 0.5 s on a loaded machine is not the question)."""
    clock = _TimedOnceBlocked(host.paths.sysroot_lock)
    monkeypatch.setattr(hostcmd, "asyncio", clock)
    with (
        flocked(host.paths.sysroot_lock),
        pytest.raises(CommandTimeout, match=r"did not finish within 0\.5s .*sysroot lock"),
    ):
        await commands(command_timeout=0.5).status()
    statuses = [c["pid"] for c in host.calls("bootc") if c["argv"][:1] == ["status"]]
    assert clock.blocked and clock.blocked <= set(statuses), (clock.blocked, statuses)
    assert not any(_alive(pid) for pid in statuses), "bootc status was killed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return False


async def test_switch_stages_through_a_transient_unit(host: Host) -> None:
    await commands().switch(D2)
    staged = host.state().staged
    assert staged is not None and staged.image == D2
    units = [c["argv"] for c in host.calls("systemd-run")]
    assert units == [
        [
            "--wait",
            "--collect",
            "--pipe",
            "--quiet",
            "--unit",
            SWITCH_UNIT,
            "bootc",
            "switch",
            "--",
            D2,
        ]
    ]
    assert ["stop", SWITCH_UNIT] in [c["argv"] for c in host.calls("systemctl")], (
        "a leftover unit is stopped first"
    )
    assert host.active_units() == []


async def test_the_sigpolicy_opt_in_reaches_bootc_and_its_refusal_is_the_error(
    host: Host,
) -> None:
    """``enforce_sigpolicy``: ``bootc switch --enforce-container-sigpolicy``; a host policy
    that accepts anything is refused by bootc, and that text is the error."""
    enforcing = HostCommands(
        DEFAULT_HOST_EXEC.split(), command_timeout=30, stage_timeout=60, enforce_sigpolicy=True
    )
    host.set_policy({"default": [{"type": "insecureAcceptAnything"}]})
    with pytest.raises(HostCommandError, match="insecureAcceptAnything`; refusing usage"):
        await enforcing.switch(D2)
    assert host.switch_calls() == [["switch", "--enforce-container-sigpolicy", "--", D2]]
    host.set_policy(
        {
            "default": [{"type": "reject"}],
            "transports": {"docker": {REPO: [{"type": "insecureAcceptAnything"}]}},
        }
    )
    await enforcing.switch(D2)
    staged = host.status()["status"]["staged"]
    assert staged["image"]["image"] == {
        "image": D2,
        "transport": "registry",
        "signature": "containerPolicy",
    }


async def test_an_image_that_looks_like_an_option_stays_an_image(host: Host) -> None:
    """``--`` ends bootc's options: "--apply@sha256:…" is a (bad) image, never --apply."""
    hostile = "--apply@sha256:" + "2" * 64
    with contextlib.suppress(HostCommandError):  # real bootc refuses it; the fake may not
        await commands().switch(hostile)
    assert host.switch_calls() == [["switch", "--", hostile]]
    staged = host.state().staged
    assert staged is None or staged.image == hostile, "read as the target"
    assert host.reboot_request is None, "not read as --apply"


async def test_stopping_an_absent_switch_unit_is_one_command(host: Host) -> None:
    await commands().stop_switch()
    assert [c["argv"] for c in host.calls("systemctl")] == [["stop", SWITCH_UNIT]], (
        "not loaded: nothing to reset"
    )


async def test_a_switch_unit_that_failed_without_collect_is_cleared(host: Host) -> None:
    # left by something that ran it without --collect: it stays loaded, failed
    ran = host.run("systemd-run", "--wait", "--unit", SWITCH_UNIT, "false")
    assert ran.returncode != 0
    await commands().stop_switch()
    argv = [c["argv"] for c in host.calls("systemctl")]
    assert argv == [["stop", SWITCH_UNIT], ["reset-failed", SWITCH_UNIT]]
    again = host.run("systemd-run", "--wait", "--collect", "--unit", SWITCH_UNIT, "true")
    assert again.returncode == 0, "the unit name is free again"


async def test_switch_failure_carries_bootcs_error_text(host: Host) -> None:
    host.set_fault("switch-fail", message="Switching: Pulling: manifest unknown")
    with pytest.raises(HostCommandError) as exc:
        await commands().switch(D2)
    assert str(exc.value) == (
        f"bootc switch {D2} failed (exit code 1): error: Switching: Pulling: manifest unknown"
    )


async def test_switch_timeout_stops_the_unit(host: Host) -> None:
    host.set_fault("switch-hang")
    with pytest.raises(CommandTimeout, match=rf"bootc switch {D2} did not finish within 0\.5s"):
        await commands(stage_timeout=0.5).switch(D2)
    assert host.active_units() == []
    assert not lock_is_held(host.paths.sysroot_lock)


async def test_cancelled_switch_stops_the_unit(host: Host) -> None:
    host.set_fault("switch-hang")
    task = asyncio.create_task(commands().switch(D2))

    await wait_for(lambda: SWITCH_UNIT in host.active_units(), DEADLINE, "the switch unit")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert host.active_units() == []
    assert host.state().staged is None


async def test_reboot_is_requested(host: Host) -> None:
    await commands().reboot()
    request = host.reboot_request
    assert request is not None and request["kind"] == "reboot"


async def test_apply_downloaded_unlocks_a_download_only_deployment(tmp_path: Path) -> None:
    tagged = f"{REPO}:stable"
    catalog = tmp_path / "catalog.json"
    add_catalog_image(catalog, tagged, "sha256:" + "1" * 64)
    h = make_host(tmp_path / "tagged", booted=tagged, catalogs=[catalog])
    add_catalog_image(catalog, tagged, "sha256:" + "2" * 64)  # the tag moved
    assert h.upgrade(download_only=True).returncode == 0
    cmds = HostCommands(
        [str(h.bin_dir / "nsenter"), "--target", "1", "--"], command_timeout=30, stage_timeout=60
    )
    staged = (await cmds.status()).staged
    assert staged is not None and staged.download_only
    await cmds.apply_downloaded()
    staged = (await cmds.status()).staged
    assert staged is not None and not staged.download_only
    assert [c["argv"] for c in h.calls("bootc") if c["argv"][0] == "upgrade"][-1] == [
        "upgrade",
        "--from-downloaded",
    ]
    assert h.reboot_request is None, "without --apply: the daemon reboots by itself"


async def test_soft_reboot_applies_the_staged_deployment_without_a_pull(host: Host) -> None:
    assert host.switch(D2).returncode == 0
    pulls = host.pulls()
    await commands().soft_reboot()
    assert host.bootc_calls("upgrade")[-1] == [
        "upgrade",
        "--from-downloaded",
        "--apply",
        "--soft-reboot=required",
    ]
    assert host.pulls() == pulls
    assert host.next_reboot_kind() == "soft"
    assert host.reboot().boot_kind == "soft"


async def test_a_refused_soft_reboot_is_a_clear_error(host: Host) -> None:
    host.add_image(f"{REPO}:k", "sha256:" + "3" * 64, kernel="6.99-sim")
    assert host.switch(f"{REPO}:k").returncode == 0
    before = failures("soft-reboot")
    with pytest.raises(HostCommandError) as exc:
        await commands().soft_reboot()
    assert str(exc.value) == (
        "bootc upgrade --from-downloaded --apply --soft-reboot=required failed (exit code 1): "
        "error: Upgrading: Handling staged soft reboot: Handling soft reboot: Soft reboot was "
        "required but staged deployment is not soft-reboot capable"
    )
    assert failures("soft-reboot") == before + 1
    assert host.reboot_request is None


async def test_apply_downloaded_without_a_staged_deployment_fails_clearly(host: Host) -> None:
    before = failures("apply")
    with pytest.raises(HostCommandError) as exc:
        await commands().apply_downloaded()
    assert str(exc.value) == (
        "bootc upgrade --from-downloaded failed (exit code 1): "
        "error: Upgrading: No staged deployment found"
    )
    assert failures("apply") == before + 1


async def test_a_missing_tool_is_a_clear_error(host: Host) -> None:
    cmds = HostCommands(["/nonexistent/nsenter"], command_timeout=5, stage_timeout=5)
    with pytest.raises(HostCommandError, match="cannot run bootc status: /nonexistent/nsenter"):
        await cmds.status()


async def test_boot_probe_of_a_completed_boot_reads_only_the_target(host: Host) -> None:
    before = len(host.calls("systemctl"))
    probe = await commands().boot_probe()
    assert probe == BootProbe(target="active")
    assert [c["argv"] for c in host.calls("systemctl")[before:]] == [
        ["is-active", "boot-complete.target"]
    ]


async def test_boot_probe_of_a_failed_boot_names_the_unit(host: Host) -> None:
    host.set_fault("boot-fail", message="app-check.service")
    host.reboot()
    probe = await commands().boot_probe()
    assert probe == BootProbe(
        target="inactive", system="degraded", failed_units=("app-check.service",)
    )
    assert assess(probe).state == BootAssessmentState.FAILED


async def test_a_finished_boot_has_its_target_read_again_after_the_system_state(
    host: Host,
) -> None:
    """The target is reached before systemd says the system runs: read in the other
    order, a boot completing between the two reads would look failed."""
    host.set_fault("boot-fail", message="app-check.service")
    host.reboot()
    before = len(host.calls("systemctl"))
    await commands().boot_probe()
    assert [c["argv"][:2] for c in host.calls("systemctl")[before:]] == [
        ["is-active", "boot-complete.target"],
        ["is-system-running"],
        ["is-active", "boot-complete.target"],
        ["list-units", "--failed"],
    ]


async def test_boot_probe_of_a_boot_that_never_completes(host: Host) -> None:
    host.set_fault("boot-hang")
    host.reboot()
    probe = await commands().boot_probe()
    assert probe == BootProbe(target="inactive", system="starting")
    assert assess(probe).state == BootAssessmentState.PENDING


async def test_boot_probe_errors_are_in_the_probe_not_raised(host: Host) -> None:
    before = failures("assess")
    cmds = HostCommands(["/nonexistent/nsenter"], command_timeout=5, stage_timeout=5)
    probe = await cmds.boot_probe()
    assert probe.error == (
        "cannot run systemctl is-active boot-complete.target: /nonexistent/nsenter: "
        "No such file or directory"
    )
    assert failures("assess") == before + 1
    # a command that prints no state at all (here: not even systemctl)
    silent = HostCommands(["true"], command_timeout=5, stage_timeout=5)
    probe = await silent.boot_probe()
    assert probe.error is not None and "printed no state (exit code 0)" in probe.error
    assert assess(probe).state == BootAssessmentState.UNKNOWN


async def test_a_wedged_systemctl_times_out_quickly_into_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hostcmd, "PROBE_TIMEOUT", 0.5)
    wedged = HostCommands(["sh", "-c", "sleep 60", "--"], command_timeout=30, stage_timeout=5)
    probe = await wedged.boot_probe()
    assert probe.error == "systemctl is-active boot-complete.target did not finish within 0.5s"


async def test_rollback_queues_then_reverts_without_a_pull(host: Host) -> None:
    assert host.switch(D2).returncode == 0
    host.reboot()
    cmds = commands()
    await cmds.rollback()
    assert (await cmds.status()).status.rollback_queued
    await cmds.rollback()
    assert not (await cmds.status()).status.rollback_queued
    assert host.bootc_calls("rollback") == [["rollback"], ["rollback"]]
    assert host.pulls() == [D2], "only the switch pulled"
    assert host.reboot_request is None, "without --apply: the daemon reboots by itself"


async def test_rollback_without_a_rollback_deployment_fails_clearly(host: Host) -> None:
    before = failures("rollback")
    with pytest.raises(HostCommandError) as exc:
        await commands().rollback()
    assert str(exc.value) == (
        "bootc rollback failed (exit code 1): error: Rollback: No rollback available"
    )
    assert failures("rollback") == before + 1


@pytest.mark.parametrize(
    ("stderr", "text"),
    [
        ("Waiting for sysroot lock...\nerror: Switching: boom\n  caused by: x\n", None),
        ("", "(no output)"),
        ("just a line\n", "just a line"),
    ],
)
def test_error_text(stderr: str, text: str | None) -> None:
    expected = text if text is not None else "error: Switching: boom\n  caused by: x"
    assert error_text(stderr) == expected


def test_error_text_is_bounded() -> None:
    long = error_text("error: " + "x" * 10_000)
    assert len(long) <= 4003 and long.startswith("...")


# ------------------------------------------------------------------ host watch


def test_watch_target(tmp_path: Path) -> None:
    assert watch_target(tmp_path) is None
    (tmp_path / "sysroot/state/deploy").mkdir(parents=True)
    target = watch_target(tmp_path)
    assert target is not None and target[0] == tmp_path / "sysroot/state/deploy"
    (tmp_path / "ostree/bootc").mkdir(parents=True)
    target = watch_target(tmp_path)
    assert target is not None and target[0] == tmp_path / "ostree/bootc"
    created = creation_target(tmp_path)
    assert created is not None and created[0] == tmp_path / "ostree"


async def test_the_first_staging_arms_the_watch_on_ostree_bootc(tmp_path: Path) -> None:
    """A host whose bootc never changed deployments has no /ostree/bootc yet (the real
    bootc makes it then): /ostree is watched until it appears, which is a change too,
    and later touches of /ostree/bootc are seen."""
    (tmp_path / "ostree").mkdir()
    changes: list[str] = []
    seen = asyncio.Event()

    def changed() -> None:
        changes.append("x")
        seen.set()

    watch = HostWatch(tmp_path, changed)
    try:
        assert watch.start() == tmp_path / "ostree"
        (tmp_path / "ostree" / "lock").touch()  # not bootc's directory: no change
        (tmp_path / "ostree" / "bootc").mkdir()
        await asyncio.wait_for(seen.wait(), DEADLINE)
        assert watch.watching == tmp_path / "ostree" / "bootc"
        assert changes == ["x"]
        seen.clear()
        os.utime(tmp_path / "ostree" / "bootc")
        await asyncio.wait_for(seen.wait(), DEADLINE)
        assert len(changes) == 2
    finally:
        watch.stop()


@pytest.mark.parametrize("backend", ["ostree", "composefs"])
async def test_a_switch_on_the_host_is_noticed(tmp_path: Path, backend: str) -> None:
    host = make_host(tmp_path / "node", booted=D1, backend=backend)
    changed = asyncio.Event()
    watch = HostWatch(host.root, changed.set)
    watched = watch.start()
    try:
        assert watched == host.root / (
            "ostree/bootc" if backend == "ostree" else "sysroot/state/deploy"
        )
        assert not changed.is_set()
        done = await asyncio.to_thread(host.switch, D2)
        assert done.returncode == 0, done.stderr
        await asyncio.wait_for(changed.wait(), DEADLINE)
    finally:
        watch.stop()


async def test_no_inotify_instance_is_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-user inotify instances are shared by every root process of the node; when
    they are used up (EMFILE) the daemon starts anyway and relies on its poll."""
    (tmp_path / "ostree" / "bootc").mkdir(parents=True)

    def exhausted() -> None:
        raise OSError("Cannot initialize new instance of inotify, Errno=Too many open files")

    monkeypatch.setattr(pyinotify, "WatchManager", exhausted)
    watch = HostWatch(tmp_path, lambda: None)
    assert watch.start() is None
    watch.stop()


async def test_no_watch_target_is_not_fatal(tmp_path: Path) -> None:
    watch = HostWatch(tmp_path, lambda: None)
    assert watch.start() is None
    watch.stop()


def old_nsenter(tmp_path: Path) -> Path:
    """An nsenter as util-linux < 2.40: ``--env`` unknown, other options skipped."""
    old = tmp_path / "nsenter"
    old.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in\n'
        "  --env) echo \"nsenter: unrecognized option '--env'\" >&2; exit 1;;\n"
        "  --) shift; break;; *) shift;; esac; done\n"
        'exec "$@"\n'
    )
    old.chmod(0o755)
    return old


async def test_nsenter_without_env_option_gets_pid1_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """util-linux < 2.40 (Debian bookworm's nsenter, in the image) rejects ``--env``: the
    option is dropped once, and the commands get PID 1's environment themselves."""
    old = old_nsenter(tmp_path)
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "environ").write_bytes(b"PATH=/usr/bin:/bin\0HOST_ONLY=from pid 1\0")
    monkeypatch.setattr(hostcmd, "PROC", str(proc))
    cmds = HostCommands(
        [str(old), "--target", "1", "--env", "--"], command_timeout=5, stage_timeout=5
    )
    first = await cmds.run("env", ["sh", "-c", 'echo "$HOST_ONLY"'], 5)
    assert (first.returncode, first.stdout) == (0, b"from pid 1\n")
    assert cmds.prefix == (str(old), "--target", "1", "--")
    second = await cmds.run("env", ["sh", "-c", 'echo "$HOST_ONLY"'], 5)
    assert second.stdout == b"from pid 1\n"


async def test_nsenter_without_env_option_gets_the_targets_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--env`` takes the environment of the process nsenter targets, not of PID 1: a
    daemon beside its host (the real-bootc test host, PID 1 of its own namespace) gets
    that host's environment."""
    old = old_nsenter(tmp_path)
    proc = tmp_path / "proc"
    for pid, value in (("1", "machine"), ("4242", "the host")):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "environ").write_bytes(f"PATH=/usr/bin:/bin\0WHO={value}\0".encode())
    monkeypatch.setattr(hostcmd, "PROC", str(proc))
    for prefix in (["--target", "4242"], ["--target=4242"], ["-t", "4242"], ["-t4242"]):
        cmds = HostCommands([str(old), *prefix, "--env", "--"], command_timeout=5, stage_timeout=5)
        done = await cmds.run("env", ["sh", "-c", 'echo "$WHO"'], 5)
        assert done.stdout == b"the host\n", prefix


async def test_nsenter_env_fallback_needs_pid1_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "nsenter"
    old.write_text("#!/bin/sh\necho \"nsenter: unrecognized option '--env'\" >&2\nexit 1\n")
    old.chmod(0o755)
    monkeypatch.setattr(hostcmd, "PROC", str(tmp_path / "missing"))
    cmds = HostCommands([str(old), "--env", "--"], command_timeout=5, stage_timeout=5)
    with pytest.raises(HostCommandError, match=r"nsenter has no --env and .* cannot be read"):
        await cmds.run("env", ["true"], 5)


def test_parse_environ() -> None:
    assert hostcmd.parse_environ(b"A=1\0B=x=y\0\0junk\0") == {"A": "1", "B": "x=y"}
    assert hostcmd.without_env_option(["nsenter", "--env", "--"]) == ("nsenter", "--")
    assert hostcmd.without_env_option(["sh", "-c"]) is None
    assert hostcmd.nsenter_target(["nsenter", "--mount", "--"]) == "1"
