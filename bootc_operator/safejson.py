"""Decoding JSON that comes from outside: one error type whatever the input holds.

Owns ``loads`` for text the operator does not control: bootc's status output, a
pull secret's ``.dockerconfigjson``, a registry's or token service's answer.
``json.loads`` lets three other failures escape besides ``JSONDecodeError``:
``RecursionError`` for deep nesting (``[[[[…``, a few thousand levels),
``ValueError`` for an integer of more than 4,300 digits (CPython's
int-conversion limit) and ``UnicodeDecodeError`` for bytes that are not UTF-8;
and a document nested just below the interpreter's limit still breaks any later
recursive walk of it (``json.dumps``, ``copy.deepcopy``). ``loads`` turns every
one of them into ``JSONInputError`` (a ``ValueError``, so callers that already
catch ``ValueError`` keep working) whose ``reason`` is one readable phrase that
never quotes the input, and refuses documents nested deeper than ``max_depth``.
"""

from __future__ import annotations

import json
from typing import Any, Final

#: Far deeper than any document the operator reads (bootc status: about 8 levels).
MAX_DEPTH: Final = 64


class JSONInputError(ValueError):
    """The input is not usable JSON; ``reason`` says why without quoting it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def depth(doc: Any, limit: int) -> int:
    """How deeply ``doc`` nests (a scalar: 0), counting at most to ``limit + 1``.

    Iterative, so a deep document cannot exhaust the stack here.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level) for child in children)
    return deepest


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)``; ``JSONInputError`` for anything that is not usable JSON."""
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        what = exc.msg.removesuffix(" at")  # "Invalid control character at"
        raise JSONInputError(f"{what} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JSONInputError(f"nested more than {max_depth} levels deep") from None
    except UnicodeDecodeError:
        raise JSONInputError("not UTF-8 text") from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise JSONInputError("a number has too many digits") from None
    if depth(doc, max_depth) > max_depth:
        raise JSONInputError(f"nested more than {max_depth} levels deep")
    return doc
