"""The hashed locks that hack/lock writes (pip-compile ``--generate-hashes`` format), read.

``read_lock`` gives each pinned package of a lock by its normalised name (PEP 503):
its version and the sha256 of every file of that release. The tests of the locks,
the image and its SBOM compare against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)$")
_HASH = re.compile(r"^--hash=sha256:(?P<hex>[0-9a-f]{64})$")


@dataclass(frozen=True)
class Locked:
    name: str  # as the lock spells it
    version: str
    sha256: frozenset[str]


def _entries(text: str) -> list[str]:
    """The requirement entries: comments dropped, backslash continuations joined."""
    out: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def read_lock(path: Path) -> dict[str, Locked]:
    """Every entry of the lock at PATH; ValueError for one that is not NAME==VERSION
    with at least one sha256 hash (what ``pip --require-hashes`` demands)."""
    locked: dict[str, Locked] = {}
    for entry in _entries(path.read_text()):
        pin, *options = entry.split()
        m = _PIN.match(pin)
        if m is None:
            raise ValueError(f"{path.name}: not pinned as NAME==VERSION: {entry[:80]}")
        hashes = set()
        for option in options:
            h = _HASH.match(option)
            if h is None:
                raise ValueError(f"{path.name}: {pin}: not a sha256 hash option: {option}")
            hashes.add(h["hex"])
        if not hashes:
            raise ValueError(f"{path.name}: {pin} has no --hash=sha256:")
        key = canonicalize_name(m["name"])
        if key in locked:
            raise ValueError(f"{path.name}: {m['name']} is locked twice")
        locked[key] = Locked(m["name"], m["version"], frozenset(hashes))
    return locked
