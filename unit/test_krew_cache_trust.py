"""The krew zipapp's trust check of its unpacked copy (issue 37 §9).

``hack.krewpkg.TRUST`` is the code of the zipapp's ``__main__.py`` that decides
whether ``$XDG_CACHE_HOME/kubectl-bootc/<build>`` may be run from: run here on
real directories, for a user who is not root (uid 65534; the tests run as root,
which may give files away).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hack import krewpkg

USER = 65534
OTHER = 12345

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to other users")


def untrusted() -> Callable[..., str]:
    scope: dict[str, object] = {"os": os}
    exec(krewpkg.TRUST, scope)  # the zipapp's own code, from this tree
    check = scope["_untrusted"]
    assert callable(check)
    return check


@pytest.fixture
def tree() -> Iterator[Path]:
    """/tmp/X (root, 0755) / cache / kubectl-bootc / build: the three the user's, 0700."""
    top = Path(tempfile.mkdtemp(prefix="krew-trust-"))
    top.chmod(0o755)
    build = top / "cache" / "kubectl-bootc" / "build"
    build.mkdir(parents=True)
    for path in (build, build.parent, build.parent.parent):
        path.chmod(0o700)
        os.chown(path, USER, USER)
    yield build
    for path in (build, build.parent, build.parent.parent):
        os.chown(path, 0, 0)
    for path in (build, build.parent, build.parent.parent, top):
        path.rmdir()


def test_the_users_own_private_copy_is_trusted(tree: Path) -> None:
    assert untrusted()(str(tree), uid=USER) == ""
    # the cache directory above kubectl-bootc's may be root's, a parent may be sticky
    os.chown(tree.parent.parent, 0, 0)
    tree.parent.parent.parent.chmod(0o1777)
    assert untrusted()(str(tree), uid=USER) == ""


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda t: os.chown(t, OTHER, OTHER), f"build is owned by uid {OTHER}, not {USER}"),
        (lambda t: os.chown(t, 0, 0), f"build is owned by uid 0, not {USER}"),
        (lambda t: os.chown(t.parent, 0, 0), f"kubectl-bootc is owned by uid 0, not {USER}"),
        (lambda t: t.chmod(0o770), "build is writable by its group or others (mode 770)"),
        (lambda t: t.parent.chmod(0o703), "kubectl-bootc is writable by its group or others"),
        (lambda t: os.chown(t.parent.parent, OTHER, 0), f"cache is owned by uid {OTHER}"),
        (lambda t: t.parent.parent.chmod(0o777), "cache is writable by its group or others"),
        (lambda t: t.parent.parent.parent.chmod(0o777), "is writable by its group or others"),
    ],
)
def test_a_copy_someone_else_could_have_written_is_not(
    tree: Path, change: Callable[[Path], None], why: str
) -> None:
    change(tree)
    assert why in untrusted()(str(tree), uid=USER)


def test_a_symlink_is_checked_where_it_leads(tree: Path) -> None:
    elsewhere = tree.parent.parent / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    elsewhere.chmod(0o777)
    link = tree.parent / "link"
    link.symlink_to(elsewhere)
    try:
        assert "elsewhere is owned by uid 0" in untrusted()(str(link), uid=USER)
        assert "no such" in untrusted()(str(tree / "missing"), uid=USER).lower()
    finally:
        link.unlink()
        elsewhere.rmdir()
