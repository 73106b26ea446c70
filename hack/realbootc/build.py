"""Where the real bootc and libostree are: ``hack/build-bootc.sh``'s cache directory.

``resolve_build()`` returns a :class:`Build` for ``$BOOTC_OPERATOR_BOOTC_DIR`` when set,
else for whatever ``hack/build-bootc.sh`` prints (it builds on a cold cache, about 15
minutes on 2 cores, and costs a stat when warm; concurrent callers build once). The
answer is remembered for the process. When the build cannot be had, it raises
:class:`BuildUnavailable` whose message is one line saying what is missing (the
script's own last ``error:`` line, e.g. a source archive missing from
``../shared/third_party``).

``built()`` answers without building (the script's ``--check``); ``start_build(log)``
starts a cold build in the background (its own session), so the test harness can
have it under way long before the first real-bootc test needs it: that test's
``resolve_build()`` then waits on the script's lock for the build already running.
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


class BuildUnavailable(RuntimeError):
    """The real bootc could not be built or found; the message is one line."""


@dataclass(frozen=True)
class Build:
    """One cached build: ``bin/bootc`` and libostree's ``prefix/`` (``bin/ostree``, ``lib``)."""

    dir: Path

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
        missing = [p for p in (self.bootc, self.ostree) if not p.is_file()]
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


def built() -> Build | None:
    """The build when it is cached (nothing is built), else None."""
    env = os.environ.get(BOOTC_DIR_ENV)
    if env:
        return Build(Path(env))
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    lines = done.stdout.strip().splitlines()
    return Build(Path(lines[-1])) if done.returncode == 0 and lines else None


def start_build(log: Path) -> subprocess.Popen[bytes]:
    """Start ``hack/build-bootc.sh`` in the background (its own session; output to ``log``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            ["bash", str(BUILD_SCRIPT)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@functools.cache
def resolve_build() -> Build:
    """The build to use (module docstring)."""
    env = os.environ.get(BOOTC_DIR_ENV)
    if env:
        return Build(Path(env)).check()
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildUnavailable(
            f"{BUILD_SCRIPT.name} failed (exit code {done.returncode}): {_last_error(done.stderr)}"
        )
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise BuildUnavailable(f"{BUILD_SCRIPT.name} printed no directory")
    return Build(Path(lines[-1])).check()
