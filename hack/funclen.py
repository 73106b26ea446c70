"""Function lengths: the product's functions over 60 and over 100 lines (issue 38).

A function's length is its ``def`` line to its last line, both counted (decorators
not counted; blank lines and comments inside are). Methods and nested functions count
on their own, named by their path (``Class.method``, ``outer.inner``); a nested
function's lines count in its outer function too.

``python -m hack.funclen [--ref REF ...] [--root bootc_operator] [--over 60]``
prints, for each git ref (default: the working tree), how many functions are over 60
and over 100 lines and lists those over ``--over``, longest first. With two refs it
adds a before/after column per function; a file git sees renamed between the refs (or
the one file of the same name, when git does not) is named by its last path. The
counting is pure (``lengths``), checked by ``unit/hack/test_funclen.py``.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
THRESHOLDS = (60, 100)


@dataclass(frozen=True)
class Length:
    """One function: where it is and how many lines it spans."""

    path: str
    name: str
    lines: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.name}"


def lengths(source: str, path: str = "") -> list[Length]:
    """Every function and method in ``source``, nested ones included, in source order."""
    tree = ast.parse(source)
    return list(_walk(tree, "", path))


def _walk(node: ast.AST, prefix: str, path: str) -> Iterator[Length]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            end = child.end_lineno or child.lineno
            yield Length(path, name, end - child.lineno + 1)
            yield from _walk(child, name + ".", path)
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, prefix + child.name + ".", path)
        else:
            yield from _walk(child, prefix, path)


def over(found: Sequence[Length], limit: int) -> list[Length]:
    """Those longer than ``limit`` lines, longest first (then by name)."""
    return sorted((f for f in found if f.lines > limit), key=lambda f: (-f.lines, f.key))


def _sources(ref: str | None, root: str) -> Iterator[tuple[str, str]]:
    if ref is None:
        for file in sorted((REPO / root).rglob("*.py")):
            yield str(file.relative_to(REPO)), file.read_text()
        return
    names = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", ref, "--", root],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(REPO), "show", f"{ref}:{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            yield name, text


def measure(ref: str | None, root: str = "bootc_operator") -> list[Length]:
    """Every function of ``root`` at ``ref`` (None: the working tree)."""
    found: list[Length] = []
    for path, text in _sources(ref, root):
        found.extend(lengths(text, path))
    return found


def renames(ref: str, to: str | None) -> dict[str, str]:
    """Old path -> new path for the files git sees renamed from ``ref`` to ``to``."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "diff", "--find-renames", "--name-status", ref]
        + ([to] if to else []),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    moved: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R") and len(parts) == 3:
            moved[parts[1]] = parts[2]
    return moved


def renamed(
    found: Sequence[Length], moved: dict[str, str], now: Iterable[str] = ()
) -> list[Length]:
    """``found`` under the paths its files have now: git's renames, else the one path
    of ``now`` with the same file name (a file moved and rewritten past git's guess)."""
    present = set(now)
    by_name: dict[str, list[str]] = {}
    for path in present:
        by_name.setdefault(PurePosixPath(path).name, []).append(path)

    def follow(path: str) -> str:
        if path in moved:
            return moved[path]
        same = by_name.get(PurePosixPath(path).name, [])
        return same[0] if path not in present and len(same) == 1 else path

    return [Length(follow(f.path), f.name, f.lines) for f in found]


def render(columns: Sequence[tuple[str, list[Length]]], limit: int) -> str:
    """The counts per column, then every function over ``limit`` in any column."""
    out = ["| | " + " | ".join(label for label, _ in columns) + " |"]
    out.append("|---|" + "---|" * len(columns))
    for threshold in THRESHOLDS:
        counts = " | ".join(str(len(over(found, threshold))) for _, found in columns)
        out.append(f"| functions over {threshold} lines | {counts} |")
    out.append("")
    by_column = [{f.key: f.lines for f in found} for _, found in columns]
    keys = {f.key for _, found in columns for f in over(found, limit)}
    longest = {k: max(col.get(k, 0) for col in by_column) for k in keys}
    out.append("| function | " + " | ".join(label for label, _ in columns) + " |")
    out.append("|---|" + "---|" * len(columns))
    for key in sorted(keys, key=lambda k: (-longest[k], k)):
        cells = " | ".join(str(col[key]) if key in col else "-" for col in by_column)
        out.append(f"| `{key}` | {cells} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hack/funclen", description=__doc__.splitlines()[0])
    p.add_argument("--ref", action="append", default=[], help="a git ref (repeatable)")
    p.add_argument("--root", default="bootc_operator", help="the tree to measure")
    p.add_argument("--over", type=int, default=60, help="list functions over N lines")
    args = p.parse_args(argv)
    refs: list[str | None] = list(args.ref) or [None]
    last = refs[-1]
    now = measure(last, args.root)
    paths = {f.path for f in now}
    columns = [
        (
            ref or "working tree",
            renamed(measure(ref, args.root), renames(ref, last) if ref else {}, paths),
        )
        for ref in refs
    ]
    print(render(columns, args.over))
    return 0


if __name__ == "__main__":
    sys.exit(main())
