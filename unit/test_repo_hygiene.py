"""The repository itself: nothing tracked that a clean clone must not carry.

A commit once tracked `.venv` as a symlink into the committer's own checkout
(`.gitignore` said `.venv/`, which matches only a directory, so `git add -A`
took the link). Every clean clone then held a dangling `.venv`, and
`hack/setup.sh` failed in its first second. These tests keep that class out:
no tracked path is one `.gitignore` ignores, and no tracked symlink leaves the
repository.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module", autouse=True)
def _in_a_git_checkout() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (e.g. an sdist): nothing tracked to check")


def test_no_tracked_path_is_ignored() -> None:
    tracked_but_ignored = _git("ls-files", "--cached", "--ignored", "--exclude-standard").split()
    assert tracked_but_ignored == []


def test_the_virtualenv_is_ignored_whether_a_directory_or_a_symlink() -> None:
    # `.venv/` (trailing slash) would not match a symlink named .venv.
    for path in (".venv", ".venv/bin/python"):
        assert _git("check-ignore", "--no-index", path).strip() == path


def test_no_tracked_symlink_points_outside_the_repository() -> None:
    escaping: list[str] = []
    for line in _git("ls-files", "--stage").splitlines():
        mode, _, _, path = line.split(maxsplit=3)
        if mode != "120000":
            continue
        target = _git("cat-file", "-p", line.split()[1])
        resolved = (REPO / path).parent.joinpath(target).resolve()
        if target.startswith("/") or not resolved.is_relative_to(REPO):
            escaping.append(f"{path} -> {target}")
    assert escaping == []
