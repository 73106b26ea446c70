"""docs/development.md says the code's shape as it is: its layout names every package of
``bootc_operator``, and its loop table is the controller's (``Controller._loop_table``),
in the same order."""

from __future__ import annotations

import re
from pathlib import Path

import bootc_operator
from bootc_operator.controller import Controller

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "development.md").read_text()


def section(heading: str) -> str:
    start = DOC.index(f"\n{heading}\n")
    end = DOC.find("\n#", start + len(heading) + 2)
    return DOC[start : end if end != -1 else None]


def test_the_layout_names_every_package() -> None:
    layout = section("## Layout")
    named = set(re.findall(r"`bootc_operator/(\w+)/`", layout))
    packages = {
        p.name
        for p in Path(bootc_operator.__file__).parent.iterdir()
        if (p / "__init__.py").exists()
    }
    assert packages - named == set(), "add these packages to docs/development.md's layout"
    assert named - packages == set(), "docs/development.md's layout names packages that are gone"


def test_the_loop_table_is_the_controllers() -> None:
    table = section("### The controller's loops")
    rows = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    loops = [loop.name for loop in Controller(None, identity="unit").loops]
    assert rows == loops
    words = [
        "Zero",
        "One",
        "Two",
        "Three",
        "Four",
        "Five",
        "Six",
        "Seven",
        "Eight",
        "Nine",
        "Ten",
        "Eleven",
        "Twelve",
    ]
    assert f"{words[len(loops)]} loops, each on its own rate-limited queue" in table
