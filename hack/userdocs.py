"""The user documentation as the tests read it: README.md plus the guide in docs/.

Owns which files are the user documentation, their fenced code blocks, the shell
commands in them (continuations joined, ``$ `` prompts of console blocks, with
the output shown), a section by its heading, GitHub's heading anchors, and which
sections make the quick start (the commands e2e/test_quickstart.py runs). Tests that check what the
documentation shows (every command parses, the RBAC table is the RBAC, every link
resolves) read it through here, so text can move between pages without a test
losing sight of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Languages of fenced blocks that hold shell: every line a command (``console``:
#: only the ``$ `` lines, the rest is output).
SHELL_LANGUAGES = frozenset({"sh", "shell", "bash", "console"})


def files(root: Path = ROOT) -> list[Path]:
    """README.md, then every page of the guide (docs/*.md), in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def text(root: Path = ROOT) -> str:
    """All of the user documentation, one page after the other."""
    return "\n".join(path.read_text() for path in files(root))


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language (the info string's first word) and body."""

    language: str
    body: str


def blocks(markdown: str) -> list[Block]:
    """The fenced code blocks of MARKDOWN (also indented ones, in list items)."""
    found = re.findall(r"^ *```([^\n`]*)\n(.*?)^ *```", markdown, flags=re.M | re.S)
    return [Block(info.split()[0] if info.split() else "", body) for info, body in found]


def shell_commands(markdown: str) -> list[str]:
    """Every command line of MARKDOWN's shell blocks: continuation lines joined, a
    heredoc's body left out, console output left out, blank and comment-only lines
    dropped."""
    commands: list[str] = []
    for block in blocks(markdown):
        if block.language not in SHELL_LANGUAGES:
            continue
        lines = block.body.replace("\\\n", " ").splitlines()
        heredoc_end = ""
        for raw in lines:
            line = raw.strip()
            if heredoc_end:
                if line == heredoc_end:
                    heredoc_end = ""
                continue
            if block.language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line or line.startswith("#"):
                continue
            commands.append(line)
            heredoc = re.search(r"<<-?\s*'?\"?(\w+)", line)
            if heredoc:
                heredoc_end = heredoc.group(1)
    return commands


def console(markdown: str) -> list[tuple[str, list[str]]]:
    """The ``$ `` commands of MARKDOWN's console blocks, each with the output lines
    the block shows under it."""
    shown: list[tuple[str, list[str]]] = []
    for block in blocks(markdown):
        if block.language != "console":
            continue
        for line in block.body.splitlines():
            if line.startswith("$ "):
                shown.append((line[2:].strip(), []))
            elif shown:
                shown[-1][1].append(line)
    return shown


def bare(command: str) -> str:
    """COMMAND without its trailing ``# comment``, runs of blanks made one: how a
    command is compared with the list of those a test runs."""
    return " ".join(re.sub(r"(^|\s)#.*$", "", command).split())


#: The quick start, in the order a newcomer reads it: (page, section). The
#: README's first pool and how to watch it, then the guide's kubectl view with
#: an image change; e2e/test_quickstart.py runs every command of these sections as
#: written (plus the uninstall's first line, :data:`UNINSTALL_POOLS`).
QUICKSTART = (
    ("README.md", "A first pool"),
    ("README.md", "Watching it"),
    ("docs/observing.md", "What kubectl shows"),
)

#: The README's uninstall begins with the pools (the rest uninstalls the operator).
UNINSTALL_POOLS = "kubectl delete bootcnodepools --all --wait"


def quickstart_commands(root: Path = ROOT) -> list[str]:
    """Every command of the :data:`QUICKSTART` sections, in order, then the
    uninstall of the pools (checked to be a command of the README's Install)."""
    commands: list[str] = []
    for page, heading in QUICKSTART:
        commands += shell_commands(section((root / page).read_text(), heading))
    install = shell_commands(section((root / "README.md").read_text(), "Install"))
    if UNINSTALL_POOLS not in map(bare, install):
        raise KeyError(f"the README's Install no longer shows {UNINSTALL_POOLS!r}")
    return [*commands, UNINSTALL_POOLS]


def section(markdown: str, heading: str) -> str:
    """The text under the heading HEADING (any level, exact title) up to the next
    heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\n", markdown, flags=re.M)
    if match is None:
        raise KeyError(f"no heading {heading!r}")
    level = len(match.group(1))
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", _without_code(rest), flags=re.M)
    return rest[: end.start()] if end else rest


def _without_code(markdown: str) -> str:
    """MARKDOWN with the lines of fenced blocks blanked (same length), so a ``# comment``
    in a shell block is not a heading."""
    return re.sub(
        r"^ *```.*?^ *```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), markdown, flags=re.M | re.S
    )


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to ``-``."""
    slug = heading.strip().lower()
    slug = re.sub(r"[^\w\- ]", "", slug)
    return slug.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The anchors of MARKDOWN's headings (a repeated heading gets ``-1``, ``-2``...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for title in re.findall(r"^#{1,6} (.+)$", _without_code(markdown), flags=re.M):
        slug = anchor(title)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(markdown: str) -> list[str]:
    """The targets of MARKDOWN's inline links ``[text](target)`` outside code."""
    prose = re.sub(r"`[^`\n]*`", "", _without_code(markdown))
    return re.findall(r"\]\(([^)\s]+)\)", prose)
