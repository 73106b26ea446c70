"""Running commands on the host: ``bootc status``, the switch unit, ``systemctl``.

Every command runs as ``<host-exec prefix> <command...>`` (DESIGN §4: by default
``nsenter --target 1 --mount --pid --cgroup --setuid 0 --setgid 0 --env --``; tests
use a simulated host's shims, or ``--target <the test host's PID 1>``; an nsenter older
than util-linux 2.40, Debian bookworm's and so the image's, has no ``--env``: on its
"unrecognized option" the option is dropped and the command gets the target's
environment from ``/proc/<target>/environ`` instead, which is what ``--env`` does) in
its own process group, with a timeout: on timeout or cancellation the whole group
gets SIGKILL and is reaped, so nothing is left behind and the event loop never blocks.
Each run is timed and failures counted (``metrics``). Failures raise
``HostCommandError`` whose message is one readable text meant for the ``Degraded``
condition.

- ``status()``: ``bootc status --format=json --format-version=1``, parsed. It waits
  for the sysroot lock while another bootc command runs, hence the timeout.
- ``switch(image)``: stop a leftover switch unit first, then ``systemd-run --wait
  --collect --pipe --quiet --unit bootc-operator-switch.service bootc switch
  [--enforce-container-sigpolicy] -- IMAGE`` (the option with the daemon's opt-in of the
  same name: bootc then refuses a host containers policy that accepts anything, and
  keeps enforcing the policy for later upgrades). The switch runs as a transient unit so
  that it is systemd's child, not the daemon's (a daemon restart never leaves a
  half-killed bootc behind) and can be stopped by name. ``--pipe`` hands bootc's stderr
  to us (without it the error text would only be in the journal), ``--quiet`` drops
  systemd-run's own chatter. Its exit code only says whether bootc failed: whether the
  image got staged is read from status. On timeout the unit is stopped (killing the
  systemd-run client would not stop it) and the error says so. Cancelled (a newer
  desired image, shutdown), the unit is stopped too: ``block=False`` only queues the
  stop job, for a shutdown that must be quick.
- ``stop_switch()``: ``systemctl stop`` the unit (exit 5, "not loaded", is fine),
  then ``systemctl reset-failed`` it (a failed unit would block the next start).
- ``apply_downloaded()``: ``bootc upgrade --from-downloaded`` (no ``--apply``): the
  staged download-only deployment is unlocked, so the next boot boots it. No pull,
  just bootc's finalization lock under the sysroot lock: run directly, with the
  command timeout. Whether it worked is read from status (``downloadOnly``).
- ``rollback()``: ``bootc rollback`` (no ``--apply``): the rollback deployment boots
  next (``rollbackQueued: true``; a staged deployment is discarded), or, run again,
  a queued rollback is reverted. No pull: the deployment is on disk; run directly
  with the command timeout. Whether it worked is read from status.
- ``reboot()``: ``systemctl reboot``.
- ``soft_reboot()``: ``bootc upgrade --from-downloaded --apply --soft-reboot=required``:
  apply the staged deployment (unlocking a download-only one) with a soft reboot,
  without pulling; bootc refuses (non-zero exit) when the deployment is not
  soft-reboot capable (``decide``'s docstring says why this command). Like ``reboot()``
  it returns once the reboot is under way; the process is ended by it.
- ``boot_probe()``: what ``assessment.assess`` needs: ``systemctl is-active
  boot-complete.target``; unless ``active``, ``systemctl is-system-running`` and
  ``systemctl list-units --failed --plain --no-legend --no-pager``. Their exit codes
  say the state too (``is-active`` 3 = not active, ``is-system-running`` 1 = not
  running): only a command that cannot run, times out, or prints no state is an
  error, returned in the probe (never raised). Each read is quick on a sane host, so
  its timeout is the command timeout capped at ``PROBE_TIMEOUT``: a wedged systemd
  must not hold the reconcile (a reboot, a rollback) for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from bootc_operator.daemon import metrics as m
from bootc_operator.daemon.assessment import (
    BOOT_COMPLETE_TARGET,
    BOOTING,
    BootProbe,
    parse_failed_units,
)
from bootc_operator.daemon.bootc_status import BootcStatusError, HostStatus, parse_status

SWITCH_UNIT: Final = "bootc-operator-switch.service"
SIGPOLICY_OPTION: Final = "--enforce-container-sigpolicy"
STATUS_ARGS: Final = ("bootc", "status", "--format=json", "--format-version=1")
APPLY_DOWNLOADED_ARGS: Final = ("bootc", "upgrade", "--from-downloaded")
ROLLBACK_ARGS: Final = ("bootc", "rollback")
SOFT_REBOOT_ARGS: Final = (
    "bootc",
    "upgrade",
    "--from-downloaded",
    "--apply",
    "--soft-reboot=required",
)
TARGET_ARGS: Final = ("systemctl", "is-active", BOOT_COMPLETE_TARGET)
SYSTEM_ARGS: Final = ("systemctl", "is-system-running")
FAILED_UNITS_ARGS: Final = (
    "systemctl",
    "list-units",
    "--failed",
    "--plain",
    "--no-legend",
    "--no-pager",
)
UNIT_NOT_LOADED: Final = 5
PROBE_TIMEOUT: Final = 10.0
ERROR_TEXT_LIMIT: Final = 4000
OUTPUT_LIMIT: Final = 16 * 1024 * 1024

log = logging.getLogger("daemon.host")
ENV_OPTION: Final = "--env"
PROC: Final = "/proc"


def without_env_option(prefix: Sequence[str]) -> tuple[str, ...] | None:
    """PREFIX without nsenter's ``--env`` (None when it has none to drop)."""
    if ENV_OPTION not in prefix:
        return None
    return tuple(a for a in prefix if a != ENV_OPTION)


def env_unsupported(stderr: str) -> bool:
    """util-linux's nsenter before 2.40: "nsenter: unrecognized option '--env'"."""
    return f"unrecognized option '{ENV_OPTION}'" in stderr


def nsenter_target(prefix: Sequence[str]) -> str:
    """The PID an nsenter line enters (``--target N``, ``--target=N``, ``-t N``, ``-tN``;
    1 when it names none)."""
    for i, arg in enumerate(prefix):
        if arg in ("--target", "-t") and i + 1 < len(prefix):
            return prefix[i + 1]
        if arg.startswith("--target="):
            return arg.partition("=")[2]
        if arg.startswith("-t") and not arg.startswith("--") and len(arg) > 2:
            return arg[2:]
    return "1"


def target_environment(prefix: Sequence[str]) -> dict[str, str]:
    """What ``nsenter --env`` would give a command: the *target's* environment (PID 1's
    on a node; the host's PID 1 wherever the daemon runs beside it, e.g. a test host)."""
    path = f"{PROC}/{nsenter_target(prefix)}/environ"
    try:
        return parse_environ(Path(path).read_bytes())
    except OSError as exc:
        raise HostCommandError(
            f"nsenter has no {ENV_OPTION} and {path} cannot be read: {exc.strerror}"
        ) from None


def parse_environ(data: bytes) -> dict[str, str]:
    """``/proc/PID/environ`` (NUL-separated ``NAME=value``) as a dict."""
    env: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


class HostCommandError(Exception):
    """A host command failed; ``str()`` is the text for the Degraded condition."""


class CommandTimeout(HostCommandError):
    pass


class UnreadableStatus(HostCommandError):
    """``bootc status`` exited 0 but printed something the parser refuses."""


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: str
    seconds: float


def _check(result: Result, kind: str, what: str, *, with_stdout: bool = False) -> None:
    """Count a non-zero exit of ``what`` under ``kind`` and raise ``HostCommandError``."""
    if result.returncode == 0:
        return
    m.COMMAND_FAILURES.labels(kind).inc()
    stdout = result.stdout.decode("utf-8", "replace") if with_stdout else ""
    raise HostCommandError(
        f"{what} failed (exit code {result.returncode}): {error_text(result.stderr, stdout)}"
    )


def error_text(stderr: str, stdout: str = "") -> str:
    """The useful part of a failed command's output: from bootc's first ``error:`` line
    on (its error chain), else the last lines; trimmed to a condition-sized length."""
    text = stderr.strip() or stdout.strip()
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.lstrip().startswith("error:"):
            lines = lines[i:]
            break
    else:
        lines = lines[-20:]
    joined = "\n".join(lines)
    if len(joined) > ERROR_TEXT_LIMIT:
        joined = "..." + joined[-ERROR_TEXT_LIMIT:]
    return joined or "(no output)"


def _read(f: IO[bytes]) -> bytes:
    """What a finished command wrote to ``f`` (a small local temporary file)."""
    f.seek(0)
    return f.read(OUTPUT_LIMIT)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class HostCommands:
    def __init__(
        self,
        prefix: Sequence[str],
        *,
        command_timeout: float,
        stage_timeout: float,
        unit: str = SWITCH_UNIT,
        enforce_sigpolicy: bool = False,
    ) -> None:
        self.prefix = tuple(prefix)
        #: the commands' environment: None (the daemon's) unless nsenter had no --env
        self.env: dict[str, str] | None = None
        self.command_timeout = command_timeout
        self.stage_timeout = stage_timeout
        self.unit = unit
        #: ``bootc switch --enforce-container-sigpolicy`` (the daemon's opt-in)
        self.enforce_sigpolicy = enforce_sigpolicy
        #: set at shutdown: a cancelled switch then only queues the stop job (no waiting)
        self.shutting_down = False

    async def run(self, command: str, args: Sequence[str], timeout: float) -> Result:  # noqa: ASYNC109
        """Run ``prefix + args``; raises ``CommandTimeout`` / ``HostCommandError`` if it
        cannot be started. A non-zero exit is returned, not raised (callers judge)."""
        result = await self._run(command, args, timeout)
        fallback = without_env_option(self.prefix)
        if result.returncode != 0 and fallback is not None and env_unsupported(result.stderr):
            self.env = target_environment(self.prefix)
            self.prefix = fallback
            log.info(
                "nsenter has no --env (util-linux < 2.40): commands get the target's environment",
                extra={"host_exec": " ".join(fallback)},
            )
            result = await self._run(command, args, timeout)
        return result

    async def _run(self, command: str, args: Sequence[str], timeout: float) -> Result:  # noqa: ASYNC109
        args = tuple(args)
        argv = (*self.prefix, *args)
        what = " ".join(args[:2]) if args[:1] == ("bootc",) else " ".join(args)
        started = time.monotonic()
        # Output goes to anonymous temporary files, not pipes: ``systemd-run --pipe`` hands
        # them to the unit, and asyncio's ``wait()`` would wait for every holder of a pipe
        # to close it, i.e. for the unit, even after the command itself was killed.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    env=self.env,
                )
            except OSError as exc:
                m.COMMAND_FAILURES.labels(command).inc()
                raise HostCommandError(f"cannot run {what}: {argv[0]}: {exc.strerror}") from None
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except TimeoutError:
                _kill_group(proc)
                await proc.wait()
                m.COMMAND_DURATION.labels(command).observe(time.monotonic() - started)
                m.COMMAND_FAILURES.labels(command).inc()
                raise CommandTimeout(f"{what} did not finish within {timeout:g}s") from None
            except asyncio.CancelledError:
                _kill_group(proc)
                await proc.wait()
                raise
            seconds = time.monotonic() - started
            m.COMMAND_DURATION.labels(command).observe(seconds)
            stdout, stderr = _read(out), _read(err)
        assert proc.returncode is not None
        return Result(argv, proc.returncode, stdout, stderr.decode("utf-8", "replace"), seconds)

    async def status(self) -> HostStatus:
        """``bootc status``, parsed; ``HostCommandError`` with a clear reason otherwise."""
        try:
            result = await self.run("status", STATUS_ARGS, self.command_timeout)
        except CommandTimeout:
            raise CommandTimeout(
                f"bootc status did not finish within {self.command_timeout:g}s (it waits for "
                "the sysroot lock while another bootc command, such as a switch, runs)"
            ) from None
        _check(result, "status", "bootc status")
        try:
            host = parse_status(result.stdout)
        except BootcStatusError as exc:
            m.COMMAND_FAILURES.labels("status").inc()
            raise UnreadableStatus(str(exc)) from None
        m.LAST_STATUS_REFRESH.set(time.time())
        return host

    async def stop_switch(self, *, block: bool = True) -> None:
        """Stop the switch unit if it is loaded; errors are logged, not raised."""
        args = ["systemctl", "stop", *([] if block else ["--no-block"]), self.unit]
        try:
            result = await self.run("stop", args, self.command_timeout)
        except HostCommandError as exc:
            log.warning("could not stop the switch unit", extra={"unit": self.unit, "error": exc})
            return
        if result.returncode not in (0, UNIT_NOT_LOADED):
            m.COMMAND_FAILURES.labels("stop").inc()
            log.warning(
                "could not stop the switch unit",
                extra={"unit": self.unit, "error": error_text(result.stderr)},
            )
        if block and result.returncode != UNIT_NOT_LOADED:
            # Only a unit that failed without --collect stays loaded: clear it, quietly.
            # (Not loaded, the usual answer at start-up: nothing to clear, one command less.)
            with contextlib.suppress(HostCommandError):
                await self.run("stop", ["systemctl", "reset-failed", self.unit], 30.0)

    async def switch(self, image: str) -> None:
        """Stage ``image``; ``HostCommandError`` when bootc fails or it takes too long."""
        await self.stop_switch()
        args = [
            "systemd-run",
            "--wait",
            "--collect",
            "--pipe",
            "--quiet",
            "--unit",
            self.unit,
            "bootc",
            "switch",
            *([SIGPOLICY_OPTION] if self.enforce_sigpolicy else []),
            "--",  # the image is never an option, whatever it begins with
            image,
        ]
        try:
            result = await self.run("switch", args, self.stage_timeout)
        except CommandTimeout:
            await self.stop_switch()
            raise CommandTimeout(
                f"bootc switch {image} did not finish within {self.stage_timeout:g}s "
                f"(--stage-timeout); stopped {self.unit}"
            ) from None
        except asyncio.CancelledError:
            await self._stop_after_cancel()
            raise
        _check(result, "switch", f"bootc switch {image}", with_stdout=True)

    async def _stop_after_cancel(self) -> None:
        # Cancelled again meanwhile: stop waiting; the caller re-raises anyway.
        with contextlib.suppress(asyncio.CancelledError):
            await self.stop_switch(block=not self.shutting_down)

    async def apply_downloaded(self) -> None:
        """Let the staged download-only deployment boot; ``HostCommandError`` on failure."""
        what = " ".join(APPLY_DOWNLOADED_ARGS)
        try:
            result = await self.run("apply", APPLY_DOWNLOADED_ARGS, self.command_timeout)
        except CommandTimeout:
            raise CommandTimeout(
                f"{what} did not finish within {self.command_timeout:g}s"
            ) from None
        _check(result, "apply", what, with_stdout=True)

    async def rollback(self) -> None:
        """``bootc rollback``: queue the rollback deployment (or revert a queued rollback)."""
        what = " ".join(ROLLBACK_ARGS)
        try:
            result = await self.run("rollback", ROLLBACK_ARGS, self.command_timeout)
        except CommandTimeout:
            raise CommandTimeout(
                f"{what} did not finish within {self.command_timeout:g}s"
            ) from None
        _check(result, "rollback", what, with_stdout=True)

    async def reboot(self) -> None:
        result = await self.run("reboot", ["systemctl", "reboot"], self.command_timeout)
        _check(result, "reboot", "systemctl reboot")

    async def soft_reboot(self) -> None:
        """Apply the staged deployment with a soft reboot; ``HostCommandError`` on failure."""
        what = " ".join(SOFT_REBOOT_ARGS)
        try:
            result = await self.run("soft-reboot", SOFT_REBOOT_ARGS, self.command_timeout)
        except CommandTimeout:
            raise CommandTimeout(
                f"{what} did not finish within {self.command_timeout:g}s"
            ) from None
        _check(result, "soft-reboot", what, with_stdout=True)

    @property
    def _probe_timeout(self) -> float:
        return min(self.command_timeout, PROBE_TIMEOUT)

    async def _state_word(self, args: Sequence[str]) -> str:
        """The state a ``systemctl is-*`` command prints, whatever its exit code."""
        result = await self.run("assess", args, self._probe_timeout)
        lines = result.stdout.decode("utf-8", "replace").split()
        if not lines:
            m.COMMAND_FAILURES.labels("assess").inc()
            raise HostCommandError(
                f"{' '.join(args)} printed no state (exit code {result.returncode}): "
                f"{error_text(result.stderr)}"
            )
        return lines[0]

    async def boot_probe(self) -> BootProbe:
        """Read what the boot assessment needs (module docstring); errors in the probe."""
        try:
            target = await self._state_word(TARGET_ARGS)
            if target == "active":
                return BootProbe(target=target)
            system = await self._state_word(SYSTEM_ARGS)
            if system not in BOOTING:
                # The boot may have finished between the two reads (the target is
                # reached before the system says it is running): look again, or a
                # completed boot would read as "finished without the target".
                target = await self._state_word(TARGET_ARGS)
                if target == "active":
                    return BootProbe(target=target)
            listed = await self.run("assess", FAILED_UNITS_ARGS, self._probe_timeout)
            _check(listed, "assess", " ".join(FAILED_UNITS_ARGS[:3]))
        except HostCommandError as exc:
            return BootProbe(error=str(exc))
        units = parse_failed_units(listed.stdout.decode("utf-8", "replace"))
        return BootProbe(target=target, system=system, failed_units=units)
