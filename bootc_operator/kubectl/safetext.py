"""Cluster text made safe for the admin's terminal: C0 and C1 control characters replaced.

Whatever ``kubectl bootc`` reads from the cluster may carry control characters: a
daemon's Degraded message quotes registry and bootc output, an Event's note is
whatever its creator (anyone allowed to create Events) wrote, a health-check note
quotes Prometheus. Printed raw, ESC and the C1 CSI (U+009B) start terminal escape
sequences (retitle the window, move the cursor and rewrite lines already printed,
on some terminals answer back into the input), BEL rings, CR and BS overwrite
what came before.

``clean(text)``: tab, newline, CR, VT and FF become one space (a multi-line
message stays in its cell, and cannot forge a table row); every other C0 control
and DEL is shown in caret notation, as ``cat -v`` and kubectl show ESC (``^[``,
BEL ``^G``, NUL ``^@``, DEL ``^?``); a C1 control as ``<U+009B>``. Text without
control characters comes back unchanged (and unchanged again: ``clean`` is
idempotent). ``clean_obj(obj)`` cleans every string of a decoded JSON document,
keys included: ``Cluster`` applies it to every answer, so every cell the plugin
prints (``status``, ``why``, ``approve``, ``events``, ``-o json|yaml``) is clean.
"""

from __future__ import annotations

from typing import Any

_SPACE = "\t\n\r\v\f"


def _replacement(code: int) -> str:
    if chr(code) in _SPACE:
        return " "
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


_TABLE = {code: _replacement(code) for code in (*range(0x20), *range(0x7F, 0xA0))}


def clean(text: str) -> str:
    """``text`` with its C0 and C1 control characters replaced (module docstring)."""
    if text.isprintable():  # fast path: no control character (nor any other unprintable)
        return text
    return text.translate(_TABLE)


def clean_obj(obj: Any) -> Any:
    """Every string of a decoded JSON document ``obj`` cleaned (a new document)."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean(k) if isinstance(k, str) else k: clean_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(clean_obj(v) for v in obj)
    return obj
