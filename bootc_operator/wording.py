"""Counted nouns in user-visible text (conditions, Events, logs, CLI and demo output).

``counted(1, "node")`` is ``1 node`` and ``counted(3, "node")`` ``3 nodes``: never
``1 nodes``. ``noun`` is the word alone, for a verb or a phrase that agrees with
a number said elsewhere (``noun(n, "is", "are")``). Irregular plurals are passed.
"""

from __future__ import annotations


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """``singular`` when ``n`` is 1 (or -1), else ``plural`` (default ``singular + "s"``)."""
    if abs(n) == 1:
        return singular
    return plural if plural is not None else singular + "s"


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` followed by the noun in agreement with it: ``1 node``, ``0 nodes``, ``2 nodes``."""
    return f"{n} {noun(n, singular, plural)}"
