"""Committed generated files: write one, or (``--check``) say it is stale and how to
regenerate it. The generator of ``docs/api.md`` (``hack.apidocs``) ends with it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_or_check(path: Path, text: str, *, check: bool, regenerate: str) -> int:
    """Write TEXT to PATH, or with CHECK compare: exit code 1 (and one line naming
    REGENERATE, the command that writes it) when PATH differs."""
    if not check:
        path.write_text(text)
        return 0
    if path.exists() and path.read_text() == text:
        return 0
    print(f"{path.relative_to(ROOT)} is stale: run {regenerate}", file=sys.stderr)
    return 1
