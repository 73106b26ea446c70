"""Logging setup shared by both modes: human-readable text or one JSON object per line.

Context travels as ``extra={"pool": ..., "node": ...}``; both formats print it.
Nothing here formats secrets: callers must never pass them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Final

FORMATS: Final = ("text", "json")

# Attributes every LogRecord has; anything else was passed through ``extra``.
_STANDARD_ATTRS: Final = frozenset(
    vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None)).keys()
) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS}


class TextFormatter(logging.Formatter):
    """``2026-11-21T10:00:00.123Z INFO rollout: slot taken pool=p node=n``."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = f"{ts}.{int(record.msecs):03d}Z {record.levelname} {record.name}: "
        line += record.getMessage()
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in sorted(extras.items()))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, extras, exc."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in _extras(record).items():
            doc[k] = v if isinstance(v, str | int | float | bool | None) else str(v)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, separators=(",", ":"))


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """Configure the root logger once; safe to call again (replaces handlers)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log is noise at info level for probes and scrapes.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
