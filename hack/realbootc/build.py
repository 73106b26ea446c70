"""Where the real bootc and libostree are (``hack/build-bootc.sh``'s cache directory), and
the host's ``skopeo`` (``hack/build-policygate.sh``'s binary: Debian's skopeo with the
containers policy check of skopeo >= 1.13's image proxy in front, ``hack/policygate``).

``resolve_build()`` returns a :class:`Build` for ``$BOOTC_OPERATOR_BOOTC_DIR`` and
``$BOOTC_OPERATOR_POLICYGATE`` when set, else for whatever the scripts print (they build
on a cold cache, about 15 and 3-8 minutes on 2 cores, and cost a stat when warm;
concurrent callers build once). The answer is remembered for the process. When a build
cannot be had, it raises :class:`BuildUnavailable` whose message is one line saying
what is missing (the script's own last ``error:`` line, e.g. a source archive missing
from ``../shared/third_party``).

``built()`` answers without building (the scripts' ``--check``); ``start_build(log)``
starts the cold builds in the background (one session), so the test harness can have
them under way long before the first real-bootc test needs them: that test's
``resolve_build()`` then waits on the scripts' locks for the builds already running.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-bootc.sh"
BOOTC_DIR_ENV = "BOOTC_OPERATOR_BOOTC_DIR"
GATE_SCRIPT = REPO_ROOT / "hack" / "build-policygate.sh"
GATE_ENV = "BOOTC_OPERATOR_POLICYGATE"


class BuildUnavailable(RuntimeError):
    """The real bootc could not be built or found; the message is one line."""


@dataclass(frozen=True)
class Build:
    """One cached build: ``bin/bootc`` and libostree's ``prefix/`` (``bin/ostree``, ``lib``)
    in ``dir``, and ``policygate``, the host's ``skopeo``."""

    dir: Path
    policygate: Path

    @property
    def bootc(self) -> Path:
        return self.dir / "bin" / "bootc"

    @property
    def ostree(self) -> Path:
        return self.dir / "prefix" / "bin" / "ostree"

    @property
    def lib(self) -> Path:
        return self.dir / "prefix" / "lib"

    def check(self) -> Build:
        missing = [p for p in (self.bootc, self.ostree, self.policygate) if not p.is_file()]
        if missing:
            raise BuildUnavailable(
                f"the bootc build in {self.dir} lacks {', '.join(str(p) for p in missing)}"
            )
        return self


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error:" in line:
            return line
    return lines[-1] if lines else "(no output)"


def _cached(script: Path, env: str) -> Path | None:
    """What ``script --check`` prints (``$env`` when set), None when it is not built."""
    given = os.environ.get(env)
    if given:
        return Path(given)
    done = subprocess.run(
        ["bash", str(script), "--check"], capture_output=True, text=True, check=False
    )
    lines = done.stdout.strip().splitlines()
    return Path(lines[-1]) if done.returncode == 0 and lines else None


def built() -> Build | None:
    """The build when both parts are cached (nothing is built), else None."""
    bootc, gate = _cached(BUILD_SCRIPT, BOOTC_DIR_ENV), _cached(GATE_SCRIPT, GATE_ENV)
    return Build(bootc, gate) if bootc is not None and gate is not None else None


def start_build(log: Path) -> subprocess.Popen[bytes]:
    """Start ``hack/build-bootc.sh`` and ``hack/build-policygate.sh`` in the background
    (side by side, one session; output to ``log``; exit code 1 when either failed)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    both = 'bash "$1" & gate=$!; bash "$0"; rc=$?; wait "$gate" || rc=1; exit "$rc"'
    with log.open("ab") as out:
        return subprocess.Popen(
            ["bash", "-c", both, str(BUILD_SCRIPT), str(GATE_SCRIPT)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _resolve(script: Path, env: str) -> Path:
    given = os.environ.get(env)
    if given:
        return Path(given)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildUnavailable(
            f"{script.name} failed (exit code {done.returncode}): {_last_error(done.stderr)}"
        )
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise BuildUnavailable(f"{script.name} printed no path")
    return Path(lines[-1])


@functools.cache
def resolve_build() -> Build:
    """The build to use (module docstring)."""
    return Build(_resolve(BUILD_SCRIPT, BOOTC_DIR_ENV), _resolve(GATE_SCRIPT, GATE_ENV)).check()
