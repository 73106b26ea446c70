"""Summarise py-spy raw (collapsed) stacks: the functions that take the most time.

    python -m hack.perf.profsum PROFILE.txt [--top 30] [--filter bootc_operator]

Prints, per function (``name (file:line)`` without the line), the share of samples
in which it is on the stack (inclusive) and at the top of it (self).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def frame_name(frame: str) -> str:
    return _LINE.sub(")", frame.strip())


def summarise(path: Path, top: int, needle: str) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";") if f]
        total += count
        for name in set(frames):
            inclusive[name] += count
        if frames:
            own[frames[-1]] += count
    if not total:
        return "no samples"
    lines = [f"{total} samples", "inclusive%  self%  function"]
    for name, count in inclusive.most_common():
        if needle and needle not in name:
            continue
        lines.append(f"{100 * count / total:9.1f}  {100 * own[name] / total:5.1f}  {name}")
        if len(lines) >= top + 2:
            break
    lines.append("")
    lines.append("self% top:")
    for name, count in own.most_common(top):
        lines.append(f"{100 * count / total:5.1f}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hack.perf.profsum")
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--filter", default="", help="only functions whose name contains this")
    args = p.parse_args(argv)
    print(summarise(args.profile, args.top, args.filter))
    return 0


if __name__ == "__main__":
    sys.exit(main())
